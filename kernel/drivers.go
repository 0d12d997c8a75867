package kernel

import (
	_ "embed"
	"time"

	"github.com/cellbox-dev/cellbox/protocol"
)

// The drivers, one small program per language (drivers/README.md is their
// contract with this package). Each runs inside the workspace's sandbox.
var (
	//go:embed drivers/driver.py
	driverPython string
	//go:embed drivers/driver.js
	driverJavaScript string
	//go:embed drivers/driver.sh
	driverBash string
	//go:embed drivers/driver.rb
	driverRuby string
	//go:embed drivers/driver.R
	driverR string
)

// driverSpec says how to start one language's driver.
type driverSpec struct {
	// argv runs the driver; the sandbox looks argv[0] up on its PATH.
	argv []string
	// bashFraming: requests are NUL-terminated fields (drivers/README.md).
	bashFraming bool
	// interruptRequest: kernel/interrupt also sends the driver an
	// "interrupt" request for the running execution. node loses a SIGINT
	// that lands while vm's breakOnSigint watchdog stops (the cell's
	// synchronous part just returned): the cell then awaits on, and only a
	// request read on its event loop ends it (TestRealDrivers,
	// "javascript/SIGINT lost"). Such a driver gets the request first and
	// the SIGINT only if the execution still runs 100 ms later
	// (driver.interrupt).
	interruptRequest bool
	// entry, when set, makes the driver an entry of this binary run
	// inside the sandbox (sandbox.Register), started for the language's
	// program at path (go: the go command; "" for sql, which has none): its
	// argv and the environment entry that selects it. argv is then unused.
	entry func(path string) (argv []string, envEntry string)
	// reopenPipes: the driver opens its fds 1 to 4 again through
	// /proc/self/fd (R has no dup(2) nor a connection on a descriptor), so
	// the pipes belong to the sandbox's user (workspace.SandboxOwner),
	// mode 0600: a root daemon's would be host root's, whom the sandbox
	// does not map.
	reopenPipes bool
	// interruptInput: kernel/interrupt while the client is asked for input
	// also answers the question, as end of file with interrupted set. R's
	// read of the request pipe does not end on a SIGINT, so its interrupt
	// would wait for an answer the user will not give.
	interruptInput bool
	// gatherOutput: after reading a driver's output, the manager waits
	// this long (reading an event at once) before it reads output again,
	// so a language that writes every piece through at once (R: each
	// element of cat) reaches the client in chunks of that period, not a
	// notification per write.
	gatherOutput time.Duration
	mimetype     string
	extension    string
	// transform, when set, rewrites each execute request in the daemon
	// before the driver gets it (typescript: transpiles the code).
	transform func(*Manager, *request)
	// isComplete, when set, answers kernel/isComplete in the daemon.
	isComplete func(m *Manager, code string) protocol.KernelIsCompleteResult
}

var drivers = map[string]driverSpec{
	"python": {
		argv:      []string{"python3", "-c", driverPython},
		mimetype:  "text/x-python",
		extension: ".py",
	},
	"javascript": {
		argv:             []string{"node", "-e", driverJavaScript},
		interruptRequest: true,
		mimetype:         "text/javascript",
		extension:        ".js",
	},
	"typescript": { // the javascript driver, on code transpiled by the daemon (typescript.go)
		argv:             []string{"node", "-e", driverJavaScript},
		interruptRequest: true,
		mimetype:         "text/typescript",
		extension:        ".ts",
		transform:        tsTransform,
		isComplete:       tsIsComplete,
	},
	"bash": {
		argv:        []string{"bash", "--noprofile", "--norc", "-c", driverBash, "cellbox-bash"},
		bashFraming: true,
		mimetype:    "text/x-sh",
		extension:   ".sh",
	},
	"sql": sqlDriver,
	"ruby": {
		argv:      []string{"ruby", "-e", driverRuby},
		mimetype:  "text/x-ruby",
		extension: ".rb",
	},
	// Rscript folds -e expressions into its command line, which bounds
	// their length: the driver comes as an argument that -e evaluates.
	"r": {
		argv: []string{"Rscript", "-e",
			"eval(parse(text = commandArgs(TRUE)[[1L]], keep.source = FALSE), new.env(parent = baseenv()))", driverR},
		reopenPipes:    true,
		interruptInput: true,
		gatherOutput:   20 * time.Millisecond,
		mimetype:       "text/x-r-source",
		extension:      ".r",
	},
	"go": goDriverSpec,
}
