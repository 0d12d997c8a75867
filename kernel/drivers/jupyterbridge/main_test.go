package jupyterbridge

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cellbox-dev/cellbox/workspace/sandbox"
)

func TestMain(m *testing.M) {
	if sandbox.Main() { // the bridge's entry, run by TestBridgeProcess
		return
	}
	os.Exit(m.Run())
}

// bridgeProc is the bridge run as its own process, as the manager runs it.
type bridgeProc struct {
	cmd    *exec.Cmd
	reqW   *os.File
	reqIno uint64 // the request pipe's inode
	events *bufio.Scanner
	kernel int // the kernel's pid
}

func startBridgeProc(t *testing.T, cfg Config) *bridgeProc {
	t.Helper()
	argv, entry, err := Command(cfg)
	if err != nil {
		t.Fatal(err)
	}
	reqR, reqW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	evR, evW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(reqR.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/proc/self/exe", argv[1:]...)
	cmd.Env = []string{entry, "PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + t.TempDir(), "LANG=C.UTF-8", "TMPDIR=/tmp"}
	cmd.Dir = t.TempDir()
	cmd.ExtraFiles = []*os.File{reqR, evW}
	stderr := &syncBuf{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	reqR.Close()
	evW.Close()
	p := &bridgeProc{cmd: cmd, reqW: reqW, reqIno: st.Ino, events: bufio.NewScanner(evR)}
	p.events.Buffer(make([]byte, 1<<20), 64<<20)
	t.Cleanup(func() {
		reqW.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		evR.Close()
		if t.Failed() {
			t.Logf("the bridge's stderr:\n%s", stderr.bytes(0, 1<<20))
		}
	})
	ev := p.next(t)
	if ev["ev"] != "ready" {
		t.Fatalf("first event %+v", ev)
	}
	p.kernel = int(ev["pid"].(float64))
	return p
}

// next is the next event (the test's deadline bounds it).
func (p *bridgeProc) next(t *testing.T) map[string]any {
	t.Helper()
	if !p.events.Scan() {
		t.Fatalf("the bridge's events ended: %v", p.events.Err())
	}
	var ev map[string]any
	if err := json.Unmarshal(p.events.Bytes(), &ev); err != nil {
		t.Fatal(err)
	}
	return ev
}

func (p *bridgeProc) execute(t *testing.T, id, code string) {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"op": "execute", "id": id, "code": code})
	if _, err := p.reqW.Write(append(b, '\n')); err != nil {
		t.Fatal(err)
	}
}

// waitGone waits until pid has ended (a zombie counts as ended).
func waitGone(t *testing.T, pid int, what string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil || strings.Contains(string(b), ") Z ") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s (pid %d) is still there", what, pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestBridgeProcess runs the bridge's entry as the manager does: its
// request and event pipes do not reach the kernel; it exits with the
// kernel's code, dies of the signal that killed the kernel, and the
// kernel dies with it.
func TestBridgeProcess(t *testing.T) {
	cfg := ipykernel(t)

	t.Run("pipes", func(t *testing.T) {
		p := startBridgeProc(t, cfg)
		fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", p.kernel))
		if err != nil {
			t.Fatal(err)
		}
		for _, fd := range fds {
			target, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", p.kernel, fd.Name()))
			if target == fmt.Sprintf("pipe:[%d]", p.reqIno) {
				t.Fatalf("the kernel holds the request pipe as fd %s", fd.Name())
			}
		}
	})
	t.Run("exit code", func(t *testing.T) {
		p := startBridgeProc(t, cfg)
		p.execute(t, "x1", "import os\nos._exit(3)")
		err := p.cmd.Wait()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 {
			t.Fatalf("the bridge ended with %v, want exit code 3", err)
		}
	})
	t.Run("signal", func(t *testing.T) {
		p := startBridgeProc(t, cfg)
		p.execute(t, "x1", "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)")
		err := p.cmd.Wait()
		ws, _ := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
		if !ws.Signaled() || ws.Signal() != syscall.SIGSEGV {
			t.Fatalf("the bridge ended with %v, want killed by SIGSEGV", err)
		}
	})
	t.Run("bridge killed", func(t *testing.T) {
		p := startBridgeProc(t, cfg)
		if err := p.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		_ = p.cmd.Wait()
		waitGone(t, p.kernel, "the kernel of a killed bridge")
	})
	t.Run("requests end", func(t *testing.T) {
		p := startBridgeProc(t, cfg)
		p.reqW.Close()
		if err := p.cmd.Wait(); err != nil {
			t.Fatalf("the bridge ended with %v when its requests ended", err)
		}
		waitGone(t, p.kernel, "the kernel of a bridge that ended")
	})
}
