package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cellbox-dev/cellbox/protocol"
)

// Kernel tests that hold for every language, and the manager's own
// behaviour (queue, cancel, timeout, death, attach, audit). Language
// specifics are in kernel_python_e2e_test.go and its siblings.

var allLanguages = []string{"python", "javascript", "bash"}

// langCode is a snippet per language.
type langCode struct {
	print, slowLoop, sleep, setVar, getVar, fail, exit3, readLine string
	// started prints "started" (flushed), for code that must be seen
	// running before it is interrupted.
	started string
}

var snippets = map[string]langCode{
	"python": {
		print: "print('héllo 🌍')", slowLoop: "while True: pass", sleep: "import time; time.sleep(60)",
		setVar: "marker = 'kept'", getVar: "print(marker)", fail: "1/0", exit3: "import os; os._exit(3)",
		readLine: "print('got', input('name? '))", started: "print('started', flush=True)",
	},
	"javascript": {
		print: "console.log('héllo 🌍')", slowLoop: "while (true) {}", sleep: "await new Promise(r => setTimeout(r, 60000))",
		setVar: "var marker = 'kept'", getVar: "console.log(marker)", fail: "null.x", exit3: "process.exit(3)",
		readLine: "console.log('got', await input('name? '))", started: "console.log('started')",
	},
	"bash": {
		print: "echo 'héllo 🌍'", slowLoop: "while :; do :; done", sleep: "sleep 60",
		setVar: "marker=kept", getVar: "echo $marker", fail: "false", exit3: "exit 3",
		readLine: "read -p 'name? ' n; echo got $n", started: "echo started",
	},
}

// TestKernelEveryLanguage: output, state, errors, restart, stdin both
// ways, interrupt of a busy loop and a sleep, exit reported as death, for
// each language.
func TestKernelEveryLanguage(t *testing.T) {
	for _, lang := range allLanguages {
		t.Run(lang, func(t *testing.T) {
			t.Parallel()
			s := snippets[lang]
			p := startStdio(t)
			c := p.client()
			c.initialize(t)
			k := startKernel(t, c, protocol.KernelStartParams{Language: lang})
			kid := k.KernelID
			if k.LanguageInfo.Version == "" || !k.Sandbox.UserNamespaces || !k.Sandbox.PidNamespace || k.Sandbox.Network != protocol.NetworkModeNone {
				t.Fatalf("kernel/start = %+v", k)
			}

			res, outs := execute(t, c, kid, s.print)
			wantOK(t, res, outs)
			if got := streamText(outs, protocol.StreamStdout); got != "héllo 🌍\n" {
				t.Fatalf("stdout = %q (outputs %+v)", got, outs)
			}
			if res.ExecutionCount != 1 {
				t.Fatalf("executionCount = %d, want 1", res.ExecutionCount)
			}

			res, outs = execute(t, c, kid, s.setVar)
			wantOK(t, res, outs)
			res, outs = execute(t, c, kid, s.getVar)
			wantOK(t, res, outs)
			if got := streamText(outs, protocol.StreamStdout); got != "kept\n" {
				t.Fatalf("state lost: %q", got)
			}

			res, outs = execute(t, c, kid, s.fail)
			if res.Status != protocol.ExecutionStatusError || res.Error == nil || res.Error.Ename == "" {
				t.Fatalf("failing code: %+v", res)
			}
			if errs := ofKind(outs, protocol.OutputKindError); lang != "bash" && len(errs) != 1 {
				t.Fatalf("error outputs = %+v", errs)
			}

			// stdin: fed from the request, then asked of the client.
			res, outs = execute(t, c, kid, s.readLine, withStdin("alice\n", false))
			wantOK(t, res, outs)
			if got := streamText(outs, protocol.StreamStdout); !strings.Contains(got, "got alice") {
				t.Fatalf("stdin from the request: %q", got)
			}
			var asked []protocol.KernelInputRequestParams
			var mu sync.Mutex
			c.mu.Lock()
			c.answer = func(method string, params json.RawMessage) (any, error) {
				var ip protocol.KernelInputRequestParams
				_ = json.Unmarshal(params, &ip)
				mu.Lock()
				asked = append(asked, ip)
				mu.Unlock()
				return protocol.KernelInputReply{Value: "bob"}, nil
			}
			c.mu.Unlock()
			res, outs = execute(t, c, kid, s.readLine, withStdin("", true))
			wantOK(t, res, outs)
			mu.Lock()
			if len(asked) != 1 || asked[0].KernelID != kid || !strings.Contains(asked[0].Prompt, "name?") {
				t.Fatalf("input requests = %+v", asked)
			}
			mu.Unlock()
			if got := streamText(outs, protocol.StreamStdout); !strings.Contains(got, "got bob") {
				t.Fatalf("stdin from the client: %q", got)
			}

			// Interrupt a busy loop, then a sleep; the kernel lives on.
			for i, code := range []string{s.slowLoop, s.sleep} {
				code = s.started + "\n" + code
				execID := fmt.Sprint("interrupted-", i)
				done := make(chan protocol.ExecuteResult, 1)
				go func() {
					r, _, err := tryRun(t, c, kid, code, withID(execID))
					if err != nil {
						t.Errorf("execute %q: %v", code, err)
					}
					done <- r
				}()
				waitOutput(t, c, execID, "started\n") // into the loop
				c.mustCall(t, protocol.MethodKernelInterrupt, protocol.KernelIDParams{KernelID: kid}, nil)
				select {
				case r := <-done:
					if r.Status != protocol.ExecutionStatusInterrupted {
						t.Fatalf("interrupted %q: %+v", code, r)
					}
				case <-time.After(10 * time.Second):
					t.Fatalf("interrupt did not stop %q", code)
				}
				res, outs = execute(t, c, kid, s.getVar)
				if got := streamText(outs, protocol.StreamStdout); res.Status != protocol.ExecutionStatusOK || got != "kept\n" {
					t.Fatalf("after the interrupt: %+v %q", res, got)
				}
			}

			// Restart clears state and the count.
			c.mustCall(t, protocol.MethodKernelRestart, protocol.KernelIDParams{KernelID: kid}, nil)
			res, outs = execute(t, c, kid, s.getVar)
			if lang == "bash" {
				if streamText(outs, protocol.StreamStdout) != "\n" {
					t.Fatalf("state survived a restart: %+v", outs)
				}
			} else if res.Status != protocol.ExecutionStatusError {
				t.Fatalf("state survived a restart: %+v %+v", res, outs)
			}
			if res.ExecutionCount != 1 {
				t.Fatalf("count after restart = %d", res.ExecutionCount)
			}

			// Exit: the kernel is dead with the reason, and can be restarted.
			_, _, err := tryRun(t, c, kid, s.exit3)
			wantCode(t, err, protocol.CodeKernelDead)
			st := waitStatus(t, c, kid, protocol.KernelStateDead, 0)
			if st.Reason != "exited with code 3" {
				t.Fatalf("dead reason = %q", st.Reason)
			}
			_, _, err = tryRun(t, c, kid, s.print)
			msg := wantCode(t, err, protocol.CodeKernelDead)
			if !strings.Contains(msg, "exited with code 3") {
				t.Fatalf("KernelDead message %q lacks the reason", msg)
			}
			c.mustCall(t, protocol.MethodKernelRestart, protocol.KernelIDParams{KernelID: kid}, nil)
			res, outs = execute(t, c, kid, s.print)
			wantOK(t, res, outs)

			c.mustCall(t, protocol.MethodKernelShutdown, protocol.KernelIDParams{KernelID: kid}, nil)
			wantCode(t, c.call(t, protocol.MethodKernelExecute, protocol.KernelExecuteParams{KernelID: kid, Code: s.print}, nil), protocol.CodeNotFound)
		})
	}
}

// TestKernelQueueCancelTimeout: ordered queue, stopOnError aborts the
// queued, $/cancelRequest of a queued and of a running execution, timeout
// with and without a kernel restart.
func TestKernelQueueCancelTimeout(t *testing.T) {
	p := startStdio(t)
	c, tap := p.tappedClient()
	c.initialize(t)
	kid := startKernel(t, c, protocol.KernelStartParams{Language: "python"}).KernelID
	ctx := context.Background()

	// Queued in order; stopOnError aborts what is queued behind a failure.
	type out struct {
		res protocol.ExecuteResult
		err error
	}
	sent := 0
	send := func(code string, stopOnError bool) <-chan out {
		ch := make(chan out, 1)
		sent++
		p := protocol.KernelExecuteParams{KernelID: kid, Code: code, StopOnError: &stopOnError, ExecutionID: fmt.Sprint("queue-", sent)}
		go func() {
			var r protocol.ExecuteResult
			_, err := c.conn.Call(ctx, protocol.MethodKernelExecute, p, &r)
			ch <- out{r, err}
		}()
		waitSent(t, tap, p.ExecutionID) // keep the order of the sends
		return ch
	}
	// The first waits for input from the client, which answers once the
	// others are queued behind it.
	release := make(chan struct{})
	c.mu.Lock()
	c.answer = func(method string, params json.RawMessage) (any, error) {
		<-release
		return protocol.KernelInputReply{Value: "first"}, nil
	}
	c.mu.Unlock()
	sendInput := func(code string) <-chan out {
		ch := make(chan out, 1)
		sent++
		stop := true
		p := protocol.KernelExecuteParams{KernelID: kid, Code: code, StopOnError: &stop, AllowStdin: true, ExecutionID: fmt.Sprint("queue-", sent)}
		go func() {
			var r protocol.ExecuteResult
			_, err := c.conn.Call(ctx, protocol.MethodKernelExecute, p, &r)
			ch <- out{r, err}
		}()
		waitSent(t, tap, p.ExecutionID)
		return ch
	}
	first := sendInput("order = [input()]")
	second := send("order.append('second'); 1/0", true)
	third := send("order.append('third')", true)
	release <- struct{}{}
	if r := <-first; r.err != nil || r.res.Status != protocol.ExecutionStatusOK {
		t.Fatalf("first: %+v", r)
	}
	if r := <-second; r.err != nil || r.res.Status != protocol.ExecutionStatusError {
		t.Fatalf("second: %+v", r)
	}
	if r := <-third; r.err != nil || r.res.Status != protocol.ExecutionStatusAborted {
		t.Fatalf("third (queued behind a failure): %+v", r)
	}
	res, outs := execute(t, c, kid, "order")
	if resultText(t, outs) != "['first', 'second']" {
		t.Fatalf("order = %q (%+v)", resultText(t, outs), res)
	}

	// stopOnError false: the queued one runs.
	a := send("import time; time.sleep(0.3); 1/0", false)
	b := send("order.append('after')", true)
	if r := <-a; r.res.Status != protocol.ExecutionStatusError {
		t.Fatalf("a: %+v", r)
	}
	if r := <-b; r.res.Status != protocol.ExecutionStatusOK {
		t.Fatalf("b with stopOnError false before it: %+v", r)
	}

	// $/cancelRequest of a queued execution: it never runs. The one before
	// it waits for input until the cancel is answered.
	running := sendInput("input()")
	queued := make(chan error, 1)
	go func() {
		_, err := c.conn.Call(ctx, protocol.MethodKernelExecute, protocol.KernelExecuteParams{KernelID: kid, Code: "order.append('cancelled')", ExecutionID: "queued-1"}, nil)
		queued <- err
	}()
	cancelExecution(t, c, tap, "queued-1")
	wantCode(t, <-queued, protocol.CodeRequestCancelled)
	release <- struct{}{}
	if r := <-running; r.err != nil || r.res.Status != protocol.ExecutionStatusOK {
		t.Fatalf("the execution before the cancelled one: %+v", r)
	}
	_, outs = execute(t, c, kid, "'cancelled' in order")
	if resultText(t, outs) != "False" {
		t.Fatalf("a cancelled queued execution ran: %+v", outs)
	}

	// $/cancelRequest of a running execution interrupts it: -32800.
	errc := make(chan error, 1)
	n := len(statuses(t, c, kid)) // before the execution, whose busy may come at once
	go func() {
		_, err := c.conn.Call(ctx, protocol.MethodKernelExecute, protocol.KernelExecuteParams{KernelID: kid, Code: "import time\nwhile True: time.sleep(0.01)", ExecutionID: "running-1"}, nil)
		errc <- err
	}()
	waitStatus(t, c, kid, protocol.KernelStateBusy, n)
	cancelExecution(t, c, tap, "running-1")
	select {
	case err := <-errc:
		wantCode(t, err, protocol.CodeRequestCancelled)
	case <-time.After(10 * time.Second):
		t.Fatal("cancel did not stop the running execution")
	}
	if outs := kernelOutputs(t, c, "running-1"); len(ofKind(outs, protocol.OutputKindError)) != 1 {
		t.Fatalf("the cancelled execution's KeyboardInterrupt: %+v", outs)
	}
	res, outs = execute(t, c, kid, "order[0]")
	if resultText(t, outs) != "'first'" {
		t.Fatalf("state lost by a cancel: %+v %+v", res, outs)
	}

	// timeoutMs: the interrupt stops it; state stays.
	res, _ = execute(t, c, kid, "import time; time.sleep(30)", withTimeout(300))
	if res.Status != protocol.ExecutionStatusTimeout || res.Error == nil || res.Error.Ename == "KernelRestarted" {
		t.Fatalf("timeout: %+v", res)
	}
	res, outs = execute(t, c, kid, "order[0]")
	if resultText(t, outs) != "'first'" {
		t.Fatalf("state lost by a timeout that the interrupt handled: %+v", outs)
	}
	// Code that ignores SIGINT: the kernel is restarted after the grace.
	res, _ = execute(t, c, kid, "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: pass", withTimeout(300))
	if res.Status != protocol.ExecutionStatusTimeout || res.Error == nil || res.Error.Ename != "KernelRestarted" {
		t.Fatalf("timeout of code that ignores SIGINT: %+v", res)
	}
	res, _ = execute(t, c, kid, "order")
	if res.Status != protocol.ExecutionStatusError {
		t.Fatalf("state survived a restart: %+v", res)
	}

	// Bad requests.
	wantCode(t, c.call(t, protocol.MethodKernelExecute, protocol.KernelExecuteParams{KernelID: "k-nope", Code: "1"}, nil), protocol.CodeNotFound)
	wantCode(t, c.call(t, protocol.MethodKernelExecute, protocol.KernelExecuteParams{KernelID: kid, Code: strings.Repeat("#", 1<<20+1)}, nil), protocol.CodeLimitExceeded)
	wantCode(t, c.call(t, protocol.MethodKernelStart, protocol.KernelStartParams{Language: "cobol"}, nil), protocol.CodeInvalidParams)
	wantCode(t, c.call(t, protocol.MethodKernelStart, protocol.KernelStartParams{Language: "python", Limits: &protocol.Limits{MemoryBytes: 1 << 50}}, nil), protocol.CodeLimitExceeded)
	wantCode(t, c.call(t, protocol.MethodKernelStart, protocol.KernelStartParams{Language: "python", Cwd: "../.."}, nil), protocol.CodePathOutsideWorkspace)
	wantCode(t, c.call(t, protocol.MethodKernelInterrupt, protocol.KernelIDParams{}, nil), protocol.CodeInvalidParams)
	wantCode(t, c.call(t, protocol.MethodKernelAttach, protocol.KernelAttachParams{KernelID: "k-nope"}, nil), protocol.CodeNotFound)

	var stats protocol.DaemonStats
	c.mustCall(t, protocol.MethodDaemonStats, struct{}{}, &stats)
	if stats.Kernels != 1 || stats.Executions.Total < 10 || stats.Executions.Timeout != 2 || stats.Executions.Error < 2 {
		t.Fatalf("daemon/stats = %+v", stats)
	}
}

// TestKernelOutputLimitsAndFlood: 200,000 lines arrive whole and in order;
// output over limits.outputBytes is cut with a marker, and the kernel is
// not killed for it.
func TestKernelOutputLimitsAndFlood(t *testing.T) {
	p := startStdio(t)
	c := p.client()
	c.initialize(t)
	kid := startKernel(t, c, protocol.KernelStartParams{Language: "python"}).KernelID
	res, outs := execute(t, c, kid, "for i in range(200000): print(i)")
	wantOK(t, res, outs)
	lines := strings.Split(strings.TrimSuffix(streamText(outs, protocol.StreamStdout), "\n"), "\n")
	if len(lines) != 200000 || lines[0] != "0" || lines[199999] != "199999" || res.OutputTruncated {
		t.Fatalf("flood: %d lines, truncated %v", len(lines), res.OutputTruncated)
	}
	for i, l := range lines {
		if l != strconv.Itoa(i) {
			t.Fatalf("line %d = %q", i, l)
		}
	}

	small := startKernel(t, c, protocol.KernelStartParams{Language: "python", Limits: &protocol.Limits{OutputBytes: 10000}}).KernelID
	res, outs = execute(t, c, small, "import sys\nfor i in range(100000): print('x' * 50)\nprint('end', file=sys.stderr)")
	if !res.OutputTruncated || res.Status != protocol.ExecutionStatusOK {
		t.Fatalf("over the limit: %+v", res)
	}
	text := streamText(outs, protocol.StreamStdout)
	if len(text) > 10000 || !strings.HasPrefix(text, strings.Repeat("x", 50)+"\n") {
		t.Fatalf("kept %d bytes of stdout, want the head within 10000", len(text))
	}
	if !strings.Contains(streamText(outs, protocol.StreamStderr), "output truncated") {
		t.Fatalf("no truncation marker: %+v", ofKind(outs, protocol.OutputKindStream)[len(ofKind(outs, protocol.OutputKindStream))-1])
	}
	res, outs = execute(t, c, small, "print('alive')")
	if res.Status != protocol.ExecutionStatusOK || streamText(outs, protocol.StreamStdout) != "alive\n" {
		t.Fatalf("kernel after a flood: %+v", outs)
	}
}

func sha256hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// TestKernelSharedWorkspaceAndAudit: two kernels of one workspace see each
// other's files; executions are in the audit log with the code's sha256.
func TestKernelSharedWorkspaceAndAudit(t *testing.T) {
	project := t.TempDir()
	p := startStdio(t)
	c := p.client()
	c.initialize(t)
	var ws protocol.WorkspaceInfo
	c.mustCall(t, protocol.MethodWorkspaceOpen, protocol.WorkspaceOpenParams{Root: project}, &ws)
	py := startKernel(t, c, protocol.KernelStartParams{Language: "python", WorkspaceID: ws.WorkspaceID}).KernelID
	sh := startKernel(t, c, protocol.KernelStartParams{Language: "bash", WorkspaceID: ws.WorkspaceID}).KernelID
	res, outs := execute(t, c, py, "open('from-python.txt', 'w').write('ünï\\n')")
	wantOK(t, res, outs)
	res, outs = execute(t, c, sh, "cat from-python.txt; pwd")
	wantOK(t, res, outs)
	if got := streamText(outs, protocol.StreamStdout); got != "ünï\n/workspace\n" {
		t.Fatalf("bash saw %q", got)
	}
	if _, err := os.Stat(filepath.Join(project, "from-python.txt")); !os.IsNotExist(err) {
		t.Fatalf("a kernel's write reached the project: %v", err)
	}
	var list protocol.KernelListResult
	c.mustCall(t, protocol.MethodKernelList, struct{}{}, &list)
	if len(list.Kernels) != 2 || list.Kernels[0].WorkspaceID != ws.WorkspaceID || list.Kernels[0].ExecutionCount != 1 {
		t.Fatalf("kernel/list = %+v", list)
	}
	var hist protocol.KernelHistoryResult
	c.mustCall(t, protocol.MethodKernelHistory, protocol.KernelHistoryParams{KernelID: sh}, &hist)
	if len(hist.Entries) != 1 || hist.Entries[0].Code != "cat from-python.txt; pwd" || hist.Entries[0].ExecutionCount != 1 {
		t.Fatalf("history = %+v", hist)
	}

	f, err := os.Open(filepath.Join(envValue(p.cmd.Env, "CELLBOX_STATE_DIR"), "audit", "executions.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var recs []map[string]any
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r map[string]any
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("audit line %q: %v", sc.Text(), err)
		}
		recs = append(recs, r)
	}
	if len(recs) != 2 || recs[1]["kernel"] != sh || recs[1]["language"] != "bash" || recs[1]["workspace"] != ws.WorkspaceID ||
		recs[1]["status"] != "ok" || recs[1]["codeSha256"] != sha256hex("cat from-python.txt; pwd") {
		t.Fatalf("audit = %+v", recs)
	}
}

// TestKernelAttachReplay: a second connection attaches with fromSeq and
// gets the kept output, then live output; a dropped connection leaves the
// kernel running (websocket, the daemon outlives its clients).
func TestKernelAttachReplay(t *testing.T) {
	l := startListen(t)
	a, wa := l.wsClient(t)
	a.initialize(t)
	kid := startKernel(t, a, protocol.KernelStartParams{Language: "python"}).KernelID
	execute(t, a, kid, "print('one')")
	_, outs := execute(t, a, kid, "print('two')")
	twoSeq := outs[0].Seq
	// Drop the first client while its code runs: the code runs on, and
	// its output waits in the kernel for the next client.
	before := len(statuses(t, a, kid))
	go func() {
		_, _, _ = tryRun(t, a, kid, "import time; time.sleep(1); print('finished')", withID("while-away"))
	}()
	waitStatus(t, a, kid, protocol.KernelStateBusy, before)
	wa.Close()
	b, _ := l.wsClient(t)
	b.initialize(t)
	// The code ends with no client attached: the kernel goes idle.
	waitKernelState(t, b, kid, protocol.KernelStateIdle)
	from := twoSeq
	b.mustCall(t, protocol.MethodKernelAttach, protocol.KernelAttachParams{KernelID: kid, FromSeq: &from}, nil)
	replayed := kernelOutputs(t, b, "")
	if len(replayed) != 2 || replayed[0].Text != "two\n" || replayed[0].Seq != twoSeq ||
		replayed[1].Text != "finished\n" || replayed[1].ExecutionID != "while-away" {
		t.Fatalf("replay from %d = %+v", from, replayed)
	}
	_, outs = execute(t, b, kid, "print('three')")
	if len(outs) != 1 || outs[0].Seq != twoSeq+2 {
		t.Fatalf("live after attach = %+v", outs)
	}
	b.mustCall(t, protocol.MethodKernelDetach, protocol.KernelIDParams{KernelID: kid}, nil)
	var all []protocol.KernelOutputParams
	b.mustCall(t, protocol.MethodKernelAttach, protocol.KernelAttachParams{KernelID: kid}, nil)
	all = kernelOutputs(t, b, "") // the replay came before the response
	if len(all) < 4 {
		t.Fatalf("replay of everything = %+v", all)
	}
}

// TestServeLimitFlags: --max-kernels and --max-terminals bound what runs at
// once, initialize says so, and one more is refused with -32012 naming the
// flag, while the daemon goes on.
func TestServeLimitFlags(t *testing.T) {
	p := startStdio(t, "--max-kernels", "1", "--max-terminals", "1")
	c := p.client()
	init := c.initialize(t)
	if init.Capabilities.Limits.MaxKernels != 1 || init.Capabilities.Limits.MaxPtys != 1 {
		t.Fatalf("initialize limits: %+v", init.Capabilities.Limits)
	}
	k := startKernel(t, c, protocol.KernelStartParams{Language: "bash"})
	msg := wantCode(t, c.call(t, protocol.MethodKernelStart, protocol.KernelStartParams{Language: "bash"}, nil), protocol.CodeLimitExceeded)
	if !strings.Contains(msg, "--max-kernels") {
		t.Errorf("the second kernel's refusal does not name --max-kernels: %q", msg)
	}
	var pty protocol.PtyOpenResult
	if err := c.call(t, protocol.MethodPtyOpen, protocol.PtyOpenParams{Cols: 80, Rows: 24}, &pty); err != nil {
		t.Fatal(err)
	}
	msg = wantCode(t, c.call(t, protocol.MethodPtyOpen, protocol.PtyOpenParams{Cols: 80, Rows: 24}, nil), protocol.CodeLimitExceeded)
	if !strings.Contains(msg, "--max-terminals") {
		t.Errorf("the second terminal's refusal does not name --max-terminals: %q", msg)
	}
	// Freed, the slot takes the next one.
	if err := c.call(t, protocol.MethodKernelShutdown, protocol.KernelIDParams{KernelID: k.KernelID}, nil); err != nil {
		t.Fatal(err)
	}
	startKernel(t, c, protocol.KernelStartParams{Language: "bash"})

	for _, bad := range [][]string{{"--max-kernels", "0"}, {"--max-terminals", "-1"}} {
		cmd := exec.Command(cellboxBin, append([]string{"serve", "--stdio"}, bad...)...)
		cmd.Env = testEnv(t)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "allow at least 1") {
			t.Errorf("serve %v: %v %q", bad, err, out)
		}
	}
}
