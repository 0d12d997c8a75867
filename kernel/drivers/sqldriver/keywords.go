package sqldriver

// keywords are SQLite's keywords (sqlite3_keyword_name), for completion.
var keywords = []string{
	"ABORT", "ACTION", "ADD", "AFTER", "ALL", "ALTER", "ALWAYS", "ANALYZE", "AND", "AS", "ASC",
	"ATTACH", "AUTOINCREMENT", "BEFORE", "BEGIN", "BETWEEN", "BY", "CASCADE", "CASE", "CAST",
	"CHECK", "COLLATE", "COLUMN", "COMMIT", "CONFLICT", "CONSTRAINT", "CREATE", "CROSS",
	"CURRENT", "CURRENT_DATE", "CURRENT_TIME", "CURRENT_TIMESTAMP", "DATABASE", "DEFAULT",
	"DEFERRABLE", "DEFERRED", "DELETE", "DESC", "DETACH", "DISTINCT", "DO", "DROP", "EACH",
	"ELSE", "END", "ESCAPE", "EXCEPT", "EXCLUDE", "EXCLUSIVE", "EXISTS", "EXPLAIN", "FAIL",
	"FILTER", "FIRST", "FOLLOWING", "FOR", "FOREIGN", "FROM", "FULL", "GENERATED", "GLOB",
	"GROUP", "GROUPS", "HAVING", "IF", "IGNORE", "IMMEDIATE", "IN", "INDEX", "INDEXED",
	"INITIALLY", "INNER", "INSERT", "INSTEAD", "INTERSECT", "INTO", "IS", "ISNULL", "JOIN",
	"KEY", "LAST", "LEFT", "LIKE", "LIMIT", "MATCH", "MATERIALIZED", "NATURAL", "NO", "NOT",
	"NOTHING", "NOTNULL", "NULL", "NULLS", "OF", "OFFSET", "ON", "OR", "ORDER", "OTHERS",
	"OUTER", "OVER", "PARTITION", "PLAN", "PRAGMA", "PRECEDING", "PRIMARY", "QUERY", "RAISE",
	"RANGE", "RECURSIVE", "REFERENCES", "REGEXP", "REINDEX", "RELEASE", "RENAME", "REPLACE",
	"RESTRICT", "RETURNING", "RIGHT", "ROLLBACK", "ROW", "ROWS", "SAVEPOINT", "SELECT", "SET",
	"TABLE", "TEMP", "TEMPORARY", "THEN", "TIES", "TO", "TRANSACTION", "TRIGGER", "UNBOUNDED",
	"UNION", "UNIQUE", "UPDATE", "USING", "VACUUM", "VALUES", "VIEW", "VIRTUAL", "WHEN", "WHERE",
	"WINDOW", "WITH", "WITHOUT",
	// Type names and the STRICT table option, which are no keywords but
	// are typed like them.
	"INTEGER", "REAL", "TEXT", "BLOB", "NUMERIC", "STRICT",
}

// functions are SQLite's built-in functions, for completion.
var functions = []string{
	"abs", "avg", "changes", "char", "coalesce", "concat", "concat_ws", "count", "date",
	"datetime", "format", "glob", "group_concat", "hex", "ifnull", "iif", "instr", "json",
	"json_array", "json_array_length", "json_each", "json_extract", "json_group_array",
	"json_group_object", "json_object", "json_tree", "julianday", "last_insert_rowid", "length",
	"like", "lower", "ltrim", "max", "min", "nullif", "printf", "quote", "random", "randomblob",
	"replace", "round", "rtrim", "sign", "soundex", "sqlite_version", "strftime", "string_agg",
	"substr", "substring", "sum", "time", "total", "total_changes", "trim", "typeof", "unhex",
	"unicode", "unixepoch", "upper", "zeroblob", "row_number", "rank", "dense_rank",
	"percent_rank", "cume_dist", "ntile", "lag", "lead", "first_value", "last_value",
	"nth_value",
}
