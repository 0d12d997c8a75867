package sqldriver

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"modernc.org/sqlite"
)

// driver is the kernel's state: one connection to the database, kept for
// the kernel's life (a transaction begun in one cell goes on in the next).
type driver struct {
	db   *sql.DB
	conn *sql.Conn
	w    *wire
	// version is SQLite's.
	version string

	mu sync.Mutex
	// cancel ends the running execution's queries (an interrupt); nil
	// while none runs. runEnd is that execute's end in the request pipe.
	cancel context.CancelFunc
	runEnd int64
	// sigMark is the pipe's mark at the last SIGINT that found no
	// execution running: an execute written before it is interrupted as
	// it starts (the signal overtook the request).
	sigMark int64
	// schema is what completion and inspect know of the database, read
	// after each execution (they answer while a query runs).
	schema *schema
}

// busyTimeout is how long a statement waits for a lock another process
// holds (another kernel of the workspace on the same database).
const busyTimeout = 5 * time.Second

// open opens the database dsn names (DefaultDB when empty).
func open(dsn string, w *wire) (*driver, error) {
	if dsn == "" {
		dsn = DefaultDB
	}
	// A path (not a file: URI, not :memory:) gets its directory made, so
	// that the default's .cellbox/ and a DSN's data/ need no step of the
	// user's.
	if !strings.HasPrefix(dsn, "file:") && dsn != ":memory:" {
		path, _, _ := strings.Cut(dsn, "?")
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, fmt.Errorf("create the database's directory: %w", err)
		}
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", dsn, err)
	}
	db.SetMaxOpenConns(1)
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open %s: %w", dsn, err)
	}
	d := &driver{db: db, conn: conn, w: w, schema: &schema{}}
	if _, err := conn.ExecContext(ctx, fmt.Sprintf("PRAGMA busy_timeout = %d", busyTimeout.Milliseconds())); err != nil {
		d.close()
		return nil, fmt.Errorf("open %s: %w", dsn, err)
	}
	if err := conn.QueryRowContext(ctx, "SELECT sqlite_version()").Scan(&d.version); err != nil {
		d.close()
		return nil, fmt.Errorf("open %s: %w", dsn, err)
	}
	d.refreshSchema()
	return d, nil
}

func (d *driver) close() {
	d.conn.Close()
	d.db.Close()
}

// interrupts cancels the running execution at each SIGINT, or the
// execute the manager had written before the signal when it has not
// started yet.
func (d *driver) interrupts(ch <-chan os.Signal, reqs *requestPipe) {
	for range ch {
		mark := reqs.mark()
		d.mu.Lock()
		switch {
		case d.cancel != nil && d.runEnd <= mark:
			d.cancel()
		case d.cancel == nil:
			d.sigMark = max(d.sigMark, mark)
		}
		d.mu.Unlock()
	}
}

// serve answers requests until the manager closes the pipe. Executions and
// variables (which count rows) run one at a time on the connection;
// complete, inspect and isComplete are answered at once from what the
// driver knows of the schema, even while a query runs.
func (d *driver) serve(reqs io.Reader) int {
	var at int64 // bytes of the pipe read as requests
	d.w.send(&event{Ev: "ready", Version: d.version, Pid: os.Getpid()})
	work := make(chan *request, 16)
	go func() {
		defer close(work)
		r := bufio.NewReaderSize(reqs, 64<<10)
		for {
			req, n, err := readRequest(r)
			at += n
			if err != nil {
				if req != nil && req.ID == "" {
					continue // a line that is no request: nothing to answer
				}
				return // end of the pipe, or an overlong line: the manager is broken
			}
			switch req.Op {
			case "execute", "variables":
				req.end = at
				work <- req
			case "complete":
				d.w.reply(req.ID, d.complete(req.Code, req.CursorPos), nil)
			case "inspect":
				d.w.reply(req.ID, d.inspect(req.Code, req.CursorPos, req.DetailLevel), nil)
			case "isComplete":
				d.w.reply(req.ID, isComplete(req.Code), nil)
			case "input", "interrupt":
				// SQL never reads standard input; interrupts come as SIGINT.
			default:
				d.w.reply(req.ID, nil, fmt.Errorf("sql driver: unknown request %q", req.Op))
			}
		}
	}()
	for req := range work {
		switch req.Op {
		case "execute":
			d.execute(req)
		case "variables":
			d.w.reply(req.ID, d.variables(), nil)
		}
	}
	return 0
}

// stmtError is a statement's failure: where it is and why.
type stmtError struct {
	stmt Statement
	err  error
}

// execute runs a cell's statements in order, each query's rows shown as a
// table: the last statement's as the result, earlier ones' as displays.
// The first error ends the cell.
func (d *driver) execute(req *request) {
	cpu0 := cpuTime()
	ctx, cancel := context.WithCancel(context.Background())
	d.mu.Lock()
	d.cancel, d.runEnd = cancel, req.end
	if req.end <= d.sigMark {
		cancel()
	}
	d.mu.Unlock()
	stmts := Split(req.Code)
	var failed *stmtError
	for i, st := range stmts {
		if err := d.run(ctx, req, st, i == len(stmts)-1); err != nil {
			failed = &stmtError{st, err}
			break
		}
	}
	d.mu.Lock()
	d.cancel = nil
	d.mu.Unlock()
	interrupted := ctx.Err() != nil
	cancel()
	d.refreshSchema()
	dn := &event{Ev: "done", ID: req.ID, Status: "ok"}
	if failed != nil {
		e := d.describe(req, failed, interrupted)
		d.w.send(&event{Ev: "error", ID: req.ID, Ename: e.Ename, Evalue: e.Evalue, Traceback: e.Traceback})
		dn.Status, dn.Error = "error", e
		if interrupted {
			dn.Status = "interrupted"
		}
	}
	cpu := float64(cpuTime()-cpu0) / float64(time.Millisecond)
	dn.CPUMs = &cpu
	dn.PeakMemoryBytes = peakMemory()
	d.w.send(dn)
}

// run runs one statement.
func (d *driver) run(ctx context.Context, req *request, st Statement, last bool) error {
	rows, err := d.conn.QueryContext(ctx, st.Text)
	if err != nil {
		return err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return err
	}
	if len(cols) == 0 {
		for rows.Next() {
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if err := rows.Close(); err != nil {
			return err
		}
		if changesRows(st.Text) && !req.Silent {
			var n int64
			if err := d.conn.QueryRowContext(ctx, "SELECT changes()").Scan(&n); err != nil {
				return err
			}
			if n == 1 {
				d.w.print("1 row changed\n")
			} else {
				d.w.print(fmt.Sprintf("%d rows changed\n", n))
			}
		}
		return nil
	}
	types := make([]string, len(cols))
	if cts, err := rows.ColumnTypes(); err == nil {
		for i, ct := range cts {
			if i < len(types) {
				types[i] = ct.DatabaseTypeName()
			}
		}
	}
	t := &Table{Columns: cols}
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if len(t.Rows) >= MaxRows {
			t.More++
			continue
		}
		if err := rows.Scan(ptrs...); err != nil {
			return err
		}
		row := make([]Cell, len(cols))
		for i, v := range vals {
			row[i] = FormatValue(v, types[i])
		}
		t.Rows = append(t.Rows, row)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if req.Silent {
		return nil
	}
	ev := "display"
	if last {
		ev = "result"
	}
	d.w.send(&event{Ev: ev, ID: req.ID, Data: map[string]any{"text/plain": t.Text(), "text/html": t.HTML()}, Metadata: map[string]any{}})
	return nil
}

// changesRows says whether a statement without result columns changes
// rows (INSERT, UPDATE, DELETE, REPLACE, or one of them after WITH), so
// that "N rows changed" is said for it and not for CREATE or BEGIN.
func changesRows(stmt string) bool {
	switch strings.ToUpper(firstWord(stmt)) {
	case "INSERT", "UPDATE", "DELETE", "REPLACE", "WITH":
		return true
	}
	return false
}

// firstWord is the first keyword of a statement, after blanks and
// comments.
func firstWord(s string) string {
	for i := 0; i < len(s); {
		class, end, _ := token(s, i)
		if class != tkWS {
			if isIDChar(s[i]) {
				return s[i:end]
			}
			return ""
		}
		i = end
	}
	return ""
}

// sqliteCodes names SQLite's primary result codes.
var sqliteCodes = map[int]string{
	1: "SQLITE_ERROR", 2: "SQLITE_INTERNAL", 3: "SQLITE_PERM", 4: "SQLITE_ABORT", 5: "SQLITE_BUSY",
	6: "SQLITE_LOCKED", 7: "SQLITE_NOMEM", 8: "SQLITE_READONLY", 9: "SQLITE_INTERRUPT", 10: "SQLITE_IOERR",
	11: "SQLITE_CORRUPT", 12: "SQLITE_NOTFOUND", 13: "SQLITE_FULL", 14: "SQLITE_CANTOPEN", 15: "SQLITE_PROTOCOL",
	16: "SQLITE_EMPTY", 17: "SQLITE_SCHEMA", 18: "SQLITE_TOOBIG", 19: "SQLITE_CONSTRAINT", 20: "SQLITE_MISMATCH",
	21: "SQLITE_MISUSE", 22: "SQLITE_NOLFS", 23: "SQLITE_AUTH", 24: "SQLITE_FORMAT", 25: "SQLITE_RANGE",
	26: "SQLITE_NOTADB",
}

// describe is the error of a failed statement: its name, its message and
// where it is, "PATH: line N" with the statement's first line under it.
// PATH is the execute's source path, "<cell>" without one; the line counts
// from the source's line.
func (d *driver) describe(req *request, f *stmtError, interrupted bool) *execError {
	e := &execError{Ename: "SQLError", Evalue: f.err.Error()}
	var se *sqlite.Error
	switch {
	case interrupted:
		e.Ename, e.Evalue = "Interrupted", "the query was interrupted"
	case errors.As(f.err, &se):
		if name, ok := sqliteCodes[se.Code()&0xff]; ok {
			e.Ename = name
		}
		// "SQL logic error: no such table: t (1)": the code is in ename.
		msg := strings.TrimSuffix(se.Error(), fmt.Sprintf(" (%d)", se.Code()))
		e.Evalue = msg
	}
	path, line := "<cell>", f.stmt.Line
	if req.Source != nil {
		if req.Source.Path != "" {
			path = req.Source.Path
		}
		if req.Source.Line > 0 {
			line += req.Source.Line - 1
		}
	}
	first, _, more := strings.Cut(f.stmt.Text, "\n")
	if more {
		first += " …"
	}
	e.Traceback = []string{
		fmt.Sprintf("%s: line %d", path, line),
		"    " + clean(first, 200),
		e.Ename + ": " + e.Evalue,
	}
	return e
}

// cpuTime is the process's CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
