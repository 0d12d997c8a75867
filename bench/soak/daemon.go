//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gorilla/websocket"
)

// daemon is `cellbox serve --listen 127.0.0.1:0` with a state dir and an
// XDG_RUNTIME_DIR of its own.
type daemon struct {
	bin         string
	cmd         *exec.Cmd
	state, run  string
	base, token string // http://127.0.0.1:PORT and the token
	stderr      *tailBuffer
	exited      chan struct{}
	waitErr     error
}

var urlRE = regexp.MustCompile(`http://127\.0\.0\.1:\d+/\?token=([0-9a-f]+)`)

func startDaemon(bin, dir string) (*daemon, error) {
	d := &daemon{bin: bin, state: filepath.Join(dir, "state"), run: filepath.Join(dir, "run"),
		stderr: &tailBuffer{max: 16 << 10}, exited: make(chan struct{})}
	for _, p := range []string{d.state, d.run} {
		if err := os.MkdirAll(p, 0o700); err != nil {
			return nil, err
		}
	}
	d.cmd = exec.Command(bin, "serve", "--listen", "127.0.0.1:0")
	d.cmd.Env = []string{"CELLBOX_STATE_DIR=" + d.state, "XDG_RUNTIME_DIR=" + d.run, "CELLBOX_LOG_LEVEL=warn"}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CELLBOX_") && !strings.HasPrefix(kv, "XDG_RUNTIME_DIR=") {
			d.cmd.Env = append(d.cmd.Env, kv)
		}
	}
	d.cmd.Stderr = d.stderr
	stdout, err := d.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := d.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { d.waitErr = d.cmd.Wait(); close(d.exited) }()
	// The URL line carries the token; the runtime file must say the same.
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := urlRE.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[0]
				break
			}
		}
		close(found)
		_, _ = io.Copy(io.Discard, stdout)
	}()
	var url string
	select {
	case url = <-found:
	case <-time.After(60 * time.Second):
	}
	if url == "" {
		d.kill()
		return nil, fmt.Errorf("serve --listen printed no URL%s", d.stderr.show())
	}
	m := urlRE.FindStringSubmatch(url)
	d.token, d.base = m[1], url[:strings.Index(url, "/?")]
	b, err := os.ReadFile(d.runtimeFile())
	if err != nil || !bytes.Contains(b, []byte(d.token)) {
		d.kill()
		return nil, fmt.Errorf("runtime file %s does not hold the printed token (%v)", d.runtimeFile(), err)
	}
	return d, nil
}

func (d *daemon) pid() int { return d.cmd.Process.Pid }

func (d *daemon) runtimeFile() string {
	return filepath.Join(d.run, "cellbox", fmt.Sprintf("server-%d.json", d.pid()))
}

// dial opens a websocket to /rpc with the token.
func (d *daemon) dial() (*websocket.Conn, error) {
	url := "ws" + strings.TrimPrefix(d.base, "http") + "/rpc"
	dialer := *websocket.DefaultDialer
	dialer.HandshakeTimeout = 60 * time.Second
	ws, _, err := dialer.Dial(url, http.Header{"Authorization": {"Bearer " + d.token}})
	return ws, err
}

// stop ends the daemon with SIGTERM, as a service manager does, and checks
// that it exits 0 and removes its runtime file.
func (d *daemon) stop() error {
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(60 * time.Second):
		d.kill()
		return errors.New("the daemon did not exit within 60 s of SIGTERM")
	}
	if d.waitErr != nil {
		return fmt.Errorf("the daemon exited with %v after SIGTERM%s", d.waitErr, d.stderr.show())
	}
	if _, err := os.Stat(d.runtimeFile()); err == nil {
		return fmt.Errorf("the daemon left its runtime file %s", d.runtimeFile())
	}
	return nil
}

func (d *daemon) kill() {
	_ = d.cmd.Process.Kill()
	<-d.exited
}

// sample is what the leak check measures of the daemon.
type sample struct {
	fds, goroutines, threads int
	rssKiB                   int64
	procs, mounts            int
	stateFiles, wsFiles      int
	stateBytes               int64
	heapInuse, heapFree      int64    // Go heap in use, and free but not returned to the OS
	nextGC, gcs              int64    // the heap goal (twice the heap live at the last GC), GC cycles
	procNames                []string // the descendants, for the report when they differ
}

// measure reads the daemon's /proc entries, its /metrics (over a
// connection closed after the response, so it is not counted next time)
// and walks its state dir.
func (d *daemon) measure(ctx context.Context) (sample, error) {
	var s sample
	pid := d.pid()
	dir := filepath.Join("/proc", strconv.Itoa(pid))
	fds, err := os.ReadDir(filepath.Join(dir, "fd"))
	if err != nil {
		return s, fmt.Errorf("read the daemon's descriptors: %w", err)
	}
	s.fds = len(fds)
	if b, err := os.ReadFile(filepath.Join(dir, "status")); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				s.rssKiB = firstInt(v)
			}
		}
	}
	mi, err := os.ReadFile(filepath.Join(dir, "mountinfo"))
	if err != nil {
		return s, fmt.Errorf("read the daemon's mountinfo: %w", err)
	}
	s.mounts = bytes.Count(mi, []byte("\n"))
	for _, p := range scanProcs().under(pid) {
		s.procs++
		s.procNames = append(s.procNames, fmt.Sprintf("%d %s", p.pid, strings.Join(p.argv, " ")))
	}
	wsDir := filepath.Join(d.state, "workspaces") + string(filepath.Separator)
	_ = filepath.WalkDir(d.state, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return nil
		}
		s.stateFiles++
		if strings.HasPrefix(p, wsDir) {
			s.wsFiles++
		}
		if info, err := e.Info(); err == nil {
			s.stateBytes += info.Size()
		}
		return nil
	})
	m, err := d.metrics(ctx)
	if err != nil {
		return s, err
	}
	var ok1, ok2 bool
	s.goroutines, ok1 = m["go_goroutines"]
	s.threads, ok2 = m["go_threads"]
	s.heapInuse = int64(m["go_memstats_heap_inuse_bytes"])
	s.heapFree = int64(m["go_memstats_heap_idle_bytes"] - m["go_memstats_heap_released_bytes"])
	s.nextGC = int64(m["go_memstats_next_gc_bytes"])
	s.gcs = int64(m["go_gc_duration_seconds_count"])
	if !ok1 || !ok2 {
		return s, errors.New("/metrics has no go_goroutines or go_threads")
	}
	return s, nil
}

// metrics reads the gauges of GET /metrics that have no labels.
func (d *daemon) metrics(ctx context.Context) (map[string]int, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.base+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+d.token)
	req.Close = true
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET /metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	out := map[string]int{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 || strings.HasPrefix(f[0], "#") || strings.Contains(f[0], "{") {
			continue
		}
		if v, err := strconv.ParseFloat(f[1], 64); err == nil {
			out[f[0]] = int(v)
		}
	}
	return out, sc.Err()
}

func firstInt(s string) int64 {
	f := strings.Fields(s)
	if len(f) == 0 {
		return 0
	}
	n, _ := strconv.ParseInt(f[0], 10, 64)
	return n
}

// proc is a process seen in the host's /proc (a sandbox's processes are
// there too, under their host pids).
type proc struct {
	pid, ppid int
	argv      []string
}

type procs map[int]*proc

func scanProcs() procs {
	ps := procs{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		argv := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
		ps[pid] = &proc{pid: pid, ppid: ppid, argv: argv}
	}
	return ps
}

// under lists root's descendants (not root).
func (ps procs) under(root int) []*proc {
	kids := map[int][]*proc{}
	for _, p := range ps {
		kids[p.ppid] = append(kids[p.ppid], p)
	}
	var out []*proc
	var walk func(int)
	walk = func(pid int) {
		for _, k := range kids[pid] {
			out = append(out, k)
			walk(k.pid)
		}
	}
	walk(root)
	return out
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

// show is the buffer as the end of an error message.
func (t *tailBuffer) show() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.b) == 0 {
		return ""
	}
	return "\n--- the daemon's stderr (the end) ---\n" + strings.TrimRight(string(t.b), "\n")
}
