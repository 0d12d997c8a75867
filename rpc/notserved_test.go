package rpc

import (
	"strings"
	"testing"

	"github.com/cellbox-dev/cellbox/protocol"
)

// TestNotYetServedMethods: the methods of PROTOCOL.md that this build does
// not serve answer -32601 naming the method, so a client can tell "not here
// yet" from a typo, and the connection goes on.
func TestNotYetServedMethods(t *testing.T) {
	tc := startInProc(t, Options{})
	tc.initialize(t)
	for _, m := range notYetServed {
		je := wantCode(t, tc.call(t, m, map[string]any{"workspaceId": "ws-x"}, nil), protocol.CodeMethodNotFound)
		if !strings.Contains(je.Message, m) || !strings.Contains(je.Message, "not available in this build") {
			t.Errorf("%s answered %q", m, je.Message)
		}
	}
	var st protocol.DaemonStats
	if err := tc.call(t, protocol.MethodDaemonStats, struct{}{}, &st); err != nil {
		t.Fatalf("daemon/stats after the methods not served: %v", err)
	}
}
