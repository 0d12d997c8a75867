package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// defaultProbeTimeout bounds each probe helper when ProbeOptions.Timeout is 0.
const defaultProbeTimeout = 5 * time.Second

func probe(ctx context.Context, opts ProbeOptions) Report {
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = defaultProbeTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	h := readHost()
	layers := make(map[string]Layer, len(LayerNames()))
	var r Report

	sc, scErr := makeScratch(opts.StateDir)
	dir := ""
	if sc != nil {
		defer sc.remove()
		dir = sc.dir
		r.ScratchDir, r.ScratchFS = sc.parent, sc.fs
	}

	// The namespace checks run in a helper while the in-process checks run here.
	var results map[string]helperResult
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			if p := recover(); p != nil {
				results = nil
			}
		}()
		results = runNSChecks(ctx, dir)
	}()

	layers[LayerSeccomp] = safeLayer(LayerSeccomp, func() Layer { return probeSeccomp(h) })
	layers[LayerLandlock] = safeLayer(LayerLandlock, func() Layer {
		var l Layer
		l, r.LandlockABI = probeLandlock()
		return l
	})
	layers[LayerCgroups] = safeLayer(LayerCgroups, func() Layer { return probeCgroups(h) })
	layers[LayerIDMappedMounts] = safeLayer(LayerIDMappedMounts, func() Layer { return probeIDMap(h) })

	<-done
	for _, c := range nsChecks {
		res, ok := results[c.layer]
		switch {
		case !ok:
			res = helperResult{msg: "the namespace probe failed without a result"}
		case !res.ok && res.msg == errNoScratch.Error() && scErr != nil:
			res.msg = scErr.Error()
		}
		layers[c.layer] = safeLayer(c.layer, func() Layer { return interpretHelper(c, res, h, sc) })
	}
	u := results[LayerUserNamespaces]
	interpretDependents(layers, h, u.errno != 0 || u.ran && !u.ok)

	for _, name := range LayerNames() {
		l := layers[name]
		l.Name = name
		if !l.Available && l.Reason == "" {
			l.Reason = "unavailable (no reason found)"
		}
		r.Layers = append(r.Layers, l)
	}
	return r
}

// runNSChecks runs the namespace checks with dir as their scratch directory.
// All run in one helper in all the namespaces at once; only when the host
// refuses to create those together does each run in its own helper, so that
// the refusal is attributed to the namespace type that causes it.
func runNSChecks(ctx context.Context, dir string) map[string]helperResult {
	var args []string
	if dir != "" {
		args = []string{dir}
	}
	all := runHelper(ctx, entryProbeAll, probeAllFlags, args...)
	if all.ran || all.errno == 0 {
		m := parseProbeAll(all.stdout)
		// A check the helper did not report on (it crashed, hung or never
		// started) is unavailable for the helper's reason.
		none := helperResult{msg: all.msg}
		if none.msg == "" {
			none.msg = "helper " + entryProbeAll + " reported no result"
		}
		for _, c := range nsChecks {
			if _, ok := m[c.layer]; !ok {
				m[c.layer] = none
			}
		}
		return m
	}
	results := make([]helperResult, len(nsChecks))
	var wg sync.WaitGroup
	for i, c := range nsChecks {
		wg.Go(func() {
			defer func() {
				if p := recover(); p != nil {
					results[i] = helperResult{msg: fmt.Sprintf("probe panicked: %v", p)}
				}
			}()
			results[i] = runHelper(ctx, c.entry, c.flags, args...)
		})
	}
	wg.Wait()
	m := make(map[string]helperResult, len(nsChecks))
	for i, c := range nsChecks {
		m[c.layer] = results[i]
	}
	return m
}

// safeLayer runs one check, turning a panic into an unavailable layer.
func safeLayer(name string, check func() Layer) (l Layer) {
	defer func() {
		if p := recover(); p != nil {
			l = Layer{Name: name, Reason: fmt.Sprintf("probe panicked: %v", p)}
		}
	}()
	l = check()
	l.Name = name
	return l
}

// --- scratch directory -------------------------------------------------------

// scratch is the directory tree the mount, overlay and pid helpers use:
// lower/ (holding f1 and f2), upper/, work/, merged/, root/ and proc/.
type scratch struct {
	parent string // the state dir or os.TempDir()
	dir    string
	fs     string // filesystem type of dir
}

func makeScratch(stateDir string) (*scratch, error) {
	parent := os.TempDir()
	if stateDir != "" {
		if fi, err := os.Stat(stateDir); err == nil && fi.IsDir() {
			parent = stateDir
		}
	}
	dir, err := os.MkdirTemp(parent, ".cellbox-probe-")
	if err != nil {
		return nil, fmt.Errorf("create probe directory in %q: %w", parent, err)
	}
	sc := &scratch{parent: parent, dir: dir}
	sc.fs, _ = FilesystemType(dir)
	for _, d := range []string{"lower", "upper", "work", "merged", "root", "proc"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("create probe directory: %w", err)
		}
	}
	for _, f := range []string{"f1", "f2"} {
		if err := os.WriteFile(filepath.Join(dir, "lower", f), []byte("lower\n"), 0o600); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("create probe file: %w", err)
		}
	}
	return sc, nil
}

// remove deletes the scratch tree. Overlayfs leaves work/work with mode
// 000 (and sometimes a whiteout in it), which its owner cannot list until
// it restores the permission.
func (sc *scratch) remove() {
	os.Chmod(filepath.Join(sc.dir, "work", "work"), 0o700)
	os.RemoveAll(sc.dir)
}

// FilesystemType returns the type of the filesystem holding path, as
// /proc/filesystems names it ("ext4", "overlay", "tmpfs", ...), or
// "0x<magic>" for a type this function does not know.
func FilesystemType(path string) (string, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return "", fmt.Errorf("statfs %q: %w", path, err)
	}
	if name, ok := fsMagic[uint32(st.Type)]; ok {
		return name, nil
	}
	return fmt.Sprintf("0x%x", uint32(st.Type)), nil
}

var fsMagic = map[uint32]string{
	unix.EXT4_SUPER_MAGIC:      "ext4", // also ext2 and ext3
	unix.XFS_SUPER_MAGIC:       "xfs",
	unix.BTRFS_SUPER_MAGIC:     "btrfs",
	unix.TMPFS_MAGIC:           "tmpfs",
	unix.OVERLAYFS_SUPER_MAGIC: "overlay",
	unix.NFS_SUPER_MAGIC:       "nfs",
	unix.FUSE_SUPER_MAGIC:      "fuse",
	unix.F2FS_SUPER_MAGIC:      "f2fs",
	unix.CGROUP2_SUPER_MAGIC:   "cgroup2",
	unix.CGROUP_SUPER_MAGIC:    "cgroup",
	unix.PROC_SUPER_MAGIC:      "proc",
	unix.SYSFS_MAGIC:           "sysfs",
	unix.RAMFS_MAGIC:           "ramfs",
	0x2fc12fc1:                 "zfs",
	0x01021997:                 "9p",
	0x786f4256:                 "virtiofs",
	0xff534d42:                 "cifs",
	0x4d44:                     "vfat",
}

// --- host facts ----------------------------------------------------------------

// hostInfo is what the diagnoses need to know about the host. Integers read
// from /proc/sys are -1 when the file is absent or unreadable.
type hostInfo struct {
	uid, gid    int
	capSysAdmin bool   // CAP_SYS_ADMIN in the effective set
	initUserNS  bool   // this process is in the initial user namespace
	seccompMode int    // "Seccomp:" of /proc/self/status, -1 unknown
	release     string // kernel release, e.g. "6.18.44"

	nsLimit           map[string]int // by sysctl name, e.g. "user.max_user_namespaces"
	unprivUsernsClone int            // kernel.unprivileged_userns_clone (Debian, Arch)
	apparmorRestrict  int            // kernel.apparmor_restrict_unprivileged_userns (Ubuntu 23.10+)

	mounts          []mountEntry
	rootFS          string   // fstype of "/"
	procMasked      []string // mounts over paths inside /proc (a container's masks)
	procSysReadOnly bool
	container       string // which container cellbox seems to run in, and why it seems so; "" on a host
}

func readHost() hostInfo {
	h := hostInfo{uid: os.Getuid(), gid: os.Getgid(), seccompMode: -1}
	var uts unix.Utsname
	if unix.Uname(&uts) == nil {
		h.release = unix.ByteSliceToString(uts.Release[:])
	}
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		st := parseStatus(b)
		if v, ok := st["Seccomp"]; ok {
			h.seccompMode, _ = strconv.Atoi(v)
		}
		if v, ok := st["CapEff"]; ok {
			if caps, err := strconv.ParseUint(v, 16, 64); err == nil {
				h.capSysAdmin = caps&(1<<unix.CAP_SYS_ADMIN) != 0
			}
		}
	}
	if b, err := os.ReadFile("/proc/self/uid_map"); err == nil {
		h.initUserNS = strings.Join(strings.Fields(string(b)), " ") == "0 0 4294967295"
	}
	h.nsLimit = make(map[string]int, len(nsTypes))
	for _, t := range nsTypes {
		h.nsLimit[t.limit] = readSysctl(strings.ReplaceAll(t.limit, ".", "/"))
	}
	h.unprivUsernsClone = readSysctl("kernel/unprivileged_userns_clone")
	h.apparmorRestrict = readSysctl("kernel/apparmor_restrict_unprivileged_userns")

	if f, err := os.Open("/proc/self/mountinfo"); err == nil {
		h.mounts, _ = parseMountinfo(f)
		f.Close()
	}
	for _, m := range h.mounts {
		switch {
		case m.point == "/":
			h.rootFS = m.fstype
		case m.point == "/proc/sys/fs/binfmt_misc":
			// An empty, permanently empty directory: does not mask /proc.
		case strings.HasPrefix(m.point, "/proc/"):
			h.procMasked = append(h.procMasked, m.point)
			if m.point == "/proc/sys" && hasOption(m.options, "ro") {
				h.procSysReadOnly = true
			}
		}
	}
	switch {
	case exists("/.dockerenv"):
		h.container = "docker (/.dockerenv exists)"
	case exists("/run/.containerenv"):
		h.container = "podman (/run/.containerenv exists)"
	case len(h.procMasked) > 0:
		h.container = "a container (/proc is masked)"
	case h.rootFS == "overlay" && !h.initUserNS:
		h.container = "a container (root on overlayfs in a user namespace)"
	}
	return h
}

func readSysctl(name string) int {
	b, err := os.ReadFile("/proc/sys/" + name)
	if err != nil {
		return -1
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return -1
	}
	return v
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// parseStatus parses /proc/PID/status into its "Key: value" pairs.
func parseStatus(b []byte) map[string]string {
	m := make(map[string]string)
	for line := range bytes.Lines(b) {
		k, v, ok := bytes.Cut(line, []byte{':'})
		if ok {
			m[string(k)] = string(bytes.TrimSpace(v))
		}
	}
	return m
}

// mountEntry is one line of /proc/PID/mountinfo.
type mountEntry struct {
	root, point, options, fstype, source, superOptions string
}

// parseMountinfo parses /proc/PID/mountinfo (proc(5)).
func parseMountinfo(r io.Reader) ([]mountEntry, error) {
	var out []mountEntry
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 0, 4096), 1<<20)
	for s.Scan() {
		f := strings.Fields(s.Text())
		sep := -1
		for i := 6; i < len(f); i++ {
			if f[i] == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || len(f) < sep+3 {
			return out, fmt.Errorf("parse mountinfo: malformed line %q", s.Text())
		}
		e := mountEntry{
			root:    unescapeMountinfo(f[3]),
			point:   unescapeMountinfo(f[4]),
			options: f[5],
			fstype:  f[sep+1],
			source:  unescapeMountinfo(f[sep+2]),
		}
		if len(f) > sep+3 {
			e.superOptions = f[sep+3]
		}
		out = append(out, e)
	}
	return out, s.Err()
}

// unescapeMountinfo undoes the octal escapes (\040 for space, ...) of mountinfo.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func hasOption(opts, want string) bool {
	for o := range strings.SplitSeq(opts, ",") {
		if o == want {
			return true
		}
	}
	return false
}

// interpretHelper turns a helper's result into its layer.
func interpretHelper(ph nsCheck, res helperResult, h hostInfo, sc *scratch) Layer {
	l := Layer{Name: ph.layer}
	if ph.layer == LayerOverlay && sc != nil && sc.fs == "overlay" {
		l.Reason = fmt.Sprintf("the upper layer directory %s is on overlayfs, which cannot be an overlay's upper layer", sc.parent)
		l.Fix = "put the state dir on a non-overlay filesystem (--state-dir on ext4, xfs, btrfs or tmpfs; in a container, a volume)"
		return l
	}
	switch {
	case res.ok:
		l.Available = true
		l.Detail = helperDetail(ph.layer, h, sc)
		return l
	case res.errno != 0:
		l.Reason, l.Fix = diagnoseClone(ph.flags, res.errno, h)
		return l
	case !res.ran:
		l.Reason = res.msg
		return l
	}
	l.Reason = res.msg
	denied := strings.Contains(res.msg, "(EPERM)") || strings.Contains(res.msg, "(EACCES)")
	switch {
	case ph.layer == LayerMountNamespace && strings.HasPrefix(res.msg, "pivot_root") && h.rootFS == "rootfs":
		l.Reason += "; the host runs from an initramfs (rootfs), where pivot_root is impossible"
		l.Fix = "boot with a real root filesystem (or switch_root out of the initramfs before starting cellbox)"
	case ph.layer == LayerOverlay && strings.Contains(res.msg, "(ENODEV)"):
		l.Fix = "load the overlay module: modprobe overlay (and add it to /etc/modules-load.d/)"
	case ph.layer == LayerOverlay && denied && !kernelAtLeast(h.release, 5, 11):
		l.Reason += fmt.Sprintf("; overlayfs can be mounted in a user namespace only since Linux 5.11 (this is %s)", h.release)
		l.Fix = "use Linux 5.11 or newer"
	case ph.layer == LayerOverlay && strings.Contains(res.msg, "(EINVAL)") && sc != nil:
		l.Reason += fmt.Sprintf(" (upper layer on %s in %s)", sc.fs, sc.parent)
		l.Fix = "overlayfs in a user namespace with userxattr needs Linux 5.11+ and an upper filesystem with user xattrs " +
			"(ext4, xfs, btrfs, tmpfs on 6.6+); use such a --state-dir"
	case ph.layer == LayerPidNamespace && strings.HasPrefix(res.msg, "mount proc") && len(h.procMasked) > 0:
		l.Reason += fmt.Sprintf("; /proc is masked (mounts over %s, as container runtimes do), so a new proc cannot be mounted", strings.Join(h.procMasked, ", "))
		l.Fix = "run the container with an unmasked /proc (docker/podman: --security-opt systempaths=unconfined; " +
			"Kubernetes: procMount: Unmasked), or run cellbox on the host"
	case denied:
		if reason, fix, ok := permissionPolicy(h); ok {
			l.Reason += "; " + reason
			l.Fix = fix
		}
	}
	return l
}

// kernelAtLeast says whether the kernel release ("6.18.44-...") is at least
// major.minor; an unparsable release counts as new enough.
func kernelAtLeast(release string, major, minor int) bool {
	var ma, mi int
	if _, err := fmt.Sscanf(release, "%d.%d", &ma, &mi); err != nil {
		return true
	}
	return ma > major || ma == major && mi >= minor
}

func helperDetail(layer string, h hostInfo, sc *scratch) string {
	switch layer {
	case LayerUserNamespaces:
		return fmt.Sprintf("root in a new user namespace maps to uid %d", h.uid)
	case LayerMountNamespace:
		return "tmpfs root and pivot_root work"
	case LayerOverlay:
		return fmt.Sprintf("overlay with userxattr, upper layer on %s in %s", sc.fs, sc.parent)
	case LayerPidNamespace:
		return "pid 1 in a new pid namespace, proc mounts"
	case LayerNetworkNamespace:
		return "empty network namespace, loopback up"
	}
	return ""
}

// interpretDependents fixes up layers whose helpers needed a user namespace:
// when user namespaces are unavailable that is their reason; when they can
// be created but AppArmor strips their capabilities, that makes user
// namespaces themselves unusable.
// usernsFailed says the user namespace check itself failed (rather than
// not running, as on a timeout).
func interpretDependents(layers map[string]Layer, h hostInfo, usernsFailed bool) {
	u := layers[LayerUserNamespaces]
	if u.Available && h.apparmorRestrict == 1 && !h.capSysAdmin && !layers[LayerMountNamespace].Available {
		u.Available = false
		u.Detail = ""
		u.Reason, u.Fix, _ = permissionPolicy(h)
		u.Reason = "a user namespace can be created but has no capabilities: " + u.Reason
		layers[LayerUserNamespaces] = u
		usernsFailed = true
	}
	if u.Available || !usernsFailed {
		return
	}
	for _, name := range []string{LayerMountNamespace, LayerOverlay, LayerPidNamespace, LayerNetworkNamespace} {
		l := layers[name]
		if l.Available {
			continue
		}
		l.Reason = "needs user namespaces, which are unavailable: " + u.Reason
		l.Fix = u.Fix
		layers[name] = l
	}
}

// --- diagnoses ------------------------------------------------------------------

// nsTypes are the namespace types the probes create, with the clone flag,
// the sysctl limiting their number and the kernel option they need.
var nsTypes = []struct {
	flag          uintptr
	flagName      string
	limit, config string
}{
	{unix.CLONE_NEWUSER, "CLONE_NEWUSER", "user.max_user_namespaces", "CONFIG_USER_NS"},
	{unix.CLONE_NEWNS, "CLONE_NEWNS", "user.max_mnt_namespaces", "CONFIG_NAMESPACES"},
	{unix.CLONE_NEWPID, "CLONE_NEWPID", "user.max_pid_namespaces", "CONFIG_PID_NS"},
	{unix.CLONE_NEWNET, "CLONE_NEWNET", "user.max_net_namespaces", "CONFIG_NET_NS"},
}

// diagnoseClone explains why clone with the namespace flags failed with
// errno, naming the host policy responsible and its fix.
func diagnoseClone(flags uintptr, errno syscall.Errno, h hostInfo) (reason, fix string) {
	var flagNames, configs, zero, limits []string
	for _, t := range nsTypes {
		if flags&t.flag == 0 {
			continue
		}
		flagNames = append(flagNames, t.flagName)
		configs = append(configs, t.config)
		v, ok := h.nsLimit[t.limit]
		if ok && v == 0 {
			zero = append(zero, t.limit)
		}
		if ok && v >= 0 {
			limits = append(limits, fmt.Sprintf("%s = %d", t.limit, v))
		}
	}
	prefix := fmt.Sprintf("clone(%s) failed: %v (%s)", strings.Join(flagNames, "|"), errno, unix.ErrnoName(errno))
	switch errno {
	case unix.ENOSPC:
		if len(zero) > 0 {
			what := "namespaces are disabled"
			if zero[0] == "user.max_user_namespaces" {
				what = "user namespaces are disabled"
			}
			var fixes []string
			for _, z := range zero {
				fixes = append(fixes, "sysctl -w "+z+"=15000")
			}
			return fmt.Sprintf("%s; %s: %s = 0", prefix, what, strings.Join(zero, " = 0, ")),
				strings.Join(fixes, " and ") + " (persist it in /etc/sysctl.d/)"
		}
		return fmt.Sprintf("%s; a namespace limit is reached (%s)", prefix, strings.Join(limits, ", ")),
			"raise the limit that is reached (sysctl -w user.max_..._namespaces=15000) or end stale sandboxes"
	case unix.EINVAL:
		return fmt.Sprintf("%s; the kernel lacks namespace support (%s)", prefix, strings.Join(configs, ", ")),
			fmt.Sprintf("use a kernel built with %s", strings.Join(configs, "=y, ")+"=y")
	case unix.EUSERS:
		return prefix + "; user namespaces are nested too deeply (32 levels at most)",
			"run cellbox fewer user namespaces deep"
	case unix.EPERM, unix.EACCES:
		if r, f, ok := permissionPolicy(h); ok {
			return prefix + "; " + r, f
		}
		if h.nsLimit["user.max_user_namespaces"] < 0 && h.procSysReadOnly {
			return prefix + "; /proc/sys is read-only or masked here, so the sysctls that allow user namespaces cannot be checked",
				"run cellbox on the host or in a container that allows creating user namespaces"
		}
		return prefix + "; refused although the sysctls allow user namespaces: an LSM (SELinux, AppArmor) or seccomp policy denies it",
			"look for the denial in the audit log (journalctl -k | grep -i denied) and allow cellbox to create user namespaces"
	}
	return prefix, ""
}

// permissionPolicy names the host policy that makes namespace operations
// fail with EPERM, if one is known to apply.
func permissionPolicy(h hostInfo) (reason, fix string, ok bool) {
	switch {
	case h.unprivUsernsClone == 0 && !h.capSysAdmin:
		return "kernel.unprivileged_userns_clone = 0 forbids unprivileged user namespaces",
			"sysctl -w kernel.unprivileged_userns_clone=1 (persist it in /etc/sysctl.d/)", true
	case h.apparmorRestrict == 1 && !h.capSysAdmin:
		return "AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns = 1, Ubuntu 23.10+)",
			"install an AppArmor profile granting userns to cellbox: write /etc/apparmor.d/cellbox with " +
				"`abi <abi/4.0>, include <tunables/global> profile cellbox /path/to/cellbox flags=(unconfined) { userns, }` " +
				"and run apparmor_parser -r /etc/apparmor.d/cellbox; or sysctl -w kernel.apparmor_restrict_unprivileged_userns=0", true
	case h.container != "" || h.seccompMode == 2:
		where := h.container
		if where == "" {
			where = "a process under a seccomp filter (Seccomp: 2)"
		}
		return fmt.Sprintf("cellbox seems to run inside %s, whose seccomp profile or security policy blocks namespace operations although the sysctls allow them", where),
			"run the container with --security-opt seccomp=unconfined --security-opt apparmor=unconfined " +
				"(or a seccomp profile allowing clone/unshare/mount with new namespaces), or run cellbox on the host", true
	}
	return "", "", false
}

// --- in-process checks --------------------------------------------------------

func probeSeccomp(h hostInfo) Layer {
	l := Layer{Name: LayerSeccomp}
	mode, err := unix.PrctlRetInt(unix.PR_GET_SECCOMP, 0, 0, 0, 0)
	if err != nil {
		if errors.Is(err, unix.EINVAL) {
			l.Reason = "prctl(PR_GET_SECCOMP) failed with EINVAL: the kernel was built without CONFIG_SECCOMP"
		} else {
			l.Reason = "prctl(PR_GET_SECCOMP): " + err.Error()
		}
		l.Fix = "use a kernel built with CONFIG_SECCOMP=y and CONFIG_SECCOMP_FILTER=y"
		return l
	}
	var avail []string
	for _, a := range []struct {
		name     string
		action   uint32
		required bool
	}{
		{"errno", unix.SECCOMP_RET_ERRNO, true},
		{"kill_process", unix.SECCOMP_RET_KILL_PROCESS, true},
		{"user_notif", unix.SECCOMP_RET_USER_NOTIF, false},
	} {
		action := a.action
		_, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_GET_ACTION_AVAIL, 0, uintptr(unsafe.Pointer(&action)))
		switch {
		case e == 0:
			avail = append(avail, a.name)
		case !a.required:
		case e == unix.ENOSYS:
			l.Reason = "the seccomp syscall is missing (ENOSYS): the kernel was built without CONFIG_SECCOMP_FILTER"
			l.Fix = "use a kernel built with CONFIG_SECCOMP_FILTER=y"
			return l
		case e == unix.EINVAL:
			l.Reason = "seccomp(SECCOMP_GET_ACTION_AVAIL) failed with EINVAL: the kernel is older than 4.14"
			l.Fix = "use Linux 4.14 or newer (5.11+ for overlay in a user namespace)"
			return l
		default:
			l.Reason = fmt.Sprintf("seccomp action %s is unavailable: %v (%s)", a.name, e, unix.ErrnoName(e))
			l.Fix = "use a kernel with full seccomp filter support"
			return l
		}
	}
	l.Available = true
	l.Detail = "filters with actions " + strings.Join(avail, ", ")
	if mode != 0 || h.seccompMode > 0 {
		l.Detail += fmt.Sprintf("; the daemon itself already runs under seccomp mode %d (filters stack)", mode)
	}
	return l
}

func probeLandlock() (Layer, int) {
	l := Layer{Name: LayerLandlock}
	abi, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	switch e {
	case 0:
		l.Available = true
		l.Detail = fmt.Sprintf("ABI %d", abi)
		return l, int(abi)
	case unix.ENOSYS:
		l.Reason = "landlock_create_ruleset is missing (ENOSYS): the kernel is older than 5.13 or built without CONFIG_SECURITY_LANDLOCK"
		l.Fix = "use Linux 5.13+ built with CONFIG_SECURITY_LANDLOCK=y (landlock is an extra; sandboxes work without it)"
	case unix.EOPNOTSUPP:
		l.Reason = "Landlock is built into the kernel but disabled at boot (EOPNOTSUPP)"
		l.Fix = "add landlock to the lsm= kernel parameter (e.g. lsm=landlock,lockdown,yama,integrity,apparmor,bpf) and reboot"
	default:
		l.Reason = fmt.Sprintf("landlock_create_ruleset: %v (%s)", e, unix.ErrnoName(e))
	}
	return l, 0
}

// cgroupNeeded are the controllers a sandbox's limits use.
var cgroupNeeded = []string{"memory", "pids"}

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

func probeIDMap(h hostInfo) Layer {
	l := Layer{Name: LayerIDMappedMounts}
	// A bad dirfd: EBADF means the syscall exists, ENOSYS that it does not.
	err := unix.MountSetattr(-1, "", unix.AT_EMPTY_PATH, &unix.MountAttr{})
	if errors.Is(err, unix.ENOSYS) {
		l.Reason = "mount_setattr is missing (ENOSYS): the kernel is older than 5.12"
		l.Fix = "optional; cellbox does not need idmapped mounts"
		return l
	}
	if !h.capSysAdmin || !h.initUserNS {
		l.Reason = fmt.Sprintf("mount_setattr exists, but idmapping a host filesystem needs CAP_SYS_ADMIN in the initial user namespace (the daemon runs as uid %d)", h.uid)
		l.Fix = "optional; cellbox does not need idmapped mounts"
		return l
	}
	l.Available = true
	l.Detail = "mount_setattr(MOUNT_ATTR_IDMAP) present; per-filesystem support not probed"
	return l
}
