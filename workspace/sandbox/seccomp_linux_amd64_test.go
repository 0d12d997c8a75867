package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/cellbox-dev/cellbox/workspace/sandbox/sandboxtest"
)

// int80 makes an i386 system call with int $0x80 (int80_linux_amd64_test.s).
func int80(trap uintptr) uintptr

// int81 does the same through int $0x81, which faults like int $0x80 on a
// kernel without 32-bit syscall emulation.
func int81(trap uintptr) uintptr

// i386Getpid is getpid's number in the i386 table.
const i386Getpid = 20

const entryTestSeccompKill = "test-seccomp-kill"

// callingMark is the kill helper's stderr line just before its call.
const callingMark = "making the call"

func init() {
	register(entryTestSeccompKill, seccompKillEntry)
}

// seccompKillEntry installs the filter (unless args[1] is "nofilter") and
// makes a getpid call of another ABI: args[0] is "int80" (i386, through
// int $0x80), "int81" (the same through a gate that faults, as int $0x80
// does without 32-bit emulation) or "x32". It prints callingMark on stderr
// just before the call, and "pid result" after it.
func seccompKillEntry(args []string) int {
	if len(args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: test-seccomp-kill int80|int81|x32 filter|nofilter")
		return 2
	}
	// No core file for the expected SIGSYS.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if args[0] == "int80" || args[0] == "int81" {
		// A fault of the int instruction (no 32-bit emulation) must kill
		// the process with SIGSEGV, as it would a C program, rather than
		// become a Go panic and exit 2.
		var dfl [4]uint64 // struct sigaction: SIG_DFL, no flags, empty mask
		if _, _, e := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(unix.SIGSEGV), uintptr(unsafe.Pointer(&dfl)), 0, 8, 0, 0); e != 0 {
			fmt.Fprintln(os.Stderr, "rt_sigaction:", e)
			return 1
		}
	}
	if args[1] == "filter" {
		if err := installSeccomp(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	fmt.Fprintln(os.Stderr, callingMark)
	var r uintptr
	switch args[0] {
	case "int80":
		r = int80(i386Getpid)
	case "int81":
		r = int81(i386Getpid)
	case "x32":
		var e syscall.Errno
		r, _, e = unix.RawSyscall(x32SyscallBit|unix.SYS_GETPID, 0, 0, 0)
		if e != 0 {
			r = -uintptr(e) // as the kernel returns it
		}
	default:
		fmt.Fprintln(os.Stderr, "unknown call", args[0])
		return 2
	}
	fmt.Printf("%d %d\n", os.Getpid(), int64(r))
	return 0
}

// runKillHelper runs the kill helper and returns its output and how it
// ended. A death by a signal before the helper got to its call fails.
func runKillHelper(t *testing.T, call, filter string) (string, syscall.WaitStatus) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd, err := helperCommand(ctx, entryTestSeccompKill, 0, call, filter)
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("run helper: %v", err)
	}
	ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Exited() && ws.ExitStatus() != 0 {
		t.Fatalf("helper exited %d: %s", ws.ExitStatus(), stderr.String())
	}
	if !strings.Contains(stderr.String(), callingMark+"\n") {
		t.Fatalf("helper %s %s: %v before making its call: %s", call, filter, ws, stderr.String())
	}
	return string(out), ws
}

// i386Outcome reads a kill helper's run of an int $0x80 (or int $0x81)
// getpid: it returned if it printed two fields.
func i386Outcome(out string, ws syscall.WaitStatus) sandboxtest.I386Outcome {
	// runKillHelper checked that it reached the call.
	o := sandboxtest.I386Outcome{ExitCode: ws.ExitStatus(), Reached: true, Returned: len(strings.Fields(out)) == 2}
	if ws.Signaled() {
		o.Signal = ws.Signal()
	}
	return o
}

// TestSeccompKillsI386: an int $0x80 getpid under the filter does not run.
// Where the kernel has 32-bit syscall emulation, the run without the filter
// returns the pid (so the test's i386 call is real) and the filter kills
// the process with SIGSYS. Where it has none, int $0x80 faults with SIGSEGV
// without the filter too, and the call cannot reach the kernel at all.
func TestSeccompKillsI386(t *testing.T) {
	out, ws := runKillHelper(t, "int80", "nofilter")
	control := i386Outcome(out, ws)
	t.Logf("i386 getpid without the filter: %v, output %q", control, out)
	if control.Returned {
		if f := strings.Fields(out); f[0] != f[1] {
			t.Fatalf("i386 getpid without the filter: got %q, want the pid twice", out)
		}
	}
	out, ws = runKillHelper(t, "int80", "filter")
	filtered := i386Outcome(out, ws)
	t.Logf("i386 getpid under the filter: %v, output %q", filtered, out)
	host := sandboxtest.HostI386Emulation()
	t.Logf("kernel configuration: %s", host.Why)
	path, note, err := sandboxtest.CheckI386(control, filtered, host)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s; under the filter the i386 call did not run: %v", note, path)
}

// TestSeccompI386NoEmulation runs the check of TestSeccompKillsI386 on the
// outcomes a kernel without 32-bit emulation gives: int $0x81 faults as
// int $0x80 does there, with the filter and without. The check must take
// them as the call not running, and must still reject a call that ran.
func TestSeccompI386NoEmulation(t *testing.T) {
	out, ws := runKillHelper(t, "int81", "nofilter")
	control := i386Outcome(out, ws)
	out, ws = runKillHelper(t, "int81", "filter")
	filtered := i386Outcome(out, ws)
	t.Logf("faulting gate: without the filter %v; under it %v", control, filtered)
	noEmulation := sandboxtest.I386Emulation{Known: true, Why: "CONFIG_IA32_EMULATION is not set"}
	for _, host := range []sandboxtest.I386Emulation{noEmulation, {}} {
		path, note, err := sandboxtest.CheckI386(control, filtered, host)
		if err != nil || path != sandboxtest.I386NoEmulation {
			t.Fatalf("configuration %+v: got %v, %v; want %v", host, path, err, sandboxtest.I386NoEmulation)
		}
		t.Logf("configuration %+v: %s; %v", host, note, path)
	}
	// A filtered call that printed its result ran, whatever the control.
	ran := sandboxtest.I386Outcome{Reached: true, Returned: true}
	if _, _, err := sandboxtest.CheckI386(control, ran, noEmulation); err == nil {
		t.Fatal("a filtered i386 call that returned was accepted")
	}
}

// TestSeccompKillsX32: an x32 call under the filter kills the process.
func TestSeccompKillsX32(t *testing.T) {
	out, ws := runKillHelper(t, "x32", "nofilter")
	f := strings.Fields(out)
	if ws.Signaled() || len(f) != 2 {
		t.Fatalf("x32 getpid without the filter: status %v, output %q", ws, out)
	}
	if n, _ := strconv.ParseInt(f[1], 10, 64); n != -int64(unix.ENOSYS) && f[0] != f[1] {
		t.Fatalf("x32 getpid without the filter: got %s, want ENOSYS or the pid", f[1])
	}
	t.Logf("x32 getpid without the filter: %s (pid %s)", f[1], f[0])
	out, ws = runKillHelper(t, "x32", "filter")
	if !ws.Signaled() || ws.Signal() != syscall.SIGSYS {
		t.Fatalf("x32 getpid under the filter: the process was not killed by SIGSYS (status %v, output %q)", ws, out)
	}
}

// TestSeccompNumbers checks the policy's written-out numbers against x/sys/unix.
func TestSeccompNumbers(t *testing.T) {
	want := map[string]uintptr{
		"clone3": unix.SYS_CLONE3, "clone": unix.SYS_CLONE, "unshare": unix.SYS_UNSHARE, "setns": unix.SYS_SETNS,
		"socket": unix.SYS_SOCKET, "socketpair": unix.SYS_SOCKETPAIR, "ioctl": unix.SYS_IOCTL,
		"personality": unix.SYS_PERSONALITY,
		"keyctl":      unix.SYS_KEYCTL, "add_key": unix.SYS_ADD_KEY, "request_key": unix.SYS_REQUEST_KEY,
		"bpf": unix.SYS_BPF, "perf_event_open": unix.SYS_PERF_EVENT_OPEN,
		"io_uring_setup": unix.SYS_IO_URING_SETUP, "io_uring_enter": unix.SYS_IO_URING_ENTER,
		"io_uring_register": unix.SYS_IO_URING_REGISTER, "userfaultfd": unix.SYS_USERFAULTFD,
		"mount": unix.SYS_MOUNT, "umount2": unix.SYS_UMOUNT2, "pivot_root": unix.SYS_PIVOT_ROOT,
		"move_mount": unix.SYS_MOVE_MOUNT, "open_tree": unix.SYS_OPEN_TREE, "open_tree_attr": unix.SYS_OPEN_TREE_ATTR,
		"fsopen": unix.SYS_FSOPEN, "fsconfig": unix.SYS_FSCONFIG, "fsmount": unix.SYS_FSMOUNT, "fspick": unix.SYS_FSPICK,
		"mount_setattr": unix.SYS_MOUNT_SETATTR,
		"ptrace":        unix.SYS_PTRACE, "process_vm_readv": unix.SYS_PROCESS_VM_READV,
		"process_vm_writev": unix.SYS_PROCESS_VM_WRITEV, "process_madvise": unix.SYS_PROCESS_MADVISE,
		"pidfd_getfd": unix.SYS_PIDFD_GETFD, "kcmp": unix.SYS_KCMP,
		"kexec_load": unix.SYS_KEXEC_LOAD, "kexec_file_load": unix.SYS_KEXEC_FILE_LOAD,
		"init_module": unix.SYS_INIT_MODULE, "finit_module": unix.SYS_FINIT_MODULE, "delete_module": unix.SYS_DELETE_MODULE,
		"acct": unix.SYS_ACCT, "swapon": unix.SYS_SWAPON, "swapoff": unix.SYS_SWAPOFF, "reboot": unix.SYS_REBOOT,
		"settimeofday": unix.SYS_SETTIMEOFDAY, "clock_settime": unix.SYS_CLOCK_SETTIME,
		"clock_adjtime": unix.SYS_CLOCK_ADJTIME, "adjtimex": unix.SYS_ADJTIMEX, "syslog": unix.SYS_SYSLOG,
		"quotactl": unix.SYS_QUOTACTL, "quotactl_fd": unix.SYS_QUOTACTL_FD, "lookup_dcookie": unix.SYS_LOOKUP_DCOOKIE,
		"nfsservctl":        unix.SYS_NFSSERVCTL,
		"name_to_handle_at": unix.SYS_NAME_TO_HANDLE_AT, "open_by_handle_at": unix.SYS_OPEN_BY_HANDLE_AT,
		"uselib": unix.SYS_USELIB, "iopl": unix.SYS_IOPL, "ioperm": unix.SYS_IOPERM, "modify_ldt": unix.SYS_MODIFY_LDT,
		"vhangup": unix.SYS_VHANGUP, "fanotify_init": unix.SYS_FANOTIFY_INIT, "memfd_secret": unix.SYS_MEMFD_SECRET,
		"lsm_set_self_attr": unix.SYS_LSM_SET_SELF_ATTR,
	}
	for _, r := range seccompPolicy {
		nr, ok := want[r.Syscall]
		if !ok {
			t.Errorf("%s: not in the test's table", r.Syscall)
			continue
		}
		if uintptr(r.Nr) != nr {
			t.Errorf("%s: policy has %d, x/sys/unix %d", r.Syscall, r.Nr, nr)
		}
	}
	if len(want) != len(seccompPolicy) {
		t.Errorf("the test knows %d calls, the policy has %d rules", len(want), len(seccompPolicy))
	}
}
