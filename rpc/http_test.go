package rpc

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/cellbox-dev/cellbox/protocol"
)

const httpToken = "s3cret-token"

func startHTTP(t *testing.T, opts Options) *httptest.Server {
	t.Helper()
	opts.Token = httpToken
	opts.TestHooks = true
	d := newTestDaemon(t, opts)
	ctx, cancel := context.WithCancel(context.Background())
	srv := httptest.NewServer(d.Handler(ctx))
	t.Cleanup(func() { cancel(); srv.Close() })
	return srv
}

func get(t *testing.T, url string, header http.Header) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestHTTPAuth(t *testing.T) {
	srv := startHTTP(t, Options{AllowOrigins: []string{"http://localhost:5173"}})
	bearer := http.Header{"Authorization": {"Bearer " + httpToken}}
	for _, tt := range []struct {
		name   string
		path   string
		header http.Header
		want   int
	}{
		{"no token", "/healthz", nil, 401},
		{"wrong token", "/healthz", http.Header{"Authorization": {"Bearer nope"}}, 401},
		{"token prefix", "/healthz", http.Header{"Authorization": {"Bearer " + httpToken[:5]}}, 401},
		{"basic auth", "/healthz", http.Header{"Authorization": {"Basic " + httpToken}}, 401},
		{"wrong query token", "/healthz?token=x", nil, 401},
		{"bearer", "/healthz", bearer, 200},
		{"query token", "/healthz?token=" + httpToken, nil, 200},
		{"metrics needs token", "/metrics", nil, 401},
		{"index needs token", "/", nil, 401},
		{"rpc needs token", "/rpc", nil, 401},
		{"foreign origin", "/healthz", http.Header{"Authorization": {"Bearer " + httpToken}, "Origin": {"https://evil.example"}}, 403},
		{"foreign origin without token", "/healthz", http.Header{"Origin": {"https://evil.example"}}, 403},
		{"allowed origin", "/healthz", http.Header{"Authorization": {"Bearer " + httpToken}, "Origin": {"http://localhost:5173"}}, 200},
		{"own origin", "/healthz", http.Header{"Authorization": {"Bearer " + httpToken}, "Origin": {srv.URL}}, 200},
		{"unknown path", "/nope", bearer, 404},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := get(t, srv.URL+tt.path, tt.header)
			if resp.StatusCode != tt.want {
				t.Fatalf("GET %s: %d %q, want %d", tt.path, resp.StatusCode, body, tt.want)
			}
			if tt.want == 401 && !strings.Contains(body, "token") {
				t.Fatalf("401 body %q does not say what is missing", body)
			}
		})
	}
}

func TestHealthz(t *testing.T) {
	dir := t.TempDir()
	srv := startHTTP(t, Options{StateDir: dir})
	resp, body := get(t, srv.URL+"/healthz?token="+httpToken, nil)
	if resp.StatusCode != 200 || strings.TrimSpace(body) != `{"status":"ok"}` {
		t.Fatalf("healthz = %d %s", resp.StatusCode, body)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	resp, body = get(t, srv.URL+"/healthz?token="+httpToken, nil)
	if resp.StatusCode != 503 || !strings.Contains(body, "stateDir") {
		t.Fatalf("healthz with the state dir gone = %d %s, want 503 naming stateDir", resp.StatusCode, body)
	}
}

func TestMetrics(t *testing.T) {
	srv := startHTTP(t, Options{})
	ws := dialWS(t, srv, nil)
	wsCall(t, ws, 1, "initialize", map[string]any{"protocolVersion": 1})
	wsCall(t, ws, 2, "evil/"+strings.Repeat("x", 50), nil)
	_, body := get(t, srv.URL+"/metrics", http.Header{"Authorization": {"Bearer " + httpToken}})
	for _, want := range []string{
		`cellbox_rpc_requests_total{code="ok",method="initialize"} 1`,
		`cellbox_rpc_requests_total{code="method_not_found",method="unknown"} 1`,
		`cellbox_rpc_connections{transport="websocket"} 1`,
		"cellbox_rpc_request_duration_seconds_bucket",
		"go_goroutines",
		"process_resident_memory_bytes",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q in:\n%s", want, grepLines(body, "cellbox_"))
		}
	}
	if strings.Contains(body, "evil/") {
		t.Error("an unknown method name became a metric label")
	}
}

func dialWS(t *testing.T, srv *httptest.Server, header http.Header) *websocket.Conn {
	t.Helper()
	if header == nil {
		header = http.Header{"Authorization": {"Bearer " + httpToken}}
	}
	url := "ws" + strings.TrimPrefix(srv.URL, "http") + "/rpc"
	ws, resp, err := websocket.DefaultDialer.Dial(url, header)
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		t.Fatalf("dial %s: %v (HTTP %d)", url, err, status)
	}
	t.Cleanup(func() { ws.Close() })
	return ws
}

// wsCall sends one request and returns its response, skipping notifications.
func wsCall(t *testing.T, ws *websocket.Conn, id int, method string, params any) map[string]json.RawMessage {
	t.Helper()
	msg := map[string]any{"jsonrpc": "2.0", "id": id, "method": method}
	if params != nil {
		msg["params"] = params
	}
	if err := ws.WriteJSON(msg); err != nil {
		t.Fatal(err)
	}
	return wsReadID(t, ws, id)
}

func wsReadID(t *testing.T, ws *websocket.Conn, id int) map[string]json.RawMessage {
	t.Helper()
	_ = ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		var m map[string]json.RawMessage
		if err := ws.ReadJSON(&m); err != nil {
			t.Fatalf("read response %d: %v", id, err)
		}
		if string(m["id"]) == jsonInt(id) {
			return m
		}
	}
}

func jsonInt(i int) string { b, _ := json.Marshal(i); return string(b) }

func errCodeOf(m map[string]json.RawMessage) protocol.ErrorCode {
	return rawMsg{m: m}.errCode()
}

func TestWebsocketLifecycleAndExit(t *testing.T) {
	srv := startHTTP(t, Options{})
	ws := dialWS(t, srv, nil)
	if code := errCodeOf(wsCall(t, ws, 1, "daemon/stats", nil)); code != protocol.CodeServerNotInitialized {
		t.Fatalf("before initialize: code %d", code)
	}
	if code := errCodeOf(wsCall(t, ws, 2, "initialize", map[string]any{"protocolVersion": 1})); code != 0 {
		t.Fatalf("initialize: code %d", code)
	}
	if code := errCodeOf(wsCall(t, ws, 3, "shutdown", nil)); code != 0 {
		t.Fatalf("shutdown: code %d", code)
	}
	_ = ws.WriteJSON(map[string]any{"jsonrpc": "2.0", "method": "exit"})
	_, _, err := ws.ReadMessage()
	var ce *websocket.CloseError
	if !asCloseError(err, &ce) || ce.Code != websocket.CloseNormalClosure || ce.Text != "exit after shutdown" {
		t.Fatalf("after exit: %v, want close 1000 \"exit after shutdown\"", err)
	}
}

func asCloseError(err error, ce **websocket.CloseError) bool {
	e, ok := err.(*websocket.CloseError)
	if ok {
		*ce = e
	}
	return ok
}

func TestWebsocketBadMessages(t *testing.T) {
	srv := startHTTP(t, Options{MaxMessageBytes: 1024})
	ws := dialWS(t, srv, nil)
	wsCall(t, ws, 1, "initialize", map[string]any{"protocolVersion": 1})

	// Non-JSON, a non-object and a binary frame are answered; the connection stays.
	for _, tt := range []struct {
		kind int
		data string
		code protocol.ErrorCode
	}{
		{websocket.TextMessage, `{"jsonrpc":`, protocol.CodeParseError},
		{websocket.TextMessage, `[1,2]`, protocol.CodeInvalidRequest},
		{websocket.TextMessage, `"x"`, protocol.CodeInvalidRequest},
		{websocket.BinaryMessage, `{"jsonrpc":"2.0","id":5,"method":"daemon/stats"}`, protocol.CodeInvalidRequest},
	} {
		if err := ws.WriteMessage(tt.kind, []byte(tt.data)); err != nil {
			t.Fatal(err)
		}
		var m map[string]json.RawMessage
		_ = ws.SetReadDeadline(time.Now().Add(5 * time.Second))
		if err := ws.ReadJSON(&m); err != nil {
			t.Fatal(err)
		}
		if errCodeOf(m) != tt.code {
			t.Fatalf("%q: got %v, want code %d", tt.data, m, tt.code)
		}
	}
	if code := errCodeOf(wsCall(t, ws, 2, "daemon/stats", nil)); code != 0 {
		t.Fatalf("connection unusable after bad messages: %d", code)
	}
	// A second connection, then an oversized message on the first.
	ws2 := dialWS(t, srv, nil)
	wsCall(t, ws2, 1, "initialize", map[string]any{"protocolVersion": 1})
	big := `{"jsonrpc":"2.0","id":3,"method":"daemon/stats","params":{"pad":"` + strings.Repeat("x", 2000) + `"}}`
	if err := ws.WriteMessage(websocket.TextMessage, []byte(big)); err != nil {
		t.Fatal(err)
	}
	_ = ws.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, _, err := ws.ReadMessage()
	var ce *websocket.CloseError
	if !asCloseError(err, &ce) || ce.Code != websocket.CloseMessageTooBig || !strings.Contains(ce.Text, "max-message-bytes") {
		t.Fatalf("oversized message: %v, want close 1009 naming --max-message-bytes", err)
	}
	if code := errCodeOf(wsCall(t, ws2, 2, "daemon/stats", nil)); code != 0 {
		t.Fatalf("other connection affected by an oversized message: %d", code)
	}
}

func TestWebsocketQueryToken(t *testing.T) {
	srv := startHTTP(t, Options{})
	url := "ws" + strings.TrimPrefix(srv.URL, "http") + "/rpc?token=" + httpToken
	ws, _, err := websocket.DefaultDialer.Dial(url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	if code := errCodeOf(wsCall(t, ws, 1, "initialize", map[string]any{"protocolVersion": 1})); code != 0 {
		t.Fatalf("initialize: %d", code)
	}
	_, resp, err := websocket.DefaultDialer.Dial(url, http.Header{"Origin": {"https://evil.example"}})
	if err == nil || resp == nil || resp.StatusCode != 403 {
		t.Fatalf("foreign origin upgrade: %v, want HTTP 403", err)
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestWebsocketCloseDoesNotWaitForRequests: a client that closes while a
// request runs gets the close answered and the connection ended at once,
// not when the request ends (a browser waits for that before it can
// reconnect).
func TestWebsocketCloseDoesNotWaitForRequests(t *testing.T) {
	srv := startHTTP(t, Options{})
	ws := dialWS(t, srv, nil)
	wsCall(t, ws, 1, "initialize", map[string]any{"protocolVersion": 1})
	if err := ws.WriteJSON(map[string]any{"jsonrpc": "2.0", "id": 2, "method": "cellboxTest/sleep", "params": map[string]any{"ms": 30000, "workDoneToken": "running"}}); err != nil {
		t.Fatal(err)
	}
	// Its $/progress has begun: the request runs.
	_ = ws.SetReadDeadline(time.Now().Add(20 * time.Second))
	for {
		var m map[string]json.RawMessage
		if err := ws.ReadJSON(&m); err != nil {
			t.Fatalf("waiting for the request's progress: %v", err)
		}
		if string(m["method"]) == `"`+protocol.MethodProgress+`"` {
			break
		}
	}
	start := time.Now()
	if err := ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, "bye"), time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	_ = ws.SetReadDeadline(time.Now().Add(15 * time.Second))
	for {
		if _, _, err := ws.ReadMessage(); err != nil {
			break
		}
	}
	// The close frame came back; now the server must end the TCP
	// connection (what a browser waits for).
	buf := make([]byte, 64)
	for {
		if _, err := ws.UnderlyingConn().Read(buf); err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatal("the server kept the TCP connection open while a request ran")
			}
			break
		}
	}
	// The sleep runs for 30 s; the bound is far from both.
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("the connection ended %v after the client's close, with a request running", d)
	}
}

// TestHTTPHostCheck: DNS rebinding. A page of evil.example whose name is
// made to resolve to 127.0.0.1 sends its own name as Host, and as an Origin
// that then looks same-origin; it is refused even with the token (which a
// leak elsewhere could give it). The names the daemon is reached by pass.
func TestHTTPHostCheck(t *testing.T) {
	srv := startHTTP(t, Options{AllowOrigins: []string{"http://devbox.example:8080"}})
	port := srv.URL[strings.LastIndex(srv.URL, ":")+1:]
	for _, tt := range []struct {
		host, origin string
		want         int
	}{
		{"evil.example:" + port, "http://evil.example:" + port, 403},
		{"evil.example:" + port, "", 403},
		{"127.0.0.1.nip.example:" + port, "", 403},
		{"127.0.0.1:" + port, "", 200},
		{"127.0.0.2:" + port, "", 200},
		{"localhost:" + port, "http://localhost:" + port, 200},
		{"app.localhost:" + port, "", 200},
		{"[::1]:" + port, "", 200},
		{"devbox.example:8080", "http://devbox.example:8080", 200},
	} {
		req, _ := http.NewRequest("GET", srv.URL+"/healthz", nil)
		req.Host = tt.host
		req.Header.Set("Authorization", "Bearer "+httpToken)
		if tt.origin != "" {
			req.Header.Set("Origin", tt.origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tt.want {
			t.Errorf("Host %s Origin %q: %d %q, want %d", tt.host, tt.origin, resp.StatusCode, body, tt.want)
		}
		if tt.want == 403 && !strings.Contains(string(body), "host") {
			t.Errorf("403 body %q does not name the host check", body)
		}
	}
}
