package kernel

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/cellbox-dev/cellbox/protocol"
)

// TestRealSQLDriver runs the sql driver (this binary's entry) in a sandbox:
// statements change the database in the workspace, a query's rows are the
// result, an error names its line, a running query is interrupted and the
// kernel stays, and the data outlives a restart. It also runs as an
// unprivileged user (TestRealDriversAsUser).
func TestRealSQLDriver(t *testing.T) {
	m := newRealManager(t)
	s := &sink{}
	k, err := m.Start(context.Background(), protocol.KernelStartParams{Language: "sql"}, s)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Shutdown(context.Background(), k.ID())
	if info := k.StartResult().LanguageInfo; info.Version == "" || info.FileExtension != ".sql" {
		t.Fatalf("language info = %+v", info)
	}

	res, outs := execProbe(t, k, s, "CREATE TABLE t(x TEXT);\nINSERT INTO t VALUES ('ünï'), ('two');")
	if res.Status != protocol.ExecutionStatusOK || len(outs) != 1 || outs[0].Text != "2 rows changed\n" {
		t.Fatalf("insert: %+v %+v", res, outs)
	}
	res, outs = execProbe(t, k, s, "SELECT x FROM t ORDER BY rowid")
	if res.Status != protocol.ExecutionStatusOK || len(outs) != 1 || outs[0].Kind != protocol.OutputKindResult {
		t.Fatalf("select: %+v %+v", res, outs)
	}
	if text, _ := outs[0].Data["text/plain"].(string); !strings.Contains(text, "│ ünï │") || !strings.HasSuffix(text, "2 rows") {
		t.Fatalf("select text/plain:\n%s", text)
	}
	if html, _ := outs[0].Data["text/html"].(string); !strings.Contains(html, "<td>ünï</td>") {
		t.Fatalf("select text/html:\n%s", html)
	}

	res, outs = execProbe(t, k, s, "SELECT 1;\n\nSELECT * FROM nope;")
	if res.Status != protocol.ExecutionStatusError || res.Error == nil || res.Error.Ename != "SQLITE_ERROR" ||
		!strings.Contains(res.Error.Evalue, "no such table: nope") || res.Error.Traceback[0] != "<cell>: line 3" {
		t.Fatalf("error: %+v", res.Error)
	}
	if len(outs) != 2 || outs[0].Kind != protocol.OutputKindDisplay || outs[1].Kind != protocol.OutputKindError {
		t.Fatalf("error outputs: %+v", outs)
	}

	// A query that runs until interrupted. The interrupt may come before
	// the driver has read the request: the driver places the signal
	// among its requests, so it is not lost.
	go func() {
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			k.mu.Lock()
			running := k.current != nil
			k.mu.Unlock()
			if running {
				break
			}
		}
		_ = k.Interrupt()
	}()
	res, _ = execProbe(t, k, s, "WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 1000000000000) SELECT count(*) FROM c;")
	if res.Status != protocol.ExecutionStatusInterrupted {
		t.Fatalf("interrupt: %+v", res)
	}
	if res, outs = execProbe(t, k, s, "SELECT count(*) AS n FROM t"); res.Status != protocol.ExecutionStatusOK || !strings.Contains(outs[0].Data["text/plain"].(string), "│ 2 │") {
		t.Fatalf("after the interrupt: %+v %+v", res, outs)
	}

	vars, err := k.Variables(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(vars)
	if len(vars.Variables) != 1 || vars.Variables[0].Name != "t" || vars.Variables[0].Size == nil || *vars.Variables[0].Size != 2 {
		t.Fatalf("variables = %s", b)
	}

	if err := k.Restart(context.Background()); err != nil {
		t.Fatal(err)
	}
	if res, outs = execProbe(t, k, s, "SELECT x FROM t WHERE x = 'ünï'"); res.Status != protocol.ExecutionStatusOK || !strings.Contains(outs[0].Data["text/plain"].(string), "ünï") {
		t.Fatalf("after a restart: %+v %+v", res, outs)
	}
}
