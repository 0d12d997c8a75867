package workspace

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cellbox-dev/cellbox/protocol"
	"github.com/cellbox-dev/cellbox/workspace/sandbox"
)

// quotaInterval is how often a running workspace's upper layer is measured
// while its programs run. Once they have been idle for idleTicks ticks, the
// tick only looks for activity, at a pace its headroom allows (idlePace).
const (
	quotaInterval = 250 * time.Millisecond
	// portsInterval: the listening ports are read at most this often.
	portsInterval = time.Second
	idleTicks     = 4
	// maxIdleInterval bounds the idle pace; fillRate is the fastest a
	// sandbox is assumed to write or take memory (a fast NVMe disk, a
	// program touching fresh pages): an idle tick comes before a program
	// that wakes could use up the headroom at that rate.
	maxIdleInterval = 5 * time.Second
	fillRate        = 2 << 30 // bytes a second
)

// idlePace is how far apart idle ticks may be with headroom bytes left
// under the disk quota and the memory limit: the time to fill it at
// fillRate, between quotaInterval and maxIdleInterval.
func idlePace(headroom int64) time.Duration {
	d := time.Duration(float64(headroom) / fillRate * float64(time.Second))
	return min(max(d, quotaInterval), maxIdleInterval)
}

// activity is what a quota tick compares to the last one to know whether
// anything could have changed: the nanoseconds the sandbox's programs have
// run and how many threads they have (sandbox.SandboxActivity), and the
// daemon's own file operations on the workspace. ok is false when it could
// not be read: the tick then measures.
type activity struct {
	runNs   int64
	threads int
	fileOps int64
	ok      bool
}

// sandboxActivity reads the activity of the sandbox whose init is initPid.
// A program writes files or takes memory only by running: any system call
// moves its run time.
func (w *Workspace) sandboxActivity(initPid int) activity {
	a := activity{fileOps: w.fileOps.Load()}
	a.runNs, a.threads, a.ok = sandbox.SandboxActivity(initPid)
	return a
}

// minFileCharge is what each file counts at least toward diskBytes, so a
// flood of empty files meets the quota too.
const minFileCharge = 4096

// quotaRetries: a walk that saw the tree change is tried again at once,
// this many times; quotaFailures ticks in a row whose walks all failed
// kill the sandbox's programs (a tree that cannot be measured is not
// trusted to be under its quota).
const (
	quotaRetries  = 3
	quotaFailures = 20
)

// watchQuota measures the workspace's writable layer while its sandbox
// runs (a program's background children may write after it ends) and,
// over the quota, kills every program of the sandbox. What is measured:
// the files under the upper layer (walked by descriptors, see walkUsage)
// and the files its programs hold open or mapped after unlinking them
// (heldDeleted), which no walk can find. A direct workspace has no
// quota. The same tick checks the memory the sandbox's programs hold
// together (checkMemory), and records the baselines of the paths the
// workspace touched since the last tick (noteTouched).
func (w *Workspace) watchQuota(sb *sandbox.Sandbox, cg *sandbox.Cgroup) {
	dir := w.UpperDir()
	if dir == "" {
		dir = w.root // scratch
	}
	direct := w.mode == protocol.WorkspaceModeDirect
	t := time.NewTicker(quotaInterval)
	defer t.Stop()
	failed := 0
	var touched int64 // see noteTouched
	// Idle sandboxes cost no walks: a tick that finds no activity since the
	// last measure skips them, and after idleTicks such ticks the ticker
	// slows to the pace the headroom allows, until activity shows.
	var last activity
	measured, idle := false, 0
	portsDue, portsAt := false, time.Time{}
	pace, idleAt := quotaInterval, quotaInterval
	setPace := func(d time.Duration) {
		if d != pace {
			pace = d
			t.Reset(d)
		}
	}
	for {
		select {
		case <-sb.Done():
			if !direct {
				w.noteTouched(touched)
			}
			w.notePorts(nil)
			if cg != nil {
				if err := cg.Remove(); err != nil {
					w.m.log.Warn("sandbox cgroup left behind", "workspace", w.id, "err", err)
				}
			}
			return
		case <-w.wake:
			setPace(quotaInterval)
			measured, idle = false, 0
			continue
		case <-t.C:
		}
		now := w.sandboxActivity(sb.InitPID())
		// The listening ports: read when the programs ran, at most once
		// a portsInterval (a read of /proc/PID/net/tcp walks the host's
		// whole socket table, about 2 ms); one due is read at a later
		// tick, idle or not.
		if portsDue && time.Since(portsAt) >= portsInterval {
			portsAt = time.Now()
			portsDue = !w.notePorts(sb) // held by a kernel's start: again later
		}
		if measured && now.ok && now == last {
			if idle++; idle >= idleTicks {
				setPace(idleAt)
			}
			continue
		}
		setPace(quotaInterval)
		last, measured, idle = now, true, 0
		w.measures.Add(1)
		portsDue = true
		headroom := w.checkMemory(sb, cg, &w.mem)
		if direct {
			idleAt = idlePace(headroom)
			continue
		}
		headroom = min(headroom, w.checkQuota(sb, dir, &failed))
		idleAt = idlePace(headroom)
		if failed > 0 {
			measured = false // measure again at the next tick, idle or not
		}
		// Baselines after the quota: a flood of new files must not delay
		// the check that stops it.
		prev := touched
		touched = w.noteTouched(touched)
		if touched == prev && w.mode == protocol.WorkspaceModeOverlay && w.UpperDir() != "" {
			measured = false // skipped or failed: again at the next tick
		}
	}
}

// checkQuota is one quota tick: measure, and kill past the quota in force.
// headroom is what is left under the quota (0 when unknown).
func (w *Workspace) checkQuota(sb *sandbox.Sandbox, dir string, failed *int) (headroom int64) {
	quota := w.quotaInForce()
	used, err := measure(dir, quota)
	if err == nil {
		used += heldDeleted(sb.InitPID())
		*failed = 0
	} else if *failed++; *failed < quotaFailures {
		return 0
	}
	if err == nil && used <= quota {
		return quota - used
	}
	// The programs may have changed while the tree was measured (the
	// one over its quota ended, another began): the kill is for the
	// quota in force now.
	if now := w.quotaInForce(); err == nil && used <= now {
		return now - used
	}
	reason := "killed: disk quota exceeded"
	if err != nil {
		reason = "killed: the workspace's disk use could not be measured (" + err.Error() + ")"
		*failed = 0
	}
	w.m.log.Warn("disk quota: killing the workspace's programs", "workspace", w.id, "used_bytes", used, "quota_bytes", quota, "reason", reason)
	w.mu.Lock()
	for p := range w.procs {
		p.setReason(reason)
	}
	w.mu.Unlock()
	_ = sb.KillAll()
	return 0
}

// quotaInForce is the smallest diskBytes of the programs running now (one
// that has ended but is not yet forgotten does not count), else the last
// quota in force: what programs' background children write is held to it.
func (w *Workspace) quotaInForce() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	var q int64
	for d := range w.starting {
		if *d > 0 && (q == 0 || *d < q) {
			q = *d
		}
	}
	for p := range w.procs {
		select {
		case <-p.Exited():
			continue
		default:
		}
		if p.disk > 0 && (q == 0 || p.disk < q) {
			q = p.disk
		}
	}
	if q > 0 {
		w.quota = q
	}
	return w.quota
}

// measure is walkUsage, tried again when the tree changed under it.
func measure(dir string, limit int64) (int64, error) {
	var used int64
	var err error
	for range quotaRetries {
		if used, err = walkUsage(dir, limit); err == nil || used > limit {
			return used, nil
		}
	}
	return used, err
}

// diskUsage is the space the files under dir take (see walkUsage); it
// stops counting past limit.
func diskUsage(dir string, limit int64) int64 {
	used, _ := measure(dir, limit)
	return used
}

// maxOpenDirs bounds the descriptors one walk keeps open: deeper, a
// directory's descriptor is closed and opened again from its child ("..")
// when the walk comes back up, checked to be the same directory.
const maxOpenDirs = 64

// errTreeChanged: a directory moved while the walk was in it.
var errTreeChanged = errors.New("a directory moved while the workspace was measured")

// walkUsage is the space the files under dir take (allocated blocks, each
// entry at least minFileCharge), counted by descriptors (openat, never a
// path, so no depth is too deep for it), with at most maxOpenDirs of them
// open. It stops counting past limit. An error says the count is not
// whole: nothing is skipped silently.
func walkUsage(dir string, limit int64) (int64, error) {
	root, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, fmt.Errorf("open %s: %w", dir, err)
	}
	type frame struct {
		fd       int // -1 while closed (see maxOpenDirs)
		dev, ino uint64
		subdirs  []string
	}
	var used int64
	// list counts the entries of the directory open at fd and returns its
	// subdirectories.
	list := func(fd int) ([]string, error) {
		var subdirs []string
		buf := make([]byte, 32<<10)
		for {
			n, err := unix.Getdents(fd, buf)
			if err != nil {
				return nil, fmt.Errorf("read a directory: %w", err)
			}
			if n <= 0 {
				return subdirs, nil
			}
			names := parseDirents(buf[:n])
			for _, name := range names {
				var st unix.Stat_t
				if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
					if errors.Is(err, unix.ENOENT) {
						continue // removed since it was listed
					}
					return nil, fmt.Errorf("stat %q: %w", name, err)
				}
				used += max(st.Blocks*512, minFileCharge)
				if st.Mode&unix.S_IFMT == unix.S_IFDIR {
					subdirs = append(subdirs, name)
				}
			}
			if used > limit {
				return nil, nil
			}
		}
	}
	stat := func(fd int) (uint64, uint64, error) {
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return 0, 0, err
		}
		return st.Dev, st.Ino, nil
	}
	dev, ino, err := stat(root)
	if err != nil {
		unix.Close(root)
		return 0, err
	}
	subs, err := list(root)
	stack := []*frame{{fd: root, dev: dev, ino: ino, subdirs: subs}}
	defer func() {
		for _, f := range stack {
			if f.fd >= 0 {
				unix.Close(f.fd)
			}
		}
	}()
	if err != nil {
		return used, err
	}
	open := 1
	for len(stack) > 0 && used <= limit {
		top := stack[len(stack)-1]
		if len(top.subdirs) == 0 {
			stack = stack[:len(stack)-1]
			if len(stack) > 0 {
				parent := stack[len(stack)-1]
				if parent.fd < 0 {
					fd, err := openDirAt(top.fd, "..")
					if err != nil {
						unix.Close(top.fd)
						return used, fmt.Errorf("open a directory's parent: %w", err)
					}
					if d, i, err := stat(fd); err != nil || d != parent.dev || i != parent.ino {
						unix.Close(fd)
						unix.Close(top.fd)
						return used, errTreeChanged
					}
					parent.fd = fd
					open++
				}
			}
			unix.Close(top.fd)
			open--
			continue
		}
		name := top.subdirs[len(top.subdirs)-1]
		top.subdirs = top.subdirs[:len(top.subdirs)-1]
		fd, err := unix.Openat(top.fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
		if err != nil {
			if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
				// Moved, removed or swapped for something else since it was
				// listed: its files may now be where the walk has been.
				return used, errTreeChanged
			}
			return used, fmt.Errorf("open directory %q: %w", name, err)
		}
		d, i, err := stat(fd)
		if err != nil {
			unix.Close(fd)
			return used, err
		}
		subs, err := list(fd)
		if err != nil {
			unix.Close(fd)
			return used, err
		}
		stack = append(stack, &frame{fd: fd, dev: d, ino: i, subdirs: subs})
		open++
		if open > maxOpenDirs {
			// Close the outermost open ancestor (never the root's
			// direct line we are about to use).
			for _, f := range stack[:len(stack)-1] {
				if f.fd >= 0 {
					unix.Close(f.fd)
					f.fd = -1
					open--
					break
				}
			}
		}
	}
	return used, nil
}

// heldDeleted is the space of files that the processes below pid hold
// open, or mapped, after they were unlinked (or made with O_TMPFILE): they
// take disk space under no name a walk can find. Files on a tmpfs (the
// sandbox's /tmp and /dev/shm, memfd) are not counted here: their own size
// bounds them. A deleted file only mapped counts at the extent mapped when
// its size cannot be read (an unprivileged daemon cannot open
// /proc/PID/map_files).
func heldDeleted(pid int) int64 {
	type key struct{ dev, ino uint64 }
	seen := map[key]int64{}
	for _, p := range descendants(pid) {
		dir := "/proc/" + strconv.Itoa(p)
		fds, _ := os.ReadDir(dir + "/fd")
		for _, e := range fds {
			fdPath := dir + "/fd/" + e.Name()
			link, err := os.Readlink(fdPath)
			if err != nil || !strings.HasSuffix(link, " (deleted)") {
				continue
			}
			var st unix.Stat_t
			if unix.Stat(fdPath, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || onTmpfs(fdPath) {
				continue
			}
			seen[key{st.Dev, st.Ino}] = max(seen[key{st.Dev, st.Ino}], st.Blocks*512)
		}
		f, err := os.Open(dir + "/maps")
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			line := sc.Text()
			if !strings.HasSuffix(line, " (deleted)") {
				continue
			}
			m, ok := parseMapping(line)
			if !ok {
				continue
			}
			k := key{m.dev, m.ino}
			if _, ok := seen[k]; ok {
				continue
			}
			var st unix.Stat_t
			if unix.Stat(dir+"/map_files/"+m.addr, &st) == nil {
				if st.Mode&unix.S_IFMT == unix.S_IFREG && !onTmpfs(dir+"/map_files/"+m.addr) {
					seen[k] = max(seen[k], st.Blocks*512)
				}
				continue
			}
			if strings.HasPrefix(m.path, "/dev/shm/") || strings.HasPrefix(m.path, "/memfd:") || strings.HasPrefix(m.path, "/tmp/") || strings.HasPrefix(m.path, "/SYSV") {
				continue // tmpfs, bounded by its size
			}
			seen[k] = max(seen[k], m.extent)
		}
		f.Close()
	}
	var total int64
	for _, n := range seen {
		total += n
	}
	return total
}

// onTmpfs says whether path (a /proc magic link) is a file on a tmpfs.
func onTmpfs(path string) bool {
	var sf unix.Statfs_t
	return unix.Statfs(path, &sf) == nil && sf.Type == unix.TMPFS_MAGIC
}

// descendants lists pid and every process below it, from the kernel's
// children lists.
func descendants(pid int) []int {
	out := []int{pid}
	for i := 0; i < len(out) && len(out) < 1<<16; i++ {
		out = append(out, sandbox.Children(out[i])...)
	}
	return out
}

// mapping is one line of /proc/PID/maps that maps a file.
type mapping struct {
	addr     string // start-end, the name of its /proc/PID/map_files entry
	path     string
	dev, ino uint64
	extent   int64 // offset plus length: how much of the file it reaches
}

// parseMapping parses a maps line ("start-end perms offset major:minor
// inode path"); ok is false for anonymous mappings.
func parseMapping(line string) (m mapping, ok bool) {
	f := strings.Fields(line)
	if len(f) < 6 || f[4] == "0" {
		return m, false
	}
	mm := strings.SplitN(f[3], ":", 2)
	if len(mm) != 2 {
		return m, false
	}
	major, _ := strconv.ParseUint(mm[0], 16, 32)
	minor, _ := strconv.ParseUint(mm[1], 16, 32)
	m.ino, _ = strconv.ParseUint(f[4], 10, 64)
	m.dev = unix.Mkdev(uint32(major), uint32(minor))
	m.addr, m.path = f[0], strings.Join(f[5:], " ")
	se := strings.SplitN(f[0], "-", 2)
	start, _ := strconv.ParseUint(se[0], 16, 64)
	end, _ := strconv.ParseUint(se[len(se)-1], 16, 64)
	off, _ := strconv.ParseUint(f[2], 16, 64)
	m.extent = int64(off + end - start)
	return m, true
}
