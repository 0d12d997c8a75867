package jupyterbridge

import (
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// tailBytes of what the kernel wrote to its stderr, and nobody saw, are
// kept to explain its death.
const tailBytes = 4 << 10

// kernelProc is the kernel's process, a child of the bridge in a process
// group of its own (as Jupyter starts a kernel in a session of its own): it
// dies with the bridge (PR_SET_PDEATHSIG where the system has it; the
// manager also kills the bridge's whole tree), and the bridge kills its
// group when it ends.
type kernelProc struct {
	cmd    *exec.Cmd
	pid    int
	exited chan struct{} // closed when it has ended (st set)
	st     exitStatus
	output sync.WaitGroup // its fds 1 and 2 read to the end

	mu   sync.Mutex
	tail []byte // its stderr that was not forwarded
}

// startKernel starts the kernel: argv with path as the program, stdin
// /dev/null, fds 1 and 2 to pipes read into forward (which says whether it
// took the bytes), in a process group of its own.
func startKernel(path string, argv, env []string, dir string, forward func(name string, p []byte) bool) (*kernelProc, error) {
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, err
	}
	cmd := &exec.Cmd{Path: path, Args: argv, Env: env, Dir: dir, Stdout: outW, Stderr: errW, SysProcAttr: sysProcAttr()}
	err = cmd.Start()
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return nil, err
	}
	k := &kernelProc{cmd: cmd, pid: cmd.Process.Pid, exited: make(chan struct{})}
	k.output.Add(2)
	go k.read(outR, "stdout", forward)
	go k.read(errR, "stderr", forward)
	go func() {
		_ = cmd.Wait()
		k.st = statusOf(cmd.ProcessState)
		close(k.exited)
	}()
	return k, nil
}

func (k *kernelProc) read(f *os.File, name string, forward func(string, []byte) bool) {
	defer k.output.Done()
	defer f.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := f.Read(buf)
		if n > 0 && !forward(name, buf[:n]) && name == "stderr" {
			k.keep(buf[:n])
		}
		if err != nil {
			return
		}
	}
}

func (k *kernelProc) keep(p []byte) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.tail = append(k.tail, p...)
	if len(k.tail) > tailBytes {
		k.tail = append(k.tail[:0], k.tail[len(k.tail)-tailBytes:]...)
	}
}

// unforwarded is the end of what the kernel wrote to its stderr that
// nobody saw.
func (k *kernelProc) unforwarded() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return string(k.tail)
}

// waitOutput waits (at most d) until the kernel's fds 1 and 2 are read to
// the end; a child it left may hold them open.
func (k *kernelProc) waitOutput(d time.Duration) {
	done := make(chan struct{})
	go func() { k.output.Wait(); close(done) }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}

// interrupt sends SIGINT to the kernel's process group, as ^C does (and
// jupyter_client for a kernel whose interrupt_mode is signal): programs
// the kernel runs get it too.
func (k *kernelProc) interrupt() {
	if k.pid > 0 { // -0 would be the bridge's own group, -1 every process
		_ = syscall.Kill(-k.pid, syscall.SIGINT)
	}
}

// kill ends the kernel and its process group, and waits a little for it.
func (k *kernelProc) kill() {
	if k.pid > 0 {
		_ = syscall.Kill(-k.pid, syscall.SIGKILL)
	}
	_ = k.cmd.Process.Kill()
	t := time.NewTimer(2 * time.Second)
	defer t.Stop()
	select {
	case <-k.exited:
	case <-t.C:
	}
}

// status is how the kernel ended (once exited is closed).
func (k *kernelProc) status() exitStatus {
	<-k.exited
	return k.st
}

// exitStatus is how the kernel ended.
type exitStatus struct {
	code   int
	signal syscall.Signal
}

func statusOf(ps *os.ProcessState) exitStatus {
	if ps == nil {
		return exitStatus{code: -1}
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return exitStatus{code: -1, signal: ws.Signal()}
	}
	return exitStatus{code: ps.ExitCode()}
}

func (s exitStatus) String() string {
	if s.signal != 0 {
		return "was killed by " + signalName(s.signal)
	}
	return fmt.Sprintf("exited with code %d", s.code)
}

// exitCode is what the bridge ends with: the kernel's exit code, or minus
// the signal that killed it (Main dies of the same signal).
func (s exitStatus) exitCode() int {
	if s.signal != 0 {
		return -int(s.signal)
	}
	return s.code
}

func signalName(s syscall.Signal) string {
	names := map[syscall.Signal]string{
		syscall.SIGKILL: "SIGKILL", syscall.SIGSEGV: "SIGSEGV", syscall.SIGABRT: "SIGABRT", syscall.SIGTERM: "SIGTERM",
		syscall.SIGINT: "SIGINT", syscall.SIGBUS: "SIGBUS", syscall.SIGFPE: "SIGFPE", syscall.SIGILL: "SIGILL",
		syscall.SIGHUP: "SIGHUP", syscall.SIGPIPE: "SIGPIPE", syscall.SIGXCPU: "SIGXCPU", syscall.SIGXFSZ: "SIGXFSZ",
	}
	if n, ok := names[s]; ok {
		return n
	}
	return fmt.Sprintf("signal %d", int(s))
}

// isExecutable reports whether p is a regular file someone may run.
func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}
