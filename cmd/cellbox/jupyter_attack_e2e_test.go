//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cellbox-dev/cellbox/kernel/jupyter"
)

// TestJupyterKernelRefusesForged attacks a running `cellbox jupyter-kernel`
// as another local user could: a message signed with another key (its
// code must not run), and a frame claiming 2^62 bytes (the connection is
// cut before anything is allocated). The kernel, its daemon and the
// workspace carry on: a client with the key runs code after both.
func TestJupyterKernelRefusesForged(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	project := t.TempDir()
	k := startJupyterKernel(t, ctx, "python", project)
	ci, stderr := k.ci, k.stderr

	good := dialJupyter(t, ctx, &ci, ci.Key)
	execute := func(c *jupyter.ClientSockets, code string) string {
		t.Helper()
		req, _ := jupyter.NewSession("t").New("execute_request", nil, map[string]any{"code": code, "silent": false})
		if err := c.Shell.Send(req); err != nil {
			t.Fatal(err)
		}
		for {
			m, err := c.IOPub.Recv()
			if err != nil {
				t.Fatalf("iopub: %v", err)
			}
			if m.ParentHeader().MsgID == req.Header.MsgID && m.Header.MsgType == "execute_result" {
				var content struct {
					Data map[string]string `json:"data"`
				}
				_ = json.Unmarshal(m.Content, &content)
				return content.Data["text/plain"]
			}
		}
	}
	if got := execute(good, "6*7"); got != "42" {
		t.Fatalf("6*7 = %q", got)
	}

	// Signed with another key: dropped before it is parsed, and said on stderr.
	forger := dialJupyter(t, ctx, &ci, "not-the-key")
	req, _ := jupyter.NewSession("forger").New("execute_request", nil, map[string]any{"code": "open('forged.txt', 'w').write('x')"})
	if err := forger.Shell.Send(req); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "the forged message's refusal on stderr", func() bool {
		return strings.Contains(stderr.String(), "bad message signature")
	})
	if got := execute(good, "import os; os.path.exists('forged.txt')"); got != "False" {
		t.Fatalf("the forged code ran: os.path.exists('forged.txt') = %q", got)
	}

	// A frame claiming 2^62 bytes on the shell socket: cut off.
	raw, err := net.Dial("unix", fmt.Sprintf("%s-%d", ci.IP, ci.ShellPort))
	if err != nil {
		t.Fatal(err)
	}
	greeting := make([]byte, 64)
	greeting[0], greeting[9], greeting[10] = 0xff, 0x7f, 3
	copy(greeting[12:], "NULL")
	hdr := make([]byte, 9)
	hdr[0] = 0x02 // LONG
	binary.BigEndian.PutUint64(hdr[1:], 1<<62)
	if _, err := raw.Write(append(greeting, hdr...)); err != nil {
		t.Fatal(err)
	}
	_ = raw.SetReadDeadline(time.Now().Add(time.Minute))
	buf := make([]byte, 4096)
	for {
		if _, err := raw.Read(buf); err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatal("the connection with the huge frame was not closed")
			}
			break
		}
	}
	raw.Close()

	if got := execute(good, "6*7"); got != "42" {
		t.Fatalf("after the attacks, 6*7 = %q", got)
	}
	select {
	case <-k.exited:
		t.Fatalf("jupyter-kernel ended: %v", k.err)
	default:
	}
	if _, err := os.Stat(filepath.Join(project, "forged.txt")); !os.IsNotExist(err) {
		t.Fatalf("forged.txt in the project: %v", err)
	}
}

// dialJupyter connects a client signing with key, once the kernel answers
// kernel_info (the kernel binds its sockets after it starts).
func dialJupyter(t *testing.T, ctx context.Context, ci *jupyter.ConnectionInfo, key string) *jupyter.ClientSockets {
	t.Helper()
	signer, err := jupyter.NewSigner(ci.SignatureScheme, []byte(key))
	if err != nil {
		t.Fatal(err)
	}
	var c *jupyter.ClientSockets
	waitFor(t, time.Minute, "the kernel's sockets", func() bool {
		c, err = jupyter.Dial(ctx, ci, signer, jupyter.NewSession("test"))
		return err == nil
	})
	t.Cleanup(c.Close)
	if key != ci.Key {
		return c
	}
	got := make(chan *jupyter.Message, 1)
	go func() {
		m, err := c.Shell.Recv()
		if err == nil {
			got <- m
		}
	}()
	req, _ := jupyter.NewSession("test").New("kernel_info_request", nil, map[string]any{})
	if err := c.Shell.Send(req); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-got:
		if m.Header.MsgType != "kernel_info_reply" || !bytes.Contains(m.Content, []byte(`"cellbox"`)) {
			t.Fatalf("kernel_info: %s %s", m.Header.MsgType, m.Content)
		}
	case <-ctx.Done():
		t.Fatal("no kernel_info_reply")
	}
	return c
}

// TestJupyterKernelStartFails: a kernelspec whose language the daemon
// cannot start (a stale spec, an interpreter removed) leaves the kernel
// process answering, and every execution gets the daemon's reason, which
// Jupyter shows in the notebook (a process that ended would be restarted
// and fail again, with the reason only in the server's log).
func TestJupyterKernelStartFails(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	k := startJupyterKernel(t, ctx, "cobol", t.TempDir())
	ci, stderr := k.ci, k.stderr
	c := dialJupyter(t, ctx, &ci, ci.Key)
	for i := range 2 { // the first may wait for the start, the second comes after it
		req, _ := jupyter.NewSession("t").New("execute_request", nil, map[string]any{"code": "1", "silent": false})
		if err := c.Shell.Send(req); err != nil {
			t.Fatal(err)
		}
		rep, err := c.Shell.Recv()
		if err != nil {
			t.Fatal(err)
		}
		var content struct {
			Status string `json:"status"`
			Evalue string `json:"evalue"`
		}
		_ = json.Unmarshal(rep.Content, &content)
		if rep.Header.MsgType != "execute_reply" || content.Status != "error" || !strings.Contains(content.Evalue, "start a cobol kernel") {
			t.Fatalf("execution %d: %s %s", i, rep.Header.MsgType, rep.Content)
		}
	}
	if !strings.Contains(stderr.String(), "start a cobol kernel") {
		t.Fatalf("stderr does not say why:\n%s", stderr.String())
	}
}

// jupyterKernel is a `cellbox jupyter-kernel` process of a review daemon,
// on ipc sockets (no ports to pick).
type jupyterKernel struct {
	ci     jupyter.ConnectionInfo
	stderr *syncBuffer
	exited chan struct{} // closed when it has ended, with err its Wait's
	err    error
}

// startJupyterKernel runs `cellbox jupyter-kernel --language language` in
// dir, as Jupyter starts it; it is killed at the test's end.
func startJupyterKernel(t *testing.T, ctx context.Context, language, dir string) *jupyterKernel {
	t.Helper()
	d := startReviewDaemon(t)
	sockDir, err := os.MkdirTemp("", "cbjk-") // ipc paths must stay short
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	k := &jupyterKernel{
		ci: jupyter.ConnectionInfo{Transport: "ipc", IP: filepath.Join(sockDir, "k"), ShellPort: 1, IOPubPort: 2, StdinPort: 3,
			ControlPort: 4, HBPort: 5, Key: "the-right-key", SignatureScheme: "hmac-sha256"},
		stderr: &syncBuffer{},
		exited: make(chan struct{}),
	}
	b, _ := json.Marshal(k.ci)
	connFile := filepath.Join(sockDir, "kernel.json")
	if err := os.WriteFile(connFile, b, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, cellboxBin, "jupyter-kernel", "--language", language, "-f", connFile)
	cmd.Env, cmd.Dir, cmd.Stderr = d.env, dir, k.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { k.err = cmd.Wait(); close(k.exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-k.exited
		if t.Failed() {
			t.Logf("jupyter-kernel stderr:\n%s", k.stderr.String())
		}
	})
	return k
}
