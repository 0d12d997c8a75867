package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The landlock test re-executes the test binary as a helper that checks a
// few accesses, installs the ruleset on itself and makes the accesses
// again, reporting one "name<TAB>result" line each (0, an errno number,
// "ok" or "error TEXT").

const entryTestLandlock = "test-landlock"

func init() {
	register(entryTestLandlock, landlockTestEntry)
}

// landlockTestArgs are what the parent prepared, passed in this order.
type landlockTestArgs struct {
	outside  string // a readable file outside every rule
	roDir    string // a read-only directory holding the file "existing"
	rwDir    string // a read-write directory
	tcpAddr  string // a TCP listener of the parent on 127.0.0.1
	abstract string // an abstract unix socket the parent listens on
}

func (a landlockTestArgs) list() []string {
	return []string{a.outside, a.roDir, a.rwDir, a.tcpAddr, a.abstract}
}

func tcpConnect(addr string, proto int) error {
	ap, err := netipAddrPort(addr)
	if err != nil {
		return err
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, proto)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Connect(fd, ap)
}

func netipAddrPort(addr string) (*unix.SockaddrInet4, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return nil, err
	}
	ip := net.ParseIP(host).To4()
	if ip == nil {
		return nil, fmt.Errorf("%s is not IPv4", host)
	}
	return &unix.SockaddrInet4{Port: p, Addr: [4]byte(ip)}, nil
}

func tcpBind() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}})
}

func abstractConnect(name string) error {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Connect(fd, &unix.SockaddrUnix{Name: "@" + name})
}

// writeRW makes, renames across directories, and removes files below dir.
func writeRW(dir string) error {
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	if err := os.MkdirAll(a, 0o755); err != nil {
		return err
	}
	if err := os.MkdirAll(b, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(a, "f"), []byte("x"), 0o644); err != nil {
		return err
	}
	if err := os.Truncate(filepath.Join(a, "f"), 0); err != nil {
		return err
	}
	if err := os.Rename(filepath.Join(a, "f"), filepath.Join(b, "f")); err != nil {
		return fmt.Errorf("rename across directories: %w", err)
	}
	if err := os.Symlink("f", filepath.Join(b, "l")); err != nil {
		return err
	}
	return os.RemoveAll(a)
}

func landlockTestEntry(args []string) int {
	if len(args) != 5 {
		fmt.Fprintln(os.Stderr, "usage: test-landlock OUTSIDE RODIR RWDIR TCPADDR ABSTRACT")
		return 2
	}
	a := landlockTestArgs{args[0], args[1], args[2], args[3], args[4]}
	abi, err := landlockABI()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	readOutside := func() error { _, err := os.ReadFile(a.outside); return err }

	// Before: what must be denied afterwards works now.
	reportResult("pre_read_outside", readOutside())
	reportResult("pre_write_ro", os.WriteFile(filepath.Join(a.roDir, "pre"), nil, 0o644))
	reportResult("pre_tcp_connect", tcpConnect(a.tcpAddr, 0))
	reportResult("pre_abstract_connect", abstractConnect(a.abstract))
	reportResult("pre_signal_parent", unix.Kill(os.Getppid(), 0))

	const preThreads = 3
	threads := startLockedThreads(preThreads)
	defer threads.stop()

	ro := []string{"/usr", "/bin", "/lib", "/lib64", "/etc", "/proc", a.roDir, "/nonexistent/cellbox-landlock-test"}
	rw := []string{a.rwDir, "/dev/null", "/nonexistent/cellbox-landlock-test-rw"}
	if err := installLandlock(ro, rw, false); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("abi\t%d\n", abi)
	reportResult("read_outside", readOutside())
	for i := range preThreads {
		reportResult(fmt.Sprintf("read_outside_thread%d", i), threads.run(i, readOutside))
	}
	_, err = os.ReadDir(filepath.Dir(a.outside))
	reportResult("list_outside", err)
	_, err = os.ReadFile(filepath.Join(a.roDir, "existing"))
	reportResult("read_ro", err)
	reportResult("write_ro_new", os.WriteFile(filepath.Join(a.roDir, "new"), nil, 0o644))
	f, err := os.OpenFile(filepath.Join(a.roDir, "existing"), os.O_WRONLY, 0)
	if err == nil {
		f.Close()
	}
	reportResult("write_ro_existing", err)
	reportResult("remove_ro", os.Remove(filepath.Join(a.roDir, "existing")))
	reportResult("write_rw", writeRW(a.rwDir))
	reportResult("write_dev_null", os.WriteFile("/dev/null", []byte("x"), 0))
	reportResult("exec_true", exec.Command("/bin/true").Run())
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		out, err := exec.Command("/usr/bin/python3", "-c", "import os, sys; print(len(os.listdir('/usr')))").CombinedOutput()
		if err != nil {
			err = fmt.Errorf("%v: %s", err, out)
		}
		reportResult("python3", err)
	}
	reportResult("tcp_connect", tcpConnect(a.tcpAddr, 0))
	reportResult("tcp_bind", tcpBind())
	// Landlock's TCP rights cover TCP only: Multipath TCP is not restricted (logged, not asserted).
	reportResult("mptcp_connect", tcpConnect(a.tcpAddr, unix.IPPROTO_MPTCP))
	reportResult("abstract_connect", abstractConnect(a.abstract))
	reportResult("signal_parent", unix.Kill(os.Getppid(), 0))
	return 0
}

// TestLandlock runs the landlock helper and checks what it could do.
func TestLandlock(t *testing.T) {
	abi, err := landlockABI()
	if err != nil || abi < landlockMinABI {
		// Only the refusal can be tested here; it restricts nothing.
		err := installLandlock([]string{"/usr"}, nil, false)
		if err == nil || !strings.Contains(err.Error(), "landlock") || !strings.Contains(err.Error(), "ABI") {
			t.Fatalf("installLandlock on a kernel with Landlock ABI %d: got %v, want an error naming landlock and the ABI", abi, err)
		}
		t.Skipf("this kernel cannot run the landlock layer: %v", err)
	}

	tmp := t.TempDir()
	a := landlockTestArgs{
		outside: filepath.Join(tmp, "outside", "secret"),
		roDir:   filepath.Join(tmp, "ro"),
		rwDir:   filepath.Join(tmp, "rw"),
	}
	for _, d := range []string{filepath.Dir(a.outside), a.roDir, a.rwDir} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{a.outside, filepath.Join(a.roDir, "existing")} {
		if err := os.WriteFile(f, []byte("data"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	a.tcpAddr = ln.Addr().String()
	a.abstract = fmt.Sprintf("cellbox-landlock-test-%d-%d", os.Getpid(), time.Now().UnixNano())
	uln, err := net.Listen("unix", "@"+a.abstract)
	if err != nil {
		t.Fatal(err)
	}
	defer uln.Close()
	// Accept and drop whatever connects, so that connects never wait on a backlog.
	for _, l := range []net.Listener{ln, uln} {
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res := runHelper(ctx, entryTestLandlock, 0, a.list()...)
	if !res.ok {
		t.Fatalf("landlock helper failed: %s\nstdout:\n%s", res.msg, res.stdout)
	}
	lines := parseHelperLines(res.stdout)
	t.Logf("kernel Landlock ABI %d; helper reported:\n%s", abi, res.stdout)

	const ok = "0"
	eacces, eperm := strconv.Itoa(int(unix.EACCES)), strconv.Itoa(int(unix.EPERM))
	want := map[string]string{
		"pre_read_outside":     ok,
		"pre_write_ro":         ok,
		"pre_tcp_connect":      ok,
		"pre_abstract_connect": ok,
		"pre_signal_parent":    ok,
		"read_outside":         eacces,
		"list_outside":         eacces,
		"read_ro":              ok,
		"write_ro_new":         eacces,
		"write_ro_existing":    eacces,
		"remove_ro":            eacces,
		"write_rw":             ok,
		"write_dev_null":       ok,
		"exec_true":            ok,
	}
	for i := range 3 {
		want[fmt.Sprintf("read_outside_thread%d", i)] = eacces
	}
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		want["python3"] = ok
	}
	if abi >= 4 {
		want["tcp_connect"] = eacces
		want["tcp_bind"] = eacces
	}
	if abi >= 6 {
		want["abstract_connect"] = eperm
		want["signal_parent"] = eperm
	}
	for name, w := range want {
		if got := lines[name]; got != w {
			t.Errorf("%s: got %s, want %s", name, errnoText(got), errnoText(w))
		}
	}
	if abi >= 4 && lines["mptcp_connect"] == ok {
		t.Logf("note: Multipath TCP connect is not restricted by Landlock's TCP rights (kernel ABI %d)", abi)
	}
}

// TestLandlockPaths: relative paths are refused, missing ones skipped, and
// files sorted from directories.
func TestLandlockPaths(t *testing.T) {
	if _, _, err := splitLandlockPaths([]string{"usr"}); err == nil {
		t.Error("relative path accepted")
	}
	dirs, files, err := splitLandlockPaths([]string{"/usr", "/dev/null", "/nonexistent/cellbox", "/etc/passwd"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(dirs, " ") != "/usr" || strings.Join(files, " ") != "/dev/null /etc/passwd" {
		t.Errorf("dirs %q, files %q", dirs, files)
	}
}

// TestLandlockABIError: the error for a kernel without Landlock names it
// and the ABI (checked by message on this kernel only when it lacks it).
func TestLandlockABI(t *testing.T) {
	abi, err := landlockABI()
	if err != nil {
		if !strings.Contains(err.Error(), "landlock") || !strings.Contains(err.Error(), "ABI 0") {
			t.Errorf("error %q does not name landlock and the ABI", err)
		}
		if !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EOPNOTSUPP) {
			t.Logf("unexpected errno: %v", err)
		}
		return
	}
	t.Logf("Landlock ABI %d", abi)
	if abi < 1 {
		t.Errorf("ABI %d without an error", abi)
	}
}
