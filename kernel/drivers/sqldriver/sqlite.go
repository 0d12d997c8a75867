package sqldriver

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"modernc.org/sqlite"
)

// sqliteBackend is SQLite: one connection for the driver's life (a
// transaction begun in one cell goes on in the next).
type sqliteBackend struct {
	dsn  string
	db   *sql.DB
	conn *sql.Conn
	ver  string
}

// busyTimeout is how long a statement waits for a lock another process
// holds (another kernel of the workspace on the same database).
const busyTimeout = 5 * time.Second

// openSQLite opens the database dsn names (DefaultDB when empty).
func openSQLite(dsn string) (*sqliteBackend, error) {
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
	b := &sqliteBackend{dsn: dsn, db: db, conn: conn}
	if _, err := conn.ExecContext(ctx, fmt.Sprintf("PRAGMA busy_timeout = %d", busyTimeout.Milliseconds())); err != nil {
		b.close()
		return nil, fmt.Errorf("open %s: %w", dsn, err)
	}
	if err := conn.QueryRowContext(ctx, "SELECT sqlite_version()").Scan(&b.ver); err != nil {
		b.close()
		return nil, fmt.Errorf("open %s: %w", dsn, err)
	}
	return b, nil
}

func (b *sqliteBackend) close() {
	b.conn.Close()
	b.db.Close()
}

func (b *sqliteBackend) version() string { return b.ver }

func (b *sqliteBackend) describe() string { return "SQLite " + b.ver + ": " + b.dsn }

func (b *sqliteBackend) split(cell string) []Statement { return Split(cell) }

func (b *sqliteBackend) exec(ctx context.Context, text string) (*Table, int64, error) {
	rows, err := b.conn.QueryContext(ctx, text)
	if err != nil {
		return nil, -1, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, -1, err
	}
	if len(cols) == 0 {
		for rows.Next() {
		}
		if err := rows.Err(); err != nil {
			return nil, -1, err
		}
		if err := rows.Close(); err != nil {
			return nil, -1, err
		}
		if !changesRows(text) {
			return nil, -1, nil
		}
		var n int64
		if err := b.conn.QueryRowContext(ctx, "SELECT changes()").Scan(&n); err != nil {
			return nil, -1, err
		}
		return nil, n, nil
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
			return nil, -1, err
		}
		row := make([]Cell, len(cols))
		for i, v := range vals {
			row[i] = FormatValue(v, types[i])
		}
		t.Rows = append(t.Rows, row)
	}
	if err := rows.Err(); err != nil {
		return nil, -1, err
	}
	return t, -1, ctx.Err()
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

func (b *sqliteBackend) errorInfo(err error) (string, string, int, []string) {
	var se *sqlite.Error
	if errors.As(err, &se) {
		ename := "SQLError"
		if name, ok := sqliteCodes[se.Code()&0xff]; ok {
			ename = name
		}
		// "SQL logic error: no such table: t (1)": the code is in ename.
		return ename, strings.TrimSuffix(se.Error(), fmt.Sprintf(" (%d)", se.Code())), 0, nil
	}
	return "SQLError", err.Error(), 0, nil
}

func (b *sqliteBackend) readSchema(ctx context.Context) (*schema, error) {
	conn := b.conn
	rows, err := conn.QueryContext(ctx, `SELECT name, type, coalesce(sql, '') FROM sqlite_schema
		WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite\_%' ESCAPE '\' ORDER BY name LIMIT ?`, maxObjects)
	if err != nil {
		return nil, err
	}
	s := &schema{keywords: keywords, functions: functions}
	for rows.Next() {
		var o object
		if err := rows.Scan(&o.name, &o.kind, &o.sql); err != nil {
			rows.Close()
			return nil, err
		}
		s.objects = append(s.objects, o)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for i := range s.objects {
		o := &s.objects[i]
		cr, err := conn.QueryContext(ctx, `SELECT name, type, "notnull", pk FROM pragma_table_info(?) LIMIT ?`, o.name, maxColumns)
		if err != nil {
			continue // a view over a table dropped since: no columns
		}
		for cr.Next() {
			var c column
			if cr.Scan(&c.name, &c.typ, &c.notNull, &c.pk) == nil {
				o.columns = append(o.columns, c)
			}
		}
		cr.Close()
	}
	return s, nil
}

func (b *sqliteBackend) count(ctx context.Context, o *object) (int64, error) {
	var n int64
	err := b.conn.QueryRowContext(ctx, "SELECT count(*) FROM "+quoteIdent(o.name)).Scan(&n)
	return n, err
}
