//go:build linux

package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cellbox-dev/cellbox/kernel/jupyter"
	"github.com/cellbox-dev/cellbox/protocol"
)

// Installed Jupyter kernels (jupyter:NAME, PROTOCOL.md §8) run in the
// workspace's sandbox and driven through the bridge: Debian's ipykernel
// (kernelspec python3) and IRkernel (ir), which CI installs
// (python3-ipykernel, r-cran-irkernel). Their kernelspecs are the system's;
// where one is missing, the test writes it into a JUPYTER_PATH of its own.

// hostedKernel says how to check one kernel.
type hostedKernel struct {
	name     string // kernelspec
	language string // language_info.name
	argv     []string
	// code, and what it must give
	onePlusOne, onePlusOneText string
	print, printed             string
	fail, ename, evalueHas     string
	plot                       string
	sleep                      string // prints "started\n", then sleeps 60 s
	setX, getX                 string
	writeFile                  string // writes hosted-NAME.txt
	complete                   string
	completeMatch              string
	inspect                    string
	input                      string // asks "who? " and prints "hi NAME\n"
}

var hostedKernels = []hostedKernel{
	{
		name: "python3", language: "python",
		argv:       []string{"/usr/bin/python3", "-m", "ipykernel_launcher", "-f", "{connection_file}"},
		onePlusOne: "1+1", onePlusOneText: "2",
		print: "print('hello')", printed: "hello\n",
		fail: "1/0", ename: "ZeroDivisionError", evalueHas: "division by zero",
		plot:          "%matplotlib inline\nimport matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.show()",
		sleep:         "import time\nprint('started', flush=True)\ntime.sleep(60)",
		setX:          "x = 42",
		getX:          "x",
		writeFile:     "open('hosted-python3.txt', 'w').write('from ipykernel\\n')",
		complete:      "import os\nos.pa",
		completeMatch: "path",
		inspect:       "len",
		input:         "name = input('who? ')\nprint('hi', name)",
	},
	{
		name: "ir", language: "R",
		argv:       []string{"R", "--slave", "-e", "IRkernel::main()", "--args", "{connection_file}"},
		onePlusOne: "1+1", onePlusOneText: "[1] 2",
		print: "cat('hello\\n')", printed: "hello\n",
		fail: "stop('boom')", evalueHas: "boom",
		plot:          "plot(1:10)",
		sleep:         "cat('started\\n'); Sys.sleep(60)",
		setX:          "x <- 42",
		getX:          "x",
		writeFile:     "writeLines('from IRkernel', 'hosted-ir.txt')",
		complete:      "prin",
		completeMatch: "print",
		inspect:       "print",
		input:         "name <- readline('who? '); cat(paste('hi', name), '\\n', sep = '')",
	},
}

// hostedJupyterEnv is testEnv with a JUPYTER_PATH holding the kernelspecs of
// hostedKernels that the host lacks, a kernelspec of cellbox's own (which
// must not be listed) and one whose program is missing.
func hostedJupyterEnv(t *testing.T) []string {
	t.Helper()
	env := testEnv(t)
	dir := t.TempDir()
	kernels := filepath.Join(dir, "kernels")
	have := map[string]bool{}
	specs, _ := jupyter.FindKernelSpecs()
	for _, s := range specs {
		have[s.Name] = true
	}
	write := func(spec jupyter.KernelSpec) {
		if _, err := jupyter.WriteKernelSpec(kernels, spec, nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range hostedKernels {
		if !have[k.name] {
			write(jupyter.KernelSpec{Name: k.name, Argv: k.argv, DisplayName: k.name, Language: k.language})
		}
	}
	write(jupyter.KernelSpec{Name: "cellbox-python", Argv: []string{cellboxBin, "jupyter-kernel", "--language", "python", "-f", "{connection_file}"}, DisplayName: "cellbox", Language: "python"})
	write(jupyter.KernelSpec{Name: "nowhere", Argv: []string{"no-such-kernel-program", "{connection_file}"}, DisplayName: "Nowhere", Language: "nothing"})
	return append(env, "JUPYTER_PATH="+dir, "JUPYTER_DATA_DIR="+t.TempDir())
}

// TestJupyterHostedKernels: initialize lists the installed kernels; each
// runs in the workspace's sandbox with results, streams, one error output
// for a failing cell, a plot as image/png, an interrupt, a restart that
// resets its state, complete and inspect, input, a file that lands in the
// workspace's overlay, and no process left after shutdown.
func TestJupyterHostedKernels(t *testing.T) {
	env := hostedJupyterEnv(t)
	p := startStdioEnv(t, env)
	c := p.client()
	init := c.initialize(t)
	langs := map[string]protocol.LanguageCapability{}
	for _, l := range init.Capabilities.Languages {
		langs[l.ID] = l
	}
	if _, ok := langs["jupyter:cellbox-python"]; ok {
		t.Fatalf("cellbox's own kernelspec is listed: %+v", init.Capabilities.Languages)
	}
	if l := langs["jupyter:nowhere"]; l.Available || !strings.Contains(l.Reason, "no-such-kernel-program not found on the sandbox's PATH") {
		t.Fatalf("a kernelspec whose program is missing: %+v", l)
	}
	for _, k := range hostedKernels {
		l := langs["jupyter:"+k.name]
		if !l.Available || !slices.Equal(l.Unsupported, []string{"kernel/variables"}) || l.DisplayName == "" {
			t.Fatalf("jupyter:%s = %+v; languages %+v", k.name, l, init.Capabilities.Languages)
		}
	}
	for _, k := range hostedKernels {
		t.Run(k.name, func(t *testing.T) { hostedKernelScenario(t, p, c, k) })
	}
}

func hostedKernelScenario(t *testing.T, p *stdioProc, c *client, k hostedKernel) {
	project := t.TempDir()
	ws := openWorkspace(t, c, project, "jupyter-"+k.name)
	mark := fmt.Sprintf("CELLBOX_JUPYTER_MARK=%s-%d", k.name, time.Now().UnixNano())
	start := startKernel(t, c, protocol.KernelStartParams{
		Language: "jupyter:" + k.name, WorkspaceID: ws,
		Env: map[string]string{"CELLBOX_JUPYTER_MARK": strings.TrimPrefix(mark, "CELLBOX_JUPYTER_MARK=")},
	})
	kid := start.KernelID
	if start.LanguageInfo.Name != k.language || start.LanguageInfo.Version == "" || !start.Sandbox.UserNamespaces {
		t.Fatalf("kernel/start = %+v", start)
	}

	// 1+1: python's is a result; IRkernel sends values as display_data.
	res, outs := execute(t, c, kid, k.onePlusOne)
	wantOK(t, res, outs)
	var values []string
	for _, o := range outs {
		if o.Kind == protocol.OutputKindResult || o.Kind == protocol.OutputKindDisplay {
			values = append(values, fmt.Sprint(o.Data["text/plain"]))
		}
	}
	if !slices.Equal(values, []string{k.onePlusOneText}) {
		t.Fatalf("%s gave %q: %+v", k.onePlusOne, values, outs)
	}
	res, outs = execute(t, c, kid, k.print)
	if wantOK(t, res, outs); streamText(outs, protocol.StreamStdout) != k.printed {
		t.Fatalf("%s printed %q", k.print, streamText(outs, protocol.StreamStdout))
	}

	// A failing cell: status error, exactly one error output.
	res, outs = execute(t, c, kid, k.fail)
	errs := ofKind(outs, protocol.OutputKindError)
	if res.Status != protocol.ExecutionStatusError || res.Error == nil || len(errs) != 1 || errs[0].Error == nil {
		t.Fatalf("%s: %+v, outputs %+v", k.fail, res, outs)
	}
	if k.ename != "" && res.Error.Ename != k.ename || !strings.Contains(res.Error.Evalue, k.evalueHas) {
		t.Fatalf("%s: error %+v", k.fail, res.Error)
	}
	for _, line := range res.Error.Traceback {
		if strings.ContainsAny(line, "\x1b\n") {
			t.Fatalf("traceback line %q", line)
		}
	}

	// A plot as image/png.
	res, outs = execute(t, c, kid, k.plot)
	wantOK(t, res, outs)
	var png []byte
	for _, o := range ofKind(outs, protocol.OutputKindDisplay) {
		if s, ok := o.Data["image/png"].(string); ok {
			png, _ = base64.StdEncoding.DecodeString(s)
		}
	}
	if len(png) < 1000 || string(png[1:4]) != "PNG" {
		t.Fatalf("%s: no image/png: %+v", k.plot, outs)
	}

	// Interrupt.
	execID := "sleep-" + k.name
	done := make(chan protocol.ExecuteResult, 1)
	began := time.Now()
	go func() {
		r, _, err := tryRun(t, c, kid, k.sleep, withID(execID))
		if err != nil {
			t.Errorf("execute %q: %v", k.sleep, err)
		}
		done <- r
	}()
	waitOutput(t, c, execID, "started\n")
	c.mustCall(t, protocol.MethodKernelInterrupt, protocol.KernelIDParams{KernelID: kid}, nil)
	select {
	case r := <-done:
		if r.Status != protocol.ExecutionStatusInterrupted || len(ofKind(kernelOutputs(t, c, execID), protocol.OutputKindError)) != 1 {
			t.Fatalf("interrupted: %+v, outputs %+v", r, kernelOutputs(t, c, execID))
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the interrupt did not stop %q", k.sleep)
	}
	if took := time.Since(began); took > 40*time.Second {
		t.Fatalf("the interrupted sleep took %v", took)
	}

	// Restart resets the state.
	res, outs = execute(t, c, kid, k.setX)
	wantOK(t, res, outs)
	c.mustCall(t, protocol.MethodKernelRestart, protocol.KernelIDParams{KernelID: kid}, nil)
	if res, _ = execute(t, c, kid, k.getX); res.Status != protocol.ExecutionStatusError {
		t.Fatalf("x after the restart: %+v", res)
	}

	// Complete, inspect, isComplete; variables is unsupported.
	var comp protocol.KernelCompleteResult
	c.mustCall(t, protocol.MethodKernelComplete, protocol.KernelCompleteParams{KernelID: kid, Code: k.complete, CursorPos: len([]rune(k.complete))}, &comp)
	if !slices.ContainsFunc(comp.Matches, func(m string) bool { return strings.HasSuffix(m, k.completeMatch) }) || comp.CursorEnd != len([]rune(k.complete)) {
		t.Fatalf("complete %q = %+v", k.complete, comp)
	}
	var insp protocol.KernelInspectResult
	c.mustCall(t, protocol.MethodKernelInspect, protocol.KernelInspectParams{KernelID: kid, Code: k.inspect, CursorPos: len(k.inspect)}, &insp)
	if text, _ := insp.Data["text/plain"].(string); !insp.Found || !strings.Contains(text, k.inspect) || strings.Contains(text, "\x1b") {
		t.Fatalf("inspect %q = %+v", k.inspect, insp)
	}
	var ic protocol.KernelIsCompleteResult
	c.mustCall(t, protocol.MethodKernelIsComplete, protocol.KernelIsCompleteParams{KernelID: kid, Code: k.onePlusOne}, &ic)
	if ic.Status == "" {
		t.Fatalf("isComplete = %+v", ic)
	}
	wantCode(t, c.call(t, protocol.MethodKernelVariables, protocol.KernelIDParams{KernelID: kid}, nil), protocol.CodeInvalidParams)

	// Reading stdin asks the client.
	c.mu.Lock()
	c.answer = func(method string, params json.RawMessage) (any, error) {
		var q protocol.KernelInputRequestParams
		_ = json.Unmarshal(params, &q)
		if method != protocol.MethodKernelInputRequest || q.Prompt != "who? " {
			return nil, fmt.Errorf("unexpected %s %s", method, params)
		}
		return protocol.KernelInputReply{Value: "ada"}, nil
	}
	c.mu.Unlock()
	res, outs = execute(t, c, kid, k.input, withStdin("", true))
	if wantOK(t, res, outs); streamText(outs, protocol.StreamStdout) != "hi ada\n" {
		t.Fatalf("input: %+v", outs)
	}

	// A file the code writes is in the workspace's overlay, not the project.
	res, outs = execute(t, c, kid, k.writeFile)
	wantOK(t, res, outs)
	var changes protocol.WorkspaceChangesResult
	c.mustCall(t, protocol.MethodWorkspaceChanges, protocol.WorkspaceChangesParams{WorkspaceID: ws}, &changes)
	name := "hosted-" + k.name + ".txt"
	if !slices.ContainsFunc(changes.Changes, func(ch protocol.Change) bool { return ch.Path == name && ch.Kind == "added" }) {
		t.Fatalf("workspace/changes = %+v", changes)
	}
	if _, err := os.Stat(filepath.Join(project, name)); !os.IsNotExist(err) {
		t.Fatalf("the kernel's write reached the project: %v", err)
	}

	// Shutdown: the kernel and its bridge are gone.
	procs := hostedProcsWithEnv(p.cmd.Process.Pid, mark)
	if len(procs) < 2 {
		t.Fatalf("want the bridge and the kernel with %s, found %d processes", mark, len(procs))
	}
	c.mustCall(t, protocol.MethodKernelShutdown, protocol.KernelIDParams{KernelID: kid}, nil)
	waitGone(t, procs, 10*time.Second, "the kernel's processes after kernel/shutdown")
}

// hostedProcsWithEnv are the descendants of root whose environment holds kv.
func hostedProcsWithEnv(root int, kv string) []hostProc {
	var out []hostProc
	for _, p := range descendants(root) {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", p.pid))
		if slices.Contains(strings.Split(string(b), "\x00"), kv) {
			out = append(out, p)
		}
	}
	return out
}

// needHostedKernel skips (fails under CI) when the host has no kernelspec
// name, for the tests that use the host's kernelspecs as they are.
func needHostedKernel(t *testing.T, name string) {
	t.Helper()
	specs, _ := jupyter.FindKernelSpecs()
	for _, s := range specs {
		if s.Name == name {
			return
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("CI must install the kernelspec %s (python3-ipykernel, r-cran-irkernel)", name)
	}
	t.Skipf("no kernelspec %s on this host (apt-get install python3-ipykernel r-cran-irkernel)", name)
}

// TestJupyterHostedForgedMessages: code in a hosted kernel connects to the
// kernel's own ipc sockets and sends execute_requests unsigned and signed
// with a wrong key: neither runs. (With the key, which the kernel's code
// can read, one runs: the kernel's user could run that code anyway. It
// marks when the kernel has dealt with the forged ones before it.) The
// bridge goes on as if nothing happened.
func TestJupyterHostedForgedMessages(t *testing.T) {
	p := startStdioEnv(t, hostedJupyterEnv(t))
	c := p.client()
	c.initialize(t)
	ws := openWorkspace(t, c, t.TempDir(), "forged")
	kid := startKernel(t, c, protocol.KernelStartParams{Language: "jupyter:python3", WorkspaceID: ws}).KernelID
	res, outs := execute(t, c, kid, `import datetime, hashlib, hmac, json, uuid, zmq
from ipykernel import get_connection_file
info = json.load(open(get_connection_file()))
s = zmq.Context.instance().socket(zmq.DEALER)
s.connect('ipc://%s-%d' % (info['ip'], info['shell_port']))
def request(code, key):
    header = {'msg_id': uuid.uuid4().hex, 'session': 'intruder', 'username': 'x', 'msg_type': 'execute_request',
              'version': '5.3', 'date': datetime.datetime.now(datetime.timezone.utc).isoformat()}
    parts = [json.dumps(header).encode(), b'{}', b'{}',
             json.dumps({'code': code, 'silent': False, 'store_history': False, 'user_expressions': {}, 'allow_stdin': False}).encode()]
    sig = hmac.new(key, b''.join(parts), hashlib.sha256).hexdigest().encode() if key else b''
    return [b'<IDS|MSG>', sig] + parts
s.send_multipart(request("open('/workspace/forged-unsigned.txt', 'w').write('x')", None))
s.send_multipart(request("open('/workspace/forged-badkey.txt', 'w').write('x')", b'not the key'))
s.send_multipart(request("open('/workspace/control.txt', 'w').write('x')", info['key'].encode()))
print('sent')`)
	if wantOK(t, res, outs); streamText(outs, protocol.StreamStdout) != "sent\n" {
		t.Fatalf("the forging cell printed %q", streamText(outs, protocol.StreamStdout))
	}
	// The kernel takes shell messages in order: once control.txt is there,
	// the forged requests before it were dealt with.
	waitFor(t, 30*time.Second, "the signed request to run", func() bool {
		_, outs := execute(t, c, kid, "import os\nos.path.exists('/workspace/control.txt')")
		return resultText(t, outs) == "True"
	})
	var changes protocol.WorkspaceChangesResult
	c.mustCall(t, protocol.MethodWorkspaceChanges, protocol.WorkspaceChangesParams{WorkspaceID: ws}, &changes)
	for _, ch := range changes.Changes {
		if strings.HasPrefix(ch.Path, "forged") {
			t.Fatalf("a forged request ran: %+v", changes.Changes)
		}
	}
	if res, outs = execute(t, c, kid, "6*7"); resultText(t, outs) != "42" || len(outs) != 1 {
		t.Fatalf("after the forgeries: %+v %+v", res, outs)
	}
}

// TestJupyterHostedKernelDies: a kernel that exits makes the kernel dead
// with the reason; the daemon goes on, and kernel/restart brings it back.
func TestJupyterHostedKernelDies(t *testing.T) {
	p := startStdioEnv(t, hostedJupyterEnv(t))
	c := p.client()
	c.initialize(t)
	kid := startKernel(t, c, protocol.KernelStartParams{Language: "jupyter:python3"}).KernelID
	_, _, err := tryRun(t, c, kid, "import os\nos._exit(3)")
	if msg := wantCode(t, err, protocol.CodeKernelDead); !strings.Contains(msg, "exited with code 3") {
		t.Fatalf("execute error %q", msg)
	}
	if st := waitStatus(t, c, kid, protocol.KernelStateDead, 0); !strings.Contains(st.Reason, "exited with code 3") {
		t.Fatalf("dead status = %+v", st)
	}
	var stats protocol.DaemonStats
	c.mustCall(t, protocol.MethodDaemonStats, struct{}{}, &stats)
	c.mustCall(t, protocol.MethodKernelRestart, protocol.KernelIDParams{KernelID: kid}, nil)
	if res, outs := execute(t, c, kid, "1+1"); resultText(t, outs) != "2" {
		t.Fatalf("after the restart: %+v %+v", res, outs)
	}
	c.mustCall(t, protocol.MethodKernelShutdown, protocol.KernelIDParams{KernelID: kid}, nil)
}

// TestJupyterHostedAsUser: the host's kernelspecs run as they do for root
// when the daemon is an ordinary user (CELLBOX_TEST_USER).
func TestJupyterHostedAsUser(t *testing.T) {
	needHostedKernel(t, "python3")
	needHostedKernel(t, "ir")
	d := newFilesDaemon(t, true, map[string]string{"data.txt": "project\n"})
	ws := openWorkspace(t, d.c, d.project, "jupyter-user")
	for _, k := range hostedKernels {
		kid := startKernel(t, d.c, protocol.KernelStartParams{Language: "jupyter:" + k.name, WorkspaceID: ws}).KernelID
		res, outs := execute(t, d.c, kid, k.writeFile)
		wantOK(t, res, outs)
		execID := "user-sleep-" + k.name
		done := make(chan protocol.ExecuteResult, 1)
		go func() {
			r, _, _ := tryRun(t, d.c, kid, k.sleep, withID(execID))
			done <- r
		}()
		waitOutput(t, d.c, execID, "started\n")
		d.c.mustCall(t, protocol.MethodKernelInterrupt, protocol.KernelIDParams{KernelID: kid}, nil)
		select {
		case r := <-done:
			if r.Status != protocol.ExecutionStatusInterrupted {
				t.Fatalf("%s interrupted: %+v", k.name, r)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("the interrupt did not stop %q", k.sleep)
		}
		d.c.mustCall(t, protocol.MethodKernelShutdown, protocol.KernelIDParams{KernelID: kid}, nil)
	}
	if got := d.changes(t, ws); !strings.Contains(got, "added hosted-python3.txt") || !strings.Contains(got, "added hosted-ir.txt") {
		t.Fatalf("changes = %s", got)
	}
}
