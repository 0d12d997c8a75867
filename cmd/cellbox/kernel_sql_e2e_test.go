package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cellbox-dev/cellbox/protocol"
)

// TestKernelSQL: the sql kernel (SQLite in the sandbox) through the daemon:
// tables as text/plain and text/html, the row limit's footer, cells of
// several statements, errors with their line and source mapping, the
// database as a file of the workspace (a change to review) that outlives a
// restart, an interrupted query, completion, inspect, isComplete and
// variables.
func TestKernelSQL(t *testing.T) {
	p := startStdio(t)
	c := p.client()
	init := c.initialize(t)
	i := slices.IndexFunc(init.Capabilities.Languages, func(l protocol.LanguageCapability) bool { return l.ID == "sql" })
	if i < 0 || !init.Capabilities.Languages[i].Available || init.Capabilities.Languages[i].Version == "" ||
		!slices.Equal(init.Capabilities.Languages[i].FileExtensions, []string{".sql"}) {
		t.Fatalf("initialize languages = %+v", init.Capabilities.Languages)
	}
	project := attackProject(t)
	ws := openWorkspace(t, c, project, "sql")
	start := startKernel(t, c, protocol.KernelStartParams{Language: "sql", WorkspaceID: ws})
	kid := start.KernelID
	if start.LanguageInfo.FileExtension != ".sql" || start.LanguageInfo.Version != init.Capabilities.Languages[i].Version {
		t.Fatalf("kernel/start languageInfo = %+v", start.LanguageInfo)
	}

	// Several statements: a table, a trigger whose body has semicolons,
	// 1500 rows.
	res, outs := execute(t, c, kid, `CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT NOT NULL, price REAL);
CREATE TABLE log(n INTEGER);
CREATE TRIGGER count_items AFTER INSERT ON items BEGIN
  INSERT INTO log VALUES (new.id);
END;
WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 1500)
INSERT INTO items(name, price) SELECT 'item ' || n, n / 4.0 FROM c;`)
	wantOK(t, res, outs)
	if got := streamText(outs, protocol.StreamStdout); got != "1500 rows changed\n" {
		t.Fatalf("insert: stdout %q", got)
	}

	// The row limit: 1000 rows shown, the footer says the rest.
	res, outs = execute(t, c, kid, "SELECT id, name, price FROM items ORDER BY id")
	wantOK(t, res, outs)
	r := ofKind(outs, protocol.OutputKindResult)
	if len(r) != 1 {
		t.Fatalf("select outputs = %+v", outs)
	}
	text, _ := r[0].Data["text/plain"].(string)
	html, _ := r[0].Data["text/html"].(string)
	if !strings.HasPrefix(text, "┌────") || !strings.Contains(text, "│ 1000 │ item 1000 │  250.0 │") || strings.Contains(text, "item 1001") ||
		!strings.HasSuffix(text, "1500 rows (the first 1000 shown, 500 more not shown)") {
		t.Fatalf("text/plain:\n%s", text)
	}
	if !strings.HasPrefix(html, "<table>") || !strings.Contains(html, "<td>item 1000</td>") || strings.Contains(html, "item 1001") ||
		!strings.Contains(html, "500 more not shown") {
		t.Fatalf("text/html:\n%s", html)
	}

	// Earlier queries are displays, the last the result; values are
	// escaped in HTML.
	res, outs = execute(t, c, kid, "SELECT count(*) AS n FROM log;\nSELECT '<b>ünï</b>' AS s, NULL AS z;")
	wantOK(t, res, outs)
	if len(outs) != 2 || outs[0].Kind != protocol.OutputKindDisplay || outs[1].Kind != protocol.OutputKindResult ||
		!strings.Contains(outs[0].Data["text/plain"].(string), "│ 1500 │") ||
		!strings.Contains(outs[1].Data["text/html"].(string), "<td>&lt;b&gt;ünï&lt;/b&gt;</td><td><em>NULL</em></td>") {
		t.Fatalf("two queries: %+v", outs)
	}

	// An error names the failing statement's line, in the editor's file
	// with source; the statements before it ran.
	res, outs = execute(t, c, kid, "UPDATE items SET price = 0 WHERE id = 1;\n\nSELEC oops;\nSELECT 1;", withSource("/home/me/report.sql", 40))
	if res.Status != protocol.ExecutionStatusError || res.Error == nil || res.Error.Ename != "SQLITE_ERROR" ||
		len(res.Error.Traceback) == 0 || res.Error.Traceback[0] != "/home/me/report.sql: line 42" || !strings.Contains(res.Error.Evalue, "syntax error") {
		t.Fatalf("error = %+v", res.Error)
	}
	if errs := ofKind(outs, protocol.OutputKindError); len(errs) != 1 || streamText(outs, protocol.StreamStdout) != "1 row changed\n" || len(ofKind(outs, protocol.OutputKindResult)) != 0 {
		t.Fatalf("error outputs = %+v", outs)
	}
	res, _ = execute(t, c, kid, "\nINSERT INTO items(id, name) VALUES (1, 'dup')")
	if res.Status != protocol.ExecutionStatusError || res.Error.Ename != "SQLITE_CONSTRAINT" || res.Error.Traceback[0] != "<cell>: line 2" {
		t.Fatalf("constraint error = %+v", res.Error)
	}

	// The database is a file of the workspace: a change to review, not
	// yet in the project.
	var changes protocol.WorkspaceChangesResult
	c.mustCall(t, protocol.MethodWorkspaceChanges, protocol.WorkspaceChangesParams{WorkspaceID: ws}, &changes)
	if !slices.ContainsFunc(changes.Changes, func(ch protocol.Change) bool { return ch.Path == ".cellbox/sql.db" && ch.Kind == "added" }) {
		t.Fatalf("workspace/changes = %+v", changes)
	}
	if _, err := os.Stat(filepath.Join(project, ".cellbox")); !os.IsNotExist(err) {
		t.Fatalf("the database reached the project: %v", err)
	}

	// An interrupt ends a query that would run for ages; the kernel and
	// its data stay. The interrupt is sent until the execution has ended
	// (the first may come before it runs).
	done := make(chan protocol.ExecuteResult, 1)
	go func() {
		res, _, _ := tryRun(t, c, kid, "WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 1000000000000) SELECT count(*) FROM c;")
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
			t.Fatal("the query was not interrupted")
		}
		break
	}
	if interrupted.Status != protocol.ExecutionStatusInterrupted {
		t.Fatalf("interrupted query = %+v", interrupted)
	}
	res, outs = execute(t, c, kid, "SELECT count(*) AS n FROM items")
	if wantOK(t, res, outs); !strings.Contains(resultText(t, outs), "│ 1500 │") {
		t.Fatalf("after the interrupt: %+v", outs)
	}

	// Completion: keywords in the case typed, tables, a table's columns.
	for _, tc := range []struct {
		code string
		want string
	}{{"SEL", "SELECT"}, {"sel", "select"}, {"SELECT * FROM it", "items"}, {"SELECT items.pr", "price"}, {"SELECT na", "name"}} {
		var comp protocol.KernelCompleteResult
		c.mustCall(t, protocol.MethodKernelComplete, protocol.KernelCompleteParams{KernelID: kid, Code: tc.code, CursorPos: len(tc.code)}, &comp)
		if !slices.Contains(comp.Matches, tc.want) || comp.CursorEnd != len(tc.code) {
			t.Fatalf("complete %q = %+v, want %q", tc.code, comp, tc.want)
		}
	}
	var insp protocol.KernelInspectResult
	c.mustCall(t, protocol.MethodKernelInspect, protocol.KernelInspectParams{KernelID: kid, Code: "SELECT * FROM items", CursorPos: 16}, &insp)
	if s, _ := insp.Data["text/plain"].(string); !insp.Found || !strings.Contains(s, "CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT NOT NULL, price REAL)") {
		t.Fatalf("inspect items = %+v", insp)
	}
	for code, want := range map[string]protocol.IsCompleteStatus{"SELECT 1": "incomplete", "SELECT 1;": "complete", "SELECT ';": "incomplete",
		"CREATE TRIGGER t AFTER INSERT ON items BEGIN SELECT 1;": "incomplete"} {
		var ic protocol.KernelIsCompleteResult
		c.mustCall(t, protocol.MethodKernelIsComplete, protocol.KernelIsCompleteParams{KernelID: kid, Code: code}, &ic)
		if ic.Status != want {
			t.Fatalf("isComplete(%q) = %+v, want %s", code, ic, want)
		}
	}
	var vars protocol.KernelVariablesResult
	c.mustCall(t, protocol.MethodKernelVariables, protocol.KernelIDParams{KernelID: kid}, &vars)
	if len(vars.Variables) != 2 || vars.Variables[0].Name != "items" || vars.Variables[0].Type != "table" || vars.Variables[0].Size == nil ||
		*vars.Variables[0].Size != 1500 || !strings.HasPrefix(vars.Variables[0].Summary, "1500 rows (id, name, price)") {
		t.Fatalf("variables = %+v", vars)
	}

	// A restart is a new driver on the same database. A transaction left
	// open is rolled back.
	res, outs = execute(t, c, kid, "BEGIN; DELETE FROM items;")
	wantOK(t, res, outs)
	c.mustCall(t, protocol.MethodKernelRestart, protocol.KernelIDParams{KernelID: kid}, nil)
	res, outs = execute(t, c, kid, "SELECT count(*) AS n, max(name) AS m FROM items")
	if wantOK(t, res, outs); !strings.Contains(resultText(t, outs), "│ 1500 │ item 999 │") {
		t.Fatalf("after the restart: %s", resultText(t, outs))
	}
}

// TestKernelSQLConfined: the sql driver runs in the sandbox, so ATTACH and
// CELLBOX_SQL_DSN reach only what the sandbox shows: not the host's
// /etc/shadow, nor the daemon's state directory, nor the project behind
// the overlay. Attaching the driver's own pipes (its events and requests,
// through /proc/self/fd) puts bytes the daemon did not expect on them:
// the daemon stays, and the kernel answers or restarts.
func TestKernelSQLConfined(t *testing.T) {
	env := testEnv(t)
	state := envValue(env, "CELLBOX_STATE_DIR")
	p := startStdioEnv(t, env)
	c := p.client()
	c.initialize(t)
	project := attackProject(t)
	ws := openWorkspace(t, c, project, "sql-confined")
	kid := startKernel(t, c, protocol.KernelStartParams{Language: "sql", WorkspaceID: ws, Env: map[string]string{"CELLBOX_SQL_DSN": "data/my.db"}}).KernelID

	res, outs := execute(t, c, kid, "CREATE TABLE t(x); INSERT INTO t VALUES (1);")
	wantOK(t, res, outs)
	var changes protocol.WorkspaceChangesResult
	c.mustCall(t, protocol.MethodWorkspaceChanges, protocol.WorkspaceChangesParams{WorkspaceID: ws}, &changes)
	if !slices.ContainsFunc(changes.Changes, func(ch protocol.Change) bool { return ch.Path == "data/my.db" }) {
		t.Fatalf("CELLBOX_SQL_DSN: workspace/changes = %+v", changes)
	}

	for _, path := range []string{
		"/etc/shadow",
		filepath.Join(state, "stolen.db"),
		filepath.Join(project, "stolen.db"),
		"/proc/1/root/etc/shadow",
	} {
		res, _ := execute(t, c, kid, fmt.Sprintf("ATTACH '%s' AS x; CREATE TABLE x.t(a); INSERT INTO x.t VALUES (1);", path))
		if res.Status != protocol.ExecutionStatusError {
			t.Fatalf("ATTACH %s worked: %+v", path, res)
		}
	}
	for _, path := range []string{filepath.Join(state, "stolen.db"), filepath.Join(project, "stolen.db")} {
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Fatalf("ATTACH made %s on the host: %v", path, err)
		}
	}

	// The driver's pipes as databases: SQLite writes and reads pages there.
	for _, fd := range []int{201, 200, 1, 2} {
		code := fmt.Sprintf("ATTACH '/proc/self/fd/%d' AS p; CREATE TABLE p.t(a); INSERT INTO p.t VALUES (randomblob(5000));", fd)
		done := make(chan struct{})
		go func() {
			defer close(done)
			res, _, err := tryRun(t, c, kid, code, withTimeout(5000))
			t.Logf("fd %d: %s %+v %v", fd, res.Status, res.Error, err)
		}()
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			t.Fatalf("fd %d: the execution did not end", fd)
		}
		var list protocol.KernelListResult
		c.mustCall(t, protocol.MethodKernelList, struct{}{}, &list)
		if len(list.Kernels) != 1 {
			t.Fatalf("kernel/list = %+v", list)
		}
		if list.Kernels[0].State == protocol.KernelStateDead {
			c.mustCall(t, protocol.MethodKernelRestart, protocol.KernelIDParams{KernelID: kid}, nil)
		}
		_, _ = execute(t, c, kid, "DETACH p") // attached or not
		res, outs := execute(t, c, kid, "SELECT x FROM t")
		if wantOK(t, res, outs); !strings.Contains(resultText(t, outs), "│ 1 │") {
			t.Fatalf("fd %d: after attaching a pipe: %+v", fd, outs)
		}
	}

	// Another program of the sandbox (a bash kernel of the same workspace)
	// tries to write junk into the sql driver's event pipe: forged events,
	// bad JSON, a long line without its end. The sandbox refuses it the
	// pipe (the kernel manager's forged-event tests, kernel/forged_test.go,
	// cover the daemon's side for a driver that writes such junk itself);
	// either way the sql kernel answers on.
	sh := startKernel(t, c, protocol.KernelStartParams{Language: "bash", WorkspaceID: ws}).KernelID
	res, outs = execute(t, c, sh, `for p in /proc/[0-9]*; do
  [ "$(readlink $p/exe 2>/dev/null)" = /.cellbox/cellbox ] && [ -e $p/fd/201 ] || continue
  echo found
  { printf '{"ev":"done","id":"x","status":"ok"}\n\xff\xfe{not json\n{"ev":"result","id":"nope","data":{"text/plain":1}}\n{"ev":"reply","id":"r9"}\n'
    head -c 3000000 /dev/zero | tr '\0' 'a'; printf '\n'; } > $p/fd/201 && echo wrote
done; true`)
	wantOK(t, res, outs)
	t.Logf("junk on the driver's pipe: %q %q", streamText(outs, protocol.StreamStdout), streamText(outs, protocol.StreamStderr))
	if !strings.Contains(streamText(outs, protocol.StreamStdout), "found") {
		t.Fatalf("no sql driver found: %+v", outs)
	}
	res, outs = execute(t, c, kid, "SELECT x FROM t")
	if wantOK(t, res, outs); !strings.Contains(resultText(t, outs), "│ 1 │") {
		t.Fatalf("after junk on the driver's pipe: %+v", outs)
	}
}
