package jupyterbridge

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// sysProcAttr: the kernel is killed when the bridge's thread that started
// it ends (the Go runtime ends a thread only when a goroutine locked to it
// exits, which the bridge never does), and has a process group of its own:
// the manager's SIGINT to the bridge's group does not reach it; the bridge
// passes it on when the kernel can take it.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
}

// clockTick is USER_HZ, the unit of /proc/PID/stat's times (100 on every
// architecture Linux runs Go on).
const clockTick = 10 * time.Millisecond

// kernelCPU is the CPU time the kernel process has used, with its
// waited-for children; -1 when unknown.
func kernelCPU(pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return -1
	}
	// The command name (field 2) may hold spaces and parentheses: count
	// fields after its closing parenthesis.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return -1
	}
	f := bytes.Fields(b[i+1:])
	// utime, stime, cutime, cstime are fields 14 to 17; f[0] is field 3.
	if len(f) < 15 {
		return -1
	}
	var ticks int64
	for _, s := range f[11:15] {
		n, err := strconv.ParseInt(string(s), 10, 64)
		if err != nil {
			return -1
		}
		ticks += n
	}
	return time.Duration(ticks) * clockTick
}

// kernelPeakRSS is the kernel process's peak resident memory (VmHWM), 0
// when unknown.
func kernelPeakRSS(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("VmHWM:")); ok {
			f := bytes.Fields(v)
			if len(f) >= 1 {
				if kb, err := strconv.ParseInt(string(f[0]), 10, 64); err == nil {
					return kb << 10
				}
			}
		}
	}
	return 0
}

// dieOf ends this process by sig, as the kernel ended: the signal's
// default action, which the Go runtime would otherwise handle (a SIGSEGV
// sent by kill makes it print its goroutines and exit 2).
func dieOf(sig syscall.Signal) {
	if sig != syscall.SIGKILL && sig != syscall.SIGSTOP {
		// struct sigaction of the kernel: handler, flags, restorer, mask.
		var sa struct {
			handler  uintptr
			flags    uint64
			restorer uintptr
			mask     uint64
		}
		_, _, _ = unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&sa)), 0, 8, 0, 0)
	}
	_ = unix.Kill(os.Getpid(), sig)
	time.Sleep(time.Second) // the signal is on its way
	os.Exit(128 + int(sig))
}
