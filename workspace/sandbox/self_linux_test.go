package sandbox

import (
	"context"
	"crypto/sha256"
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
	sum := func() [32]byte {
		t.Helper()
		b, err := os.ReadFile(selfExe)
		if err != nil {
			t.Fatal(err)
		}
		return sha256.Sum256(b)
	}
	before := sum()
	s, _, _ := testSandbox(t, ModeOverlay)
	out, st := run(t, s, Spec{Argv: []string{SelfPath, "a", "b"}, Env: append(DefaultEnv(), ReexecEnv+"=test-self")})
	if st.Code != 7 || !strings.Contains(out, `entry ran with ["a" "b"] as `+SelfPath) {
		t.Fatalf("the entry: %v, output %q", st, out)
	}
	// Each change on its own: the status of a list would be its last's.
	p := SelfPath
	out, st = sh(t, s, "echo x > "+p+" && exit 10; echo x >> "+p+" && exit 11; rm -f "+p+" && exit 12; "+
		"mv "+p+" "+p+".old && exit 13; chmod 777 "+p+" && exit 14; exit 0")
	if st.Code != 0 {
		t.Fatalf("%s could be changed (exit %v): %q", SelfPath, st, out)
	}
	if out, st = sh(t, s, "test -x "+SelfPath); st.Code != 0 {
		t.Fatalf("%s is not an executable: %v %q", SelfPath, st, out)
	}
	if sum() != before {
		t.Fatalf("the binary changed on the host")
	}
}

// TestSandboxSelfMissing: a sandbox whose init cannot bind the binary at
// SelfPath still starts and runs programs; only a spawn of SelfPath fails,
// and says why.
func TestSandboxSelfMissing(t *testing.T) {
	old := selfSourceForTest
	selfSourceForTest = "/proc/self/exe"
	t.Cleanup(func() { selfSourceForTest = old })
	s, _, _ := testSandbox(t, ModeOverlay)
	selfSourceForTest = old
	if out, st := sh(t, s, "true && test ! -e "+SelfPath); st.Code != 0 {
		t.Fatalf("a sandbox without %s: %v %q", SelfPath, st, out)
	}
	_, err := s.Spawn(context.Background(), Spec{Argv: []string{SelfPath}, Env: append(DefaultEnv(), ReexecEnv+"=test-self")})
	if err == nil || !strings.HasPrefix(err.Error(), "the cellbox binary is not visible in this sandbox: ") {
		t.Fatalf("spawn of %s: %v", SelfPath, err)
	}
	t.Logf("%v; init stderr %q", err, s.stderr.String())
	if !strings.Contains(s.stderr.String(), SelfPath+" is missing") {
		t.Fatalf("init stderr %q", s.stderr.String())
	}
}
