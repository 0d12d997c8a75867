package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// errEntryNotHandled: this process carries ReexecEnv, so it was started as
// a helper but its main did not call Main. Re-executing again would recurse.
var errEntryNotHandled = errors.New("sandbox: started as a helper but sandbox.Main was not called first in main/TestMain")

// selfExe is the binary helpers re-execute. /proc/self/exe stays valid even
// when the file on disk was replaced or removed after the daemon started.
const selfExe = "/proc/self/exe"

// helperCommand returns a command that re-executes this binary as the helper
// entry name with args, in the new namespaces cloneflags asks for. With
// CLONE_NEWUSER, uid and gid 0 in the new user namespace map to the caller's
// uid and gid (one id each, setgroups denied). The helper gets an
// environment holding only ReexecEnv and GORACE, stdin from /dev/null, and
// is killed when the daemon dies or ctx ends.
func helperCommand(ctx context.Context, name string, cloneflags uintptr, args ...string) (*exec.Cmd, error) {
	if _, ok := os.LookupEnv(ReexecEnv); ok {
		return nil, errEntryNotHandled
	}
	cmd := exec.CommandContext(ctx, selfExe, args...)
	cmd.Args[0] = argv0Prefix + name
	// A race-detector build sleeps 1 s at exit by default; helpers exit
	// on the probe's critical path. Other binaries ignore GORACE.
	gorace := strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0")
	cmd.Env = []string{ReexecEnv + "=" + name, "GORACE=" + gorace}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: cloneflags,
		Pdeathsig:  syscall.SIGKILL,
	}
	if cloneflags&unix.CLONE_NEWUSER != 0 {
		cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}}
		cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}}
		cmd.SysProcAttr.GidMappingsEnableSetgroups = false
	}
	// A helper that left a grandchild holding its output must not hang Wait.
	cmd.WaitDelay = time.Second
	return cmd, nil
}

// helperResult is how one helper ended.
type helperResult struct {
	ran      bool          // the helper ran (its namespaces were created)
	ok       bool          // and exited 0
	startErr error         // why it could not be started
	errno    syscall.Errno // of startErr, 0 if none
	msg      string        // the helper's error line, or why it did not finish
	stdout   string
}

// runHelper runs the helper entry in new namespaces and waits for it.
func runHelper(ctx context.Context, entry string, flags uintptr, args ...string) helperResult {
	cmd, err := helperCommand(ctx, entry, flags, args...)
	if err != nil {
		return helperResult{startErr: err, msg: err.Error()}
	}
	stdout, stderr := &capBuffer{max: 8192}, &capBuffer{max: 2048}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		res := helperResult{startErr: err, msg: "start helper " + entry + ": " + err.Error()}
		if ctx.Err() != nil {
			res.msg = "the probe ran out of time before helper " + entry + " started: " + ctx.Err().Error()
		}
		errors.As(err, &res.errno)
		return res
	}
	err = cmd.Wait()
	res := helperResult{ran: true, ok: err == nil, stdout: stdout.String()}
	if err != nil {
		res.msg = strings.TrimSpace(stderr.String())
		switch {
		case ctx.Err() != nil:
			res.msg = "helper " + entry + " did not finish in time: " + ctx.Err().Error()
		case res.msg == "":
			res.msg = "helper " + entry + ": " + err.Error()
		}
	}
	return res
}

// capBuffer keeps the first max bytes written to it and drops the rest.
type capBuffer struct {
	max int

	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *capBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := b.max - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

func (b *capBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// --- the probe helpers -----------------------------------------------------------

// nsCheck is a probe that runs in a helper in new namespaces. Each has its
// own entry (used to attribute a failure to one namespace type); the
// probe-all entry runs them all in one helper, the fast path.
type nsCheck struct {
	layer string
	entry string
	flags uintptr
	// check runs in the helper; dir is the scratch directory ("" if none).
	check func(dir string) error
}

// nsChecks in the order probe-all runs them: the mount namespace check
// pivots into a new root, so it comes last.
var nsChecks = []nsCheck{
	{LayerUserNamespaces, "probe-userns", unix.CLONE_NEWUSER, checkUserNS},
	{LayerOverlay, "probe-overlay", unix.CLONE_NEWUSER | unix.CLONE_NEWNS, checkOverlay},
	{LayerPidNamespace, "probe-pidns", unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWPID, checkPidNS},
	{LayerNetworkNamespace, "probe-netns", unix.CLONE_NEWUSER | unix.CLONE_NEWNET, checkNetNS},
	{LayerMountNamespace, "probe-mountns", unix.CLONE_NEWUSER | unix.CLONE_NEWNS, checkMountNS},
}

const (
	entryProbeAll = "probe-all"
	probeAllFlags = unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWNET
)

func init() {
	for _, c := range nsChecks {
		register(c.entry, checkEntry(c))
	}
	register(entryProbeAll, probeAllEntry)
}

// checkEntry runs one check: exit 0, or the error on one stderr line and exit 1.
func checkEntry(c nsCheck) entry {
	return func(args []string) int {
		if err := runCheck(c, scratchArg(args)); err != nil {
			fmt.Fprintln(os.Stderr, oneLine(err.Error()))
			return 1
		}
		return 0
	}
}

// probeAllEntry runs every check and writes "LAYER<TAB>ok" or
// "LAYER<TAB>error" for each to stdout; it exits 0 when it could report.
func probeAllEntry(args []string) int {
	dir := scratchArg(args)
	for _, c := range nsChecks {
		res := "ok"
		if err := runCheck(c, dir); err != nil {
			res = oneLine(err.Error())
		}
		// One write per check: what was reported survives a later hang.
		if _, err := fmt.Fprintf(os.Stdout, "%s\t%s\n", c.layer, res); err != nil {
			return 1
		}
	}
	return 0
}

// parseProbeAll parses probe-all's output into results by layer.
func parseProbeAll(out string) map[string]helperResult {
	m := make(map[string]helperResult)
	for line := range strings.Lines(out) {
		layer, msg, ok := strings.Cut(strings.TrimRight(line, "\n"), "\t")
		if !ok {
			continue
		}
		if msg == "ok" {
			m[layer] = helperResult{ran: true, ok: true}
		} else {
			m[layer] = helperResult{ran: true, msg: msg}
		}
	}
	return m
}

func scratchArg(args []string) string {
	if len(args) == 1 {
		return args[0]
	}
	return ""
}

// runCheck runs c.check, turning a panic into an error.
func runCheck(c nsCheck, dir string) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%s check panicked: %v", c.layer, p)
		}
	}()
	return c.check(dir)
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// errText is err with its errno's name, e.g. "operation not permitted (EPERM)",
// which the parent matches on.
func errText(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return fmt.Sprintf("%v (%s)", err, unix.ErrnoName(errno))
	}
	return err.Error()
}

var errNoScratch = errors.New("no scratch directory")

// checkUserNS: root in the new user namespace is the caller.
func checkUserNS(string) error {
	if uid := os.Getuid(); uid != 0 {
		return fmt.Errorf("uid in the new user namespace is %d, want 0 (uid_map not written)", uid)
	}
	return nil
}

// makePrivate stops mounts in this namespace from propagating anywhere.
func makePrivate() error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make / private: %s", errText(err))
	}
	return nil
}

// checkMountNS mounts a tmpfs on dir/root and pivots into it, as a sandbox
// does. It leaves the process in that empty root.
func checkMountNS(dir string) error {
	if dir == "" {
		return errNoScratch
	}
	if err := makePrivate(); err != nil {
		return err
	}
	root := filepath.Join(dir, "root")
	if err := unix.Mount("tmpfs", root, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=64k,mode=0755"); err != nil {
		return fmt.Errorf("mount tmpfs on %s: %s", root, errText(err))
	}
	if err := os.Mkdir(filepath.Join(root, "old"), 0o700); err != nil {
		return fmt.Errorf("mkdir in tmpfs: %s", errText(err))
	}
	if err := unix.PivotRoot(root, filepath.Join(root, "old")); err != nil {
		return fmt.Errorf("pivot_root to %s: %s", root, errText(err))
	}
	if err := unix.Chdir("/"); err != nil {
		return fmt.Errorf("chdir to new root: %s", errText(err))
	}
	if err := unix.Unmount("/old", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detach old root: %s", errText(err))
	}
	return nil
}

// checkOverlay mounts overlayfs with userxattr on dir/merged over dir/lower
// and dir/upper, and checks that copy-up, whiteouts and new files work.
func checkOverlay(dir string) error {
	if dir == "" {
		return errNoScratch
	}
	if err := makePrivate(); err != nil {
		return err
	}
	// Relative layer paths keep the options free of the commas and colons
	// the directory's name might hold.
	if err := unix.Chdir(dir); err != nil {
		return fmt.Errorf("chdir %s: %s", dir, errText(err))
	}
	defer unix.Chdir("/")
	if err := unix.Mount("overlay", "merged", "overlay", 0, "lowerdir=lower,upperdir=upper,workdir=work,userxattr"); err != nil {
		return fmt.Errorf("mount overlay with userxattr in %s: %s", dir, errText(err))
	}
	defer unix.Unmount("merged", unix.MNT_DETACH)
	if err := appendFile("merged/f1", "upper\n"); err != nil {
		return fmt.Errorf("overlay copy-up: %s", errText(err))
	}
	if err := os.Remove("merged/f2"); err != nil {
		return fmt.Errorf("overlay whiteout: %s", errText(err))
	}
	if err := os.WriteFile("merged/new", []byte("new\n"), 0o600); err != nil {
		return fmt.Errorf("overlay new file: %s", errText(err))
	}
	if b, err := os.ReadFile("lower/f1"); err != nil || string(b) != "lower\n" {
		return fmt.Errorf("overlay changed its lower layer (lower/f1 = %q, %v)", b, err)
	}
	if b, err := os.ReadFile("upper/f1"); err != nil || string(b) != "lower\nupper\n" {
		return fmt.Errorf("overlay copy-up did not reach the upper layer (upper/f1 = %q, %v)", b, err)
	}
	if _, err := os.Lstat("merged/f2"); err == nil {
		return errors.New("overlay whiteout: removed file still visible")
	}
	if _, err := os.Lstat("upper/f2"); err != nil {
		return fmt.Errorf("overlay whiteout not in the upper layer: %s", errText(err))
	}
	return nil
}

func appendFile(name, s string) error {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(s); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// checkPidNS: this process is pid 1 of a new pid namespace and can mount a
// proc for it on dir/proc.
func checkPidNS(dir string) error {
	if pid := os.Getpid(); pid != 1 {
		return fmt.Errorf("pid in the new pid namespace is %d, want 1", pid)
	}
	if dir == "" {
		return errNoScratch
	}
	if err := makePrivate(); err != nil {
		return err
	}
	proc := filepath.Join(dir, "proc")
	if err := unix.Mount("proc", proc, "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount proc for the new pid namespace: %s", errText(err))
	}
	defer unix.Unmount(proc, unix.MNT_DETACH)
	self, err := os.Readlink(filepath.Join(proc, "self"))
	if err != nil || self != "1" {
		return fmt.Errorf("the new proc shows self = %q (%v), want 1", self, err)
	}
	return nil
}

// checkNetNS brings lo up in the new network namespace and sends a
// datagram over it.
func checkNetNS(string) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socket: %s", errText(err))
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return fmt.Errorf("ifreq lo: %v", err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("get flags of lo: %s", errText(err))
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bring lo up: %s", errText(err))
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		return fmt.Errorf("bind 127.0.0.1: %s", errText(err))
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return fmt.Errorf("getsockname: %s", errText(err))
	}
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 1}); err != nil {
		return fmt.Errorf("set receive timeout: %s", errText(err))
	}
	if err := unix.Sendto(fd, []byte{'x'}, 0, sa); err != nil {
		return fmt.Errorf("send over loopback: %s", errText(err))
	}
	buf := make([]byte, 1)
	if n, _, err := unix.Recvfrom(fd, buf, 0); err != nil || n != 1 {
		return fmt.Errorf("receive over loopback: n=%d, %v", n, err)
	}
	return nil
}
