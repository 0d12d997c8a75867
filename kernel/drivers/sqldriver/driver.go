package sqldriver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cellbox-dev/cellbox/kernel/drivers/driverio"
)

// driver is the kernel's state: the backend its cells run on (SQLite by
// default, or a throwaway PostgreSQL server after `%connect postgres`).
type driver struct {
	be backend
	// dsn is the SQLite database of the kernel's CELLBOX_SQL_DSN ("" for
	// DefaultDB): where `%connect sqlite` goes back to.
	dsn string
	w   *wire

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

// open opens the SQLite database dsn names (DefaultDB when empty).
func open(dsn string, w *wire) (*driver, error) {
	be, err := openSQLite(dsn)
	if err != nil {
		return nil, err
	}
	d := &driver{be: be, dsn: dsn, w: w, schema: &schema{keywords: keywords, functions: functions}}
	d.refreshSchema()
	return d, nil
}

func (d *driver) close() {
	d.be.close()
}

// interrupts cancels the running execution at each SIGINT, or the
// execute the manager had written before the signal when it has not
// started yet.
func (d *driver) interrupts(ch <-chan os.Signal, reqs *driverio.RequestPipe) {
	for range ch {
		mark := reqs.Mark()
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
	d.w.send(&event{Ev: "ready", Version: d.be.version(), Pid: os.Getpid()})
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
				d.w.reply(req.ID, isComplete(req.Code, d.currentSchema().pg), nil)
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
	code := req.Code
	var failed *stmtError
	if m, ok := cutMagic(code); ok {
		code = m.rest
		if err := d.connect(ctx, req, m.args); err != nil {
			failed = &stmtError{Statement{Text: m.line, Line: m.lineNo}, err}
		}
	}
	var stmts []Statement
	if failed == nil {
		stmts = d.be.split(code)
	}
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
	if pg, ok := d.be.(*pgBackend); ok {
		pg.quiet = req.Silent
	}
	t, changed, err := d.be.exec(ctx, st.Text)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if pg, ok := d.be.(*pgBackend); ok && pg.reconn {
		pg.reconn = false
		d.w.print("(the connection to the PostgreSQL server was lost and made again: the session's settings and temporary tables are gone)\n")
	}
	if req.Silent {
		return nil
	}
	switch {
	case t != nil:
		ev := "display"
		if last {
			ev = "result"
		}
		d.w.send(&event{Ev: ev, ID: req.ID, Data: map[string]any{"text/plain": t.Text(), "text/html": t.HTML()}, Metadata: map[string]any{}})
	case changed == 1:
		d.w.print("1 row changed\n")
	case changed >= 0:
		d.w.print(fmt.Sprintf("%d rows changed\n", changed))
	}
	return nil
}

// describe is the error of a failed statement: its name, its message and
// where it is, "PATH: line N" with the statement's first line under it.
// PATH is the execute's source path, "<cell>" without one; the line counts
// from the source's line.
func (d *driver) describe(req *request, f *stmtError, interrupted bool) *execError {
	e := &execError{Ename: "SQLError", Evalue: f.err.Error()}
	pos := 0
	var extra []string
	var ue *usageError
	switch {
	case interrupted:
		e.Ename, e.Evalue = "Interrupted", "the query was interrupted"
	case errors.As(f.err, &ue):
		e.Ename, e.Evalue = ue.ename, ue.msg
	default:
		e.Ename, e.Evalue, pos, extra = d.be.errorInfo(f.err)
	}
	path, line := "<cell>", f.stmt.Line
	text := f.stmt.Text
	if pos > 0 {
		// The line of the error's position, and that line of the statement.
		n := positionLine(text, pos)
		line += n
		if n > 0 {
			text = strings.SplitN(text, "\n", n+2)[n]
		}
	}
	if req.Source != nil {
		if req.Source.Path != "" {
			path = req.Source.Path
		}
		if req.Source.Line > 0 {
			line += req.Source.Line - 1
		}
	}
	first, _, more := strings.Cut(text, "\n")
	if more {
		first += " …"
	}
	e.Traceback = []string{
		fmt.Sprintf("%s: line %d", path, line),
		"    " + clean(first, 200),
		e.Ename + ": " + e.Evalue,
	}
	e.Traceback = append(e.Traceback, extra...)
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
