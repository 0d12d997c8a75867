package kernel

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cellbox-dev/cellbox/protocol"
	"github.com/cellbox-dev/cellbox/workspace"
)

// needPostgres skips a test where PostgreSQL is not installed, except
// under CI, which installs it: there its absence fails the test.
func needPostgres(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("postgres"); err == nil {
		return
	}
	if m, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres"); len(m) > 0 {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("PostgreSQL is not installed (postgres neither on the PATH nor in /usr/lib/postgresql/*/bin), and CI installs it")
	}
	t.Skip("PostgreSQL is not installed: apt-get install postgresql")
}

// TestRealPostgresDriver: `%connect postgres` in a sql kernel starts a
// throwaway PostgreSQL server in the sandbox, as the sandbox's user
// (whoever runs the daemon: it also runs as an unprivileged user,
// TestRealDriversAsUser), where statements run, an error names its line,
// pg_sleep is interrupted, and `%connect sqlite` goes back to the SQLite
// database. A restart stops the server: no postgres process is left in
// the sandbox, as a bash kernel of the same workspace sees.
func TestRealPostgresDriver(t *testing.T) {
	needPostgres(t)
	ws, err := workspace.NewManager(workspace.Options{StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ws.Close)
	w, err := ws.Open(context.Background(), protocol.WorkspaceOpenParams{Root: t.TempDir(), Name: "pg"})
	if err != nil {
		t.Fatal(err)
	}
	m := NewManager(Options{Workspaces: ws, Languages: func() []Language { return DetectLanguages(context.Background()) }})
	t.Cleanup(m.Close)
	s := &sink{}
	k, err := m.Start(context.Background(), protocol.KernelStartParams{Language: "sql", WorkspaceID: w.ID()}, s)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Shutdown(context.Background(), k.ID())
	ok := func(code string) []protocol.KernelOutputParams {
		t.Helper()
		res, outs := execProbe(t, k, s, code)
		if res.Status != protocol.ExecutionStatusOK {
			t.Fatalf("%q: %+v %+v", code, res, res.Error)
		}
		return outs
	}
	stdout := func(outs []protocol.KernelOutputParams) string {
		var b strings.Builder
		for _, o := range outs {
			if o.Kind == protocol.OutputKindStream && o.Name == protocol.StreamStdout {
				b.WriteString(o.Text)
			}
		}
		return b.String()
	}
	ok("CREATE TABLE lite(x); INSERT INTO lite VALUES (42);")

	outs := ok("%connect postgres\nCREATE TABLE t(id int PRIMARY KEY, name text);\nINSERT INTO t VALUES (1, 'ünï'), (2, NULL);")
	if got := stdout(outs); !strings.HasPrefix(got, "connected to PostgreSQL ") || !strings.HasSuffix(got, "\n2 rows changed\n") {
		t.Fatalf("%%connect postgres: %q", got)
	}
	outs = ok("SELECT id, name, current_user AS u FROM t ORDER BY id")
	text, _ := outs[len(outs)-1].Data["text/plain"].(string)
	if outs[len(outs)-1].Kind != protocol.OutputKindResult || !strings.Contains(text, "│  1 │ ünï  │ cellbox │") || !strings.Contains(text, "│ NULL │") || !strings.HasSuffix(text, "2 rows") {
		t.Fatalf("select:\n%s", text)
	}
	if html, _ := outs[len(outs)-1].Data["text/html"].(string); !strings.Contains(html, "<td>ünï</td>") || !strings.Contains(html, "<em>NULL</em>") {
		t.Fatalf("select text/html:\n%s", html)
	}

	// The error's position gives its line.
	res, _ := execProbe(t, k, s, "SELECT 1;\n\nSELECT id,\n  nope FROM t;")
	if res.Status != protocol.ExecutionStatusError || res.Error.Ename != "undefined_column" ||
		!strings.Contains(res.Error.Evalue, `column "nope" does not exist`) || res.Error.Traceback[0] != "<cell>: line 4" {
		t.Fatalf("error: %+v", res.Error)
	}

	// pg_sleep is cancelled by an interrupt; the connection stays.
	done := make(chan *protocol.ExecuteResult, 1)
	go func() {
		res, _ := execProbe(t, k, s, "SELECT pg_sleep(60)")
		done <- res
	}()
	var interrupted *protocol.ExecuteResult
	for deadline := time.Now().Add(60 * time.Second); interrupted == nil; {
		_ = k.Interrupt()
		select {
		case interrupted = <-done:
		case <-time.After(100 * time.Millisecond):
			if time.Now().After(deadline) {
				t.Fatal("pg_sleep was not interrupted")
			}
		}
	}
	if interrupted.Status != protocol.ExecutionStatusInterrupted {
		t.Fatalf("interrupt: %+v %+v", interrupted, interrupted.Error)
	}
	if outs = ok("SELECT count(*) AS n FROM t"); !strings.Contains(outs[len(outs)-1].Data["text/plain"].(string), "│ 2 │") {
		t.Fatalf("after the interrupt: %+v", outs)
	}

	vars, err := k.Variables(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(vars.Variables) != 1 || vars.Variables[0].Name != "t" || vars.Variables[0].Size == nil || *vars.Variables[0].Size != 2 ||
		vars.Variables[0].Summary != "2 rows (id, name)" {
		t.Fatalf("variables = %+v", vars.Variables)
	}

	// A bash kernel of the same workspace sees the server's processes.
	sh, err := m.Start(context.Background(), protocol.KernelStartParams{Language: "bash", WorkspaceID: w.ID()}, s)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Shutdown(context.Background(), sh.ID())
	postgresProcs := func() string {
		res, outs := execProbe(t, sh, s, `for p in /proc/[0-9]*; do [ "$(cat $p/comm 2>/dev/null)" = postgres ] && echo "${p#/proc/}"; done; true`)
		if res.Status != protocol.ExecutionStatusOK {
			t.Fatalf("bash: %+v", res)
		}
		return strings.TrimSpace(stdout(outs))
	}
	if postgresProcs() == "" {
		t.Fatal("no postgres process in the sandbox while connected")
	}

	// Back to SQLite: its data is there.
	outs = ok("%connect sqlite\nSELECT x FROM lite")
	if got := stdout(outs); !strings.HasPrefix(got, "connected to SQLite ") || !strings.Contains(outs[len(outs)-1].Data["text/plain"].(string), "│ 42 │") {
		t.Fatalf("%%connect sqlite: %q %+v", got, outs)
	}
	for deadline := time.Now().Add(30 * time.Second); postgresProcs() != ""; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("postgres processes left after %%connect sqlite: %s", postgresProcs())
		}
	}

	// Again (the template is ready), then a restart: the server is gone,
	// the kernel is on SQLite.
	ok("%connect postgres")
	if postgresProcs() == "" {
		t.Fatal("no postgres process after the second connect")
	}
	if err := k.Restart(context.Background()); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); postgresProcs() != ""; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("postgres processes left after the restart: %s", postgresProcs())
		}
	}
	if got := stdout(ok("%connect")); !strings.HasPrefix(got, "connected to SQLite ") {
		t.Fatalf("%%connect after the restart: %q", got)
	}
	comp, err := k.Complete(context.Background(), "SELECT * FROM li", 16)
	if err != nil || !slices.Contains(comp.Matches, "lite") {
		t.Fatalf("complete: %+v %v", comp, err)
	}
}
