package rpc

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/cellbox-dev/cellbox/protocol"
)

// TestDialInProcess: a Client over an in-memory pipe speaks to the daemon
// as any other connection does (requests, notifications, its count in
// daemon/stats), and Close ends it on both sides.
func TestDialInProcess(t *testing.T) {
	d := newTestDaemon(t, Options{TestHooks: true})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	notes := make(chan string, 16)
	c, err := d.DialInProcess(ctx, ClientOptions{
		ClientInfo: protocol.ClientInfo{Name: "inproc-test"},
		OnNotify:   func(method string, _ json.RawMessage) { notes <- method },
	})
	if err != nil {
		t.Fatal(err)
	}
	var stats protocol.DaemonStats
	if err := c.Call(ctx, protocol.MethodDaemonStats, struct{}{}, &stats); err != nil {
		t.Fatal(err)
	}
	if stats.Connections != 1 {
		t.Fatalf("daemon/stats connections = %d, want 1", stats.Connections)
	}
	if err := c.Call(ctx, "cellboxTest/sleep", map[string]any{"ms": 400, "workDoneToken": "t"}, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-notes:
		if m != protocol.MethodProgress {
			t.Fatalf("notification %s, want %s", m, protocol.MethodProgress)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no $/progress over the in-process connection")
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Done():
	default:
		t.Fatal("Done not closed after Close")
	}
	for deadline := time.Now().Add(10 * time.Second); d.Stats().Connections != 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the daemon still counts %d connections after Close", d.Stats().Connections)
		}
	}
	if err := c.Call(ctx, protocol.MethodDaemonStats, struct{}{}, nil); err == nil {
		t.Fatal("a call on a closed client succeeded")
	}
}

// TestHandleHTTP: a handler added with HandleHTTP is behind the token and
// Origin checks of /rpc.
func TestHandleHTTP(t *testing.T) {
	d := newTestDaemon(t, Options{Token: httpToken})
	d.HandleHTTP("/extra", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("extra " + r.Method))
	}))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv := httptest.NewServer(d.Handler(ctx))
	defer srv.Close()
	bearer := http.Header{"Authorization": {"Bearer " + httpToken}}
	for _, tt := range []struct {
		name   string
		header http.Header
		want   int
		body   string
	}{
		{"no token", nil, 401, ""},
		{"token", bearer, 200, "extra GET"},
		{"foreign origin", http.Header{"Authorization": bearer["Authorization"], "Origin": {"http://evil.example"}}, 403, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := get(t, srv.URL+"/extra", tt.header)
			if resp.StatusCode != tt.want || tt.body != "" && body != tt.body {
				t.Fatalf("GET /extra = %d %q, want %d %q", resp.StatusCode, body, tt.want, tt.body)
			}
		})
	}
}
