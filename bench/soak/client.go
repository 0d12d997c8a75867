//go:build linux

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"go.lsp.dev/jsonrpc2"

	"github.com/cellbox-dev/cellbox/bench/internal/benchutil"
	"github.com/cellbox-dev/cellbox/protocol"
)

// Timeouts of the checks. They are deadlines for conditions that hold
// within milliseconds on an idle machine, long enough for a loaded one.
const (
	callTimeout  = 2 * time.Minute  // a request without an answer by then is unanswered
	eventTimeout = 30 * time.Second // an fs/didChange or a terminal's output that has not come by then is lost
)

var languages = []string{"python", "javascript", "bash"}

// client is one editor: a websocket connection with its own workspace on
// its own project dir, a kernel per language, a terminal and a watch.
type client struct {
	n       int
	s       *soak
	conn    jsonrpc2.Conn
	project string
	wsID    string
	kernels map[string]string // language -> kernelId
	ptyID   string
	watchID string

	// mu guards what the notifications said; changed is closed and
	// replaced whenever it changes, for those who wait on it.
	mu        sync.Mutex
	changed   chan struct{}
	execs     map[string]*execOut // by executionId
	lastSeq   map[string]int64    // kernelId -> the last kernel/output seq
	seen      map[string]bool     // paths fs/didChange named
	overflows int
	ptyText   strings.Builder // since the last ptyRound began
	ptySeq    int64
	ptyExit   bool
}

// execOut is what kernel/output said of one execution.
type execOut struct {
	stdout strings.Builder
	n      int // kernel/output notifications
}

func newClient(s *soak, n int, project string) (*client, error) {
	ws, err := s.d.DialWebsocket()
	if err != nil {
		return nil, err
	}
	c := &client{n: n, s: s, project: project, kernels: map[string]string{}, changed: make(chan struct{}),
		execs: map[string]*execOut{}, lastSeq: map[string]int64{}, seen: map[string]bool{}}
	c.conn = jsonrpc2.NewConn(benchutil.NewWSStream(ws, &s.wsTx, &s.wsRx))
	// The handler runs on the read loop, so every notification sent before
	// a response has been taken in when its Call returns.
	c.conn.Go(context.Background(), func(_ context.Context, req *jsonrpc2.Request) (any, error) {
		if req.IsCall() {
			return nil, jsonrpc2.ErrMethodNotFound
		}
		c.note(req.Method(), json.RawMessage(req.Params()))
		return nil, nil
	})
	return c, nil
}

// failf records a failed check.
func (c *client) failf(format string, args ...any) {
	c.s.fail(fmt.Sprintf("client %d: ", c.n) + fmt.Sprintf(format, args...))
}

func (c *client) note(method string, params json.RawMessage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch method {
	case protocol.MethodKernelOutput:
		var p protocol.KernelOutputParams
		if err := json.Unmarshal(params, &p); err != nil {
			c.failf("kernel/output: %v", err)
			return
		}
		c.s.outputs.Add(1)
		if last := c.lastSeq[p.KernelID]; p.Seq != last+1 {
			c.s.misordered.Add(1)
			c.failf("kernel %s: output seq %d after %d", p.KernelID, p.Seq, last)
		}
		c.lastSeq[p.KernelID] = p.Seq
		e := c.execs[p.ExecutionID]
		switch {
		case e == nil:
			c.failf("kernel/output of an unknown execution %q", p.ExecutionID)
		case p.Kind != protocol.OutputKindStream || p.Name != protocol.StreamStdout:
			c.failf("execution %s: unexpected output %s %s %q %v", p.ExecutionID, p.Kind, p.Name, p.Text, p.Data)
		default:
			e.n++
			e.stdout.WriteString(p.Text)
		}
	case protocol.MethodFsDidChange:
		var p protocol.FsDidChangeParams
		if err := json.Unmarshal(params, &p); err != nil {
			c.failf("fs/didChange: %v", err)
			return
		}
		c.s.watchEvents.Add(1)
		if p.Overflow {
			c.overflows++
			c.s.overflows.Add(1)
		}
		for _, ch := range p.Changes {
			c.seen[ch.Path] = true
		}
	case protocol.MethodPtyOutput:
		var p protocol.PtyOutputParams
		if err := json.Unmarshal(params, &p); err != nil {
			c.failf("pty/output: %v", err)
			return
		}
		if p.Seq != c.ptySeq+1 {
			c.s.ptyGaps.Add(1)
			c.failf("pty/output seq %d after %d", p.Seq, c.ptySeq)
		}
		c.ptySeq = p.Seq
		c.s.ptyBytes.Add(int64(len(p.Data)))
		c.ptyText.WriteString(p.Data)
	case protocol.MethodPtyExit:
		c.ptyExit = true
	default:
		return // kernel/status
	}
	close(c.changed)
	c.changed = make(chan struct{})
}

// waitFor waits until cond (called with c.mu held) holds, or timeout.
func (c *client) waitFor(timeout time.Duration, cond func() bool) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		c.mu.Lock()
		ok, ch := cond(), c.changed
		c.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-ch:
		case <-deadline.C:
			c.mu.Lock()
			defer c.mu.Unlock()
			return cond()
		}
	}
}

// call sends one request and counts it and its answer. A JSON-RPC error
// is an answer (and a failure: every request of the soak is valid); no
// answer within callTimeout, or a connection that ends first, is an
// unanswered request.
func (c *client) call(method string, params, result any) error {
	c.s.count(method, func(m *methodCount) { m.sent++ })
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	_, err := c.conn.Call(ctx, method, params, result)
	var je *jsonrpc2.Error
	switch {
	case err == nil:
		c.s.count(method, func(m *methodCount) { m.answered++ })
		return nil
	case errors.As(err, &je):
		c.s.count(method, func(m *methodCount) { m.answered++; m.errors++ })
		c.failf("%s: error answer: %v", method, err)
	default:
		c.s.count(method, func(m *methodCount) { m.unanswered++ })
		c.failf("%s: no answer: %v", method, err)
	}
	return fmt.Errorf("%s: %w", method, err)
}

// setUp initializes, opens the workspace, watches it, and starts the
// kernels and the terminal, all at once as an editor restoring a session
// does.
func (c *client) setUp() error {
	var init protocol.InitializeResult
	if err := c.call(protocol.MethodInitialize, protocol.InitializeParams{
		ProtocolVersion: 1, ClientInfo: &protocol.ClientInfo{Name: "cellbox-soak", Version: "1"},
	}, &init); err != nil {
		return err
	}
	if err := c.conn.Notify(context.Background(), protocol.MethodInitialized, struct{}{}); err != nil {
		return err
	}
	var ws protocol.WorkspaceInfo
	if err := c.call(protocol.MethodWorkspaceOpen, protocol.WorkspaceOpenParams{Root: c.project}, &ws); err != nil {
		return err
	}
	c.wsID = ws.WorkspaceID
	var w protocol.FsWatchResult
	if err := c.call(protocol.MethodFsWatch, protocol.FsWatchParams{WorkspaceID: c.wsID}, &w); err != nil {
		return err
	}
	c.watchID = w.WatchID
	var mu sync.Mutex
	errs := make([]error, 0, 4)
	var wg sync.WaitGroup
	for _, lang := range languages {
		wg.Go(func() {
			var res protocol.KernelStartResult
			err := c.call(protocol.MethodKernelStart, protocol.KernelStartParams{Language: lang, WorkspaceID: c.wsID}, &res)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			c.kernels[lang] = res.KernelID
		})
	}
	wg.Go(func() {
		var res protocol.PtyOpenResult
		err := c.call(protocol.MethodPtyOpen, protocol.PtyOpenParams{
			WorkspaceID: c.wsID, Command: []string{"bash", "--noprofile", "--norc"},
			Env: map[string]string{"PS1": "$ "}, Cols: 120, Rows: 40,
		}, &res)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			errs = append(errs, err)
			return
		}
		c.ptyID = res.PtyID
	})
	wg.Wait()
	return errors.Join(errs...)
}

// round is one iteration: the three kernels print numbered lines and
// write a file each while fs/write writes a fourth and the terminal runs
// a command; then every file's fs/didChange must arrive; then
// workspace/changes lists the four, two are committed (and must be in the
// project with their content) and two discarded (and must not be), and
// workspace/changes lists none of them.
func (c *client) round(i int) {
	tag := fmt.Sprintf("c%02d-i%06d", c.n, i)
	lines := 1 + (i*7+c.n)%40
	if i%16 == 15 {
		lines = 2000 // now and then a burst
	}
	paths := map[string]string{ // path -> content
		"fsw/" + tag + ".txt": tag + " fs/write\n",
	}
	var wg sync.WaitGroup
	for _, lang := range languages {
		p := fmt.Sprintf("k/%s-%s.txt", tag, lang)
		content := tag + " " + lang + "\n"
		paths[p] = content
		wg.Go(func() { c.execute(lang, tag, lines, p, content) })
	}
	wg.Go(func() {
		p := "fsw/" + tag + ".txt"
		var w protocol.FsWriteResult
		if c.call(protocol.MethodFsWrite, protocol.FsWriteParams{WorkspaceID: c.wsID, Path: p, Content: paths[p]}, &w) != nil {
			return
		}
		c.s.fsWrites.Add(1)
		var r protocol.FsReadResult
		if c.call(protocol.MethodFsRead, protocol.FsReadParams{WorkspaceID: c.wsID, Path: p}, &r) == nil && r.Content != paths[p] {
			c.failf("fs/read %s = %q, want %q", p, r.Content, paths[p])
		}
	})
	wg.Go(func() { c.ptyRound(tag) })
	wg.Wait()

	if !c.waitFor(eventTimeout, func() bool {
		for p := range paths {
			if !c.seen[p] {
				return false
			}
		}
		return true
	}) {
		c.mu.Lock()
		var missing []string
		for p := range paths {
			if !c.seen[p] {
				missing = append(missing, p)
			}
		}
		overflowed := c.overflows > 0
		c.mu.Unlock()
		if !overflowed {
			c.s.lostEvents.Add(int64(len(missing)))
			c.failf("no fs/didChange within %v for %v", eventTimeout, missing)
		}
	}
	c.mu.Lock()
	for p := range paths {
		delete(c.seen, p)
	}
	c.mu.Unlock()

	var ch protocol.WorkspaceChangesResult
	if c.call(protocol.MethodWorkspaceChanges, protocol.WorkspaceChangesParams{WorkspaceID: c.wsID}, &ch) == nil {
		listed := map[string]protocol.ChangeKind{}
		for _, x := range ch.Changes {
			listed[x.Path] = x.Kind
		}
		for p := range paths {
			if listed[p] != protocol.ChangeKindAdded {
				c.failf("workspace/changes: %s is %q, want added", p, listed[p])
			}
		}
	}
	commit := []string{"fsw/" + tag + ".txt", fmt.Sprintf("k/%s-python.txt", tag)}
	discard := []string{fmt.Sprintf("k/%s-javascript.txt", tag), fmt.Sprintf("k/%s-bash.txt", tag)}
	var cr protocol.WorkspaceCommitResult
	if c.call(protocol.MethodWorkspaceCommit, protocol.WorkspaceCommitParams{WorkspaceID: c.wsID, Paths: commit}, &cr) == nil {
		c.s.committed.Add(int64(len(cr.Applied)))
		if len(cr.Conflicts) > 0 || !sameSet(cr.Applied, commit) {
			c.failf("workspace/commit %v: applied %v, conflicts %v", commit, cr.Applied, cr.Conflicts)
		}
		for _, p := range commit {
			if b, err := os.ReadFile(filepath.Join(c.project, p)); err != nil || string(b) != paths[p] {
				c.failf("committed %s: the project holds %q (%v), want %q", p, b, err, paths[p])
			}
		}
	}
	var dr protocol.WorkspaceDiscardResult
	if c.call(protocol.MethodWorkspaceDiscard, protocol.WorkspaceDiscardParams{WorkspaceID: c.wsID, Paths: discard}, &dr) == nil {
		c.s.discarded.Add(int64(len(dr.Discarded)))
		if !sameSet(dr.Discarded, discard) {
			c.failf("workspace/discard %v: discarded %v", discard, dr.Discarded)
		}
		for _, p := range discard {
			if _, err := os.Stat(filepath.Join(c.project, p)); !errors.Is(err, os.ErrNotExist) {
				c.failf("discarded %s is in the project (%v)", p, err)
			}
		}
	}
	if c.call(protocol.MethodWorkspaceChanges, protocol.WorkspaceChangesParams{WorkspaceID: c.wsID}, &ch) == nil {
		for _, x := range ch.Changes {
			if _, ok := paths[x.Path]; ok {
				c.failf("workspace/changes after commit and discard still lists %s (%s)", x.Path, x.Kind)
			}
		}
	}
	c.s.rounds.Add(1)
}

// execute runs code that prints lines numbered lines and writes content
// to path, and checks that its stdout arrived whole, in order, before
// the response.
func (c *client) execute(lang, tag string, lines int, path, content string) {
	kid := c.kernels[lang]
	xid := fmt.Sprintf("%s-%s", tag, lang)
	var code string
	switch lang {
	case "python":
		code = fmt.Sprintf("for k in range(1, %d):\n    print('%s %s line %%d' %% k)\nwith open(%q, 'w') as f:\n    f.write(%q)\n",
			lines+1, tag, lang, path, content)
	case "javascript":
		code = fmt.Sprintf("for (let k = 1; k <= %d; k++) console.log('%s %s line ' + k);\nrequire('fs').writeFileSync(%q, %q);\n",
			lines, tag, lang, path, content)
	case "bash":
		code = fmt.Sprintf("for ((k = 1; k <= %d; k++)); do echo \"%s %s line $k\"; done\nprintf '%%s\\n' '%s' > %s\n",
			lines, tag, lang, strings.TrimSuffix(content, "\n"), path)
	}
	var want strings.Builder
	for k := 1; k <= lines; k++ {
		fmt.Fprintf(&want, "%s %s line %d\n", tag, lang, k)
	}
	e := &execOut{}
	c.mu.Lock()
	c.execs[xid] = e
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.execs, xid)
		c.mu.Unlock()
	}()
	var res protocol.ExecuteResult
	if c.call(protocol.MethodKernelExecute, protocol.KernelExecuteParams{KernelID: kid, Code: code, ExecutionID: xid}, &res) != nil {
		return
	}
	c.s.executions.Add(1)
	c.s.lines.Add(int64(lines))
	c.mu.Lock()
	got, n := e.stdout.String(), e.n
	c.mu.Unlock()
	c.s.stdoutBytes.Add(int64(len(got)))
	if res.Status != protocol.ExecutionStatusOK {
		c.failf("execution %s: status %s %+v", xid, res.Status, res.Error)
	}
	if got != want.String() {
		c.s.lostOutput.Add(1)
		c.failf("execution %s: %d outputs, stdout %d bytes differs from the %d bytes printed%s", xid, n, len(got), want.Len(), firstDiff(got, want.String()))
	}
}

// ptyRound types a command into the terminal and waits for its output: an
// arithmetic expansion, so the echo of the typed line does not match.
func (c *client) ptyRound(tag string) {
	marker := tag + "-pty-42"
	c.mu.Lock()
	c.ptyText.Reset()
	c.mu.Unlock()
	if c.call(protocol.MethodPtyWrite, protocol.PtyWriteParams{PtyID: c.ptyID, Data: "echo " + tag + "-pty-$((6*7))\r"}, nil) != nil {
		return
	}
	if !c.waitFor(eventTimeout, func() bool { return strings.Contains(c.ptyText.String(), marker) }) {
		c.s.lostPty.Add(1)
		c.mu.Lock()
		text := c.ptyText.String()
		c.mu.Unlock()
		c.failf("terminal: no %q within %v; it printed %q", marker, eventTimeout, text)
		return
	}
	c.s.ptyRounds.Add(1)
	c.mu.Lock()
	seq := c.ptySeq
	c.mu.Unlock()
	_ = c.call(protocol.MethodPtyAck, protocol.PtyAckParams{PtyID: c.ptyID, Seq: seq}, nil)
}

// tearDown shuts the kernels, closes the terminal (waiting for its
// pty/exit), unwatches, closes the workspace with its changes discarded,
// and ends the connection as an editor does: shutdown, exit.
func (c *client) tearDown() {
	var wg sync.WaitGroup
	for _, kid := range c.kernels {
		wg.Go(func() { _ = c.call(protocol.MethodKernelShutdown, protocol.KernelIDParams{KernelID: kid}, nil) })
	}
	if c.ptyID != "" {
		wg.Go(func() {
			if c.call(protocol.MethodPtyClose, protocol.PtyIDParams{PtyID: c.ptyID}, nil) == nil &&
				!c.waitFor(eventTimeout, func() bool { return c.ptyExit }) {
				c.failf("terminal: no pty/exit within %v of pty/close", eventTimeout)
			}
		})
	}
	wg.Wait()
	if c.watchID != "" {
		_ = c.call(protocol.MethodFsUnwatch, protocol.FsUnwatchParams{WatchID: c.watchID}, nil)
	}
	if c.wsID != "" {
		_ = c.call(protocol.MethodWorkspaceClose, protocol.WorkspaceCloseParams{WorkspaceID: c.wsID, Discard: true}, nil)
	}
	_ = c.call(protocol.MethodShutdown, nil, nil)
	_ = c.conn.Notify(context.Background(), protocol.MethodExit, nil)
	select {
	case <-c.conn.Done():
	case <-time.After(eventTimeout):
		c.failf("the connection did not end within %v of exit", eventTimeout)
	}
	c.conn.Close()
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	m := map[string]int{}
	for _, x := range a {
		m[x]++
	}
	for _, x := range b {
		if m[x] == 0 {
			return false
		}
		m[x]--
	}
	return true
}

// firstDiff says where got first differs from want.
func firstDiff(got, want string) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	from := max(0, i-40)
	return fmt.Sprintf(": at byte %d got %q, want %q", i, got[from:min(len(got), i+40)], want[from:min(len(want), i+40)])
}
