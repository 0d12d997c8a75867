package workspace

import (
	"bufio"
	"bytes"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/cellbox-dev/cellbox/workspace/sandbox"
)

// Memory of a sandbox as a whole.
//
// memoryBytes is RLIMIT_AS, which holds per process: six processes under
// it hold six times as much, and memory written into memfd files or
// /dev/shm is in no process's address space at all. So every quota tick
// the daemon adds up what the sandbox's programs really hold and kills them
// all when that passes the sum of the memoryBytes of the programs it
// started. Where cgroups v2 are delegated, the sandbox has a cgroup of its
// own: the kernel counts (anon and shmem of memory.stat) and enforces the
// budget between ticks (memory.max); elsewhere the daemon measures each
// process (memoryUsage).

// memoryUsage is the memory the programs below the sandbox's init hold
// (not the init and spawner, the sandbox's own helpers): each process's
// proportional share of anonymous memory (Pss_Anon), plus each shared
// memory object once: memfd files open or mapped, and what /dev/shm holds.
func memoryUsage(initPid int) int64 {
	var progs []int
	for _, sp := range sandbox.Children(initPid) {
		progs = append(progs, descendants(sp)[1:]...)
	}
	if len(progs) == 0 {
		return 0
	}
	var total int64
	type key struct{ dev, ino uint64 }
	shmem := map[key]int64{}
	for _, p := range progs {
		dir := "/proc/" + strconv.Itoa(p)
		total += anonPss(dir)
		fds, _ := os.ReadDir(dir + "/fd")
		for _, e := range fds {
			fdPath := dir + "/fd/" + e.Name()
			link, err := os.Readlink(fdPath)
			if err != nil || !strings.HasPrefix(link, "/memfd:") {
				continue
			}
			var st unix.Stat_t
			if unix.Stat(fdPath, &st) == nil {
				shmem[key{st.Dev, st.Ino}] = max(shmem[key{st.Dev, st.Ino}], st.Blocks*512)
			}
		}
		f, err := os.Open(dir + "/maps")
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			m, ok := parseMapping(sc.Text())
			if !ok || !strings.HasPrefix(m.path, "/memfd:") {
				continue
			}
			k := key{m.dev, m.ino}
			if _, ok := shmem[k]; ok {
				continue
			}
			var st unix.Stat_t
			if unix.Stat(dir+"/map_files/"+m.addr, &st) == nil {
				shmem[k] = st.Blocks * 512
				continue
			}
			// An unprivileged daemon cannot open map_files: the extent
			// mapped is what it can see of the object.
			shmem[k] = max(shmem[k], m.extent)
		}
		f.Close()
	}
	for _, n := range shmem {
		total += n
	}
	var sf unix.Statfs_t
	if unix.Statfs("/proc/"+strconv.Itoa(progs[0])+"/root/dev/shm", &sf) == nil && sf.Type == unix.TMPFS_MAGIC {
		total += int64(sf.Blocks-sf.Bfree) * sf.Bsize
	}
	return total
}

// anonPss is a process's proportional share of its anonymous memory, from
// smaps_rollup (Pss_Anon; Anonymous on kernels without it).
func anonPss(dir string) int64 {
	b, err := os.ReadFile(dir + "/smaps_rollup")
	if err != nil {
		return 0
	}
	var anon, pssAnon int64 = 0, -1
	for _, line := range bytes.Split(b, []byte("\n")) {
		name, rest, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		var dst *int64
		switch string(name) {
		case "Pss_Anon":
			dst = &pssAnon
		case "Anonymous":
			dst = &anon
		default:
			continue
		}
		f := bytes.Fields(rest)
		if len(f) > 0 {
			if kb, err := strconv.ParseInt(string(f[0]), 10, 64); err == nil {
				*dst = kb << 10
			}
		}
	}
	if pssAnon >= 0 {
		return pssAnon
	}
	return anon
}

// cgroupSlack is what memory.max allows above the programs' memoryBytes:
// the sandbox's own helpers (its init and spawner) are in its cgroup too,
// and the tick, not the kernel's OOM killer, should be what stops a
// program that grows slowly (it says why).
const cgroupSlack = 64 << 20

// memoryState is what the memory check keeps of a sandbox's cgroup, from
// one tick to the next and for Spawn.
type memoryState struct {
	mu  sync.Mutex      // guards the fields below; taken with no other lock held
	cg  *sandbox.Cgroup // the cgroup the fields are of (a new sandbox has another)
	max int64           // memory.max last written (0: none, "max")
	oom int64           // memory.events oom last seen
}

// ofLocked makes st about cg: what was known of another cgroup is
// forgotten (max -1: not written yet).
func (st *memoryState) ofLocked(cg *sandbox.Cgroup) {
	if st.cg != cg {
		st.cg, st.max, st.oom = cg, -1, 0
	}
}

// setMax writes memory.max for a budget of limit (plus cgroupSlack; 0:
// none) when it changed; raiseOnly leaves a larger one in place.
func (st *memoryState) setMax(cg *sandbox.Cgroup, limit int64, raiseOnly bool) {
	want := int64(0)
	if limit > 0 {
		want = limit + cgroupSlack
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	st.ofLocked(cg)
	if st.max == want || raiseOnly && st.max >= 0 && (st.max == 0 || want != 0 && want < st.max) {
		return
	}
	if cg.SetMemoryMax(want) == nil {
		st.max = want
	}
}

// cgroupMemory sets the sandbox cgroup's memory.max to the budget, and
// answers the memory the sandbox's programs hold that cannot be reclaimed:
// anonymous memory and shared memory (memfd, /dev/shm, tmpfs), from
// memory.stat, less the anonymous memory of the sandbox's own helpers (its
// init and spawners), as memoryUsage counts it; -1 when it cannot be read.
// oom says memory.max was reached since the last tick (the kernel's OOM
// killer ran for it).
func cgroupMemory(cg *sandbox.Cgroup, initPid int, limit int64, st *memoryState) (used int64, oom bool) {
	st.setMax(cg, limit, false)
	st.mu.Lock()
	st.ofLocked(cg)
	if n := cg.LimitOOMs(); n > st.oom {
		st.oom, oom = n, true
	}
	st.mu.Unlock()
	used = cgroupAnonShmem(cg.Dir())
	if used < 0 {
		return -1, oom
	}
	for _, h := range append([]int{initPid}, sandbox.Children(initPid)...) {
		used -= anonPss("/proc/" + strconv.Itoa(h))
	}
	return max(used, 0), oom
}

// cgroupAnonShmem is anon + shmem of a cgroup's memory.stat, or -1.
func cgroupAnonShmem(dir string) int64 {
	b, err := os.ReadFile(dir + "/memory.stat")
	if err != nil {
		return -1
	}
	var total int64
	found := 0
	for line := range bytes.Lines(b) {
		k, v, ok := strings.Cut(strings.TrimSpace(string(line)), " ")
		if !ok || k != "anon" && k != "shmem" {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return -1
		}
		total += n
		found++
	}
	if found != 2 {
		return -1
	}
	return total
}

// cgroup is a sandbox's cgroup (Workspace.cg); elsewhere than on Linux
// there is none.
type cgroup = sandbox.Cgroup

// daemonCgroups is the daemon's delegated cgroup v2, prepared once for the
// process (sandbox.OpenCgroups moves the daemon into a leaf of it); nil
// with the reason where cgroups cannot be used.
var daemonCgroups = sync.OnceValues(sandbox.OpenCgroups)

// openCgroups prepares the daemon's cgroups (once a process), and says
// why sandboxes go without where they cannot be used.
func (m *Manager) openCgroups() {
	if _, err := daemonCgroups(); err != nil {
		m.log.Debug("sandboxes without cgroups: memory is measured per tick", "reason", err)
	}
}

// sandboxCgroup puts a sandbox just started (its init and spawner; the
// programs are born in it) into a cgroup of its own, where cgroups are
// delegated; else nil, and memoryUsage measures instead.
func (w *Workspace) sandboxCgroup(sb *sandbox.Sandbox) *sandbox.Cgroup {
	cs, err := daemonCgroups()
	if err != nil {
		return nil
	}
	cg, err := cs.New(w.id + "-" + strconv.Itoa(sb.InitPID()))
	if err == nil {
		if err = cg.Add(descendants(sb.InitPID())...); err != nil {
			_ = cg.Remove()
		}
	}
	if err != nil {
		w.m.log.Warn("sandbox without a cgroup: memory is measured per tick", "workspace", w.id, "err", err)
		return nil
	}
	return cg
}

// checkMemory kills the sandbox's programs when together they hold more
// memory than the memoryBytes of the programs it started add up to (none
// of them unlimited). With a cgroup of its own the kernel counts (see
// cgroupMemory), and enforces the same budget between ticks.
func (w *Workspace) checkMemory(sb *sandbox.Sandbox, cg *sandbox.Cgroup, st *memoryState) (headroom int64) {
	w.mu.Lock()
	var limit int64
	for p := range w.procs {
		if p.memory <= 0 {
			limit = 0
			break
		}
		limit += p.memory
	}
	w.mu.Unlock()
	var used int64
	if cg != nil {
		var oom bool
		used, oom = cgroupMemory(cg, sb.InitPID(), limit, st)
		if oom {
			used = max(used, limit+1) // the kernel killed for the budget
		}
	}
	if limit <= 0 {
		return math.MaxInt64
	}
	if cg == nil || used < 0 {
		used = memoryUsage(sb.InitPID())
	}
	if used <= limit {
		if cg != nil {
			return math.MaxInt64 // the kernel holds it to the budget between ticks
		}
		return limit - used
	}
	// The reason kernels and clients know (a kernel/status dead reason);
	// the figures go to the log.
	const reason = "killed: memory limit"
	w.m.log.Warn("memory limit: the sandbox's programs together (memfd and /dev/shm included) hold more than their memoryBytes add up to; killing them",
		"workspace", w.id, "used_mib", used>>20, "limit_mib", limit>>20)
	w.mu.Lock()
	for p := range w.procs {
		p.setReason(reason)
	}
	w.mu.Unlock()
	_ = sb.KillAll()
	return 0
}

// raiseMemoryMax makes room in the sandbox cgroup's memory.max for a
// program about to start with memoryBytes (0: unlimited), before it runs:
// the tick would raise it only up to 250 ms later, while the kernel held
// the program to the budget before it.
func (w *Workspace) raiseMemoryMax(memoryBytes int64) {
	w.mu.Lock()
	cg := w.cg
	limit := memoryBytes
	for p := range w.procs {
		if p.memory <= 0 || limit <= 0 {
			limit = 0
			break
		}
		limit += p.memory
	}
	w.mu.Unlock()
	if cg != nil {
		w.mem.setMax(cg, limit, true)
	}
}
