package workspace

import (
	"slices"
	"testing"
)

func TestParseListening(t *testing.T) {
	table := []byte(`  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F40 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 1 1 0000000000000000 100 0 0 10 0
   1: 0100007F:0C38 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 2 1 0000000000000000 100 0 0 10 0
   2: 0100007F:1F40 0100007F:A0B2 01 00000000:00000000 00:00000000 00000000  1000        0 3 1 0000000000000000 20 4 30 10 -1
   3: 00000000:0000 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4 1 0000000000000000 100 0 0 10 0
   4: garbage
   5: 00000000:ZZZZ 00000000:0000 0A
`)
	if got := parseListening(table); !slices.Equal(got, []int{8000, 3128}) {
		t.Errorf("parseListening = %v, want [8000 3128] (established, port 0 and garbage left out)", got)
	}
	v6 := []byte(`  sl  local_address                         remote_address                        st
   0: 00000000000000000000000001000000:0BB8 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 5
`)
	if got := parseListening(v6); !slices.Equal(got, []int{3000}) {
		t.Errorf("tcp6: %v", got)
	}
	if got := parseListening(nil); len(got) != 0 {
		t.Errorf("empty: %v", got)
	}
}

// TestPortsClearedWhenTheSandboxEndsDuringAHold: a sandbox that ends while
// a kernel starts takes its ports with it; the clear is not held back, so
// no client keeps offering a dead server.
func TestPortsClearedWhenTheSandboxEndsDuringAHold(t *testing.T) {
	var got [][]int
	w := &Workspace{m: &Manager{opts: Options{OnPorts: func(_ string, ports []int) { got = append(got, ports) }}}, id: "ws-x"}
	w.ports, w.ownPorts, w.portHolds = []int{8000}, map[int]bool{9000: true}, 1
	if !w.notePorts(nil) {
		t.Fatal("notePorts(nil) during a hold was not done")
	}
	if len(got) != 1 || len(got[0]) != 0 || len(w.Ports()) != 0 || len(w.ownPorts) != 0 {
		t.Fatalf("after the sandbox ended: reported %v, ports %v, own %v", got, w.Ports(), w.ownPorts)
	}
}
