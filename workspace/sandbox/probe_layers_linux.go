package sandbox

import (
	"errors"
	"fmt"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

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
