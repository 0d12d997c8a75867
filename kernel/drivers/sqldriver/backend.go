package sqldriver

import (
	"context"
)

// backend is the database a kernel's cells run on: SQLite (the default)
// or a throwaway PostgreSQL server in the sandbox (`%connect postgres`).
// Its methods run on the driver's execution goroutine, one at a time.
type backend interface {
	// exec runs one statement. A statement with result columns gives its
	// table (at most MaxRows rows, the rest counted); one that changes
	// rows gives how many (changed >= 0); other statements neither
	// (changed < 0).
	exec(ctx context.Context, text string) (t *Table, changed int64, err error)
	// readSchema reads the tables and views, for completion, inspect and
	// variables.
	readSchema(ctx context.Context) (*schema, error)
	// count counts a table's or view's rows.
	count(ctx context.Context, o *object) (int64, error)
	// errorInfo is a failed statement's ename and evalue, and the 1-based
	// character of the statement where it failed (0: unknown), with lines
	// to add to the traceback (PostgreSQL's DETAIL and HINT).
	errorInfo(err error) (ename, evalue string, pos int, extra []string)
	// split cuts a cell into statements.
	split(cell string) []Statement
	// describe says what the kernel is connected to (`%connect`).
	describe() string
	version() string
	close()
}
