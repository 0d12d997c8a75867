package kernel

import (
	_ "embed"
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
	mimetype         string
	extension        string
	// entry: the driver is an entry of this binary (re-executed inside the
	// sandbox), started for the language's program at path; it gives the
	// argv and the environment entry that selects it.
	entry func(path string) (argv []string, envEntry string)
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
	"bash": {
		argv:        []string{"bash", "--noprofile", "--norc", "-c", driverBash, "cellbox-bash"},
		bashFraming: true,
		mimetype:    "text/x-sh",
		extension:   ".sh",
	},
	"go": goDriverSpec,
}
