package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/cellbox-dev/cellbox/protocol"
)

// End-to-end tests of PROTOCOL.md §11's previews: a server a python kernel
// starts in its sandbox (network none) is announced in workspace/ports and
// reached from the host through workspace/exposePort's URL, HTTP and
// websockets, as root and as CELLBOX_TEST_USER. The origin separation in a
// browser is tested in chromium (editors/browser/test).

// previewApp is testdata/preview_app.py, to run in a kernel.
func previewApp(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile("testdata/preview_app.py")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// portsNotes are the workspace/ports the client got for ws, in order.
func portsNotes(t testing.TB, c *client, ws string) [][]int {
	t.Helper()
	c.mu.Lock()
	notes := append([]note(nil), c.notes...)
	c.mu.Unlock()
	var out [][]int
	for _, n := range notes {
		if n.method != protocol.MethodWorkspacePorts {
			continue
		}
		var p protocol.WorkspacePortsParams
		if err := json.Unmarshal(n.params, &p); err != nil {
			t.Fatalf("bad workspace/ports %s: %v", n.params, err)
		}
		if p.WorkspaceID == ws {
			out = append(out, p.Ports)
		}
	}
	return out
}

// waitPorts waits until the latest workspace/ports of ws is want.
func waitPorts(t testing.TB, c *client, ws string, want []int) {
	t.Helper()
	waitFor(t, 20*time.Second, fmt.Sprintf("workspace/ports %v", want), func() bool {
		got := portsNotes(t, c, ws)
		return len(got) > 0 && slices.Equal(got[len(got)-1], want)
	})
}

func httpGet(t testing.TB, c *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestPreviewE2E(t *testing.T) {
	asUsers(t, testPreviewE2E)
}

func testPreviewE2E(t *testing.T, asUser bool) {
	d := newFilesDaemon(t, asUser, map[string]string{"app.py": previewApp(t)})
	ws := openWorkspace(t, d.c, d.project, "preview")
	kid := startKernel(t, d.c, protocol.KernelStartParams{Language: "python", WorkspaceID: ws}).KernelID

	// Exposed before anything listens: 502 with a page that tries again.
	var pv protocol.Preview
	if err := d.c.call(t, protocol.MethodWorkspaceExposePort, protocol.WorkspaceExposePortParams{WorkspaceID: ws, Port: 8000}, &pv); err != nil {
		t.Fatalf("workspace/exposePort: %v", err)
	}
	if pv.PreviewID == "" || pv.Port != 8000 || pv.WorkspaceID != ws || !strings.HasPrefix(pv.URL, "http://127.0.0.1:") || !strings.Contains(pv.URL, "cellbox-preview=") {
		t.Fatalf("preview %+v", pv)
	}
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar, Timeout: 20 * time.Second}
	if code, body := httpGet(t, hc, pv.URL); code != http.StatusBadGateway || !strings.Contains(body, "Nothing listens on port 8000") {
		t.Fatalf("before the server: %d %q", code, body)
	}

	// The kernel starts the server: workspace/ports says so, and the
	// preview reaches it.
	printed(t, d.c, kid, "exec(open('app.py').read())\nsrv = start(8000)")
	waitPorts(t, d.c, ws, []int{8000})
	if code, body := httpGet(t, hc, pv.URL); code != 200 || body != "hello from the sandbox /" {
		t.Fatalf("through the preview: %d %q", code, body)
	}
	base := strings.SplitN(pv.URL, "?", 2)[0]
	if code, body := httpGet(t, hc, base+"page?q=1"); code != 200 || body != "hello from the sandbox /page?q=1" {
		t.Fatalf("with the cookie: %d %q", code, body)
	}
	if code, _ := httpGet(t, &http.Client{Timeout: 20 * time.Second}, base+"page"); code != http.StatusUnauthorized {
		t.Fatalf("without the token or the cookie: %d", code)
	}
	// The browser's URL: the same server at the preview's own name (Go
	// resolves no .localhost name: the request goes to the address with
	// the name as Host, as a browser's does).
	lu, _ := url.Parse(pv.URL)
	bu, err := url.Parse(pv.BrowserURL)
	if err != nil || bu.Hostname() != pv.PreviewID+".localhost" || bu.Port() != lu.Port() {
		t.Fatalf("browserUrl %q (url %q)", pv.BrowserURL, pv.URL)
	}
	atAddr := *bu
	atAddr.Host = lu.Host
	req, _ := http.NewRequest(http.MethodGet, atAddr.String(), nil)
	req.Host = bu.Host
	if resp, err := http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	} else {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != "hello from the sandbox /" {
			t.Fatalf("at the preview's own name: %d %q", resp.StatusCode, b)
		}
	}

	// A websocket through the preview.
	wu, _ := url.Parse(pv.URL)
	wu.Scheme, wu.Path = "ws", "/ws"
	wc, _, err := websocket.DefaultDialer.Dial(wu.String(), nil)
	if err != nil {
		t.Fatalf("websocket: %v", err)
	}
	if err := wc.WriteMessage(websocket.TextMessage, []byte("hi")); err != nil {
		t.Fatal(err)
	}
	_ = wc.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, m, err := wc.ReadMessage(); err != nil || string(m) != "echo:hi" {
		t.Fatalf("websocket echo %q (%v)", m, err)
	}
	wc.Close()

	// The same port again is the same preview; the list has it.
	var again protocol.Preview
	if err := d.c.call(t, protocol.MethodWorkspaceExposePort, protocol.WorkspaceExposePortParams{WorkspaceID: ws, Port: 8000, Protocol: "http"}, &again); err != nil || again != pv {
		t.Fatalf("exposing again: %+v (%v), want %+v", again, err, pv)
	}
	var list protocol.WorkspacePreviewsResult
	if err := d.c.call(t, protocol.MethodWorkspacePreviews, protocol.WorkspacePreviewsParams{WorkspaceID: ws}, &list); err != nil || len(list.Previews) != 1 || list.Previews[0] != pv {
		t.Fatalf("workspace/previews: %+v (%v)", list, err)
	}

	// Bad input: clear errors (§7), the daemon goes on.
	for _, bad := range []struct {
		params any
		code   protocol.ErrorCode
		says   string
	}{
		{protocol.WorkspaceExposePortParams{WorkspaceID: ws}, protocol.CodeInvalidParams, "port 0 is not a TCP port"},
		{map[string]any{"workspaceId": ws, "port": 1.5}, protocol.CodeInvalidParams, `"port" must be an integer, got number 1.5`},
		{protocol.WorkspaceExposePortParams{WorkspaceID: ws, Port: 70000}, protocol.CodeInvalidParams, "not a TCP port"},
		{protocol.WorkspaceExposePortParams{WorkspaceID: ws, Port: -1}, protocol.CodeInvalidParams, "not a TCP port"},
		{protocol.WorkspaceExposePortParams{WorkspaceID: ws, Port: 3128}, protocol.CodeInvalidParams, "the daemon's"},
		{protocol.WorkspaceExposePortParams{WorkspaceID: ws, Port: 8000, Protocol: "udp"}, protocol.CodeInvalidParams, "http"},
		{protocol.WorkspaceExposePortParams{WorkspaceID: "ws-nope", Port: 8000}, protocol.CodeNotFound, "ws-nope"},
		{map[string]any{"workspaceId": ws, "port": "8000"}, protocol.CodeInvalidParams, "port"},
	} {
		err := d.c.call(t, protocol.MethodWorkspaceExposePort, bad.params, nil)
		if msg := wantCode(t, err, bad.code); !strings.Contains(msg, bad.says) {
			t.Errorf("%+v: %q does not say %q", bad.params, msg, bad.says)
		}
	}
	wantCode(t, d.c.call(t, protocol.MethodWorkspaceUnexposePort, protocol.PreviewIDParams{PreviewID: "pv-nope"}, nil), protocol.CodeNotFound)
	wantCode(t, d.c.call(t, protocol.MethodWorkspaceUnexposePort, protocol.PreviewIDParams{}, nil), protocol.CodeInvalidParams)

	// At most MaxPreviews (16) previews per workspace.
	for port := 9001; port < 9016; port++ {
		if err := d.c.call(t, protocol.MethodWorkspaceExposePort, protocol.WorkspaceExposePortParams{WorkspaceID: ws, Port: port}, nil); err != nil {
			t.Fatalf("preview %d: %v", port, err)
		}
	}
	wantCode(t, d.c.call(t, protocol.MethodWorkspaceExposePort, protocol.WorkspaceExposePortParams{WorkspaceID: ws, Port: 9016}, nil), protocol.CodeLimitExceeded)

	// The server's process ends (the kernel restarts): the set is empty
	// again, and the preview says nothing listens.
	if err := d.c.call(t, protocol.MethodKernelRestart, protocol.KernelIDParams{KernelID: kid}, nil); err != nil {
		t.Fatalf("kernel/restart: %v", err)
	}
	waitPorts(t, d.c, ws, []int{})
	if code, _ := httpGet(t, hc, base); code != http.StatusBadGateway {
		t.Fatalf("after the server stopped: %d", code)
	}

	// Unexposed: the preview's port is closed.
	if err := d.c.call(t, protocol.MethodWorkspaceUnexposePort, protocol.PreviewIDParams{PreviewID: pv.PreviewID}, nil); err != nil {
		t.Fatalf("workspace/unexposePort: %v", err)
	}
	if _, err := hc.Get(pv.URL); err == nil {
		t.Fatal("an unexposed preview still answers")
	}
	var st protocol.DaemonStats
	if err := d.c.call(t, protocol.MethodDaemonStats, struct{}{}, &st); err != nil {
		t.Fatalf("the daemon after the previews: %v", err)
	}

	// Closing the workspace closes its previews.
	if err := d.c.call(t, protocol.MethodWorkspacePreviews, protocol.WorkspacePreviewsParams{WorkspaceID: ws}, &list); err != nil || len(list.Previews) != 15 {
		t.Fatalf("previews left: %d (%v)", len(list.Previews), err)
	}
	if err := d.c.call(t, protocol.MethodWorkspaceClose, protocol.WorkspaceCloseParams{WorkspaceID: ws}, nil); err != nil {
		t.Fatalf("workspace/close: %v", err)
	}
	if _, err := hc.Get(list.Previews[0].URL); err == nil {
		t.Fatal("a preview of a closed workspace still answers")
	}
}

// TestPreviewKernelsOwnPorts: ipykernel (jupyter:python3, hosted in the
// sandbox) listens on a TCP port of its own as it starts; that is not a
// server to offer. Only the app it then starts is announced.
func TestPreviewKernelsOwnPorts(t *testing.T) {
	d := newFilesDaemon(t, false, map[string]string{"app.py": previewApp(t)})
	ws := openWorkspace(t, d.c, d.project, "own-ports")
	kid := startKernel(t, d.c, protocol.KernelStartParams{Language: "jupyter:python3", WorkspaceID: ws}).KernelID
	// The control: ipykernel does listen on a TCP port in the sandbox.
	own := printed(t, d.c, kid, `print(sum(1 for l in open("/proc/net/tcp").read().splitlines()[1:] if l.split()[3] == "0A" and int(l.split()[1].split(":")[1], 16) not in (3128, 1080, 3141)))`)
	if own == "0\n" {
		t.Log("this ipykernel listens on no TCP port of its own: the test only checks the app's port")
	}
	printed(t, d.c, kid, "exec(open('app.py').read())\nsrv = start(8000)")
	waitPorts(t, d.c, ws, []int{8000})
	for _, set := range portsNotes(t, d.c, ws) {
		if !slices.Equal(set, []int{8000}) && len(set) != 0 {
			t.Fatalf("workspace/ports announced %v: the kernel's own port", set)
		}
	}
	// Restarted, the kernel opens another port of its own: still not announced.
	if err := d.c.call(t, protocol.MethodKernelRestart, protocol.KernelIDParams{KernelID: kid}, nil); err != nil {
		t.Fatalf("kernel/restart: %v", err)
	}
	printed(t, d.c, kid, "exec(open('app.py').read())\nsrv = start(8001)")
	waitPorts(t, d.c, ws, []int{8001})
	for _, set := range portsNotes(t, d.c, ws) {
		if len(set) > 1 || (len(set) == 1 && set[0] != 8000 && set[0] != 8001) {
			t.Fatalf("workspace/ports announced %v after the restart", set)
		}
	}
	// A server that listens as another kernel starts, before any report
	// named it, is the user's: announced once the start is over.
	printed(t, d.c, kid, "srv2 = start(8002)")
	startKernel(t, d.c, protocol.KernelStartParams{Language: "jupyter:python3", WorkspaceID: ws})
	waitPorts(t, d.c, ws, []int{8001, 8002})
}
