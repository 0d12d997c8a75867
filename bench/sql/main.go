//go:build linux

// Command sql measures cellbox's sql kernel side by side with the sqlite3
// shell, in one run, interleaved: cold start to the first result (a
// kernel/start in a fresh scratch workspace and `SELECT 1`, against
// starting `sqlite3` and reading its answer to `SELECT 1;`), and the round
// trip of a query on a warm kernel (p50/p99) against a persistent sqlite3
// process fed the same query over a pipe: `SELECT 1` and a 1,000-row
// select. Both use a database file of the same content. It prints one
// table of figures and ratios. Then, where PostgreSQL is installed, the
// time of `%connect postgres` (first and next) and the round trip of
// `SELECT 1` on it against psql (postgres.go). bench/sql.sh builds it and
// runs it.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.lsp.dev/jsonrpc2"

	"github.com/cellbox-dev/cellbox/protocol"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "sql-bench:", err)
		os.Exit(1)
	}
}

type options struct {
	cellbox, sqlite3, label string
	n, warmup, rtt          int
	postgres                bool
}

// The queries of the round trips, for each side: the 1,000-row select
// reads a table that setup makes on both sides.
const (
	setup    = "CREATE TABLE IF NOT EXISTS t(id INTEGER PRIMARY KEY, name TEXT, v REAL); DELETE FROM t; WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 1000) INSERT INTO t SELECT n, 'name ' || n, n / 3.0 FROM c;"
	oneQuery = "SELECT 1;"
	rowQuery = "SELECT * FROM t;"
)

func run(args []string) error {
	var o options
	fs := flag.NewFlagSet("sql-bench", flag.ContinueOnError)
	fs.StringVar(&o.cellbox, "cellbox", "", "the cellbox `binary` (required)")
	fs.StringVar(&o.sqlite3, "sqlite3", "/usr/bin/sqlite3", "the sqlite3 shell `binary`")
	fs.IntVar(&o.n, "n", 20, "measured cold starts per side")
	fs.IntVar(&o.warmup, "warmup", 3, "unmeasured cold starts per side first")
	fs.IntVar(&o.rtt, "rtt", 500, "measured round trips per query and side")
	fs.StringVar(&o.label, "label", "", "`text` naming this run in the output")
	fs.BoolVar(&o.postgres, "postgres", true, "also measure `%connect postgres` and SELECT 1 on it against psql")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.cellbox == "" || o.n < 1 || o.rtt < 10 {
		return errors.New("need -cellbox, -n >= 1, -rtt >= 10")
	}
	base, err := os.MkdirTemp("", "cellbox-sql-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(base)
	project := filepath.Join(base, "project")
	if err := os.MkdirAll(project, 0o755); err != nil {
		return err
	}
	d, err := startDaemon(o.cellbox, base)
	if err != nil {
		return fmt.Errorf("start cellbox: %w", err)
	}
	defer d.close()
	var ws protocol.WorkspaceInfo
	if err := d.call(protocol.MethodWorkspaceOpen, protocol.WorkspaceOpenParams{Root: project, Name: "sql-bench"}, &ws); err != nil {
		return err
	}
	version := ""
	for _, l := range d.caps.Languages {
		if l.ID == "sql" {
			version = l.Version
		}
	}
	if version == "" {
		return errors.New("the daemon has no sql language")
	}
	sqliteVersion, err := exec.Command(o.sqlite3, "--version").Output()
	if err != nil {
		return fmt.Errorf("%s --version: %w", o.sqlite3, err)
	}
	cliDB := filepath.Join(base, "cli.db")

	// Cold starts, interleaved.
	var cbCold, cliCold []time.Duration
	for i := range o.warmup + o.n {
		a, err := d.coldStart()
		if err != nil {
			return fmt.Errorf("cellbox cold start: %w", err)
		}
		b, err := cliColdStart(o.sqlite3, cliDB)
		if err != nil {
			return fmt.Errorf("sqlite3 cold start: %w", err)
		}
		if i >= o.warmup {
			cbCold, cliCold = append(cbCold, a), append(cliCold, b)
		}
	}

	// Round trips: one warm kernel of the workspace, one sqlite3 process.
	var k protocol.KernelStartResult
	if err := d.call(protocol.MethodKernelStart, protocol.KernelStartParams{Language: "sql", WorkspaceID: ws.WorkspaceID}, &k); err != nil {
		return err
	}
	if _, err := d.execute(k.KernelID, setup); err != nil {
		return err
	}
	cli, err := startCLI(o.sqlite3, cliDB)
	if err != nil {
		return err
	}
	defer cli.close()
	if _, err := cli.query(setup, 0); err != nil {
		return err
	}
	type pair struct{ cb, cli []time.Duration }
	rtts := map[string]*pair{oneQuery: {}, rowQuery: {}}
	for _, q := range []string{oneQuery, rowQuery} {
		wantLines := 1
		if q == rowQuery {
			wantLines = 1000
		}
		for i := range 20 + o.rtt {
			a, err := d.execute(k.KernelID, q)
			if err != nil {
				return err
			}
			b, err := cli.query(q, wantLines)
			if err != nil {
				return err
			}
			if i >= 20 {
				rtts[q].cb, rtts[q].cli = append(rtts[q].cb, a), append(rtts[q].cli, b)
			}
		}
	}

	fmt.Printf("== cellbox sql kernel vs the sqlite3 shell (%s)\n", o.label)
	fmt.Printf("cellbox: SQLite %s (modernc.org/sqlite, in the sandbox); sqlite3 shell: %s\n", version, strings.Fields(string(sqliteVersion))[0])
	fmt.Printf("%-46s %12s %12s %8s\n", "figure", "cellbox", "sqlite3", "ratio")
	row := func(name string, a, b time.Duration) {
		fmt.Printf("%-46s %12s %12s %7.1fx\n", name, ms(a), ms(b), float64(a)/float64(b))
	}
	row(fmt.Sprintf("cold start to first result, p50 (n=%d)", o.n), pct(cbCold, 50), pct(cliCold, 50))
	row("cold start to first result, p99", pct(cbCold, 99), pct(cliCold, 99))
	row(fmt.Sprintf("round trip SELECT 1, p50 (n=%d)", o.rtt), pct(rtts[oneQuery].cb, 50), pct(rtts[oneQuery].cli, 50))
	row("round trip SELECT 1, p99", pct(rtts[oneQuery].cb, 99), pct(rtts[oneQuery].cli, 99))
	row("round trip 1,000-row SELECT, p50", pct(rtts[rowQuery].cb, 50), pct(rtts[rowQuery].cli, 50))
	row("round trip 1,000-row SELECT, p99", pct(rtts[rowQuery].cb, 99), pct(rtts[rowQuery].cli, 99))
	fmt.Println("cellbox: kernel/start in a fresh scratch workspace (sandbox, driver) + kernel/execute, over JSON-RPC;")
	fmt.Println("sqlite3: the process started and its answer read; round trips: a persistent sqlite3 fed over a pipe, list mode.")
	fmt.Println("cellbox's 1,000-row select renders text/plain and text/html tables; sqlite3 prints lines.")
	if o.postgres {
		return benchPostgres(d, o, base)
	}
	return nil
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3f ms", float64(d)/1e6) }

func pct(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[max(0, min(len(s)-1, i-1))]
}

// daemon is `cellbox serve --stdio` with its own state, as an editor runs it.
type daemon struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	conn jsonrpc2.Conn
	caps protocol.ServerCapabilities
	seq  int
}

func startDaemon(bin, base string) (*daemon, error) {
	state, rundir := filepath.Join(base, "state"), filepath.Join(base, "run")
	for _, dir := range []string{state, rundir} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
	}
	cmd := exec.Command(bin, "serve", "--stdio")
	cmd.Env = []string{"CELLBOX_STATE_DIR=" + state, "XDG_RUNTIME_DIR=" + rundir, "CELLBOX_LOG_LEVEL=warn"}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CELLBOX_") && !strings.HasPrefix(kv, "XDG_RUNTIME_DIR=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	d := &daemon{cmd: cmd, in: in}
	d.conn = jsonrpc2.NewConn(jsonrpc2.NewHeaderStream(struct {
		io.Reader
		io.Writer
		io.Closer
	}{out, in, in}))
	d.conn.Go(context.Background(), func(ctx context.Context, req *jsonrpc2.Request) (any, error) {
		if req.IsCall() {
			return nil, jsonrpc2.ErrMethodNotFound
		}
		return nil, nil
	})
	var res protocol.InitializeResult
	if err := d.call(protocol.MethodInitialize, protocol.InitializeParams{ProtocolVersion: 1, ClientInfo: &protocol.ClientInfo{Name: "cellbox-sql-bench", Version: "1"}}, &res); err != nil {
		d.close()
		return nil, err
	}
	d.caps = res.Capabilities
	return d, d.conn.Notify(context.Background(), protocol.MethodInitialized, struct{}{})
}

func (d *daemon) call(method string, params, result any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, err := d.conn.Call(ctx, method, params, result)
	if err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	return nil
}

func (d *daemon) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _ = d.conn.Call(ctx, protocol.MethodShutdown, nil, nil)
	_ = d.conn.Notify(ctx, protocol.MethodExit, nil)
	d.in.Close()
	done := make(chan struct{})
	go func() { _ = d.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = d.cmd.Process.Kill()
		<-done
	}
}

// execute runs code and says how long the call took.
func (d *daemon) execute(kid, code string) (time.Duration, error) {
	d.seq++
	var res protocol.ExecuteResult
	t0 := time.Now()
	if err := d.call(protocol.MethodKernelExecute, protocol.KernelExecuteParams{KernelID: kid, Code: code, ExecutionID: fmt.Sprintf("b%d", d.seq)}, &res); err != nil {
		return 0, err
	}
	took := time.Since(t0)
	if res.Status != protocol.ExecutionStatusOK {
		return 0, fmt.Errorf("%q: %s %+v", code, res.Status, res.Error)
	}
	return took, nil
}

// coldStart is a kernel started in a fresh scratch workspace and its first
// result; the kernel is shut down after.
func (d *daemon) coldStart() (time.Duration, error) {
	t0 := time.Now()
	var k protocol.KernelStartResult
	if err := d.call(protocol.MethodKernelStart, protocol.KernelStartParams{Language: "sql"}, &k); err != nil {
		return 0, err
	}
	if _, err := d.execute(k.KernelID, oneQuery); err != nil {
		return 0, err
	}
	took := time.Since(t0)
	return took, d.call(protocol.MethodKernelShutdown, protocol.KernelIDParams{KernelID: k.KernelID}, nil)
}

// cli is a persistent sqlite3 shell on a pipe.
type cli struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

func startCLI(bin, db string) (*cli, error) {
	cmd := exec.Command(bin, "-batch", "-list", db)
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &cli{cmd: cmd, in: in, out: bufio.NewReader(out)}, nil
}

// query sends q and reads the lines lines of its answer. A query without
// rows (lines 0) is followed by a marker query, whose line says it ended.
func (c *cli) query(q string, lines int) (time.Duration, error) {
	t0 := time.Now()
	text, want := q+"\n", lines
	if lines == 0 {
		text, want = q+"\nSELECT 'done-mark';\n", 1
	}
	if _, err := io.WriteString(c.in, text); err != nil {
		return 0, err
	}
	for range want {
		if _, err := c.out.ReadString('\n'); err != nil {
			return 0, fmt.Errorf("sqlite3 %q: %w", q, err)
		}
	}
	return time.Since(t0), nil
}

func (c *cli) close() {
	c.in.Close()
	_ = c.cmd.Wait()
}

// cliColdStart starts sqlite3 on db and reads its answer to SELECT 1.
func cliColdStart(bin, db string) (time.Duration, error) {
	t0 := time.Now()
	c, err := startCLI(bin, db)
	if err != nil {
		return 0, err
	}
	defer c.close()
	if _, err := c.query(oneQuery, 1); err != nil {
		return 0, err
	}
	return time.Since(t0), nil
}
