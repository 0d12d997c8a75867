package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cellbox-dev/cellbox/protocol"
)

// TestKernelSQLPostgres: `%connect postgres` in a sql kernel through the
// daemon: a throwaway PostgreSQL server in the workspace's sandbox where
// tables are made, filled and shown, an error names its line (from the
// server's error position, in the editor's file), pg_sleep is
// interrupted, variables count rows, completion knows the tables, and
// `%connect sqlite` goes back to the SQLite data. Ending the kernel
// (a shutdown, as a restart: kernel/TestRealPostgresDriver) leaves no
// postgres process in the sandbox. Without PostgreSQL it skips, but fails
// under CI, which installs it.
func TestKernelSQLPostgres(t *testing.T) {
	if _, err := exec.LookPath("postgres"); err != nil {
		if m, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres"); len(m) == 0 {
			if os.Getenv("CI") == "true" {
				t.Fatal("PostgreSQL is not installed, and CI installs it (apt-get install postgresql)")
			}
			t.Skip("PostgreSQL is not installed: apt-get install postgresql")
		}
	}
	p := startStdio(t)
	c := p.client()
	c.initialize(t)
	ws := openWorkspace(t, c, attackProject(t), "sql-postgres")
	kid := startKernel(t, c, protocol.KernelStartParams{Language: "sql", WorkspaceID: ws}).KernelID

	res, outs := execute(t, c, kid, "CREATE TABLE lite(x TEXT); INSERT INTO lite VALUES ('kept');")
	wantOK(t, res, outs)
	res, outs = execute(t, c, kid, "%connect postgres")
	wantOK(t, res, outs)
	t.Logf("%s", streamText(outs, protocol.StreamStdout))
	if got := streamText(outs, protocol.StreamStdout); !strings.HasPrefix(got, "connected to PostgreSQL ") || !strings.Contains(got, "throwaway") {
		t.Fatalf("%%connect postgres: %q", got)
	}
	res, outs = execute(t, c, kid, `CREATE TABLE items(id serial PRIMARY KEY, name text NOT NULL, price numeric(8,2), tags text[]);
CREATE FUNCTION dear(p numeric) RETURNS numeric AS $$
BEGIN
  RETURN p * 2;
END;
$$ LANGUAGE plpgsql;
INSERT INTO items(name, price, tags) SELECT 'item ' || n, n / 4.0, ARRAY['a;b', 'c'] FROM generate_series(1, 1500) n;`)
	wantOK(t, res, outs)
	if got := streamText(outs, protocol.StreamStdout); got != "1500 rows changed\n" {
		t.Fatalf("insert: stdout %q", got)
	}
	res, outs = execute(t, c, kid, "SELECT id, name, dear(price) AS dear, tags FROM items ORDER BY id")
	wantOK(t, res, outs)
	text := resultText(t, outs)
	r := ofKind(outs, protocol.OutputKindResult)
	html, _ := r[0].Data["text/html"].(string)
	if !strings.HasPrefix(text, "┌────") || !strings.Contains(text, "│ 1000 │ item 1000 │ 500.00 │ {a;b,c} │") || strings.Contains(text, "item 1001") ||
		!strings.HasSuffix(text, "1500 rows (the first 1000 shown, 500 more not shown)") {
		t.Fatalf("text/plain:\n%s", text)
	}
	if !strings.Contains(html, `<td style="text-align: right">500.00</td>`) || !strings.Contains(html, "500 more not shown") {
		t.Fatalf("text/html:\n%.2000s", html)
	}

	// The failing statement's line, from the server's error position.
	res, outs = execute(t, c, kid, "UPDATE items SET price = 0 WHERE id = 1;\n\nSELECT id,\n  nope\nFROM items;\nSELECT 1;", withSource("/home/me/report.sql", 40))
	if res.Status != protocol.ExecutionStatusError || res.Error == nil || res.Error.Ename != "undefined_column" ||
		res.Error.Traceback[0] != "/home/me/report.sql: line 43" || res.Error.Traceback[1] != "      nope" ||
		!strings.Contains(res.Error.Evalue, `column "nope" does not exist (SQLSTATE 42703)`) {
		t.Fatalf("error = %+v", res.Error)
	}
	if streamText(outs, protocol.StreamStdout) != "1 row changed\n" {
		t.Fatalf("error outputs = %+v", outs)
	}
	res, _ = execute(t, c, kid, "INSERT INTO items(id, name) VALUES (2, 'dup')")
	if res.Status != protocol.ExecutionStatusError || res.Error.Ename != "unique_violation" ||
		!slices.ContainsFunc(res.Error.Traceback, func(l string) bool { return strings.HasPrefix(l, "DETAIL: Key (id)=(2) already exists") }) {
		t.Fatalf("constraint error = %+v", res.Error)
	}

	// COPY from the client's STDIN is refused at once (the server would
	// wait for data a cell does not have).
	res, _ = execute(t, c, kid, "SELECT 1;\nCOPY items(name) FROM STDIN;")
	if res.Status != protocol.ExecutionStatusError || !strings.Contains(res.Error.Evalue, "COPY ... FROM STDIN") || res.Error.Traceback[0] != "<cell>: line 2" {
		t.Fatalf("COPY FROM STDIN = %+v", res.Error)
	}

	// pg_sleep(60) ends at an interrupt; the connection stays.
	done := make(chan protocol.ExecuteResult, 1)
	go func() {
		res, _, _ := tryRun(t, c, kid, "SELECT pg_sleep(60)")
		done <- res
	}()
	var interrupted protocol.ExecuteResult
	for deadline := time.Now().Add(60 * time.Second); ; {
		c.mustCall(t, protocol.MethodKernelInterrupt, protocol.KernelIDParams{KernelID: kid}, nil)
		select {
		case interrupted = <-done:
		case <-time.After(200 * time.Millisecond):
			if time.Now().Before(deadline) {
				continue
			}
			t.Fatal("pg_sleep was not interrupted")
		}
		break
	}
	if interrupted.Status != protocol.ExecutionStatusInterrupted {
		t.Fatalf("interrupted = %+v", interrupted)
	}
	res, outs = execute(t, c, kid, "SELECT count(*) AS n FROM items")
	if wantOK(t, res, outs); !strings.Contains(resultText(t, outs), "│ 1500 │") {
		t.Fatalf("after the interrupt: %+v", outs)
	}
	// The server's notices are printed.
	res, outs = execute(t, c, kid, "DO $$ BEGIN RAISE NOTICE 'hello %', 42; END $$;")
	if wantOK(t, res, outs); streamText(outs, protocol.StreamStdout) != "NOTICE: hello 42\n" {
		t.Fatalf("notice: %+v", outs)
	}

	var vars protocol.KernelVariablesResult
	c.mustCall(t, protocol.MethodKernelVariables, protocol.KernelIDParams{KernelID: kid}, &vars)
	if len(vars.Variables) != 1 || vars.Variables[0].Name != "items" || vars.Variables[0].Size == nil || *vars.Variables[0].Size != 1500 ||
		vars.Variables[0].Summary != "1500 rows (id, name, price, tags)" {
		t.Fatalf("variables = %+v", vars)
	}
	for _, tc := range []struct{ code, want string }{{"SELECT * FROM it", "items"}, {"SELECT items.pr", "price"}, {"sel", "select"}, {"SELECT * FROM public.it", "items"}} {
		var comp protocol.KernelCompleteResult
		c.mustCall(t, protocol.MethodKernelComplete, protocol.KernelCompleteParams{KernelID: kid, Code: tc.code, CursorPos: len(tc.code)}, &comp)
		if !slices.Contains(comp.Matches, tc.want) {
			t.Fatalf("complete %q = %+v, want %q", tc.code, comp, tc.want)
		}
	}
	for code, want := range map[string]protocol.IsCompleteStatus{"%connect postgres": "complete", "SELECT 1": "incomplete", "SELECT 1;": "complete",
		"CREATE FUNCTION f() RETURNS int AS $$ BEGIN RETURN 1;": "incomplete"} {
		var ic protocol.KernelIsCompleteResult
		c.mustCall(t, protocol.MethodKernelIsComplete, protocol.KernelIsCompleteParams{KernelID: kid, Code: code}, &ic)
		if ic.Status != want {
			t.Fatalf("isComplete(%q) = %+v, want %s", code, ic, want)
		}
	}

	// A bash kernel of the workspace sees the server's processes.
	sh := startKernel(t, c, protocol.KernelStartParams{Language: "bash", WorkspaceID: ws}).KernelID
	postgresProcs := func() string {
		res, outs := execute(t, c, sh, `for p in /proc/[0-9]*; do [ "$(cat $p/comm 2>/dev/null)" = postgres ] && echo "${p#/proc/}"; done; true`)
		wantOK(t, res, outs)
		return strings.TrimSpace(streamText(outs, protocol.StreamStdout))
	}
	if postgresProcs() == "" {
		t.Fatal("no postgres process in the sandbox")
	}

	// Back to SQLite, whose data is there.
	res, outs = execute(t, c, kid, "%connect sqlite\nSELECT x FROM lite;")
	if wantOK(t, res, outs); !strings.HasPrefix(streamText(outs, protocol.StreamStdout), "connected to SQLite ") || !strings.Contains(resultText(t, outs), "│ kept │") {
		t.Fatalf("%%connect sqlite: %+v", outs)
	}
	res, outs = execute(t, c, kid, "%connect")
	if wantOK(t, res, outs); !strings.HasPrefix(streamText(outs, protocol.StreamStdout), "connected to SQLite 3.") {
		t.Fatalf("%%connect: %+v", outs)
	}
	for deadline := time.Now().Add(30 * time.Second); postgresProcs() != ""; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("postgres left after %%connect sqlite: %s", postgresProcs())
		}
	}

	// A second server (the template is made), then the kernel's end.
	res, outs = execute(t, c, kid, "%connect postgres\nSELECT count(*) AS n FROM pg_tables WHERE tablename = 'items';")
	t.Logf("%s", streamText(outs, protocol.StreamStdout))
	if wantOK(t, res, outs); strings.Contains(streamText(outs, protocol.StreamStdout), "initdb") || !strings.Contains(resultText(t, outs), "│ 0 │") {
		t.Fatalf("second %%connect postgres: %+v", outs)
	}
	if postgresProcs() == "" {
		t.Fatal("no postgres process after the second connect")
	}
	c.mustCall(t, protocol.MethodKernelShutdown, protocol.KernelIDParams{KernelID: kid}, nil)
	for deadline := time.Now().Add(30 * time.Second); postgresProcs() != ""; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("postgres left after the kernel's shutdown: %s", postgresProcs())
		}
	}

	// A new kernel's server: the directory of the one before is gone
	// (removed at the driver's end, or swept as a dead driver's), the
	// template stays.
	k2 := startKernel(t, c, protocol.KernelStartParams{Language: "sql", WorkspaceID: ws}).KernelID
	res, outs = execute(t, c, k2, "%connect postgres")
	wantOK(t, res, outs)
	res, outs = execute(t, c, sh, "cd /tmp/.cellbox-postgres && ls -d server-* template-*")
	wantOK(t, res, outs)
	if dirs := strings.Fields(streamText(outs, protocol.StreamStdout)); len(dirs) != 2 || !strings.HasPrefix(dirs[0], "server-") || !strings.HasPrefix(dirs[1], "template-") {
		t.Fatalf("/tmp/.cellbox-postgres holds %q", dirs)
	}
}
