package sandbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

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
