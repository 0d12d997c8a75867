package sandbox

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

func init() {
	register("test-self", func(args []string) int {
		exe, _ := os.Readlink("/proc/self/exe")
		fmt.Printf("entry ran with %q as %s\n", args, exe)
		return 7
	})
}

// TestSandboxSelf: the binary is at SelfPath in a sandbox, read-only, and
// a program there runs one of its entries with ReexecEnv.
func TestSandboxSelf(t *testing.T) {
	s, _, _ := testSandbox(t, ModeOverlay)
	out, st := run(t, s, Spec{Argv: []string{SelfPath, "a", "b"}, Env: append(DefaultEnv(), ReexecEnv+"=test-self")})
	if st.Code != 7 || !strings.Contains(out, `entry ran with ["a" "b"] as `+SelfPath) {
		t.Fatalf("the entry: %v, output %q", st, out)
	}
	out, st = sh(t, s, "echo x > "+SelfPath+"; echo x >> "+SelfPath+"; rm -f "+SelfPath)
	if st.Code == 0 {
		t.Fatalf("%s could be changed: %q", SelfPath, out)
	}
	if out, st = sh(t, s, "test -x "+SelfPath); st.Code != 0 {
		t.Fatalf("%s is not an executable: %v %q", SelfPath, st, out)
	}
}
