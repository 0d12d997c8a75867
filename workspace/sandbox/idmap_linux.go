package sandbox

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Identity mapping. Code in a sandbox never holds host-root power:
//
//   - An ordinary user's daemon maps the sandbox's root (uid 0 of its user
//     namespace) to itself, one id. The project's files are the user's, so
//     they belong to the sandbox's root, which the sandbox user
//     (SandboxUID of the nested namespace) is.
//   - A root daemon maps the sandbox's 65536 ids to unprivileged host ids
//     (root's range in /etc/subuid and /etc/subgid, else rootRangeBase), and
//     shows the project through an idmapped mount (mount_setattr with
//     MOUNT_ATTR_IDMAP) that maps the project's owner to the sandbox's root,
//     so copy-up and writes work without the sandbox ever seeing host uid 0.

// rootRangeBase is the first host id of a root daemon's sandboxes when root
// has no range in /etc/subuid.
const rootRangeBase = 2_000_000_000

const rangeSize = 65536

type idMaps struct {
	root     bool // the daemon is root: ranges and idmapped mounts
	uid, gid []syscall.SysProcIDMap
	uidBase  int
	gidBase  int
}

func hostIDs() (idMaps, error) {
	if os.Geteuid() != 0 {
		return idMaps{
			uid: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}},
			gid: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}},
		}, nil
	}
	ub := subRange("/etc/subuid")
	gb := subRange("/etc/subgid")
	return idMaps{
		root:    true,
		uid:     []syscall.SysProcIDMap{{ContainerID: 0, HostID: ub, Size: rangeSize}},
		gid:     []syscall.SysProcIDMap{{ContainerID: 0, HostID: gb, Size: rangeSize}},
		uidBase: ub,
		gidBase: gb,
	}, nil
}

// subRange is root's first id in a subordinate-id file with room for a
// whole range, or rootRangeBase.
func subRange(path string) int {
	f, err := os.Open(path)
	if err != nil {
		return rootRangeBase
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.Split(strings.TrimSpace(sc.Text()), ":")
		if len(parts) != 3 || (parts[0] != "root" && parts[0] != "0") {
			continue
		}
		start, err1 := strconv.Atoi(parts[1])
		n, err2 := strconv.Atoi(parts[2])
		if err1 == nil && err2 == nil && n >= rangeSize && start > 0 {
			return start
		}
	}
	return rootRangeBase
}

// SandboxRootHostIDs are the host uid and gid that the sandbox's root (and
// so the sandbox user) has: where a root daemon must chown the upper layer
// and scratch directories it creates. For an ordinary user, their own ids.
func SandboxRootHostIDs() (uid, gid int) {
	ids, _ := hostIDs()
	return ids.uid[0].HostID, ids.gid[0].HostID
}

// idmappedTree returns a detached, idmapped clone of the project's mount
// tree in which the project's owner is the sandbox's root. initPid is the
// sandbox's init, whose user namespace is the mapping when the owner is
// host root; another owner gets a user namespace of its own.
func idmappedTree(project string, initPid int, ids idMaps) (*os.File, error) {
	var st unix.Stat_t
	if err := unix.Stat(project, &st); err != nil {
		return nil, fmt.Errorf("stat the project %s: %w", project, err)
	}
	nsPath := fmt.Sprintf("/proc/%d/ns/user", initPid)
	if st.Uid != 0 || st.Gid != 0 {
		holder, err := ownerUserns(int(st.Uid), int(st.Gid), ids)
		if err != nil {
			return nil, err
		}
		defer func() { holder.Process.Kill(); holder.Wait() }()
		nsPath = fmt.Sprintf("/proc/%d/ns/user", holder.Process.Pid)
	}
	ns, err := os.Open(nsPath)
	if err != nil {
		return nil, fmt.Errorf("open the mapping's user namespace: %w", err)
	}
	defer ns.Close()
	fd, err := unix.OpenTree(unix.AT_FDCWD, project, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
	if err != nil {
		return nil, &LayerError{Layer: "overlay", Reason: fmt.Sprintf("open_tree %s: %v", project, err)}
	}
	tree := os.NewFile(uintptr(fd), "project-tree")
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP, Userns_fd: uint64(ns.Fd())}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &attr); err != nil {
		tree.Close()
		return nil, &LayerError{Layer: "overlay", Reason: fmt.Sprintf("idmap the project %s (its filesystem may not support idmapped mounts): %v", project, err)}
	}
	return tree, nil
}

// ownerUserns starts a placeholder process in a user namespace mapping the
// project owner's uid and gid to the sandbox's root and the other low ids
// into the sandbox's range; its namespace is the idmapped mount's mapping.
func ownerUserns(uid, gid int, ids idMaps) (*exec.Cmd, error) {
	cmd := exec.Command("/bin/cat")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	_ = stdin // closed when the holder is killed
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:                 unix.CLONE_NEWUSER,
		UidMappings:                ownerMap(uid, ids.uidBase),
		GidMappings:                ownerMap(gid, ids.gidBase),
		GidMappingsEnableSetgroups: false,
		Pdeathsig:                  syscall.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the idmap's user namespace: %w", err)
	}
	return cmd, nil
}

// ownerMap maps on-disk id owner to base (the sandbox's root) and the other
// ids below rangeSize to base+id, with root taking owner's freed slot.
func ownerMap(owner, base int) []syscall.SysProcIDMap {
	if owner == 0 {
		return []syscall.SysProcIDMap{{ContainerID: 0, HostID: base, Size: rangeSize}}
	}
	m := []syscall.SysProcIDMap{{ContainerID: owner, HostID: base, Size: 1}}
	if owner < rangeSize {
		m = append(m, syscall.SysProcIDMap{ContainerID: 0, HostID: base + owner, Size: 1})
		if owner > 1 {
			m = append(m, syscall.SysProcIDMap{ContainerID: 1, HostID: base + 1, Size: owner - 1})
		}
		if owner+1 < rangeSize {
			m = append(m, syscall.SysProcIDMap{ContainerID: owner + 1, HostID: base + owner + 1, Size: rangeSize - owner - 1})
		}
	} else {
		m = append(m, syscall.SysProcIDMap{ContainerID: 1, HostID: base + 1, Size: rangeSize - 1})
	}
	return m
}

// Mapped reports whether a project file owned by uid:gid is writable
// through a sandbox's overlay: copy-up of a file whose owner or group the
// sandbox cannot map fails with EOVERFLOW ("Value too large for defined
// data type"). ownerUID and ownerGID own the project's root directory.
func Mapped(uid, gid, ownerUID, ownerGID int) bool {
	if os.Geteuid() != 0 {
		return uid == os.Geteuid() && gid == os.Getegid()
	}
	in := func(id, owner int) bool { return id == owner || id < rangeSize }
	return in(uid, ownerUID) && in(gid, ownerGID)
}
