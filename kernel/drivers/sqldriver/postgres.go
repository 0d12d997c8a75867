package sqldriver

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
)

// pgBackend is a throwaway PostgreSQL server of this driver (pgserver.go)
// and one connection to it, driven with pgconn's simple query protocol:
// every statement PostgreSQL takes, values in their text form as psql
// shows them. A lost connection is made again at the next statement, on
// the same server.
type pgBackend struct {
	in     *pgInstall
	srv    *pgServer
	conn   *pgconn.PgConn
	ver    string
	keys   []string // the server's keywords (pg_get_keywords)
	reconn bool     // the connection was made again: say so once
	// notice prints the server's notices (RAISE NOTICE, "... skipping")
	// on stdout, as psql does on stderr; quiet (a silent execution) drops
	// them.
	notice func(string)
	quiet  bool
}

// openPostgres starts a server and connects to it.
func openPostgres(ctx context.Context, notice func(string)) (*pgBackend, error) {
	in, err := findPostgres(ctx)
	if err != nil {
		return nil, err
	}
	srv, err := startPostgres(ctx, in)
	if err != nil {
		return nil, err
	}
	b := &pgBackend{in: in, srv: srv, ver: in.version, notice: notice}
	if err := b.connect(ctx); err != nil {
		srv.stop()
		return nil, err
	}
	if rs, err := b.conn.Exec(ctx, "SELECT upper(word) FROM pg_get_keywords() ORDER BY 1").ReadAll(); err == nil && len(rs) == 1 {
		for _, r := range rs[0].Rows {
			if len(r) == 1 {
				b.keys = append(b.keys, string(r[0]))
			}
		}
	}
	return b, nil
}

// connect connects to the server. An interrupt (the context's end) sends
// a cancel request at once; a server that does not answer it within 5 s
// loses the connection, made again at the next statement.
func (b *pgBackend) connect(ctx context.Context) error {
	cfg, err := pgconn.ParseConfig("")
	if err != nil {
		return fmt.Errorf("connect to postgres: %w", err)
	}
	cfg.Host, cfg.Port, cfg.User, cfg.Database = b.srv.sock, 5432, pgUser, "postgres"
	cfg.Password, cfg.TLSConfig, cfg.Fallbacks = "", nil, nil
	cfg.RuntimeParams = map[string]string{"application_name": "cellbox"}
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		if b.notice != nil && !b.quiet {
			b.notice(n.Severity + ": " + clean(n.Message, 2000) + "\n")
		}
	}
	cfg.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.CancelRequestContextWatcherHandler{Conn: c, CancelRequestDelay: 0, DeadlineDelay: 5 * time.Second}
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := pgconn.ConnectConfig(cctx, cfg)
	if err != nil {
		return fmt.Errorf("connect to postgres: %w", err)
	}
	b.conn = conn
	return nil
}

func (b *pgBackend) close() {
	if b.conn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = b.conn.Close(ctx)
		cancel()
	}
	b.srv.stop()
}

func (b *pgBackend) version() string { return b.ver }

func (b *pgBackend) describe() string {
	return fmt.Sprintf("PostgreSQL %s: a throwaway server in the sandbox (socket %s, database postgres, user %s); its data is gone when the kernel restarts or ends",
		b.ver, b.srv.sock, pgUser)
}

func (b *pgBackend) split(cell string) []Statement { return SplitPG(cell) }

// errServerGone: the server has died.
var errServerGone = errors.New("the PostgreSQL server is gone (its data with it): `%connect postgres` starts a new one")

// ensure makes the connection again if it was lost.
func (b *pgBackend) ensure(ctx context.Context) error {
	if b.conn != nil && !b.conn.IsClosed() {
		return nil
	}
	if !b.srv.alive() {
		return errServerGone
	}
	if err := b.connect(ctx); err != nil {
		return err
	}
	b.reconn = true
	return nil
}

// Type oids shown right-aligned: the numbers.
var pgNumberTypes = map[uint32]bool{20: true, 21: true, 23: true, 26: true, 700: true, 701: true, 1700: true, 790: true}

func (b *pgBackend) exec(ctx context.Context, text string) (*Table, int64, error) {
	if copyStdio(text) {
		return nil, -1, errCopyStdio
	}
	if err := b.ensure(ctx); err != nil {
		return nil, -1, err
	}
	mrr := b.conn.Exec(ctx, text)
	var t *Table
	changed := int64(-1)
	for mrr.NextResult() {
		rr := mrr.ResultReader()
		fields := rr.FieldDescriptions()
		var cur *Table
		if len(fields) > 0 {
			cur = &Table{Columns: make([]string, len(fields))}
			for i, f := range fields {
				cur.Columns[i] = f.Name
			}
		}
		for rr.NextRow() {
			if cur == nil {
				continue
			}
			if len(cur.Rows) >= MaxRows {
				cur.More++
				continue
			}
			vals := rr.Values()
			row := make([]Cell, len(cur.Columns))
			for i := range row {
				switch {
				case i >= len(vals) || vals[i] == nil:
					row[i] = Cell{Text: "NULL", Null: true}
				default:
					row[i] = Cell{Text: string(vals[i]), Number: pgNumberTypes[fields[i].DataTypeOID]}
				}
			}
			cur.Rows = append(cur.Rows, row)
		}
		tag, err := rr.Close()
		if err != nil {
			_ = mrr.Close()
			return nil, -1, err
		}
		if cur != nil {
			t, changed = cur, -1
		} else if changesRowsTag(tag) {
			t, changed = nil, tag.RowsAffected()
		}
	}
	if err := mrr.Close(); err != nil {
		return nil, -1, err
	}
	return t, changed, nil
}

// errCopyStdio refuses COPY ... FROM STDIN and TO STDOUT: their data
// would be the client's, which a cell does not have (the server would
// wait for it).
var errCopyStdio = errors.New("COPY ... FROM STDIN and COPY ... TO STDOUT need psql's side of the copy: copy from or to a file of the sandbox instead (COPY t FROM '/workspace/data.csv' WITH (FORMAT csv)), or SELECT")

// copyStdio says whether a statement is a COPY from STDIN or to STDOUT:
// its first word COPY, and STDIN or STDOUT a word of it outside strings
// and comments.
func copyStdio(text string) bool {
	first := true
	for i := 0; i < len(text); {
		class, end, _ := pgToken(text, i)
		if class == tkOther && pgIDChar(text[i]) {
			w := strings.ToUpper(text[i:end])
			if first && w != "COPY" {
				return false
			}
			if w == "STDIN" || w == "STDOUT" {
				return true
			}
			first = false
		}
		i = end
	}
	return false
}

// changesRowsTag says whether a command changed rows: INSERT, UPDATE,
// DELETE, MERGE (not SELECT, CREATE TABLE AS, COPY or the others).
func changesRowsTag(tag pgconn.CommandTag) bool {
	return tag.Insert() || tag.Update() || tag.Delete() || strings.HasPrefix(tag.String(), "MERGE ")
}

func (b *pgBackend) errorInfo(err error) (string, string, int, []string) {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return "PostgresError", err.Error(), 0, nil
	}
	var extra []string
	if pe.Detail != "" {
		extra = append(extra, "DETAIL: "+clean(pe.Detail, 500))
	}
	if pe.Hint != "" {
		extra = append(extra, "HINT: "+clean(pe.Hint, 500))
	}
	if pe.Where != "" {
		extra = append(extra, "CONTEXT: "+clean(pe.Where, 500))
	}
	return pgErrorName(pe.Code), pe.Message + " (SQLSTATE " + pe.Code + ")", int(pe.Position), extra
}

// pgObjects is the query of the tables and views the driver knows:
// those of every schema but the system's, a name qualified by its schema
// unless the search path finds it.
const pgObjects = `SELECT c.oid::text, n.nspname, c.relname,
	CASE c.relkind WHEN 'v' THEN 'view' WHEN 'm' THEN 'materialized view' WHEN 'f' THEN 'foreign table' ELSE 'table' END,
	pg_table_is_visible(c.oid), CASE WHEN c.relkind IN ('v', 'm') THEN coalesce(pg_get_viewdef(c.oid), '') ELSE '' END
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f') AND n.nspname <> 'information_schema'
	AND (n.nspname NOT LIKE 'pg\_%' OR n.nspname LIKE 'pg\_temp\_%')
ORDER BY 2, 3 LIMIT ` + "2000"

func (b *pgBackend) readSchema(ctx context.Context) (*schema, error) {
	if err := b.ensure(ctx); err != nil {
		return nil, err
	}
	s := &schema{keywords: b.keys, functions: pgFunctions}
	if len(s.keywords) == 0 {
		s.keywords = keywords
	}
	rs, err := b.conn.Exec(ctx, pgObjects).ReadAll()
	if err != nil {
		return nil, err
	}
	if len(rs) != 1 || rs[0].Err != nil {
		return nil, fmt.Errorf("read the schema: %v", rs)
	}
	oids := map[string]int{}
	for _, r := range rs[0].Rows {
		if len(r) != 6 {
			continue
		}
		o := object{schema: string(r[1]), name: string(r[2]), kind: string(r[3]), sql: string(r[5])}
		o.qualified = quoteIdent(o.schema) + "." + quoteIdent(o.name)
		if string(r[4]) != "t" {
			o.name = o.schema + "." + o.name
		}
		if o.sql != "" {
			o.sql = "CREATE VIEW " + o.qualified + " AS\n" + strings.TrimRight(o.sql, ";")
		}
		oids[string(r[0])] = len(s.objects)
		s.objects = append(s.objects, o)
	}
	ns, err := b.conn.Exec(ctx, `SELECT nspname FROM pg_namespace WHERE nspname <> 'information_schema' AND nspname NOT LIKE 'pg\_%' ORDER BY 1 LIMIT 500`).ReadAll()
	if err == nil && len(ns) == 1 {
		for _, r := range ns[0].Rows {
			if len(r) == 1 {
				s.namespaces = append(s.namespaces, string(r[0]))
			}
		}
	}
	if len(oids) == 0 {
		return s, nil
	}
	keys := make([]string, 0, len(oids))
	for oid := range oids {
		if _, err := strconv.ParseUint(oid, 10, 32); err == nil {
			keys = append(keys, oid)
		}
	}
	cols, err := b.conn.Exec(ctx, `SELECT a.attrelid::text, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull,
		coalesce((SELECT array_position(i.indkey::int2[], a.attnum) FROM pg_index i WHERE i.indrelid = a.attrelid AND i.indisprimary), 0) + 0
		FROM pg_attribute a WHERE a.attrelid IN (`+strings.Join(keys, ",")+`) AND a.attnum > 0 AND NOT a.attisdropped
		ORDER BY a.attrelid, a.attnum LIMIT 100000`).ReadAll()
	if err != nil || len(cols) != 1 || cols[0].Err != nil {
		return s, nil // the tables without their columns
	}
	for _, r := range cols[0].Rows {
		if len(r) != 5 {
			continue
		}
		i, ok := oids[string(r[0])]
		if !ok || len(s.objects[i].columns) >= maxColumns {
			continue
		}
		c := column{name: string(r[1]), typ: string(r[2]), notNull: string(r[3]) == "t"}
		c.pk, _ = strconv.Atoi(string(r[4]))
		s.objects[i].columns = append(s.objects[i].columns, c)
	}
	return s, nil
}

func (b *pgBackend) count(ctx context.Context, o *object) (int64, error) {
	if err := b.ensure(ctx); err != nil {
		return 0, err
	}
	rs, err := b.conn.Exec(ctx, "SELECT count(*) FROM "+o.qualified).ReadAll()
	if err != nil {
		return 0, err
	}
	if len(rs) != 1 || len(rs[0].Rows) != 1 || len(rs[0].Rows[0]) != 1 {
		return 0, errors.New("count: no row")
	}
	return strconv.ParseInt(string(rs[0].Rows[0][0]), 10, 64)
}

// positionLine is the line, counted from the statement's first, of the
// pos-th character (1-based) of stmt: PostgreSQL's error position.
func positionLine(stmt string, pos int) int {
	line, n := 0, 0
	for i := 0; i < len(stmt); {
		n++
		if n >= pos {
			break
		}
		r, size := utf8.DecodeRuneInString(stmt[i:])
		if r == '\n' {
			line++
		}
		i += size
	}
	return line
}

// pgFunctions are common PostgreSQL functions, for completion.
var pgFunctions = []string{
	"abs", "age", "array_agg", "array_length", "avg", "bool_and", "bool_or", "btrim", "ceil", "char_length",
	"coalesce", "concat", "concat_ws", "count", "current_database", "current_schema", "current_setting",
	"current_user", "date_part", "date_trunc", "dense_rank", "extract", "first_value", "floor", "format",
	"format_type", "gen_random_uuid", "generate_series", "greatest", "json_agg", "json_build_object",
	"jsonb_agg", "jsonb_build_object", "jsonb_each", "jsonb_object_agg", "jsonb_path_query", "jsonb_pretty",
	"jsonb_set", "lag", "last_value", "lead", "least", "left", "length", "lower", "lpad", "ltrim", "make_date",
	"max", "md5", "min", "now", "nullif", "percentile_cont", "pg_sleep", "pg_typeof", "position", "random",
	"rank", "regexp_match", "regexp_matches", "regexp_replace", "regexp_split_to_table", "repeat", "replace",
	"right", "round", "row_number", "rpad", "rtrim", "split_part", "sqrt", "string_agg", "string_to_array",
	"strpos", "substr", "substring", "sum", "to_char", "to_date", "to_json", "to_jsonb", "to_number",
	"to_timestamp", "trim", "trunc", "unnest", "upper", "version",
}
