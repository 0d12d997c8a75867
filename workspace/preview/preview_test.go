package preview

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// app is a stand-in for the sandboxed server (the sandbox itself is
// dialed in workspace's and cmd/cellbox's tests): it echoes what it saw of
// the request, sets cookies, and echoes websocket messages.
func app(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/ws", func(w http.ResponseWriter, r *http.Request) {
		up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		for {
			mt, m, err := c.ReadMessage()
			if err != nil {
				return
			}
			_ = c.WriteMessage(mt, append([]byte("echo:"), m...))
		}
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		http.SetCookie(w, &http.Cookie{Name: "session", Value: "app"})
		w.Header().Add("Set-Cookie", "Cellbox-Preview-1=stolen; Path=/")
		w.Header().Set("Clear-Site-Data", `"cookies"`)
		fmt.Fprintf(w, "path=%s query=%s cookie=%s host=%s referer=%s", r.URL.Path, r.URL.RawQuery, r.Header.Get("Cookie"), r.Host, r.Referer())
	})
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln
}

func start(t *testing.T, dial func(context.Context) (net.Conn, error)) *Server {
	t.Helper()
	s, err := Start(Options{Dial: dial, Port: 5000})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func dialTo(addr string) func(context.Context) (net.Conn, error) {
	return func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}
}

func get(t *testing.T, c *http.Client, u string, hdr map[string]string) (int, string, *http.Response) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
		}
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp
}

func TestPreviewTokenAndCookie(t *testing.T) {
	ln := app(t)
	s := start(t, dialTo(ln.Addr().String()))
	if !strings.Contains(s.URL(), "?"+Param+"=") || !strings.HasPrefix(s.URL(), "http://127.0.0.1:") {
		t.Fatalf("URL %q", s.URL())
	}
	base := strings.SplitN(s.URL(), "?", 2)[0]
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}

	// Without the token: 401, and the app is not reached.
	if code, body, _ := get(t, c, base+"page", nil); code != http.StatusUnauthorized || strings.Contains(body, "path=") {
		t.Fatalf("no token: %d %q", code, body)
	}
	if code, _, _ := get(t, c, base+"?"+Param+"=wrong", nil); code != http.StatusUnauthorized {
		t.Fatalf("a wrong token: %d", code)
	}

	// With it: the app answers, without seeing the token in the query.
	code, body, resp := get(t, c, s.URL()+"&x=1", nil)
	if code != 200 || !strings.Contains(body, "query=x=1 ") || strings.Contains(body, Param) {
		t.Fatalf("with the token: %d %q", code, body)
	}
	var ours []*http.Cookie
	for _, ck := range resp.Cookies() {
		if strings.HasPrefix(strings.ToLower(ck.Name), cookiePrefix) {
			ours = append(ours, ck)
		}
	}
	if len(ours) != 2 {
		t.Fatalf("preview cookies %v: want the two of the preview's (the app's stripped)", resp.Header.Values("Set-Cookie"))
	}
	if ck := ours[0]; !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/" || ck.Domain != "" || ck.Name != s.cookie {
		t.Fatalf("the preview's cookie: %+v", ck)
	}
	if ck := ours[1]; !ck.HttpOnly || ck.SameSite != http.SameSiteNoneMode || !ck.Secure || ck.Domain != "" || ck.Name != s.cookie+embedSuffix {
		t.Fatalf("the preview's framed cookie: %+v", ck)
	}
	if got := resp.Header.Values("Set-Cookie"); !strings.Contains(strings.Join(got, "\n"), "session=app") {
		t.Errorf("the app's own cookie was dropped: %q", got)
	}

	// The cookie alone, from the page itself: the app answers and sees its
	// own cookie, never the preview's.
	code, body, _ = get(t, c, base+"next", map[string]string{"Sec-Fetch-Site": "same-origin"})
	if code != 200 || !strings.Contains(body, "path=/next") || strings.Contains(body, cookiePrefix) || !strings.Contains(body, "session=app") {
		t.Fatalf("the cookie alone: %d %q", code, body)
	}
	if resp.Header.Get("Clear-Site-Data") != "" {
		t.Error("the app's Clear-Site-Data reached the browser (it would clear every preview's cookies)")
	}
	// The page's own requests carry its URL, token included, as Referer:
	// the app gets it without.
	code, body, _ = get(t, c, base+"img", map[string]string{"Sec-Fetch-Site": "same-origin", "Referer": s.URL() + "&from=1"})
	if code != 200 || strings.Contains(body, Param) || !strings.Contains(body, "referer="+base+"?from=1") {
		t.Fatalf("the Referer: %d %q", code, body)
	}
	// A browser without Fetch Metadata names the origin: another one is refused.
	if code, body, _ := get(t, c, base+"next", map[string]string{"Origin": "http://127.0.0.1:1"}); code != http.StatusUnauthorized {
		t.Errorf("cookie with another Origin: %d %q", code, body)
	}
	if code, _, _ := get(t, c, base+"next", map[string]string{"Origin": strings.TrimSuffix(base, "/")}); code != 200 {
		t.Errorf("cookie with its own Origin: %d", code)
	}
	// The cookie alone from another origin (another preview's script, the
	// same site as every loopback port): refused.
	for _, site := range []string{"same-site", "cross-site"} {
		if code, body, _ := get(t, c, base+"next", map[string]string{"Sec-Fetch-Site": site}); code != http.StatusUnauthorized {
			t.Errorf("cookie from %s: %d %q", site, code, body)
		}
	}
	// The app's own cookies reach it as the browser sent them (a quoted
	// value, UTF-8), the preview's left out wherever they are.
	req, _ := http.NewRequest("GET", base+"next", nil)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	req.Header.Set("Cookie", `a="b c"; `+s.cookie+`=`+s.token+`; u=café; `+strings.ToUpper(s.cookie)+embedSuffix+`=x;flag`)
	if resp, err := http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	} else {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if want := "cookie=a=\"b c\"; u=café; flag host="; resp.StatusCode != 200 || !strings.Contains(string(b), want) {
			t.Errorf("the app's cookies: %d %q, want %q", resp.StatusCode, b, want)
		}
	}
	// A name that is not this machine's loopback (DNS rebinding): 403.
	if code, _, _ := get(t, c, s.URL(), map[string]string{"Host": "evil.example:80"}); code != http.StatusForbidden {
		t.Errorf("Host evil.example: %d", code)
	}
	// localhost names are this machine.
	if code, body, _ := get(t, c, s.URL(), map[string]string{"Host": "localhost"}); code != 200 || !strings.Contains(body, "host=localhost") {
		t.Errorf("Host localhost: %d %q", code, body)
	}
}

func TestPreviewWebsocket(t *testing.T) {
	ln := app(t)
	s := start(t, dialTo(ln.Addr().String()))
	u, _ := url.Parse(s.URL())
	u.Scheme, u.Path = "ws", "/ws"
	c, resp, err := websocket.DefaultDialer.Dial(u.String(), nil)
	if err != nil {
		t.Fatalf("websocket through the preview: %v (%v)", err, resp)
	}
	defer c.Close()
	for i := range 3 {
		msg := fmt.Sprintf("hello %d", i)
		if err := c.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil {
			t.Fatal(err)
		}
		_, got, err := c.ReadMessage()
		if err != nil || string(got) != "echo:"+msg {
			t.Fatalf("websocket answer %q (%v)", got, err)
		}
	}
	// Closing the preview ends its websockets too.
	s2 := start(t, dialTo(ln.Addr().String()))
	u2, _ := url.Parse(s2.URL())
	u2.Scheme, u2.Path = "ws", "/ws"
	c2, _, err := websocket.DefaultDialer.Dial(u2.String(), nil)
	if err != nil {
		t.Fatalf("websocket: %v", err)
	}
	defer c2.Close()
	s2.Close()
	_ = c2.SetReadDeadline(time.Now().Add(10 * time.Second))
	var ne net.Error
	if _, _, err := c2.ReadMessage(); err == nil || (errors.As(err, &ne) && ne.Timeout()) {
		t.Errorf("a websocket of a closed preview: %v, want it closed", err)
	}
	// Without the token the upgrade is refused.
	u.RawQuery = ""
	if _, resp, err := websocket.DefaultDialer.Dial(u.String(), nil); err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a websocket without the token: %v %v", err, resp)
	}
}

func TestPreviewNothingListening(t *testing.T) {
	s := start(t, func(context.Context) (net.Conn, error) {
		return nil, fmt.Errorf("dial port 5000: %w", ErrNotListening)
	})
	code, body, resp := get(t, http.DefaultClient, s.URL(), nil)
	if code != http.StatusBadGateway || !strings.Contains(body, "Nothing listens on port 5000") || !strings.Contains(body, `http-equiv="refresh"`) {
		t.Fatalf("nothing listening: %d %q", code, body)
	}
	if resp.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("a 502 may be cached: %q", resp.Header.Get("Cache-Control"))
	}
	s.Close()
	if _, err := http.Get(s.URL()); err == nil {
		t.Error("a closed preview still answers")
	}
}

func TestStartRefusesNonLoopback(t *testing.T) {
	if _, err := Start(Options{Host: "0.0.0.0", Dial: dialTo("x")}); err == nil {
		t.Error("a preview on 0.0.0.0 started")
	}
}

func TestLoopbackHost(t *testing.T) {
	for h, want := range map[string]bool{
		"127.0.0.1:80": true, "localhost": true, "LOCALHOST.:1": true, "[::1]:4": true, "127.8.0.1": true,
		"app.localhost:3": false, "evil.example": false, "localhost.evil.example:1": false, "10.0.0.1": false, "": false,
	} {
		if got := loopbackHost(hostOf(h)); got != want {
			t.Errorf("loopbackHost(%q) = %v", h, got)
		}
	}
}

// TestPreviewBrowserURL: the preview's own name has a token of its own.
// A page there knows its token from its address; with it, it opens
// neither the loopback URL (whose cookies are every loopback service's)
// nor another preview's name; the loopback token does not open the name
// either; and another name under .localhost is refused.
func TestPreviewBrowserURL(t *testing.T) {
	ln := app(t)
	s, err := Start(Options{Dial: dialTo(ln.Addr().String()), Port: 5000, Name: "pv-0a1b2c.localhost"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	port := strconv.Itoa(s.Addr().(*net.TCPAddr).Port)
	bu, err := url.Parse(s.BrowserURL())
	if err != nil || bu.Host != "pv-0a1b2c.localhost:"+port || bu.Path != "/" {
		t.Fatalf("BrowserURL %q", s.BrowserURL())
	}
	btok, ltok := bu.Query().Get(Param), strings.SplitN(s.URL(), Param+"=", 2)[1]
	if btok == "" || btok == ltok {
		t.Fatalf("the two URLs' tokens: %q and %q", btok, ltok)
	}
	named := func(host, tok string) (int, string, *http.Response) {
		return get(t, &http.Client{}, "http://"+s.Addr().String()+"/page?"+Param+"="+tok, map[string]string{"Host": host})
	}
	code, body, resp := named("pv-0a1b2c.localhost:"+port, btok)
	if code != 200 || !strings.Contains(body, "host=pv-0a1b2c.localhost:"+port) {
		t.Fatalf("the browser URL: %d %q", code, body)
	}
	var embed *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == s.cookie+embedSuffix {
			embed = c
		}
		if strings.HasPrefix(c.Name, cookiePrefix) && c.Value != btok {
			t.Errorf("cookie %s holds another token", c.Name)
		}
	}
	if embed == nil || !embed.Partitioned || !embed.Secure || embed.SameSite != http.SameSiteNoneMode {
		t.Errorf("the framed cookie: %+v, want Partitioned, Secure, SameSite=None", embed)
	}
	for _, c := range []struct{ host, tok, why string }{
		{"127.0.0.1:" + port, btok, "the browser token at the loopback address"},
		{"localhost:" + port, btok, "the browser token at localhost"},
		{"pv-0a1b2c.localhost:" + port, ltok, "the loopback token at the name"},
	} {
		if code, body, _ := named(c.host, c.tok); code != http.StatusUnauthorized {
			t.Errorf("%s: %d %q, want 401", c.why, code, body)
		}
	}
	for _, host := range []string{"pv-other.localhost:" + port, "localhost.localhost:" + port} {
		if code, _, _ := named(host, btok); code != http.StatusForbidden {
			t.Errorf("Host %s: %d, want 403", host, code)
		}
	}
	// The cookie of one host does not open the other.
	for _, c := range []struct{ host, tok string }{{"127.0.0.1:" + port, btok}, {"pv-0a1b2c.localhost:" + port, ltok}} {
		req, _ := http.NewRequest(http.MethodGet, "http://"+s.Addr().String()+"/page", nil)
		req.Host = c.host
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		req.Header.Set("Cookie", s.cookie+"="+c.tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("the other URL's cookie at %s: %d, want 401", c.host, resp.StatusCode)
		}
	}
	if _, err := Start(Options{Dial: dialTo("x"), Name: "evil.example"}); err == nil {
		t.Error("a preview named outside .localhost started")
	}
}

// TestPreviewStreams: a response of unknown length (server-sent events, a
// dev server's log) reaches the browser as the app writes it, not when it
// ends.
func TestPreviewStreams(t *testing.T) {
	next := make(chan struct{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 2 {
			fmt.Fprintf(w, "data: %d\n\n", i)
			w.(http.Flusher).Flush()
			if i == 0 {
				<-next // the client must have the first event before the second is written
			}
		}
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	s := start(t, dialTo(ln.Addr().String()))
	resp, err := http.Get(s.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := make([]byte, 64)
	n, err := io.ReadAtLeast(resp.Body, buf, len("data: 0\n\n"))
	if err != nil || string(buf[:n]) != "data: 0\n\n" {
		t.Fatalf("the first event: %q (%v)", buf[:n], err)
	}
	close(next)
	rest, _ := io.ReadAll(resp.Body)
	if string(rest) != "data: 1\n\n" {
		t.Fatalf("the second event: %q", rest)
	}
}
