package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/landlock-lsm/go-landlock/landlock"
	"golang.org/x/sys/unix"
)

// The landlock layer: a Landlock ruleset the spawner installs on itself
// (every thread) before it starts user programs, which inherit it. It is
// a second wall behind the mount namespace: even a process that escaped
// the sandbox's root could only use the paths named here.
//
// What a domain made by installLandlock denies, by kernel ABI (best
// effort: the kernel enforces what its ABI knows, go-landlock drops the
// rest):
//
//	ABI 1 (5.13)  file access outside ro/rw; writes below ro
//	ABI 2 (5.19)  renames and links across directories outside rw
//	ABI 3 (6.2)   truncation outside rw
//	ABI 4 (6.7)   TCP bind and connect, unless allowNet (connect to the
//	              daemon's Listeners' ports stays allowed). The spawner
//	              passes allowNet: TCP and UDP are the network namespace's
//	              to confine (spawner_linux.go); the rules without it are
//	              kept, and tested, for a sandbox that would share a
//	              namespace.
//	ABI 5 (6.10)  ioctl on devices opened outside rw
//	ABI 6 (6.12)  connecting to abstract unix sockets and signalling
//	              processes outside the domain (always, even with allowNet)
//	ABI 9+        connecting to pathname unix sockets made outside the
//	              domain, except below rw
//	ABI 10+       UDP bind, connect and send, unless allowNet
//
// ABI 1 cannot allow renames across directories at all (git, pip and
// editors rename temp files between directories), so installLandlock
// refuses it with an error rather than break them.
//
// All threads: on ABI 8+ go-landlock uses LANDLOCK_RESTRICT_SELF_TSYNC; below,
// it runs landlock_restrict_self on every thread through libcap's psx
// package, which is syscall.AllThreadsSyscall (pure Go) when cgo is off, and
// libpsx's C signal mechanism when the binary links cgo (CGO_ENABLED=1 with a
// C compiler, and always under -race). Both restrict every thread.

// landlockMinABI is the lowest ABI installLandlock accepts (see above).
const landlockMinABI = 2

// landlockABI returns the kernel's Landlock ABI version, or an error
// naming why there is none.
func landlockABI() (int, error) {
	abi, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	switch e {
	case 0:
		return int(abi), nil
	case unix.ENOSYS:
		return 0, fmt.Errorf("landlock unavailable (ABI 0): the kernel is older than 5.13 or built without CONFIG_SECURITY_LANDLOCK (landlock_create_ruleset: %w)", e)
	case unix.EOPNOTSUPP:
		return 0, fmt.Errorf("landlock unavailable (ABI 0): built into the kernel but not enabled at boot (add landlock to lsm=) (landlock_create_ruleset: %w)", e)
	default:
		return 0, fmt.Errorf("landlock unavailable (ABI 0): landlock_create_ruleset: %w", e)
	}
}

// installLandlock restricts this process, every thread of it and
// everything it starts afterwards to: reading and executing below the ro
// paths; full access below the rw paths (including renames between
// directories, device ioctls such as a terminal's, and connecting to unix
// sockets there); nothing else on the filesystem. Unless allowNet, TCP (and
// on ABI 10+ UDP) bind and connect are denied too. Paths must be absolute;
// paths that do not exist are skipped; a path may name a directory or a
// file (device files such as /dev/null included). It also sets
// no_new_privs on every thread. It cannot be undone.
//
// It fails, naming the ABI, when the kernel has no Landlock or only ABI 1.
// The error of a failed install says which ABI the kernel has.
func installLandlock(ro, rw []string, allowNet bool) error {
	abi, err := landlockABI()
	if err != nil {
		return err
	}
	if abi < landlockMinABI {
		return fmt.Errorf("landlock ABI %d (Linux 5.13 to 5.18) cannot allow renames between directories, which programs need; cellbox uses Landlock from ABI %d (Linux 5.19) on", abi, landlockMinABI)
	}
	roDirs, roFiles, err := splitLandlockPaths(ro)
	if err != nil {
		return fmt.Errorf("landlock ABI %d: read-only paths: %w", abi, err)
	}
	rwDirs, rwFiles, err := splitLandlockPaths(rw)
	if err != nil {
		return fmt.Errorf("landlock ABI %d: read-write paths: %w", abi, err)
	}
	var rules []landlock.Rule
	if len(roDirs) > 0 {
		rules = append(rules, landlock.RODirs(roDirs...))
	}
	if len(roFiles) > 0 {
		rules = append(rules, landlock.ROFiles(roFiles...))
	}
	if len(rwDirs) > 0 {
		rules = append(rules, landlock.RWDirs(rwDirs...).WithRefer().WithIoctlDev().WithResolveUnix())
	}
	if len(rwFiles) > 0 {
		rules = append(rules, landlock.RWFiles(rwFiles...).WithIoctlDev().WithResolveUnix())
	}
	// The highest ABI go-landlock knows; BestEffort narrows it to the kernel's.
	cfg := landlock.V11
	if allowNet {
		cfg.HandledAccessNet = 0
	} else {
		// The way out: the daemon's listeners (TCP connect to their ports).
		for _, l := range Listeners {
			rules = append(rules, landlock.ConnectTCP(l.Port))
		}
	}
	if err := cfg.BestEffort().Restrict(rules...); err != nil {
		return fmt.Errorf("landlock ABI %d: restrict: %w", abi, err)
	}
	return nil
}

// splitLandlockPaths sorts existing paths into directories and other
// files (which cannot take directory rights), dropping missing ones.
func splitLandlockPaths(paths []string) (dirs, files []string, err error) {
	for _, p := range paths {
		if !filepath.IsAbs(p) {
			return nil, nil, fmt.Errorf("%q is not an absolute path", p)
		}
		st, err := os.Stat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		if st.IsDir() {
			dirs = append(dirs, p)
		} else {
			files = append(files, p)
		}
	}
	return dirs, files, nil
}
