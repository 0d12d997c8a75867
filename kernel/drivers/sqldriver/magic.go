package sqldriver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// `%connect` is the sql kernel's one magic: on the cell's first line that
// is not blank, alone on it, it chooses the database the kernel's cells
// run on. The statements after it in the cell run on the new database.
//
//	%connect                  says what the kernel is connected to
//	%connect postgres         a throwaway PostgreSQL server in the sandbox
//	%connect sqlite [PATH]    SQLite: the kernel's database (CELLBOX_SQL_DSN,
//	                          or DefaultDB), or PATH
//
// Leaving PostgreSQL (for SQLite, or when the kernel restarts or ends)
// stops its server: its data is gone.

// magic is a cell's %connect line.
type magic struct {
	args   []string
	line   string // the line as written
	lineNo int    // its line in the cell, 1-based
	// rest is the cell with the line blanked, so that the statements
	// after it keep their lines.
	rest string
}

// cutMagic finds a %connect line at the start of a cell.
func cutMagic(code string) (magic, bool) {
	lineNo := 1
	for i := 0; i < len(code); {
		j := strings.IndexByte(code[i:], '\n')
		end := len(code)
		if j >= 0 {
			end = i + j
		}
		line := strings.TrimSpace(code[i:end])
		switch {
		case line == "":
			lineNo++
			i = end + 1
			continue
		case line != "%connect" && !strings.HasPrefix(line, "%connect ") && !strings.HasPrefix(line, "%connect\t"):
			return magic{}, false
		}
		return magic{args: strings.Fields(line)[1:], line: line, lineNo: lineNo, rest: code[:i] + code[end:]}, true
	}
	return magic{}, false
}

// usageError is a failed %connect: ename UsageError (bad arguments) or
// ConnectError.
type usageError struct {
	ename, msg string
}

func (e *usageError) Error() string { return e.msg }

const connectUsage = "usage: %connect [postgres | sqlite [PATH]]"

// connect runs a %connect line: it opens the new backend and then closes
// the old one, and says what the kernel is connected to. When the new
// one cannot be opened, the kernel stays on the old one.
func (d *driver) connect(ctx context.Context, req *request, args []string) error {
	var nb backend
	switch {
	case len(args) == 0:
		if !req.Silent {
			d.w.print("connected to " + d.be.describe() + "\n")
		}
		return nil
	case len(args) == 1 && (args[0] == "postgres" || args[0] == "postgresql"):
		if pg, ok := d.be.(*pgBackend); ok && pg.srv.alive() {
			if !req.Silent {
				d.w.print("already connected to " + d.be.describe() + "\n")
			}
			return nil
		}
		pg, err := openPostgres(ctx, d.w.print)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(err, errNoPostgres) {
				return &usageError{"ConnectError", err.Error()}
			}
			return &usageError{"ConnectError", "start PostgreSQL: " + err.Error()}
		}
		nb = pg
		if !req.Silent {
			how := fmt.Sprintf("the template copied in %s, started in %s", ms(pg.srv.copy), ms(pg.srv.start))
			if pg.srv.initdb > 0 {
				how = fmt.Sprintf("initdb in %s (once per workspace sandbox), ", ms(pg.srv.initdb)) + how
			}
			defer d.w.print("connected to " + pg.describe() + " (" + how + ")\n")
		}
	case len(args) <= 2 && args[0] == "sqlite":
		dsn := d.dsn
		if len(args) == 2 {
			dsn = args[1]
		}
		sq, err := openSQLite(dsn)
		if err != nil {
			return &usageError{"ConnectError", err.Error()}
		}
		nb = sq
		if !req.Silent {
			defer d.w.print("connected to " + sq.describe() + "\n")
		}
	default:
		return &usageError{"UsageError", connectUsage}
	}
	old := d.be
	d.be = nb
	old.close()
	d.refreshSchema()
	return nil
}

// ms is a duration in milliseconds.
func ms(d time.Duration) string {
	return fmt.Sprintf("%d ms", d.Milliseconds())
}
