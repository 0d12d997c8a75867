package kernel

import (
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/cellbox-dev/cellbox/kernel/drivers/sqldriver"
	"github.com/cellbox-dev/cellbox/protocol"
)

// The sql language (PROTOCOL.md §8): SQLite, built into this binary
// (modernc.org/sqlite) and run as its entry sqldriver inside the sandbox,
// never in the daemon, so that what a statement opens (ATTACH, the
// database named by CELLBOX_SQL_DSN) is what the sandbox shows.

// sqlDriver starts the sql driver: this binary's entry, in the sandbox.
var sqlDriver = driverSpec{
	entry:     func(string) ([]string, string) { return sqldriver.Command() },
	mimetype:  "text/x-sql",
	extension: ".sql",
}

// sqlLanguage is the sql language: always available, its version
// SQLite's. SQL reads no standard input, so a sql kernel never sends
// kernel/inputRequest.
func sqlLanguage() Language {
	return Language{
		ID:             "sql",
		DisplayName:    "SQL (SQLite)",
		Version:        sqlite3.SQLITE_VERSION,
		FileExtensions: []string{".sql"},
		Available:      true,
		Unsupported:    []string{protocol.MethodKernelInputRequest},
	}
}
