// Package sqldriver is the driver of the sql language (PROTOCOL.md §8):
// SQLite, through the pure-Go modernc.org/sqlite, in an entry of the
// cellbox binary that the kernel manager starts inside the workspace's
// sandbox, where the binary is at sandbox.SelfPath. The database is opened
// there and only there, so an ATTACH or a DSN reaches only what the sandbox
// shows: the workspace, its /tmp, the read-only system directories.
//
// A cell's `%connect postgres` (magic.go) moves the kernel to a throwaway
// PostgreSQL server that the driver starts in the sandbox, listening on a
// unix socket only (pgserver.go), driven with pgconn (postgres.go);
// `%connect sqlite` moves it back. The server ends with the driver.
//
// It speaks the driver contract (kernel/drivers/README.md): requests are
// JSON lines on fd 3, events JSON lines on fd 4, and what it prints goes to
// fd 1, counted. A SIGINT interrupts the running query (sqlite3_interrupt)
// and the driver stays.
package sqldriver

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/cellbox-dev/cellbox/kernel/drivers/driverio"
	"github.com/cellbox-dev/cellbox/workspace/sandbox"
)

// Entry is the driver's re-exec entry (sandbox.ReexecEnv).
const Entry = "sql-driver"

// DSNEnv names the kernel's environment variable that says which database
// to open, instead of DefaultDB: a path (relative to the kernel's working
// directory) or an SQLite URI (file:...).
const DSNEnv = "CELLBOX_SQL_DSN"

// DefaultDB is the database of a sql kernel: in the workspace, so it is
// reviewed and checkpointed like any file of it.
const DefaultDB = "/workspace/.cellbox/sql.db"

func init() {
	sandbox.Register(Entry, Main)
}

// Command is how the manager starts the driver in a sandbox: the program's
// argv, and the environment entry that selects the driver.
func Command() (argv []string, envEntry string) {
	return []string{sandbox.SelfPath}, sandbox.ReexecEnv + "=" + Entry
}

// Main is the driver's entry. It returns 0 when the manager closes the
// request pipe, 1 when the database cannot be opened (said on stderr, which
// the manager reports as the kernel's death reason), 2 on a bad start.
func Main(args []string) int {
	if len(args) != 0 {
		fmt.Fprintln(os.Stderr, "sql driver: takes no arguments")
		return 2
	}
	// The manager's requests (fd 3) and events (fd 4) move to high
	// descriptors, close-on-exec (drivers/README.md).
	reqs, evs, err := driverio.Channel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "sql driver: %v\n", err)
		return 2
	}
	// SIGINT is the manager's interrupt: it cancels the running query.
	interrupts := make(chan os.Signal, 4)
	signal.Notify(interrupts, syscall.SIGINT)
	d, err := open(os.Getenv(DSNEnv), &wire{ev: evs, out: os.Stdout})
	if err != nil {
		fmt.Fprintf(os.Stderr, "sql driver: %v\n", err)
		return 1
	}
	defer d.close()
	pipe := driverio.NewRequestPipe(reqs)
	go d.interrupts(interrupts, pipe)
	return d.serve(pipe)
}
