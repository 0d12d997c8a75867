package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Cgroups v2, where the daemon's user has them delegated (systemd-run
// --user --scope -p Delegate=yes, a unit with Delegate=yes, a container
// with its own cgroup namespace): each sandbox gets a cgroup of its own
// below the daemon's, so that its memory is one budget the kernel counts
// and enforces (memfd, /dev/shm and page cache included) and all of it can
// be killed at once. Where they are not (cgroup v1 or hybrid hosts, no
// delegation), the workspace measures the sandbox's memory itself
// (workspace/memory_linux.go); doctor says which holds.

// Cgroups is the daemon's delegated cgroup v2, prepared for sandboxes.
type Cgroups struct {
	dir string // the delegated cgroup; the daemon itself moved to dir/daemon
}

// Cgroup is one sandbox's cgroup.
type Cgroup struct {
	dir string
}

// OpenCgroups prepares the daemon's own cgroup v2 for sandbox cgroups: it
// must be on a unified hierarchy, writable, with the memory controller,
// and hold no process but the daemon. cgroup v2 enables controllers only
// for the children of a cgroup that holds no process of its own (the root
// of a cgroup namespace included), so the daemon moves itself into a leaf
// child, "daemon", then enables memory for the children. On any failure it
// moves back and removes the leaf, and answers the reason. Sandbox cgroups
// a crashed daemon left are killed and removed. Call it before any
// sandbox is started (the pool's too): their processes would share the
// daemon's cgroup.
func OpenCgroups() (*Cgroups, error) {
	dir, err := ownCgroupDir()
	if err != nil {
		return nil, err
	}
	if err := cgroupUsable(dir); err != nil {
		return nil, err
	}
	leaf := filepath.Join(dir, "daemon")
	if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("cgroups: create the daemon's leaf: %w", err)
	}
	if err := writeCgroupFile(leaf, "cgroup.procs", "0"); err != nil {
		_ = unix.Rmdir(leaf)
		return nil, fmt.Errorf("cgroups: move the daemon into %s: %w", leaf, err)
	}
	enable := "+" + strings.Join(cgroupNeeded, " +")
	if err := writeCgroupFile(dir, "cgroup.subtree_control", enable); err != nil {
		// Back to where it was, as if nothing had happened.
		_ = writeCgroupFile(dir, "cgroup.procs", "0")
		_ = unix.Rmdir(leaf)
		return nil, fmt.Errorf("cgroups: enable %s for the children of %s: %w", enable, dir, err)
	}
	cs := &Cgroups{dir: dir}
	cs.removeStale()
	return cs, nil
}

// cgroupUsable says why dir cannot hold the sandboxes' cgroups, or nil:
// the controllers must be delegated to it, and no process but this one
// (and those already in its "daemon" leaf) may be in it.
func cgroupUsable(dir string) error {
	ctrl, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return fmt.Errorf("cgroups: %w", err)
	}
	have := strings.Fields(string(ctrl))
	for _, c := range cgroupNeeded {
		if !slices.Contains(have, c) {
			return fmt.Errorf("cgroups: controller %s is not delegated to %s (cgroup.controllers: %q)", c, dir, strings.TrimSpace(string(ctrl)))
		}
	}
	procs, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return fmt.Errorf("cgroups: %w", err)
	}
	self := strconv.Itoa(os.Getpid())
	var others []string
	for _, p := range strings.Fields(string(procs)) {
		if p != self {
			others = append(others, p)
		}
	}
	if len(others) > 0 {
		return fmt.Errorf("cgroups: other processes share the daemon's cgroup %s (pids %s): run cellbox in a scope of its own (systemd-run --user --scope -p Delegate=yes cellbox serve ...)", dir, strings.Join(others, " "))
	}
	return nil
}

// removeStale kills and removes sandbox cgroups (sb-*) that a daemon
// before this one left.
func (cs *Cgroups) removeStale() {
	entries, _ := os.ReadDir(cs.dir)
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), "sb-") {
			_ = (&Cgroup{dir: filepath.Join(cs.dir, e.Name())}).Remove()
		}
	}
}

// cgroupMount is where a unified cgroup v2 hierarchy is mounted.
const cgroupMount = "/sys/fs/cgroup"

// ownCgroupDir is the daemon's cgroup v2 directory, on a unified host.
func ownCgroupDir() (string, error) {
	t, err := FilesystemType(cgroupMount)
	if err != nil {
		return "", fmt.Errorf("cgroups: %w", err)
	}
	if t != "cgroup2" {
		return "", fmt.Errorf("cgroups: %s is %s, not cgroup2 (a cgroup v1 or hybrid host)", cgroupMount, t)
	}
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", fmt.Errorf("cgroups: %w", err)
	}
	own, ok := parseProcCgroup(b)
	if !ok {
		return "", errors.New("cgroups: /proc/self/cgroup has no cgroup v2 entry (0::)")
	}
	// In a cgroup namespace the path is relative to its root, which is
	// what /sys/fs/cgroup shows there.
	dir := filepath.Join(cgroupMount, filepath.Clean("/"+own))
	if filepath.Base(dir) == "daemon" {
		// A daemon that already moved itself (OpenCgroups twice).
		dir = filepath.Dir(dir)
	}
	if err := unix.Access(filepath.Join(dir, "cgroup.subtree_control"), unix.W_OK); err != nil {
		return "", fmt.Errorf("cgroups: %s is not writable by uid %d: %w", dir, os.Geteuid(), err)
	}
	return dir, nil
}

// New creates the cgroup of one sandbox, name unique among the daemon's.
func (cs *Cgroups) New(name string) (*Cgroup, error) {
	dir := filepath.Join(cs.dir, "sb-"+name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("cgroups: create %s: %w", dir, err)
	}
	return &Cgroup{dir: dir}, nil
}

// Dir is the cgroup's directory.
func (c *Cgroup) Dir() string { return c.dir }

// Add moves the processes into the cgroup (each with the threads it has;
// children forked later are born in it).
func (c *Cgroup) Add(pids ...int) error {
	for _, p := range pids {
		if err := writeCgroupFile(c.dir, "cgroup.procs", strconv.Itoa(p)); err != nil && !errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("cgroups: move %d into %s: %w", p, c.dir, err)
		}
	}
	return nil
}

// SetMemoryMax sets memory.max (bytes <= 0: no limit) and keeps the
// sandbox out of swap under a limit, so that the limit is the memory it
// holds.
func (c *Cgroup) SetMemoryMax(bytes int64) error {
	v := "max"
	if bytes > 0 {
		v = strconv.FormatInt(bytes, 10)
	}
	if err := writeCgroupFile(c.dir, "memory.max", v); err != nil {
		return fmt.Errorf("cgroups: memory.max of %s: %w", c.dir, err)
	}
	swap := "max"
	if bytes > 0 {
		swap = "0"
	}
	// memory.swap.max is absent without swap accounting: not an error.
	if err := writeCgroupFile(c.dir, "memory.swap.max", swap); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("cgroups: memory.swap.max of %s: %w", c.dir, err)
	}
	return nil
}

// LimitOOMs is the oom count of memory.events: the times the cgroup's
// memory reached memory.max and the kernel's OOM killer ran for it (not
// kills for the host's memory or an ancestor's limit).
func (c *Cgroup) LimitOOMs() int64 {
	b, err := os.ReadFile(filepath.Join(c.dir, "memory.events"))
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "oom "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}

// Remove kills whatever is left in the cgroup (cgroup.kill, Linux 5.14)
// and removes it once it is empty, trying for up to 5 s. A cgroup already
// gone is no error.
func (c *Cgroup) Remove() error {
	_ = writeCgroupFile(c.dir, "cgroup.kill", "1")
	deadline := time.Now().Add(5 * time.Second)
	for delay := time.Millisecond; ; delay = min(2*delay, 100*time.Millisecond) {
		err := unix.Rmdir(c.dir)
		if err == nil || errors.Is(err, unix.ENOENT) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cgroups: remove %s: %w", c.dir, err)
		}
		time.Sleep(delay) // the killed processes are still being reaped
	}
}

func writeCgroupFile(dir, name, value string) error {
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(value)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// cgroupNeeded are the controllers a sandbox's limits use.
var cgroupNeeded = []string{"memory"}

func probeCgroups(h hostInfo) Layer {
	l := Layer{Name: LayerCgroups}
	fixDelegate := "run cellbox in a delegated cgroup: systemd-run --user --scope -p Delegate=yes cellbox serve ..., " +
		"or a systemd unit with Delegate=yes; in a container, cgroup v2 with --cgroupns=private (cgroups are an extra: without them the daemon adds up each sandbox's memory, memfd and /dev/shm included, every 250 ms and kills past the budget; with them the kernel counts it and enforces the budget between ticks too)"
	var mount, mountRoot string
	var sysType string
	if t, err := FilesystemType("/sys/fs/cgroup"); err == nil {
		sysType = t
	} else {
		sysType = "missing"
	}
	var prefix string
	if sysType == "cgroup2" {
		mount, mountRoot = "/sys/fs/cgroup", "/"
		for _, m := range h.mounts {
			if m.point == mount {
				mountRoot = m.root
			}
		}
	} else {
		for _, m := range h.mounts {
			if m.fstype == "cgroup2" {
				mount, mountRoot = m.point, m.root
				break
			}
		}
		if mount == "" {
			l.Reason = fmt.Sprintf("/sys/fs/cgroup is %s, not cgroup2, and no cgroup2 hierarchy is mounted (cgroup v1 host)", sysType)
			l.Fix = "switch the host to the unified cgroup v2 hierarchy (kernel parameter systemd.unified_cgroup_hierarchy=1)"
			return l
		}
		prefix = fmt.Sprintf("/sys/fs/cgroup is %s, not cgroup2 (hybrid cgroup v1/v2 host; cgroup2 is at %s); ", sysType, mount)
	}
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		l.Reason = prefix + "read /proc/self/cgroup: " + err.Error()
		return l
	}
	own, ok := parseProcCgroup(b)
	if !ok {
		l.Reason = prefix + "/proc/self/cgroup has no cgroup v2 entry (0::)"
		return l
	}
	rel := own
	if mountRoot != "/" && mountRoot != "" {
		rel = strings.TrimPrefix(own, mountRoot)
	}
	dir := filepath.Join(mount, rel)
	var problems []string
	for _, p := range []string{dir, filepath.Join(dir, "cgroup.procs"), filepath.Join(dir, "cgroup.subtree_control")} {
		if err := unix.Access(p, unix.W_OK); err != nil {
			problems = append(problems, fmt.Sprintf("%s is not writable by uid %d (%v)", p, h.uid, err))
			break
		}
	}
	ctrl, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		problems = append(problems, "read cgroup.controllers: "+err.Error())
	} else {
		have := strings.Fields(string(ctrl))
		var missing []string
		for _, c := range cgroupNeeded {
			if !slices.Contains(have, c) {
				missing = append(missing, c)
			}
		}
		if len(missing) > 0 {
			why := ""
			if len(have) == 0 {
				why = " (cgroup.controllers is empty"
				if prefix != "" {
					why += "; the controllers are bound to cgroup v1 hierarchies"
				}
				why += ")"
			} else {
				why = fmt.Sprintf(" (cgroup.controllers: %s)", strings.Join(have, " "))
			}
			problems = append(problems, fmt.Sprintf("controllers %s are not delegated to cgroup %s%s", strings.Join(missing, ","), dir, why))
		}
	}
	if len(problems) > 0 || prefix != "" {
		if len(problems) == 0 {
			problems = append(problems, "cgroups on a hybrid host are not used")
		}
		l.Reason = prefix + strings.Join(problems, "; ")
		if prefix != "" {
			l.Fix = "switch the host to the unified cgroup v2 hierarchy (kernel parameter systemd.unified_cgroup_hierarchy=1), then " + fixDelegate
		} else {
			l.Fix = fixDelegate
		}
		return l
	}
	if err := cgroupUsable(dir); err != nil && filepath.Base(dir) != "daemon" {
		l.Reason = err.Error()
		l.Fix = fixDelegate
		return l
	}
	l.Available = true
	l.Detail = fmt.Sprintf("cgroup %s writable with %s", dir, strings.Join(cgroupNeeded, ","))
	if own != "/" && !delegated(dir) {
		// Root can write any cgroup; systemd marks those it handed over.
		l.Detail += " (not marked delegated by systemd: no trusted.delegate or user.delegate xattr; " +
			"use Delegate=yes so that systemd leaves the subtree alone)"
	}
	return l
}

// delegated says whether systemd (251+) marked the cgroup dir as delegated.
func delegated(dir string) bool {
	buf := make([]byte, 8)
	for _, name := range []string{"trusted.delegate", "user.delegate"} {
		if n, err := unix.Getxattr(dir, name, buf); err == nil && n > 0 && buf[0] == '1' {
			return true
		}
	}
	return false
}

// parseProcCgroup returns the cgroup v2 path ("0::PATH") of /proc/PID/cgroup.
func parseProcCgroup(b []byte) (string, bool) {
	for line := range strings.Lines(string(b)) {
		if p, ok := strings.CutPrefix(strings.TrimRight(line, "\n"), "0::"); ok {
			return p, true
		}
	}
	return "", false
}
