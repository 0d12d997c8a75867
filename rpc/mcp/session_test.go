package mcp

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/cellbox-dev/cellbox/protocol"
)

// fakeConn answers calls with answer and records them.
type fakeConn struct {
	answer func(method string, params any) (any, error)
	calls  []string
	done   chan struct{}
}

func (f *fakeConn) Call(_ context.Context, method string, params, result any) error {
	f.calls = append(f.calls, method)
	res, err := f.answer(method, params)
	if err != nil || result == nil {
		return err
	}
	raw, err := json.Marshal(res)
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, result)
}

func (f *fakeConn) Done() <-chan struct{} { return f.done }
func (f *fakeConn) Close() error          { return nil }

// TestAutoCheckpointOlderDaemon: a daemon that answers an automatic
// checkpoint with an ordinary one (it predates them) gets that one deleted
// and no more asked of it; the newest checkpoint reused (nothing changed)
// is left alone, whatever its kind.
func TestAutoCheckpointOlderDaemon(t *testing.T) {
	ws := protocol.WorkspaceInfo{WorkspaceID: "ws-1"}
	for _, tt := range []struct {
		name       string
		answer     protocol.Checkpoint
		wantID     string
		wantCalls  []string
		wantNoAuto bool
	}{
		{"automatic", protocol.Checkpoint{CheckpointID: "cp-a", Auto: true}, "cp-a",
			[]string{protocol.MethodWorkspaceCheckpoint, protocol.MethodWorkspaceCheckpoint}, false},
		{"reused, the user's", protocol.Checkpoint{CheckpointID: "cp-user", Reused: true}, "cp-user",
			[]string{protocol.MethodWorkspaceCheckpoint, protocol.MethodWorkspaceCheckpoint}, false},
		{"an older daemon's ordinary one", protocol.Checkpoint{CheckpointID: "cp-old"}, "",
			[]string{protocol.MethodWorkspaceCheckpoint, protocol.MethodWorkspaceDeleteCheckpoint}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newSession(New(Options{}), "/p", "")
			var deleted string
			c := &fakeConn{answer: func(method string, params any) (any, error) {
				switch p := params.(type) {
				case protocol.WorkspaceCheckpointParams:
					if !p.Auto || p.Name != "before write_file" {
						t.Errorf("checkpoint params %+v", p)
					}
					return tt.answer, nil
				case protocol.WorkspaceDeleteCheckpointParams:
					deleted = p.CheckpointID
					return protocol.Empty{}, nil
				}
				t.Fatalf("unexpected %s", method)
				return nil, nil
			}}
			if id := s.autoCheckpoint(t.Context(), c, ws, "write_file"); id != tt.wantID {
				t.Fatalf("autoCheckpoint = %q, want %q", id, tt.wantID)
			}
			s.autoCheckpoint(t.Context(), c, ws, "write_file") // a second tool
			if len(c.calls) != len(tt.wantCalls) {
				t.Fatalf("calls %v, want %v", c.calls, tt.wantCalls)
			}
			for i := range c.calls {
				if c.calls[i] != tt.wantCalls[i] {
					t.Fatalf("calls %v, want %v", c.calls, tt.wantCalls)
				}
			}
			if tt.wantNoAuto != (deleted == "cp-old") || s.noAuto != tt.wantNoAuto {
				t.Fatalf("deleted %q, noAuto %v", deleted, s.noAuto)
			}
		})
	}
}

// TestToolError: daemon refusals name their §7 error; failures of the
// sandbox or the connection start with "sandbox failure:".
func TestToolError(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want string
	}{
		{protocol.Errorf(protocol.CodePathOutsideWorkspace, "path \"..\" climbs out"), `PathOutsideWorkspace: path ".." climbs out`},
		{protocol.Errorf(protocol.CodeKernelDead, "killed: memory limit"), "sandbox failure: KernelDead: killed: memory limit"},
		{protocol.Errorf(protocol.CodeSandboxUnavailable, "no user namespaces"), "sandbox failure: SandboxUnavailable: no user namespaces"},
		{&connErr{context.DeadlineExceeded}, "sandbox failure: context deadline exceeded (the next call tries again)"},
	} {
		if got := toolError(tt.err).Error(); got != tt.want {
			t.Errorf("toolError(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}
