package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"go.lsp.dev/jsonrpc2"

	"github.com/cellbox-dev/cellbox/protocol"
)

// ptyClient is a terminal client of a cellbox process, as an editor's
// terminal panel or xterm.js is: it handles notifications in order on the
// read goroutine, routes them by ptyId (output may come before pty/open's
// answer), checks that seqs have no gap and that every pty/output frame is
// valid UTF-8 JSON, and acknowledges output as it goes unless told not to.
type ptyClient struct {
	conn jsonrpc2.Conn

	mu      sync.Mutex
	terms   map[string]*term
	noAck   map[string]bool  // terminals this client does not acknowledge
	pending map[string]int64 // latest seq to acknowledge, by terminal
	kick    chan struct{}
	done    chan struct{}
	err     error // a bad frame
	keep    bool  // keep each chunk's data (else only count and hash it)
	noHash  bool  // do not hash the data either (benchmarks)
	init    protocol.InitializeResult
	// outputs, when set, gets each pty/output's data (if there is room).
	outputs chan string
}

// term is what a client got of one terminal.
type term struct {
	chunks   []string
	bytes    int64 // of data
	hash     hash.Hash
	first    int64 // seq of the first chunk
	next     int64 // seq expected next
	seqErr   error
	exit     *protocol.PtyExitParams
	received time.Time // of the last chunk
}

func newPtyClient(t testing.TB, stream jsonrpc2.Stream) *ptyClient {
	c := &ptyClient{
		conn: jsonrpc2.NewConn(stream), terms: map[string]*term{}, noAck: map[string]bool{},
		pending: map[string]int64{}, kick: make(chan struct{}, 1), done: make(chan struct{}), keep: true,
	}
	c.conn.Go(context.Background(), c.handle) // not Async: in order
	go c.ackLoop()
	t.Cleanup(func() {
		close(c.done)
		_ = c.conn.Close()
	})
	return c
}

func (c *ptyClient) handle(_ context.Context, req *jsonrpc2.Request) (any, error) {
	if req.IsCall() {
		return nil, jsonrpc2.ErrMethodNotFound
	}
	raw := req.Params()
	c.mu.Lock()
	defer c.mu.Unlock()
	switch req.Method() {
	case protocol.MethodPtyOutput:
		if !c.noHash && (!utf8.Valid(raw) || !json.Valid(raw)) && c.err == nil {
			c.err = fmt.Errorf("pty/output frame is not valid UTF-8 JSON: %.100q", raw)
		}
		p, err := decodePtyOutput(raw)
		if err != nil {
			c.err = err
			return nil, nil
		}
		t := c.termLocked(p.PtyID)
		if t.next != 0 && p.Seq != t.next && t.seqErr == nil {
			t.seqErr = fmt.Errorf("terminal %s: got seq %d, want %d", p.PtyID, p.Seq, t.next)
		}
		if t.first == 0 {
			t.first = p.Seq
		}
		t.next = p.Seq + 1
		t.bytes += int64(len(p.Data))
		if !c.noHash {
			t.hash.Write([]byte(p.Data))
		}
		t.received = time.Now()
		if c.keep {
			t.chunks = append(t.chunks, p.Data)
		}
		if c.outputs != nil {
			select {
			case c.outputs <- p.Data:
			default:
			}
		}
		if !c.noAck[p.PtyID] {
			c.pending[p.PtyID] = p.Seq
			select {
			case c.kick <- struct{}{}:
			default:
			}
		}
	case protocol.MethodPtyExit:
		var p protocol.PtyExitParams
		if err := json.Unmarshal(raw, &p); err == nil {
			c.termLocked(p.PtyID).exit = &p
		}
	}
	return nil, nil
}

func (c *ptyClient) termLocked(id string) *term {
	t := c.terms[id]
	if t == nil {
		t = &term{hash: sha256.New()}
		c.terms[id] = t
	}
	return t
}

// ackLoop acknowledges the latest output of each terminal, one ack in
// flight at a time (acks coalesce while one is answered).
func (c *ptyClient) ackLoop() {
	for {
		select {
		case <-c.kick:
		case <-c.done:
			return
		}
		c.mu.Lock()
		todo := c.pending
		c.pending = map[string]int64{}
		c.mu.Unlock()
		for id, seq := range todo {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			_, _ = c.conn.Call(ctx, protocol.MethodPtyAck, protocol.PtyAckParams{PtyID: id, Seq: seq}, nil)
			cancel()
		}
	}
}

// ackNow acknowledges a terminal's output up to its last seq.
func (c *ptyClient) ackNow(t testing.TB, id string) {
	t.Helper()
	c.mu.Lock()
	seq := c.termLocked(id).next - 1
	c.mu.Unlock()
	if seq > 0 {
		c.mustCall(t, protocol.MethodPtyAck, protocol.PtyAckParams{PtyID: id, Seq: seq}, nil)
	}
}

func (c *ptyClient) call(t testing.TB, method string, params, result any) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := c.conn.Call(ctx, method, params, result)
	return err
}

func (c *ptyClient) mustCall(t testing.TB, method string, params, result any) {
	t.Helper()
	if err := c.call(t, method, params, result); err != nil {
		t.Fatalf("%s: %v", method, err)
	}
}

func (c *ptyClient) initialize(t testing.TB) {
	t.Helper()
	c.mustCall(t, protocol.MethodInitialize, protocol.InitializeParams{ProtocolVersion: 1, ClientInfo: &protocol.ClientInfo{Name: "pty-e2e", Version: "1"}}, &c.init)
}

// open opens a terminal (80x24 unless said) and returns its id.
func (c *ptyClient) open(t testing.TB, p protocol.PtyOpenParams) string {
	t.Helper()
	if p.Cols == 0 {
		p.Cols, p.Rows = 80, 24
	}
	var res protocol.PtyOpenResult
	c.mustCall(t, protocol.MethodPtyOpen, p, &res)
	if !strings.HasPrefix(res.PtyID, "pty-") {
		t.Fatalf("pty/open = %+v", res)
	}
	return res.PtyID
}

func (c *ptyClient) write(t testing.TB, id, data string) {
	t.Helper()
	c.mustCall(t, protocol.MethodPtyWrite, protocol.PtyWriteParams{PtyID: id, Data: data}, nil)
}

// text is a terminal's output so far, with the terminal's \r\n as \n.
func (c *ptyClient) text(id string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.ReplaceAll(strings.Join(c.termLocked(id).chunks, ""), "\r\n", "\n")
}

// decoded is a base64 terminal's output so far.
func (c *ptyClient) decoded(t testing.TB, id string) []byte {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []byte
	for _, ch := range c.termLocked(id).chunks {
		b, err := base64.StdEncoding.DecodeString(ch)
		if err != nil {
			t.Fatalf("base64 chunk %.40q: %v", ch, err)
		}
		out = append(out, b...)
	}
	return out
}

// state returns a copy of what the client knows of a terminal.
func (c *ptyClient) state(id string) term {
	c.mu.Lock()
	defer c.mu.Unlock()
	return *c.termLocked(id)
}

// check fails on a bad frame or a gap in a terminal's seqs.
func (c *ptyClient) check(t testing.TB, id string) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		t.Fatal(c.err)
	}
	if err := c.termLocked(id).seqErr; err != nil {
		t.Fatal(err)
	}
}

func (c *ptyClient) waitText(t testing.TB, id, want string) string {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		got := c.text(id)
		if strings.Contains(got, want) {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("terminal %s: output %q lacks %q", id, tail(got, 400), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitExit waits for the terminal's pty/exit while it makes progress: it
// fails after 30 s without output or exit (a flood on a loaded machine may
// take longer than that in all, but never stalls).
func (c *ptyClient) waitExit(t testing.TB, id string) protocol.PtyExitParams {
	t.Helper()
	const stall = 30 * time.Second
	start := time.Now()
	for {
		st := c.state(id)
		if st.exit != nil {
			c.check(t, id)
			return *st.exit
		}
		last := start
		if st.received.After(last) {
			last = st.received
		}
		if time.Since(last) > stall {
			t.Fatalf("terminal %s: no pty/exit and no output for %v (%d bytes in %v); output %q", id, stall, st.bytes, time.Since(start).Round(time.Second), tail(c.text(id), 400))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func tail(s string, n int) string { return s[max(0, len(s)-n):] }

// ptyTransports runs f against a fresh daemon over stdio and over
// websocket; dial returns a new connection (stdio has only one).
func ptyTransports(t *testing.T, f func(t *testing.T, dial func() *ptyClient)) {
	t.Run("stdio", func(t *testing.T) {
		p := startStdio(t)
		used := false
		f(t, func() *ptyClient {
			if used {
				t.Fatal("stdio has one connection")
			}
			used = true
			return stdioPtyClient(t, p)
		})
	})
	t.Run("websocket", func(t *testing.T) {
		p := startListen(t)
		f(t, func() *ptyClient { return wsPtyClient(t, p) })
	})
}

func stdioPtyClient(t testing.TB, p *stdioProc) *ptyClient {
	c := newPtyClient(t, headerStream(p.stdout, p.stdin))
	c.initialize(t)
	return c
}

func wsPtyClient(t testing.TB, p *listenProc) *ptyClient {
	ws, _, err := p.dial(t, http.Header{"Authorization": {"Bearer " + p.token}})
	if err != nil {
		t.Fatal(err)
	}
	c := newPtyClient(t, &wsStream{ws: ws})
	c.initialize(t)
	return c
}

// decodePtyOutput decodes pty/output params. encoding/json would do, at a
// third of the speed, and the throughput benchmark's client shares two
// cores with the daemon and the program: a browser's JSON.parse is native
// code too. It takes any JSON object (members in any order, any escapes).
func decodePtyOutput(raw []byte) (protocol.PtyOutputParams, error) {
	var p protocol.PtyOutputParams
	bad := func(why string) (protocol.PtyOutputParams, error) {
		return p, fmt.Errorf("pty/output params %.60q: %s", raw, why)
	}
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return bad("not an object")
	}
	i = skipSpace(raw, i+1)
	for i < len(raw) && raw[i] != '}' {
		key, n, err := jsonString(raw, i)
		if err != nil {
			return bad(err.Error())
		}
		i = skipSpace(raw, n)
		if i >= len(raw) || raw[i] != ':' {
			return bad("no colon")
		}
		i = skipSpace(raw, i+1)
		switch string(key) {
		case "ptyId", "data":
			v, n, err := jsonString(raw, i)
			if err != nil {
				return bad(err.Error())
			}
			if string(key) == "data" {
				p.Data = string(v)
			} else {
				p.PtyID = string(v)
			}
			i = n
		default:
			n := i
			for n < len(raw) && raw[n] != ',' && raw[n] != '}' {
				n++
			}
			if string(key) == "seq" {
				seq, err := strconv.ParseInt(string(bytes.TrimSpace(raw[i:n])), 10, 64)
				if err != nil {
					return bad("seq: " + err.Error())
				}
				p.Seq = seq
			}
			i = n
		}
		i = skipSpace(raw, i)
		if i < len(raw) && raw[i] == ',' {
			i = skipSpace(raw, i+1)
		}
	}
	return p, nil
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// jsonString decodes the JSON string at b[i:] and returns it and the index
// after it.
func jsonString(b []byte, i int) ([]byte, int, error) {
	if i >= len(b) || b[i] != '"' {
		return nil, 0, errors.New("not a string")
	}
	i++
	var out []byte
	for {
		j := 0
		for i+j < len(b) && b[i+j] != '"' && b[i+j] != '\\' {
			j++
		}
		if i+j == len(b) {
			return nil, 0, errors.New("unterminated string")
		}
		if b[i+j] == '"' && out == nil {
			return b[i : i+j], i + j + 1, nil // no escapes: no copy
		}
		out = append(out, b[i:i+j]...)
		i += j
		if b[i] == '"' {
			return out, i + 1, nil
		}
		if i+1 >= len(b) {
			return nil, 0, errors.New("bad escape")
		}
		switch c := b[i+1]; c {
		case '"', '\\', '/':
			out = append(out, c)
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'u':
			if i+6 > len(b) {
				return nil, 0, errors.New("bad \\u escape")
			}
			r, err := strconv.ParseUint(string(b[i+2:i+6]), 16, 32)
			if err != nil {
				return nil, 0, err
			}
			i += 6
			if utf16.IsSurrogate(rune(r)) && i+6 <= len(b) && b[i] == '\\' && b[i+1] == 'u' {
				if r2, err := strconv.ParseUint(string(b[i+2:i+6]), 16, 32); err == nil {
					if rr := utf16.DecodeRune(rune(r), rune(r2)); rr != utf8.RuneError {
						out = utf8.AppendRune(out, rr)
						i += 6
						continue
					}
				}
			}
			out = utf8.AppendRune(out, rune(r))
			continue
		default:
			return nil, 0, errors.New("bad escape")
		}
		i += 2
	}
}

// TestPtyClientDecode: the test client's decoder agrees with encoding/json.
func TestPtyClientDecode(t *testing.T) {
	for _, raw := range []string{
		`{"ptyId":"pty-1","seq":7,"data":"plain"}`,
		`{ "data" : "a\"b\\c\/d\n\r\t\b\f\u001b[0m\u00e9\ud83d\ude00\ud800x" , "seq" : 12 , "ptyId" : "p" }`,
		`{"ptyId":"p","seq":1,"data":""}`,
		`{"ptyId":"p","seq":1,"data":"€😀"}`,
	} {
		var want protocol.PtyOutputParams
		if err := json.Unmarshal([]byte(raw), &want); err != nil {
			t.Fatal(err)
		}
		got, err := decodePtyOutput([]byte(raw))
		if err != nil || got != want {
			t.Errorf("decode %s = %+v, %v; want %+v", raw, got, err, want)
		}
	}
}
