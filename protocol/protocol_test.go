package protocol

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

func ptr[T any](v T) *T { return &v }

func TestMarshal(t *testing.T) {
	mtime := time.Date(2024, 1, 2, 3, 4, 5, 600, time.UTC)
	tests := []struct {
		name string
		v    any
		want string
	}{
		{"ExecuteResult required only", ExecuteResult{ExecutionID: "e1", ExecutionCount: 3, Status: ExecutionStatusOK, DurationMs: 12},
			`{"executionId":"e1","executionCount":3,"status":"ok","durationMs":12}`},
		{"ExecuteResult error, zero cpuMs", ExecuteResult{
			ExecutionID: "e2", ExecutionCount: 4, Status: ExecutionStatusTimeout,
			Error:      &ExecuteError{Ename: "KernelRestarted", Evalue: "timed out", Traceback: []string{}},
			DurationMs: 5000, CPUMs: ptr(int64(0)), PeakMemoryBytes: 1 << 20, OutputTruncated: true,
		}, `{"executionId":"e2","executionCount":4,"status":"timeout","error":{"ename":"KernelRestarted","evalue":"timed out","traceback":[]},"durationMs":5000,"cpuMs":0,"peakMemoryBytes":1048576,"outputTruncated":true}`},
		{"kernel/output stream", KernelOutputParams{KernelID: "k1", ExecutionID: "e1", Seq: 1, Kind: OutputKindStream, Name: StreamStdout, Text: "hi\n"},
			`{"kernelId":"k1","executionId":"e1","seq":1,"kind":"stream","name":"stdout","text":"hi\n"}`},
		{"kernel/output display update", KernelOutputParams{KernelID: "k1", ExecutionID: "e1", Seq: 2, Kind: OutputKindDisplay,
			Data: MimeBundle{"text/plain": "50%"}, DisplayID: "d1", Update: true},
			`{"kernelId":"k1","executionId":"e1","seq":2,"kind":"display","data":{"text/plain":"50%"},"displayId":"d1","update":true}`},
		{"kernel/status", KernelStatusParams{KernelID: "k1", State: KernelStateDead, Reason: "killed: memory limit"},
			`{"kernelId":"k1","state":"dead","reason":"killed: memory limit"}`},
		{"kernel/start minimal", KernelStartParams{Language: "python"}, `{"language":"python"}`},
		{"kernel/start full", KernelStartParams{Language: "python", WorkspaceID: "w1", Cwd: "src", Env: map[string]string{"A": "1"},
			Limits: &Limits{MemoryBytes: 1 << 30, TimeoutMs: 30000}, Sandbox: SandboxModeBestEffort, Network: NetworkModeNone, WorkDoneToken: "t1"},
			`{"language":"python","workspaceId":"w1","cwd":"src","env":{"A":"1"},"limits":{"memoryBytes":1073741824,"timeoutMs":30000},"sandbox":"best-effort","network":"none","workDoneToken":"t1"}`},
		{"kernel/execute stopOnError false", KernelExecuteParams{KernelID: "k1", Code: "x", Source: &SourceLocation{Path: "a.py", Line: 40}, StopOnError: ptr(false)},
			`{"kernelId":"k1","code":"x","source":{"path":"a.py","line":40},"stopOnError":false}`},
		{"kernel/execute defaults", KernelExecuteParams{KernelID: "k1", Code: "x"}, `{"kernelId":"k1","code":"x"}`},
		{"kernel/attach fromSeq 0", KernelAttachParams{KernelID: "k1", FromSeq: ptr(int64(0))}, `{"kernelId":"k1","fromSeq":0}`},
		{"kernel/inputRequest", KernelInputRequestParams{KernelID: "k1", ExecutionID: "e1", Prompt: "name? "},
			`{"kernelId":"k1","executionId":"e1","prompt":"name? ","password":false}`},
		{"kernel/isComplete", KernelIsCompleteResult{Status: IsCompleteStatusIncomplete, Indent: "    "}, `{"status":"incomplete","indent":"    "}`},
		{"FileEntry", FileEntry{Path: "src/a.py", Type: FileTypeFile, Size: 3, Mtime: mtime, Mode: 0o644},
			`{"path":"src/a.py","type":"file","size":3,"mtime":"2024-01-02T03:04:05.0000006Z","mode":420}`},
		{"Change added empty file", Change{Path: "b.txt", Kind: ChangeKindAdded, Size: ptr(int64(0))}, `{"path":"b.txt","kind":"added","size":0}`},
		{"Change deleted", Change{Path: "c.txt", Kind: ChangeKindDeleted}, `{"path":"c.txt","kind":"deleted"}`},
		{"workspace/commit", WorkspaceCommitResult{Applied: []string{"a"}, Conflicts: []Conflict{{Path: "b", Reason: "changed in the project"}}},
			`{"applied":["a"],"conflicts":[{"path":"b","reason":"changed in the project"}]}`},
		{"fs/read", FsReadParams{WorkspaceID: "w1", Path: "a.bin", Encoding: EncodingBase64}, `{"workspaceId":"w1","path":"a.bin","encoding":"base64"}`},
		{"fs/didChange", FsDidChangeParams{WatchID: "f1", WorkspaceID: "w1", Changes: []FileChange{{Path: "a", Type: FileChangeCreated}}},
			`{"watchId":"f1","workspaceId":"w1","changes":[{"path":"a","type":"created"}]}`},
		{"pty/open", PtyOpenParams{WorkspaceID: "w1", Cols: 80, Rows: 24, Encoding: EncodingBase64}, `{"workspaceId":"w1","cols":80,"rows":24,"encoding":"base64"}`},
		{"pty/output", PtyOutputParams{PtyID: "p1", Seq: 7, Data: "$ "}, `{"ptyId":"p1","seq":7,"data":"$ "}`},
		{"pty/attach result", PtyAttachResult{Dropped: true, FirstSeq: 42}, `{"dropped":true,"firstSeq":42}`},
		{"pty/attach result nothing dropped", PtyAttachResult{FirstSeq: 1}, `{"dropped":false,"firstSeq":1}`},
		{"pty/exit normal", PtyExitParams{PtyID: "p1"}, `{"ptyId":"p1","exitCode":0}`},
		{"pty/exit signal", PtyExitParams{PtyID: "p1", ExitCode: 137, Signal: "SIGKILL"}, `{"ptyId":"p1","exitCode":137,"signal":"SIGKILL"}`},
		{"$/progress", ProgressParams{Token: 1, Value: ProgressValue{Kind: ProgressReport, Percentage: ptr(0)}},
			`{"token":1,"value":{"kind":"report","percentage":0}}`},
		{"Empty", Empty{}, `{}`},
		{"Limits defaults", Limits{}, `{}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := json.Marshal(tt.v)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("json.Marshal(%T)\n have %s\n want %s", tt.v, got, tt.want)
			}
		})
	}
}

func TestUnmarshal(t *testing.T) {
	tests := []struct {
		name string
		in   string
		into any // pointer to a zero value
		want any
	}{
		{"initialize", `{"protocolVersion":1,"capabilities":{"inputRequest":true}}`, new(InitializeParams),
			&InitializeParams{ProtocolVersion: 1, Capabilities: &ClientCapabilities{InputRequest: true}}},
		{"initialize utf-16", `{"protocolVersion":1,"clientInfo":{"name":"vscode","version":"1.90"},"capabilities":{"positionEncoding":"utf-16"}}`, new(InitializeParams),
			&InitializeParams{ProtocolVersion: 1, ClientInfo: &ClientInfo{Name: "vscode", Version: "1.90"}, Capabilities: &ClientCapabilities{PositionEncoding: PositionEncodingUTF16}}},
		{"kernel/execute", `{"kernelId":"k1","code":"1/0","silent":true,"stopOnError":false,"timeoutMs":500}`, new(KernelExecuteParams),
			&KernelExecuteParams{KernelID: "k1", Code: "1/0", Silent: true, StopOnError: ptr(false), TimeoutMs: 500}},
		{"workspace/open", `{"root":"/home/u/p","mode":"overlay","name":"agent"}`, new(WorkspaceOpenParams),
			&WorkspaceOpenParams{Root: "/home/u/p", Mode: WorkspaceModeOverlay, Name: "agent"}},
		{"pty/attach", `{"ptyId":"p1","fromSeq":0}`, new(PtyAttachParams), &PtyAttachParams{PtyID: "p1", FromSeq: ptr(int64(0))}},
		{"fs/rename", `{"workspaceId":"w1","from":"a","to":"b","overwrite":true}`, new(FsRenameParams),
			&FsRenameParams{WorkspaceID: "w1", From: "a", To: "b", Overwrite: true}},
		{"kernel/inputRequest reply", `{"value":"42"}`, new(KernelInputReply), &KernelInputReply{Value: "42"}},
		{"checkpoint", `{"checkpointId":"c1","name":"before-restore","createdAt":"2024-01-02T03:04:05Z","files":2,"bytes":10}`, new(Checkpoint),
			&Checkpoint{CheckpointID: "c1", Name: "before-restore", CreatedAt: time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC), Files: 2, Bytes: 10}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := json.Unmarshal([]byte(tt.in), tt.into); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(tt.into, tt.want) {
				t.Errorf("json.Unmarshal(%s)\n have %+v\n want %+v", tt.in, tt.into, tt.want)
			}
		})
	}
}

// readSpec reads PROTOCOL.md, the contract this package implements. The
// repository keeps a copy beside this package so it stands alone; where the
// shared contract is checked out beside the repository (as in CI), the copy
// must match it.
func readSpec(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("PROTOCOL.md")
	if err != nil {
		t.Fatalf("reading the protocol spec: %v", err)
	}
	const shared = "../../shared/PROTOCOL.md"
	if s, err := os.ReadFile(shared); err == nil && string(s) != string(b) {
		t.Fatalf("protocol/PROTOCOL.md differs from %s; the shared contract wins: copy it (cp %s protocol/)", shared, shared)
	}
	return string(b)
}

// methodConstants maps the name of every Method* constant in methods.go to
// its value; Go cannot list constants at run time, so it reads the source.
func methodConstants(t *testing.T) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "methods.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		spec, ok := n.(*ast.ValueSpec)
		if !ok || len(spec.Values) != len(spec.Names) {
			return true
		}
		for i, id := range spec.Names {
			if lit, ok := spec.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING && strings.HasPrefix(id.Name, "Method") {
				m[id.Name], _ = strconv.Unquote(lit.Value)
			}
		}
		return true
	})
	if len(m) == 0 {
		t.Fatal("no Method constants found")
	}
	return m
}

func TestMethodsInSpec(t *testing.T) {
	spec := readSpec(t)
	for name, method := range methodConstants(t) {
		if !strings.Contains(spec, "`"+method+"`") {
			t.Errorf("%s = %q does not appear in PROTOCOL.md", name, method)
		}
	}
}

func TestSpecMethodsHaveConstants(t *testing.T) {
	have := map[string]bool{}
	for _, m := range methodConstants(t) {
		have[m] = true
	}
	name := regexp.MustCompile("`((?:\\$|[a-z]+)/[a-zA-Z]+)`")
	n := 0
	for _, line := range strings.Split(readSpec(t), "\n") {
		if !strings.HasPrefix(line, "|") {
			continue // only the tables list methods
		}
		for _, sub := range name.FindAllStringSubmatch(line, -1) {
			n++
			if !have[sub[1]] {
				t.Errorf("PROTOCOL.md method %q has no Method constant in methods.go", sub[1])
			}
		}
	}
	if n < 40 {
		t.Errorf("found only %d method names in PROTOCOL.md's tables; has the table format changed?", n)
	}
}
