package sandbox

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// What the probe reads of the host: filesystem types, /proc/self/status,
// sysctls and the mount table.

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
