package sandbox

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// The seccomp layer: a denylist filter, written as classic BPF, that the
// spawner installs on itself (every thread) just before it starts user
// programs, which inherit it across fork and exec.
//
// The filter, in order:
//
//  1. seccomp_data.arch must be AUDIT_ARCH_X86_64, else KILL_PROCESS: an
//     i386 `int $0x80` or sysenter call would otherwise reach the i386 table,
//     whose numbers this list does not name.
//  2. A number with the x32 bit (__X32_SYSCALL_BIT, 0x40000000) set is
//     KILL_PROCESS, except -1 (0xffffffff), which is not a system call (the
//     kernel answers ENOSYS; tracers use it to skip a call), as libseccomp does.
//  3. Each rule of seccompPolicy: the call's number, and for six of them
//     one argument, decide the errno the call fails with.
//  4. Everything else is allowed.
//
// Argument tests load only the low 32 bits of the argument (offset
// 16+8*i of seccomp_data on little-endian x86_64), and that is exact, not
// an approximation: every argument tested is one the kernel itself
// truncates to 32 bits (ioctl's cmd and personality's persona are
// unsigned int, socket's family is int, and clone's flags go through
// lower_32_bits() in kernel/fork.c), or, for unshare's flags (an unsigned
// long), one whose high bits make the call EINVAL (check_unshare_flags
// knows none of them), so that unshare(CLONE_NEWNS|1<<32), let through as
// CLONE_NEWNS, fails all the same. Comparing all 64 bits would be the bug:
// ioctl(fd, TIOCSTI|1<<32, ...) is TIOCSTI to the kernel but would pass a
// 64-bit equality test (snapd's CVE-2019-7303).
//
// Only clone, unshare, socket, socketpair, ioctl and personality read an
// argument, so for every other number the result depends on arch and nr
// alone and the kernel's seccomp action cache (5.11+) skips running the
// filter for allowed calls.

// seccompArchX86_64 is the only architecture the filter lets through.
const seccompArchX86_64 = unix.AUDIT_ARCH_X86_64

// x32SyscallBit marks x32 ABI system call numbers (__X32_SYSCALL_BIT).
const x32SyscallBit = 0x40000000

// seccompNsFlags are the namespace flags a clone(2) may not carry. The
// kernel takes clone's flags from the low 32 bits; CLONE_NEWTIME (0x80) lies
// in the exit-signal byte there (legacy clone cannot ask for it, only
// clone3, which is refused), and no valid exit signal has that bit, so
// including it changes EINVAL into EPERM and nothing else.
const seccompNsFlags = unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWNET |
	unix.CLONE_NEWIPC | unix.CLONE_NEWUTS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWTIME

// personalityQuery is personality(0xffffffff): read the persona, change nothing.
const personalityQuery = 0xffffffff

// seccompTest is how a rule tests its argument.
type seccompTest int

const (
	// seccompAnyBit: the rule applies when the argument has any of Values[0]'s bits.
	seccompAnyBit seccompTest = iota + 1
	// seccompOneOf: the rule applies when the argument is one of Values.
	seccompOneOf
	// seccompNoneOf: the rule applies when the argument is none of Values.
	seccompNoneOf
)

// seccompArg restricts a rule to calls whose argument Index, as the 32-bit
// value the kernel reads, passes Test against Values.
type seccompArg struct {
	Index  int         `json:"index"`
	Name   string      `json:"name"`
	Test   seccompTest `json:"-"`
	Values []uint32    `json:"values"`
	// Desc says in words which calls the rule applies to.
	Desc string `json:"desc"`
}

// seccompRule is one line of the policy: calls of one x86_64 system call
// (those whose argument passes Arg, all of them when Arg is nil) fail with
// Errno without reaching the kernel's implementation.
type seccompRule struct {
	Syscall string        `json:"syscall"`
	Nr      uint32        `json:"nr"` // x86_64 number (checked against x/sys/unix by the tests)
	Arg     *seccompArg   `json:"arg,omitempty"`
	Errno   syscall.Errno `json:"errno"`
	Why     string        `json:"why"`
}

// String is "name(arg test) -> ERRNO: why".
func (r seccompRule) String() string {
	call := r.Syscall
	if r.Arg != nil {
		call += "(" + r.Arg.Desc + ")"
	}
	return fmt.Sprintf("%s -> %s: %s", call, unix.ErrnoName(r.Errno), r.Why)
}

// seccompKillRules describe the two checks that come before seccompPolicy
// and kill the whole process instead of failing the call.
var seccompKillRules = []string{
	"any system call with seccomp_data.arch != AUDIT_ARCH_X86_64 (i386 int $0x80, sysenter) -> KILL_PROCESS (SIGSYS): the policy names x86_64 numbers only",
	"any system call whose number has the x32 bit 0x40000000 (x32 ABI), except -1 -> KILL_PROCESS (SIGSYS): x32 reaches the same kernel code under other numbers",
}

// plain returns rules that refuse every call of the named system calls with errno.
func plain(errno syscall.Errno, why string, calls ...nrName) []seccompRule {
	rules := make([]seccompRule, len(calls))
	for i, c := range calls {
		rules[i] = seccompRule{Syscall: c.name, Nr: c.nr, Errno: errno, Why: why}
	}
	return rules
}

type nrName struct {
	nr   uint32
	name string
}

// seccompPolicy is the cellbox denylist in the order the filter tests it.
// The numbers are x86_64's, written out so that this file builds for every
// Linux architecture (installSeccomp refuses to run on others); a test
// checks each against golang.org/x/sys/unix.
//
// Left allowed on purpose: seccomp and landlock_* (they only ever add
// restrictions, and tools sandbox themselves), chroot, sethostname,
// setdomainname, mknod of devices and the set*id calls (useless without
// capabilities, which sandboxed code does not have), the AIO and NUMA
// calls, pidfd_open and pidfd_send_signal (python's subprocess and asyncio
// use them), listns, statmount and listmount (read-only, and scoped to the
// sandbox's own namespaces).
var seccompPolicy = slices.Concat(
	[]seccompRule{
		{Syscall: "clone3", Nr: 435, Errno: unix.ENOSYS,
			Why: "its flags are in a struct seccomp cannot read; ENOSYS makes glibc (2.34+) fall back to clone, whose flags are checked; Go uses clone3 only for CgroupFD and CLONE_NEWTIME"},
		{Syscall: "clone", Nr: 56, Errno: unix.EPERM,
			Arg: &seccompArg{Index: 0, Name: "flags", Test: seccompAnyBit, Values: []uint32{seccompNsFlags},
				Desc: "flags has CLONE_NEWUSER|NEWNS|NEWPID|NEWNET|NEWIPC|NEWUTS|NEWCGROUP|NEWTIME"},
			Why: "no new namespaces below the sandbox (namespace creation is the main kernel attack surface reachable without privilege); threads and fork/vfork/posix_spawn stay allowed"},
		{Syscall: "unshare", Nr: 272, Errno: unix.EPERM,
			Arg: &seccompArg{Index: 0, Name: "flags", Test: seccompNoneOf, Values: []uint32{unix.CLONE_NEWNS},
				Desc: "flags is not CLONE_NEWNS alone"},
			Why: "no new namespaces (unshare of CLONE_FILES/FS/SYSVSEM alone is rare and refused too); CLONE_NEWNS alone is the spawner's, which moves into a new mount namespace before it forks each program (the mark of the program's tree), and is left to the kernel's check of CAP_SYS_ADMIN, which no program has"},
		{Syscall: "setns", Nr: 308, Errno: unix.EPERM,
			Why: "no entering other namespaces (an fd of another sandbox's or the host's namespace must not be usable)"},
		{Syscall: "socket", Nr: 41, Errno: unix.EAFNOSUPPORT,
			Arg: &seccompArg{Index: 0, Name: "family", Test: seccompOneOf, Values: []uint32{unix.AF_VSOCK},
				Desc: "family == AF_VSOCK"},
			Why: "vsock reaches the hypervisor and other VMs, past the network namespace"},
		{Syscall: "socketpair", Nr: 53, Errno: unix.EAFNOSUPPORT,
			Arg: &seccompArg{Index: 0, Name: "family", Test: seccompOneOf, Values: []uint32{unix.AF_VSOCK},
				Desc: "family == AF_VSOCK"},
			Why: "vsock, as socket"},
		{Syscall: "ioctl", Nr: 16, Errno: unix.EPERM,
			Arg: &seccompArg{Index: 1, Name: "cmd", Test: seccompOneOf, Values: []uint32{unix.TIOCSTI, unix.TIOCLINUX, unix.TIOCSETD},
				Desc: "cmd is TIOCSTI, TIOCLINUX or TIOCSETD"},
			Why: "TIOCSTI fakes terminal input (typing commands into a shell outside the sandbox); TIOCLINUX drives the virtual console (selection paste, console reads); TIOCSETD attaches line disciplines (n_gsm, n_hdlc: a history of kernel CVEs) and nothing sandboxed needs it"},
		{Syscall: "personality", Nr: 135, Errno: unix.EPERM,
			Arg: &seccompArg{Index: 0, Name: "persona", Test: seccompNoneOf, Values: []uint32{0, personalityQuery},
				Desc: "persona is not PER_LINUX (0) or the query 0xffffffff"},
			Why: "other personas weaken the programs it execs (ADDR_NO_RANDOMIZE turns off ASLR, READ_IMPLIES_EXEC makes data executable) or select foreign ABIs; python, node, bash and git never call it, and querying or resetting stays allowed"},
	},
	plain(unix.EPERM, "kernel keyrings are not namespaced: keys are shared with the host user and have had many bugs",
		nrName{250, "keyctl"}, nrName{248, "add_key"}, nrName{249, "request_key"}),
	plain(unix.EPERM, "kernel attack surface (eBPF verifier/JIT, perf events) and host-wide information",
		nrName{321, "bpf"}, nrName{298, "perf_event_open"}),
	plain(unix.EPERM, "io_uring performs system calls that seccomp never sees and is a frequent source of kernel exploits; libuv and others fall back to threads",
		nrName{425, "io_uring_setup"}, nrName{426, "io_uring_enter"}, nrName{427, "io_uring_register"}),
	plain(unix.EPERM, "userfaultfd lets an exploit stall the kernel at a chosen page fault (a standard race-widening tool)",
		nrName{323, "userfaultfd"}),
	plain(unix.EPERM, "no mounts: the sandbox's filesystem view is fixed by its init",
		nrName{165, "mount"}, nrName{166, "umount2"}, nrName{155, "pivot_root"},
		nrName{429, "move_mount"}, nrName{428, "open_tree"}, nrName{467, "open_tree_attr"},
		nrName{430, "fsopen"}, nrName{431, "fsconfig"}, nrName{432, "fsmount"}, nrName{433, "fspick"},
		nrName{442, "mount_setattr"}),
	plain(unix.EPERM, "no access to other processes' memory or state (debuggers do not work in the sandbox)",
		nrName{101, "ptrace"}, nrName{310, "process_vm_readv"}, nrName{311, "process_vm_writev"},
		nrName{440, "process_madvise"}, nrName{438, "pidfd_getfd"}, nrName{312, "kcmp"}),
	plain(unix.EPERM, "host administration: kernels, modules, accounting, swap, reboot",
		nrName{246, "kexec_load"}, nrName{320, "kexec_file_load"},
		nrName{175, "init_module"}, nrName{313, "finit_module"}, nrName{176, "delete_module"},
		nrName{163, "acct"}, nrName{167, "swapon"}, nrName{168, "swapoff"}, nrName{169, "reboot"}),
	plain(unix.EPERM, "the clock is the host's, not namespaced",
		nrName{164, "settimeofday"}, nrName{227, "clock_settime"}, nrName{305, "clock_adjtime"}, nrName{159, "adjtimex"}),
	plain(unix.EPERM, "the kernel log is the host's",
		nrName{103, "syslog"}),
	plain(unix.EPERM, "host filesystem administration",
		nrName{179, "quotactl"}, nrName{443, "quotactl_fd"}, nrName{212, "lookup_dcookie"}, nrName{180, "nfsservctl"}),
	plain(unix.EPERM, "file handles bypass path lookup and with it mount confinement (the 'shocker' container escape)",
		nrName{303, "name_to_handle_at"}, nrName{304, "open_by_handle_at"}),
	plain(unix.EPERM, "hardware and legacy interfaces nothing sandboxed needs: uselib loads a.out libraries, iopl/ioperm give port I/O, modify_ldt is x86 segment attack surface (only 16-bit code and wine use it), vhangup hangs up the terminal",
		nrName{134, "uselib"}, nrName{172, "iopl"}, nrName{173, "ioperm"}, nrName{154, "modify_ldt"}, nrName{153, "vhangup"}),
	plain(unix.EPERM, "fanotify watches whole filesystems and mounts, beyond the sandbox's view (inotify stays allowed)",
		nrName{300, "fanotify_init"}),
	plain(unix.EPERM, "memfd_secret memory is hidden from the kernel's direct map and from the daemon's inspection; nothing sandboxed needs it",
		nrName{447, "memfd_secret"}),
	plain(unix.EPERM, "changing the LSM context of the process (AppArmor/SELinux attributes) is the host policy's business",
		nrName{460, "lsm_set_self_attr"}),
)

// seccompPolicyText is the policy as text, one line per rule, the kill
// rules first: what doctor and the docs print.
func seccompPolicyText() string {
	var b strings.Builder
	for _, k := range seccompKillRules {
		b.WriteString(k)
		b.WriteByte('\n')
	}
	for _, r := range seccompPolicy {
		b.WriteString(r.String())
		b.WriteByte('\n')
	}
	b.WriteString("everything else -> ALLOW\n")
	return b.String()
}

// seccomp_data offsets (include/uapi/linux/seccomp.h).
const (
	seccompDataNr   = 0
	seccompDataArch = 4
	seccompDataArgs = 16
)

func retErrno(e syscall.Errno) bpf.Instruction {
	return bpf.RetConstant{Val: unix.SECCOMP_RET_ERRNO | uint32(e)&unix.SECCOMP_RET_DATA}
}

var (
	retAllow = bpf.RetConstant{Val: unix.SECCOMP_RET_ALLOW}
	retKill  = bpf.RetConstant{Val: unix.SECCOMP_RET_KILL_PROCESS}
)

// seccompProgram compiles rules into a classic BPF seccomp program.
func seccompProgram(rules []seccompRule) ([]bpf.Instruction, error) {
	p := []bpf.Instruction{
		bpf.LoadAbsolute{Off: seccompDataArch, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: seccompArchX86_64, SkipTrue: 1},
		retKill,
		bpf.LoadAbsolute{Off: seccompDataNr, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: x32SyscallBit, SkipFalse: 2},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: 0xffffffff, SkipTrue: 1},
		retKill,
	}
	seen := make(map[uint32]string, len(rules))
	for _, r := range rules {
		if prev, dup := seen[r.Nr]; dup {
			return nil, fmt.Errorf("seccomp policy: %s and %s both have number %d", prev, r.Syscall, r.Nr)
		}
		seen[r.Nr] = r.Syscall
		if r.Errno <= 0 || r.Errno > unix.SECCOMP_RET_DATA {
			return nil, fmt.Errorf("seccomp policy: %s: errno %d out of range", r.Syscall, r.Errno)
		}
		body, err := ruleBody(r)
		if err != nil {
			return nil, fmt.Errorf("seccomp policy: %s: %w", r.Syscall, err)
		}
		if len(body) > 255 {
			return nil, fmt.Errorf("seccomp policy: %s: body of %d instructions is too long for a conditional jump", r.Syscall, len(body))
		}
		// A still holds nr here: every body ends in a return.
		p = append(p, bpf.JumpIf{Cond: bpf.JumpEqual, Val: r.Nr, SkipFalse: uint8(len(body))})
		p = append(p, body...)
	}
	p = append(p, retAllow)
	if len(p) > unix.BPF_MAXINSNS {
		return nil, fmt.Errorf("seccomp policy: program of %d instructions exceeds BPF_MAXINSNS", len(p))
	}
	return p, nil
}

// ruleBody is the code run when the number matched; it always returns.
func ruleBody(r seccompRule) ([]bpf.Instruction, error) {
	deny := retErrno(r.Errno)
	a := r.Arg
	if a == nil {
		return []bpf.Instruction{deny}, nil
	}
	if a.Index < 0 || a.Index > 5 {
		return nil, fmt.Errorf("argument index %d out of range", a.Index)
	}
	// The low word of the 64-bit argument on little-endian x86_64.
	load := bpf.LoadAbsolute{Off: uint32(seccompDataArgs + 8*a.Index), Size: 4}
	body := []bpf.Instruction{load}
	k := len(a.Values)
	switch a.Test {
	case seccompAnyBit:
		if k != 1 || a.Values[0] == 0 {
			return nil, fmt.Errorf("bit test needs one non-zero mask")
		}
		body = append(body,
			bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: a.Values[0], SkipFalse: 1},
			deny,
			retAllow)
	case seccompOneOf, seccompNoneOf:
		if k == 0 || k > 64 {
			return nil, fmt.Errorf("value test needs 1 to 64 values, has %d", k)
		}
		// Each match jumps past the remaining tests and the return that
		// follows them, to the last return.
		for i, v := range a.Values {
			body = append(body, bpf.JumpIf{Cond: bpf.JumpEqual, Val: v, SkipTrue: uint8(k - i)})
		}
		if a.Test == seccompOneOf {
			body = append(body, retAllow, deny)
		} else {
			body = append(body, deny, retAllow)
		}
	default:
		return nil, fmt.Errorf("unknown argument test %d", a.Test)
	}
	return body, nil
}

// installSeccomp sets no_new_privs and installs the cellbox filter on
// every thread of this process (SECCOMP_FILTER_FLAG_TSYNC); everything the
// process starts afterwards inherits both. It cannot be undone.
func installSeccomp() error {
	return installSeccompRules(seccompPolicy)
}

// installSeccompRules installs the filter compiled from rules (the tests
// install variants of the policy).
func installSeccompRules(rules []seccompRule) error {
	if runtime.GOARCH != "amd64" {
		return fmt.Errorf("installSeccomp: the cellbox filter is written for x86_64; %s is not supported", runtime.GOARCH)
	}
	prog, err := seccompProgram(rules)
	if err != nil {
		return fmt.Errorf("installSeccomp: %w", err)
	}
	raw, err := bpf.Assemble(prog)
	if err != nil {
		return fmt.Errorf("installSeccomp: assemble filter: %w", err)
	}
	filter := make([]unix.SockFilter, len(raw))
	for i, ins := range raw {
		filter[i] = unix.SockFilter{Code: ins.Op, Jt: ins.Jt, Jf: ins.Jf, K: ins.K}
	}
	fprog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}

	// The no_new_privs fallback below must set the flag on the thread that
	// then calls seccomp.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := setNoNewPrivs(); err != nil {
		return fmt.Errorf("installSeccomp: %w", err)
	}
	r, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(filter)
	switch {
	case e == unix.EACCES:
		return fmt.Errorf("installSeccomp: seccomp(SECCOMP_SET_MODE_FILTER): %w (no_new_privs is not set on the calling thread)", e)
	case e != 0:
		return fmt.Errorf("installSeccomp: seccomp(SECCOMP_SET_MODE_FILTER, TSYNC): %w (%s)", e, unix.ErrnoName(e))
	case r != 0:
		// TSYNC reports the first thread it could not move to the filter.
		return fmt.Errorf("installSeccomp: thread %d could not be synchronized to the filter (it runs under a seccomp filter this thread does not have)", r)
	}
	return nil
}

// setNoNewPrivs sets no_new_privs, which an unprivileged seccomp filter
// requires, on every thread. syscall.AllThreadsSyscall does that in a pure
// Go binary; in a binary that links cgo (the race detector does) it is
// ENOTSUP, and then the flag is set on the calling (locked) thread only:
// seccomp with TSYNC copies no_new_privs to every thread it moves to the
// filter (seccomp_sync_threads in kernel/seccomp.c), so either way every
// thread has both once installSeccompRules succeeds.
func setNoNewPrivs() error {
	_, _, e := syscall.AllThreadsSyscall(unix.SYS_PRCTL, unix.PR_SET_NO_NEW_PRIVS, 1, 0)
	if e == 0 {
		return nil
	}
	if e != unix.ENOTSUP {
		return fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS) on all threads: %w", e)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	return nil
}
