package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The sandbox's root, built by the init in its own mount namespace on a
// tmpfs at Config.Dir/root, then entered with pivot_root:
//
//	/usr /bin /sbin /lib* read-only binds of the host's (symlinks kept)
//	/etc                  generated passwd, group, hostname, hosts; read-only
//	                      binds of what interpreters need (see etcFiles)
//	/proc                 a new proc of the sandbox's pid namespace
//	/dev                  null zero full random urandom tty, a new devpts,
//	                      ptmx, shm (tmpfs), fd and std* links
//	/tmp /home/cellbox    private tmpfs, sized by Config.TmpBytes
//	/.cellbox/cellbox     this binary, read-only (SelfPath), for the entries
//	                      that run inside a sandbox (Register)
//	/workspace            the overlay (or the scratch or project directory)
//	/                     the tmpfs itself, read-only once built

// etcFiles are the host's /etc entries bound read-only into the sandbox,
// when they exist: name resolution, TLS roots, the dynamic linker's cache,
// alternatives (python3, editor links), time zone, shells' defaults.
var etcFiles = []string{
	"resolv.conf", "nsswitch.conf", "host.conf", "gai.conf", "protocols", "services",
	"ssl", "ca-certificates", "ca-certificates.conf", "pki", "crypto-policies",
	"ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives",
	"localtime", "timezone", "zoneinfo", "mime.types", "os-release",
	"bash.bashrc", "profile", "profile.d", "inputrc", "environment", "terminfo",
	"python3", "fonts", "matplotlibrc", "gitconfig", "vim", "vimrc",
	"R", // R's own configuration (Debian links /usr/lib/R/etc here)
}

// devices bound from the host's /dev.
var devices = []string{"null", "zero", "full", "random", "urandom", "tty"}

const defaultTmpBytes = 256 << 20

// prepared is a root built but for /workspace, waiting for its config.
type prepared struct {
	mfd    int    // the root tmpfs's mount (closed by finishRoot)
	root   string // how this process names it until pivot_root
	layers *Layers
	// selfMissing says why SelfPath is missing, when it is.
	selfMissing string
	// listeners are the Listeners' sockets, in their order, for the
	// daemon (none with the host's network).
	listeners []*os.File
}

// prepareRoot builds everything of the root that does not depend on the
// workspace, so a pooled init has it done before a workspace asks.
func prepareRoot(pc *prepConfig, trees map[string]*os.File) (_ *prepared, err error) {
	cfg := pc
	layers := &Layers{UserNamespaces: true, PidNamespace: true, Network: cfg.Network}
	// The root is a tmpfs made with the new mount API and stacked on this
	// namespace's "/", where this process keeps seeing the old root until
	// pivot_root; its fd names it by path (/proc/self/fd/N) meanwhile. (A
	// directory the daemon opened belongs to the host's mount namespace and
	// cannot take a mount in this one.)
	fsfd, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("fsopen tmpfs: %w", err)
	}
	for k, v := range map[string]string{"size": "16m", "mode": "0755"} {
		if err := unix.FsconfigSetString(fsfd, k, v); err != nil {
			unix.Close(fsfd)
			return nil, fmt.Errorf("configure the root tmpfs (%s): %w", k, err)
		}
	}
	if err := unix.FsconfigCreate(fsfd); err != nil {
		unix.Close(fsfd)
		return nil, fmt.Errorf("create the root tmpfs: %w", err)
	}
	mfd, err := unix.Fsmount(fsfd, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
	unix.Close(fsfd)
	if err != nil {
		return nil, fmt.Errorf("fsmount the root tmpfs: %w", err)
	}
	defer func() {
		if err != nil {
			unix.Close(mfd)
		}
	}()
	if err := unix.MoveMount(mfd, "", unix.AT_FDCWD, "/", unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return nil, fmt.Errorf("attach the root tmpfs: %w", err)
	}
	root := "/proc/self/fd/" + strconv.Itoa(mfd)
	in := func(p string) string { return filepath.Join(root, p) }
	for _, d := range []string{"usr", "etc", "proc", "dev", "tmp", "workspace", "env", "home/" + SandboxUser, "run", "var/tmp", "root", "mnt", "opt"} {
		if err := os.MkdirAll(in(d), 0o755); err != nil {
			return nil, fmt.Errorf("mkdir %s in the sandbox root: %w", d, err)
		}
	}
	// node looks for packages in node_modules of every directory up from
	// the importing file: /node_modules, last, is the environment's (npm
	// installs into /env/npm), for import as for require.
	if err := os.Symlink(EnvPath+"/npm/node_modules", in("node_modules")); err != nil {
		return nil, fmt.Errorf("link /node_modules in the sandbox root: %w", err)
	}

	// Read-only system directories.
	if err := bind("/usr", in("usr"), false); err != nil {
		return nil, err
	}
	for _, name := range topLinks {
		host := "/" + name
		fi, err := os.Lstat(host)
		switch {
		case err != nil:
			continue
		case fi.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(host)
			if err != nil {
				return nil, fmt.Errorf("readlink %s: %w", host, err)
			}
			if err := os.Symlink(target, in(name)); err != nil {
				return nil, fmt.Errorf("symlink %s in the sandbox root: %w", name, err)
			}
		case fi.IsDir():
			if err := os.Mkdir(in(name), 0o755); err != nil {
				return nil, fmt.Errorf("mkdir %s: %w", name, err)
			}
			if err := bind(host, in(name), false); err != nil {
				return nil, err
			}
		}
	}
	for _, p := range cfg.ReadOnly {
		tree := trees["ro:"+p]
		if tree == nil {
			if _, err := os.Stat(p); err != nil {
				continue // it does not exist
			}
		}
		if err := mkTarget(in(p), true); err != nil {
			return nil, err
		}
		if err := bindOrAttach(tree, p, in(p), false); err != nil {
			return nil, err
		}
	}

	// /etc.
	for name, content := range map[string]string{
		"passwd": passwd(), "group": group(), "hostname": Hostname + "\n",
		"hosts": "127.0.0.1\tlocalhost " + Hostname + "\n::1\tlocalhost ip6-localhost ip6-loopback\n",
	} {
		if err := writeFile(in("etc/"+name), content, 0o644); err != nil {
			return nil, err
		}
	}
	for _, name := range etcFiles {
		host := "/etc/" + name
		fi, err := os.Stat(host)
		if err != nil {
			continue
		}
		if err := mkTarget(in("etc/"+name), fi.IsDir()); err != nil {
			return nil, err
		}
		if err := bind(host, in("etc/"+name), false); err != nil {
			return nil, err
		}
	}

	// This binary, for the entries that run inside the sandbox.
	selfMissing := bindSelf(trees["self"], cfg, in(SelfPath))
	if selfMissing != "" {
		fmt.Fprintf(os.Stderr, "sandbox init: %s is missing: %s\n", SelfPath, selfMissing)
	}

	// Everything so far is read-only, the root with it, in one call; the
	// writable places are mounted on top afterwards. (Making a bind
	// read-only keeps the nosuid, nodev and noexec of its source: a user
	// namespace may not drop them.)
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
	if err := unix.MountSetattr(unix.AT_FDCWD, root, unix.AT_RECURSIVE, &attr); err != nil {
		return nil, fmt.Errorf("make the sandbox's system directories read-only: %w", err)
	}

	// /proc of the sandbox's pid namespace.
	if err := unix.Mount("proc", in("proc"), "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return nil, fmt.Errorf("mount proc: %w", err)
	}

	// /dev.
	if err := unix.Mount("tmpfs", in("dev"), "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "size=64k,mode=0755"); err != nil {
		return nil, fmt.Errorf("mount /dev tmpfs: %w", err)
	}
	for _, d := range devices {
		if err := mkTarget(in("dev/"+d), false); err != nil {
			return nil, err
		}
		if err := bind("/dev/"+d, in("dev/"+d), false); err != nil {
			return nil, err
		}
	}
	for _, d := range []string{"pts", "shm"} {
		if err := os.Mkdir(in("dev/"+d), 0o755); err != nil {
			return nil, fmt.Errorf("mkdir /dev/%s: %w", d, err)
		}
	}
	if err := unix.Mount("devpts", in("dev/pts"), "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620"); err != nil {
		return nil, fmt.Errorf("mount a new devpts: %w", err)
	}
	tmpSize := cfg.TmpBytes
	if tmpSize <= 0 {
		tmpSize = defaultTmpBytes
	}
	if err := unix.Mount("tmpfs", in("dev/shm"), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777,nr_inodes=16384,size="+strconv.FormatInt(tmpSize/4, 10)); err != nil {
		return nil, fmt.Errorf("mount /dev/shm: %w", err)
	}
	for link, target := range map[string]string{
		"ptmx": "pts/ptmx", "fd": "/proc/self/fd", "stdin": "/proc/self/fd/0",
		"stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2",
	} {
		if err := os.Symlink(target, in("dev/"+link)); err != nil {
			return nil, fmt.Errorf("symlink /dev/%s: %w", link, err)
		}
	}

	// Private writable places.
	size := strconv.FormatInt(tmpSize, 10)
	if err := unix.Mount("tmpfs", in("tmp"), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777,nr_inodes=65536,size="+size); err != nil {
		return nil, fmt.Errorf("mount /tmp: %w", err)
	}
	if err := unix.Mount("tmpfs", in("home/"+SandboxUser), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,nr_inodes=65536,size="+size); err != nil {
		return nil, fmt.Errorf("mount %s: %w", SandboxHome, err)
	}

	// Hostname and network.
	if err := unix.Sethostname([]byte(Hostname)); err != nil {
		return nil, fmt.Errorf("sethostname: %w", err)
	}
	var listeners []*os.File
	if cfg.Network != NetworkHost {
		if err := loopbackUp(); err != nil {
			return nil, err
		}
		layers.NetworkNamespace = true
		if listeners, err = listen(); err != nil {
			return nil, err
		}
	}

	return &prepared{mfd: mfd, root: root, layers: layers, selfMissing: selfMissing, listeners: listeners}, nil
}

// finishRoot mounts the workspace into a prepared root and enters it.
func finishRoot(pr *prepared, ic *initConfig, lower *os.File) (*Layers, error) {
	defer unix.Close(pr.mfd)
	mfd, root, layers := pr.mfd, pr.root, pr.layers
	in := func(p string) string { return filepath.Join(root, p) }
	// /workspace.
	if err := mountWorkspace(ic, lower, root, in("workspace"), layers); err != nil {
		return nil, err
	}

	if ic.Env != "" && !ic.envMounted {
		if err := bindOrAttach(ic.tree("env"), filepath.Join(ic.Env, "upper"), in(strings.TrimPrefix(EnvPath, "/")), false); err != nil {
			return nil, fmt.Errorf("mount the workspace's environment at %s: %w", EnvPath, err)
		}
	}

	for _, p := range ic.Hide {
		if err := hide(in(p)); err != nil {
			return nil, err
		}
	}

	// Enter the new root; the old one goes away entirely (pivot_root(".",
	// ".") stacks the old root on the new one, then it is detached).
	if err := unix.Fchdir(mfd); err != nil {
		return nil, fmt.Errorf("chdir into the new root: %w", err)
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return nil, fmt.Errorf("pivot_root into the new root: %w", err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return nil, fmt.Errorf("detach the host's root: %w", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return nil, fmt.Errorf("chdir /: %w", err)
	}
	return layers, nil
}

// mountWorkspace mounts what the mode asks for at target. The overlay's
// layers are first mounted in this namespace under root/.layers (overlayfs
// takes private clones of its layers' mounts, which must be in the mounting
// namespace), then that staging mount goes away: nothing in the sandbox can
// reach the upper layer behind the overlay's back.
func mountWorkspace(ic *initConfig, lower *os.File, root, target string, layers *Layers) error {
	cfg := &ic.Config
	switch cfg.Mode {
	case ModeScratch:
		return bindOrAttach(ic.tree("scratch"), cfg.Scratch, target, false)
	case ModeDirect:
		if lower != nil {
			return moveMount(lower, target)
		}
		return bindOrAttach(nil, cfg.Project, target, false)
	case ModeOverlay, "":
	default:
		return fmt.Errorf("unknown workspace mode %q", cfg.Mode)
	}
	stateDir := filepath.Dir(cfg.Upper)
	if filepath.Dir(cfg.Work) != stateDir {
		return fmt.Errorf("overlay upper %s and work %s must be in one directory", cfg.Upper, cfg.Work)
	}
	stage := filepath.Join(root, "dev", ".layers") // the root is read-only by now; /dev is not
	for _, d := range []string{"state", "lower"} {
		if err := os.MkdirAll(filepath.Join(stage, d), 0o700); err != nil {
			return fmt.Errorf("mkdir the overlay staging directory: %w", err)
		}
	}
	if err := bindOrAttach(ic.tree("layers"), stateDir, filepath.Join(stage, "state"), false); err != nil {
		return err
	}
	if lower != nil {
		if err := moveMount(lower, filepath.Join(stage, "lower")); err != nil {
			return err
		}
	} else if err := bind(cfg.Project, filepath.Join(stage, "lower"), false); err != nil {
		return err
	}
	opts := "lowerdir=" + filepath.Join(stage, "lower") +
		",upperdir=" + filepath.Join(stage, "state", filepath.Base(cfg.Upper)) +
		",workdir=" + filepath.Join(stage, "state", filepath.Base(cfg.Work)) + ",userxattr"
	if strings.ContainsAny(stage, ",:") {
		return fmt.Errorf("overlay staging path %q holds a comma or colon", stage)
	}
	if err := unix.Mount("overlay", target, "overlay", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("mount the overlay of %s (upper %s): %w", cfg.Project, cfg.Upper, err)
	}
	// The environment (/env), when it is in the same directory: an overlay
	// too, on the empty /mnt, so that no mount names a host path.
	if rel, err := filepath.Rel(stateDir, cfg.Env); cfg.Env != "" && err == nil && filepath.IsLocal(rel) {
		envDir := filepath.Join(stage, "state", rel)
		eopts := "lowerdir=" + filepath.Join(root, "mnt") + ",upperdir=" + filepath.Join(envDir, "upper") +
			",workdir=" + filepath.Join(envDir, "work") + ",userxattr"
		if strings.ContainsAny(envDir, ",:") {
			return fmt.Errorf("environment staging path %q holds a comma or colon", envDir)
		}
		if err := unix.Mount("overlay", filepath.Join(root, strings.TrimPrefix(EnvPath, "/")), "overlay", unix.MS_NOSUID|unix.MS_NODEV, eopts); err != nil {
			return fmt.Errorf("mount the workspace's environment at %s: %w", EnvPath, err)
		}
		ic.envMounted = true
	}
	for _, d := range []string{"state", "lower"} {
		if err := unix.Unmount(filepath.Join(stage, d), unix.MNT_DETACH); err != nil {
			return fmt.Errorf("unmount the overlay staging %s: %w", d, err)
		}
	}
	if err := os.RemoveAll(stage); err != nil {
		return fmt.Errorf("remove the overlay staging directory: %w", err)
	}
	layers.Overlay = true
	return nil
}

// bindSelf shows the daemon's binary at dst: the clone a root daemon sent,
// else the file at cfg.Self when it is still the one the daemon runs (its
// device and inode, cfg.SelfDev and SelfIno; this process may be the lean
// helper). A binary replaced since the daemon started is not shown (the
// entries that run in a sandbox must be this build's). When it is not
// shown, SelfPath is missing and bindSelf says why; only the entries that
// run in a sandbox (the Jupyter bridge) need it, so this fails no sandbox.
func bindSelf(tree *os.File, cfg *prepConfig, dst string) (missing string) {
	path := cfg.Self
	if tree == nil {
		var named unix.Stat_t
		switch {
		case path == "":
			return "the daemon could not name its binary"
		case cfg.SelfIno == 0:
			return "the daemon's binary cannot be read"
		}
		if err := unix.Stat(path, &named); err != nil {
			return fmt.Sprintf("stat %s: %v", path, err)
		}
		if named.Dev != cfg.SelfDev || named.Ino != cfg.SelfIno {
			return path + " was replaced since the daemon started"
		}
	}
	if err := mkTarget(dst, false); err != nil {
		return err.Error()
	}
	if err := bindOrAttach(tree, path, dst, false); err != nil {
		os.Remove(dst) // no empty file where the binary should be
		return err.Error()
	}
	return ""
}

// hide mounts an empty read-only directory on dir, if dir is one (never
// following a symlink out of the new root).
func hide(dir string) error {
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return nil // not there, or not a directory: nothing to hide
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC|unix.MS_RDONLY, "size=4k,nr_inodes=1,mode=0555"); err != nil {
		return fmt.Errorf("hide %s from the sandbox: %w", dir, err)
	}
	return nil
}

// bind mounts src on dst; read-only keeps the source's nosuid, nodev and
// noexec, which a read-only remount in a user namespace must not drop.
func bind(src, dst string, readOnly bool) error {
	if err := unix.Mount(src, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s: %w", src, err)
	}
	if !readOnly {
		return nil
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dst, &st); err != nil {
		return fmt.Errorf("statfs %s: %w", dst, err)
	}
	flags := uintptr(unix.MS_BIND | unix.MS_REMOUNT | unix.MS_RDONLY)
	for st_, ms := range map[int64]uintptr{
		unix.ST_NOSUID: unix.MS_NOSUID, unix.ST_NODEV: unix.MS_NODEV, unix.ST_NOEXEC: unix.MS_NOEXEC,
		unix.ST_NOATIME: unix.MS_NOATIME, unix.ST_NODIRATIME: unix.MS_NODIRATIME, unix.ST_RELATIME: unix.MS_RELATIME,
	} {
		if st.Flags&st_ != 0 {
			flags |= ms
		}
	}
	if err := unix.Mount("", dst, "", flags, ""); err != nil {
		return fmt.Errorf("make %s read-only: %w", src, err)
	}
	return nil
}

// bindOrAttach binds src on dst, or attaches tree (a detached clone of src
// that a root daemon made, since the sandbox's root may not reach src).
func bindOrAttach(tree *os.File, src, dst string, readOnly bool) error {
	if tree == nil {
		return bind(src, dst, readOnly)
	}
	if err := moveMount(tree, dst); err != nil {
		return err
	}
	if readOnly {
		return bind(dst, dst, true)
	}
	return nil
}

// moveMount attaches a detached mount (an idmapped project) at target.
func moveMount(tree *os.File, target string) error {
	if err := unix.MoveMount(int(tree.Fd()), "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("attach the idmapped project at %s: %w", target, err)
	}
	return nil
}

// mkTarget makes a mount point for a directory or a file.
func mkTarget(path string, dir bool) error {
	if dir {
		if err := os.MkdirAll(path, 0o755); err != nil {
			return fmt.Errorf("mkdir %s: %w", path, err)
		}
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("mkdir %s: %w", filepath.Dir(path), err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("create %s: %w", path, err)
	}
	if f != nil {
		f.Close()
	}
	return nil
}

// listen makes the Listeners' sockets on 127.0.0.1 of this process's
// network namespace. They are close-on-exec: the spawner and the programs
// never have them.
func listen() (_ []*os.File, err error) {
	var files []*os.File
	defer func() {
		if err != nil {
			closeAll(files)
		}
	}()
	for _, l := range Listeners {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("socket for the %s listener: %w", l.Name, err)
		}
		files = append(files, os.NewFile(uintptr(fd), l.Name))
		if err := unix.Bind(fd, &unix.SockaddrInet4{Port: int(l.Port), Addr: [4]byte{127, 0, 0, 1}}); err != nil {
			return nil, fmt.Errorf("bind the %s listener to 127.0.0.1:%d: %w", l.Name, l.Port, err)
		}
		if err := unix.Listen(fd, 128); err != nil {
			return nil, fmt.Errorf("listen on 127.0.0.1:%d: %w", l.Port, err)
		}
	}
	return files, nil
}

// loopbackUp brings lo up: a new network namespace starts with it down.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socket: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return fmt.Errorf("ifreq lo: %w", err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("get flags of lo: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bring lo up: %w", err)
	}
	return nil
}
