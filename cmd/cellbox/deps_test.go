package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImportDirection enforces ARCHITECTURE.md's dependency direction: an
// import the other way is a design error.
func TestImportDirection(t *testing.T) {
	const mod = "github.com/cellbox-dev/cellbox/"
	// What each package may import of ours, directly. cmd may import anything.
	allowed := map[string][]string{
		"protocol":                      {},
		"protocol/gen":                  {},
		"rpc":                           {"protocol", "kernel", "pty", "workspace", "workspace/network"}, // network: the Blocked it forwards
		"rpc/mcp":                       {"protocol"},                                                    // a client of the daemon: it speaks the protocol, never below
		"kernel":                        {"workspace", "protocol", "kernel/jupyter", "kernel/drivers/jupyterbridge", "kernel/drivers/sqldriver", "kernel/drivers/godriver"},
		"kernel/jupyter":                {"protocol"},
		"kernel/drivers/jupyterbridge":  {"kernel/jupyter", "workspace/sandbox", "kernel/drivers/driverio"}, // an entry of the binary inside a sandbox
		"kernel/drivers/sqldriver":      {"protocol", "workspace/sandbox", "kernel/drivers/driverio"},       // an entry of the binary inside a sandbox
		"kernel/drivers/godriver":       {"protocol", "workspace/sandbox", "kernel/drivers/driverio"},       // an entry of the binary inside a sandbox
		"kernel/drivers/driverio":       {},                                                                 // what those entries share of the driver contract
		"pty":                           {"workspace", "protocol"},
		"workspace":                     {"workspace/sandbox", "workspace/sandbox/helper", "workspace/network", "workspace/packages", "workspace/gitexport", "workspace/preview", "workspace/export", "protocol"},
		"workspace/sandbox":             {},
		"workspace/network":             {}, // the proxies and their policy: imports nothing of ours
		"workspace/packages":            {}, // the package cache: imports nothing of ours
		"workspace/gitexport":           {}, // changes to git: knows nothing of workspaces
		"workspace/preview":             {}, // the previews' proxies: imports nothing of ours
		"workspace/export":              {}, // a workspace as a bundle and an image: imports nothing of ours
		"workspace/export/exporttest":   {}, // the tests' tiny base image layout
		"workspace/sandbox/sandboxtest": {},
		"workspace/sandbox/helper":      {}, // the lean helper's bytes (cmd/cellbox-sandbox), embedded
		"editors/browser":               {}, // the built page, embedded; cmd/cellbox serves it through rpc.Options.UI
	}
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, mod+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	seen := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(fields[0], mod)
		if strings.HasPrefix(pkg, "cmd/") || strings.HasPrefix(pkg, "bench/") {
			continue // programs: they wire everything
		}
		ok, known := allowed[pkg]
		if !known {
			t.Errorf("package %s is not in ARCHITECTURE.md's layout; add it to this test with its allowed imports", pkg)
			continue
		}
		seen++
		for _, imp := range fields[1:] {
			dep, ours := strings.CutPrefix(imp, mod)
			if !ours {
				continue
			}
			if !contains(ok, dep) {
				t.Errorf("%s imports %s: against the dependency direction in ARCHITECTURE.md", pkg, dep)
			}
		}
	}
	if seen < 4 {
		t.Fatalf("checked only %d packages; go list output:\n%s", seen, out)
	}
	// protocol, workspace/sandbox, workspace/packages, workspace/network and workspace/gitexport import nothing of ours, even indirectly.
	for _, pkg := range []string{"protocol", "workspace/sandbox", "workspace/packages", "workspace/network", "workspace/gitexport", "workspace/preview", "workspace/export", "workspace/export/exporttest"} {
		out, err := exec.Command("go", "list", "-deps", mod+pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			if strings.HasPrefix(dep, mod) && dep != mod+pkg {
				t.Errorf("%s depends on %s; it must import nothing of ours", pkg, dep)
			}
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestHelperIsLean: the sandbox helper (cmd/cellbox-sandbox) links the
// sandbox package and nothing else of ours, and none of the daemon's big
// dependencies: it is what every sandbox's two processes run.
func TestHelperIsLean(t *testing.T) {
	const mod = "github.com/cellbox-dev/cellbox/"
	out, err := exec.Command("go", "list", "-deps", mod+"cmd/cellbox-sandbox").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	ours := 0
	for _, pkg := range strings.Fields(string(out)) {
		switch {
		case pkg == mod+"cmd/cellbox-sandbox" || pkg == mod+"workspace/sandbox":
			ours++
		case strings.HasPrefix(pkg, mod):
			t.Errorf("the helper links %s", pkg)
		case strings.Contains(pkg, "prometheus"), strings.Contains(pkg, "websocket"), strings.Contains(pkg, "jsonrpc2"),
			strings.HasPrefix(pkg, "net/http"), strings.Contains(pkg, "esbuild"), strings.Contains(pkg, "zmq"):
			t.Errorf("the helper links %s", pkg)
		}
	}
	if ours != 2 {
		t.Errorf("go list found %d of the helper's own 2 packages: %s", ours, out)
	}
}
