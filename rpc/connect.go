package rpc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/gorilla/websocket"
	"golang.org/x/sys/unix"

	"github.com/cellbox-dev/cellbox/protocol"
)

// `cellbox connect` bridges an editor's stdio (LSP framing) to the user's
// long-lived websocket daemon, starting the daemon in the background if none
// runs, so that kernels outlive an editor restart (PROTOCOL.md §2).
//
//	editor ──stdio frames──> connect ──one text message per frame──> daemon /rpc
//	editor <──stdio frames── connect <──one message per frame─────── daemon
//
// The daemon side of the contract:
//   - it writes its runtime file (WriteRuntimeFile into RuntimeDir(stateDir))
//     once its listener is bound, with the real port in URL;
//   - GET /healthz answers 200 to `Authorization: Bearer TOKEN`;
//   - /rpc accepts `Authorization: Bearer TOKEN` without an Origin header;
//   - after the `exit` notification it closes the websocket with the reason
//     CloseReasonExitAfterShutdown or CloseReasonExitWithoutShutdown.

// Close reasons the daemon puts in the websocket close frame after `exit`.
// connect turns them into its exit code, as `serve --stdio` does with its own.
const (
	CloseReasonExitAfterShutdown   = "exit after shutdown"
	CloseReasonExitWithoutShutdown = "exit without shutdown"
)

const (
	defaultStartTimeout = 10 * time.Second
	healthTimeout       = 1 * time.Second
	dialTimeout         = 10 * time.Second
	// closeWait bounds how long connect waits for the daemon's answer to
	// its close frame.
	closeWait = 2 * time.Second
	// startPoll is how often connect looks for the started daemon's
	// runtime file.
	startPoll = 10 * time.Millisecond
	// logTailBytes is how much of daemon.log an error quotes.
	logTailBytes = 2 << 10
	// keepBufBytes: a buffer grown past this by one big message is dropped
	// afterwards rather than kept for the life of the bridge.
	keepBufBytes = 1 << 20
)

// ConnectOptions configure Connect.
type ConnectOptions struct {
	// StateDir is the daemon's state dir (--state-dir); the runtime dir and
	// daemon.log derive from it.
	StateDir string
	// Executable is the path of the cellbox binary to start as the daemon.
	Executable string
	// ServeArgs are extra arguments for `serve`, e.g. a log level.
	ServeArgs []string
	Stdin     io.Reader
	Stdout    io.Writer
	// Logger receives diagnostics (stderr: stdout carries protocol only).
	Logger *slog.Logger
	// StartTimeout bounds the wait for a started daemon's runtime file
	// (default 10s).
	StartTimeout time.Duration
	// MaxMessageBytes bounds one frame read from Stdin (default 16 MiB).
	MaxMessageBytes int
}

// Connect finds the user's daemon (starting it if none runs), dials its
// websocket and bridges Stdin and Stdout to it until one side ends.
//
// exitCode is what the process should exit with: 0 when Stdin ends (the
// daemon keeps the editor's kernels) or when the daemon closes the
// connection after `shutdown` + `exit`; 1 for any other close by the daemon
// (logged with its code and reason) and when ctx is cancelled. err is
// non-nil when the daemon could not be found, started or dialled, or when
// stdio failed.
//
// The goroutine reading Stdin cannot be interrupted; when Connect returns
// because of the daemon or ctx it may still be blocked in Stdin.Read, and it
// writes nothing more to Stdout. The process is expected to exit.
func Connect(ctx context.Context, o ConnectOptions) (exitCode int, err error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = defaultStartTimeout
	}
	if o.MaxMessageBytes <= 0 {
		o.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if o.Stdin == nil || o.Stdout == nil {
		return 1, errors.New("connect: Stdin and Stdout are required")
	}
	info, err := findOrStartDaemon(ctx, o.StateDir, o.Executable, o.ServeArgs, o.StartTimeout, o.Logger)
	if err != nil {
		return 1, fmt.Errorf("connect: %w", err)
	}
	conn, err := dialDaemon(ctx, info)
	if err != nil {
		return 1, fmt.Errorf("connect: %w", err)
	}
	o.Logger.Debug("connected to daemon", "pid", info.PID, "url", redactToken(info.URL))
	return runBridge(ctx, conn, o.Stdin, o.Stdout, o.MaxMessageBytes, o.Logger)
}

// findOrStartDaemon returns a live, healthy daemon of this user, starting
// `exe serve` in the background when there is none. A lock file serialises
// concurrent callers so that two editors starting at once start one daemon.
func findOrStartDaemon(ctx context.Context, stateDir, exe string, serveArgs []string, timeout time.Duration, log *slog.Logger) (RuntimeInfo, error) {
	if stateDir == "" {
		return RuntimeInfo{}, errors.New("no state dir")
	}
	stateDir, err := filepath.Abs(stateDir)
	if err != nil {
		return RuntimeInfo{}, err
	}
	dir := RuntimeDir(stateDir)
	if info, ok := findHealthy(ctx, dir, log); ok {
		return info, nil
	}

	if err := ensurePrivateDir(dir); err != nil {
		return RuntimeInfo{}, fmt.Errorf("runtime dir: %w", err)
	}
	unlock, err := lockFile(ctx, filepath.Join(dir, "connect.lock"), 2*timeout+5*time.Second)
	if err != nil {
		return RuntimeInfo{}, err
	}
	defer unlock()
	// Another connect may have started one while we waited for the lock.
	if info, ok := findHealthy(ctx, dir, log); ok {
		return info, nil
	}
	if exe == "" {
		return RuntimeInfo{}, errors.New("no daemon runs and no executable to start one")
	}
	return startDaemon(ctx, stateDir, dir, exe, serveArgs, timeout, log)
}

// findHealthy returns the newest daemon in dir whose /healthz answers 200.
func findHealthy(ctx context.Context, dir string, log *slog.Logger) (RuntimeInfo, bool) {
	infos, err := FindServers(dir)
	if err != nil {
		log.Debug("find servers", "err", err)
		return RuntimeInfo{}, false
	}
	for _, info := range infos {
		if err := checkHealth(ctx, info); err != nil {
			log.Debug("daemon not usable", "pid", info.PID, "err", err)
			continue
		}
		return info, true
	}
	return RuntimeInfo{}, false
}

// localHTTP talks to the local daemon only: never through a proxy (the
// token must not leave the machine) and never following a redirect.
var localHTTP = &http.Client{
	Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true},
	CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	},
	Timeout: healthTimeout,
}

func checkHealth(ctx context.Context, info RuntimeInfo) error {
	base, err := daemonBase(info)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, healthTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base.JoinPath("healthz").String(), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+info.Token)
	resp, err := localHTTP.Do(req)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /healthz: %s", resp.Status)
	}
	return nil
}

// daemonBase is the scheme://host of a runtime file's URL.
func daemonBase(info RuntimeInfo) (*url.URL, error) {
	u, err := url.Parse(info.URL)
	if err != nil {
		return nil, fmt.Errorf("runtime file of pid %d: bad url: %w", info.PID, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("runtime file of pid %d: url %q is not http://HOST:PORT/", info.PID, redactToken(info.URL))
	}
	return &url.URL{Scheme: u.Scheme, Host: u.Host, Path: "/"}, nil
}

// lockFile takes an exclusive flock on path, polling until wait has passed
// or ctx is done. The descriptor is close-on-exec, so a started daemon does
// not inherit the lock.
func lockFile(ctx context.Context, path string, wait time.Duration) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	deadline := time.Now().Add(wait)
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() {
				unix.Flock(int(f.Fd()), unix.LOCK_UN)
				f.Close()
			}, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		if time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("lock %s: still held by another cellbox connect after %s", path, wait)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, context.Cause(ctx))
		case <-time.After(startPoll):
		}
	}
}

// startDaemon starts `exe serve --listen 127.0.0.1:0 --state-dir stateDir
// serveArgs...` in its own session, its output appended to
// stateDir/daemon.log, and waits for its runtime file in runDir. The daemon
// is not waited for: it outlives this process. If it exits first, the error
// quotes what it wrote to daemon.log.
func startDaemon(ctx context.Context, stateDir, runDir, exe string, serveArgs []string, timeout time.Duration, log *slog.Logger) (RuntimeInfo, error) {
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return RuntimeInfo{}, fmt.Errorf("start daemon: %w", err)
	}
	if filepath.Base(exe) != exe { // a path, not a name to look up on PATH
		abs, err := filepath.Abs(exe)
		if err != nil {
			return RuntimeInfo{}, fmt.Errorf("start daemon: %w", err)
		}
		exe = abs
	}
	logPath := filepath.Join(stateDir, "daemon.log")
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return RuntimeInfo{}, fmt.Errorf("start daemon: %w", err)
	}
	defer logf.Close() // the child has its own copy
	var logStart int64
	if fi, err := logf.Stat(); err == nil {
		logStart = fi.Size()
	}

	args := append([]string{"serve", "--listen", "127.0.0.1:0", "--state-dir", stateDir}, serveArgs...)
	cmd := exec.Command(exe, args...)
	// Not the editor's directory (the daemon would pin it), nor "/": the
	// daemon's directory is the root of a workspace/open without one from
	// a client that does not say its own (connect does, see dialDaemon).
	cmd.Dir = "/"
	if home, err := os.UserHomeDir(); err == nil {
		if fi, err := os.Stat(home); err == nil && fi.IsDir() {
			cmd.Dir = home
		}
	}
	cmd.Stdin = nil
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return RuntimeInfo{}, fmt.Errorf("start daemon: %w", err)
	}
	pid := cmd.Process.Pid
	// Not waited for through cmd: the daemon must outlive us. Until its
	// runtime file appears it is reaped here with wait4(WNOHANG), to tell
	// an early exit from a slow start.
	cmd.Process.Release()
	log.Info("started daemon", "pid", pid, "exe", exe, "log", logPath)

	fail := func(format string, a ...any) (RuntimeInfo, error) {
		msg := fmt.Sprintf(format, a...)
		if tail := readTail(logPath, logStart, logTailBytes); tail != "" {
			msg += "; " + logPath + " says:\n" + tail
		} else {
			msg += "; " + logPath + " is empty"
		}
		return RuntimeInfo{}, errors.New(msg)
	}
	stop := func() {
		// Setsid made the daemon a process group leader: stop the group.
		unix.Kill(-pid, unix.SIGTERM)
	}
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(startPoll)
	defer tick.Stop()
	for {
		infos, err := FindServers(runDir)
		if err != nil {
			stop()
			return RuntimeInfo{}, fmt.Errorf("start daemon: %w", err)
		}
		for _, info := range infos {
			if info.PID == pid {
				return info, nil
			}
		}
		var ws unix.WaitStatus
		wpid, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil)
		switch {
		case wpid == pid:
			return fail("start daemon %s: it %s before writing its runtime file", exe, describeWait(ws))
		case errors.Is(err, unix.ECHILD):
			return fail("start daemon %s: it exited before writing its runtime file", exe)
		}
		if time.Now().After(deadline) {
			stop()
			return fail("start daemon %s: no runtime file in %s after %s", exe, runDir, timeout)
		}
		select {
		case <-ctx.Done():
			stop()
			return RuntimeInfo{}, fmt.Errorf("start daemon: %w", context.Cause(ctx))
		case <-tick.C:
		}
	}
}

func describeWait(ws unix.WaitStatus) string {
	switch {
	case ws.Exited():
		return fmt.Sprintf("exited with status %d", ws.ExitStatus())
	case ws.Signaled():
		return fmt.Sprintf("was killed by %v", ws.Signal())
	}
	return "ended"
}

// readTail returns at most n bytes of what path holds past offset, starting
// at a line boundary when it had to cut.
func readTail(path string, offset int64, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Size() <= offset {
		return ""
	}
	start := max(offset, fi.Size()-int64(n))
	buf := make([]byte, fi.Size()-start)
	k, _ := f.ReadAt(buf, start)
	buf = buf[:k]
	if start > offset {
		if i := bytes.IndexByte(buf, '\n'); i >= 0 && i+1 < len(buf) {
			buf = buf[i+1:]
		}
	}
	return string(bytes.TrimRight(buf, "\n"))
}

// dialDaemon opens ws://HOST:PORT/rpc with the token in the Authorization
// header and no Origin header.
func dialDaemon(ctx context.Context, info RuntimeInfo) (*websocket.Conn, error) {
	base, err := daemonBase(info)
	if err != nil {
		return nil, err
	}
	wsURL := url.URL{Scheme: "ws", Host: base.Host, Path: "/rpc"}
	if base.Scheme == "https" {
		wsURL.Scheme = "wss"
	}
	d := websocket.Dialer{Proxy: nil, HandshakeTimeout: dialTimeout}
	h := http.Header{"Authorization": {"Bearer " + info.Token}}
	if wd, err := os.Getwd(); err == nil {
		h.Set(ClientDirHeader, wd)
	}
	conn, resp, err := d.DialContext(ctx, wsURL.String(), h)
	if err != nil {
		if resp != nil {
			return nil, fmt.Errorf("dial %s: %w (HTTP %s)", wsURL.String(), err, resp.Status)
		}
		return nil, fmt.Errorf("dial %s: %w", wsURL.String(), err)
	}
	return conn, nil
}

func redactToken(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable url)"
	}
	q := u.Query()
	if q.Has("token") {
		q.Set("token", "REDACTED")
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// bridge copies frames between stdio and one websocket connection.
type bridge struct {
	conn *websocket.Conn
	out  io.Writer
	log  *slog.Logger

	// outMu serialises writes to out: daemon messages and local frame
	// error answers.
	outMu sync.Mutex
	// outClosed: the bridge has finished; nothing more goes to out.
	outClosed bool
	outBuf    []byte
}

// stdinResult is how the stdin pump ended.
type stdinResult struct {
	readErr error // nil: clean EOF at a frame boundary
	sendErr error // writing to the websocket failed
	outErr  error // answering a bad frame on stdout failed
}

// stdoutError is a failed write to the editor.
type stdoutError struct{ err error }

func (e *stdoutError) Error() string { return "write stdout: " + e.err.Error() }
func (e *stdoutError) Unwrap() error { return e.err }

// runBridge bridges in and out to conn until one side ends; it owns conn and
// closes it. See Connect for the exit code.
func runBridge(ctx context.Context, conn *websocket.Conn, in io.Reader, out io.Writer, maxBytes int, log *slog.Logger) (exitCode int, err error) {
	b := &bridge{conn: conn, out: out, log: log}
	defer func() {
		b.outMu.Lock()
		b.outClosed = true
		b.outMu.Unlock()
	}()

	stdinDone := make(chan stdinResult, 1)
	go func() { stdinDone <- b.pumpStdin(in, maxBytes) }()
	wsDone := make(chan error, 1)
	pumpExited := make(chan struct{})
	go func() {
		defer close(pumpExited)
		wsDone <- b.pumpDaemon()
	}()
	defer func() {
		// Closing conn ends the daemon pump, unless it is blocked writing
		// to an editor that stopped reading: then give up on it after
		// closeWait rather than hang the exit.
		conn.Close()
		select {
		case <-pumpExited:
		case <-time.After(closeWait):
			log.Warn("stdout is blocked; leaving its writer behind")
		}
	}()

	select {
	case r := <-stdinDone:
		if r.outErr != nil {
			b.closeWS(websocket.CloseGoingAway)
			return 1, &stdoutError{r.outErr}
		}
		if r.sendErr != nil {
			// The connection broke under us; the reader says why.
			select {
			case werr := <-wsDone:
				return b.daemonEnded(werr)
			case <-time.After(closeWait):
				return 1, fmt.Errorf("send to daemon: %w", r.sendErr)
			case <-ctx.Done():
				b.closeWS(websocket.CloseGoingAway)
				return 1, nil
			}
		}
		// Stdin ended: leave the daemon (and the editor's kernels) running,
		// say goodbye properly and forward what arrives until its close.
		b.closeWS(websocket.CloseNormalClosure)
		code := 0
		select {
		case werr := <-wsDone:
			var ce *websocket.CloseError
			if errors.As(werr, &ce) && ce.Text == CloseReasonExitWithoutShutdown {
				log.Warn("daemon closed the connection", "code", ce.Code, "reason", ce.Text)
				code = 1
			}
		case <-time.After(closeWait):
		case <-ctx.Done():
		}
		if r.readErr != nil {
			return 1, fmt.Errorf("read stdin: %w", r.readErr)
		}
		return code, nil
	case werr := <-wsDone:
		return b.daemonEnded(werr)
	case <-ctx.Done():
		log.Info("stopping", "cause", context.Cause(ctx))
		b.closeWS(websocket.CloseGoingAway)
		return 1, nil
	}
}

// daemonEnded maps the end of the daemon's side to an exit code.
func (b *bridge) daemonEnded(err error) (int, error) {
	var se *stdoutError
	if errors.As(err, &se) {
		b.closeWS(websocket.CloseGoingAway)
		return 1, err
	}
	var ce *websocket.CloseError
	if errors.As(err, &ce) {
		if ce.Text == CloseReasonExitAfterShutdown {
			return 0, nil
		}
		b.log.Warn("daemon closed the connection", "code", ce.Code, "reason", ce.Text)
		return 1, nil
	}
	b.log.Warn("connection to daemon lost", "err", err)
	return 1, nil
}

func (b *bridge) closeWS(code int) {
	msg := websocket.FormatCloseMessage(code, "")
	b.conn.WriteControl(websocket.CloseMessage, msg, time.Now().Add(closeWait))
}

// pumpStdin sends every frame read from in to the daemon as one text message.
// A malformed frame is answered locally, as `serve --stdio` answers it, and
// the stream goes on.
func (b *bridge) pumpStdin(in io.Reader, maxBytes int) stdinResult {
	r := bufio.NewReaderSize(in, 64<<10)
	var buf []byte
	for {
		body, err := ReadFrame(r, maxBytes, buf)
		if err != nil {
			var fe *FrameError
			if errors.As(err, &fe) {
				if werr := b.writeOut(frameErrorReply(fe)); werr != nil {
					return stdinResult{outErr: werr}
				}
				continue
			}
			if err == io.EOF {
				return stdinResult{}
			}
			return stdinResult{readErr: err}
		}
		// Only this goroutine writes data messages; the control frames
		// (close, pong) use WriteControl, which may run concurrently.
		if err := b.conn.WriteMessage(websocket.TextMessage, body); err != nil {
			return stdinResult{sendErr: err}
		}
		buf = body
		if cap(buf) > keepBufBytes {
			buf = nil
		}
	}
}

// pumpDaemon writes every message from the daemon to out as one frame, until
// the connection ends. Reading also answers the daemon's pings.
func (b *bridge) pumpDaemon() error {
	var msg bytes.Buffer
	for {
		_, r, err := b.conn.NextReader()
		if err != nil {
			return err
		}
		msg.Reset()
		if _, err := msg.ReadFrom(r); err != nil {
			return err
		}
		if err := b.writeOut(msg.Bytes()); err != nil {
			return &stdoutError{err}
		}
		if msg.Cap() > keepBufBytes {
			msg = bytes.Buffer{}
		}
	}
}

// writeOut writes body to out as one frame with a single Write.
func (b *bridge) writeOut(body []byte) error {
	b.outMu.Lock()
	defer b.outMu.Unlock()
	if b.outClosed {
		return errors.New("bridge closed")
	}
	b.outBuf = AppendFrame(b.outBuf[:0], body)
	_, err := b.out.Write(b.outBuf)
	if cap(b.outBuf) > keepBufBytes {
		b.outBuf = nil
	}
	return err
}

// frameErrorReply is the JSON-RPC error response to a malformed frame,
// byte for byte what `serve --stdio` answers (stream.replyError): id null,
// the frame error's code, and data {errorCode, detail}.
func frameErrorReply(fe *FrameError) []byte {
	reply := struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   *wireError      `json:"error"`
	}{"2.0", json.RawMessage("null"), newWireError(protocol.ErrorCode(fe.Code), fe.Msg, fe.Msg, 0)}
	data, err := marshal(reply)
	if err != nil { // cannot happen: strings and numbers only
		panic(err)
	}
	return data
}
