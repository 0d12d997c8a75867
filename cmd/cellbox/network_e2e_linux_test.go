package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cellbox-dev/cellbox/protocol"
	"github.com/cellbox-dev/cellbox/rpc"
)

// End-to-end tests of PROTOCOL.md §9's network: a workspace's programs
// reach the outside only through the daemon's proxies, to what its
// allowlist names, as root and as CELLBOX_TEST_USER. Each attack of the
// issue is tried for real from a python kernel in the sandbox; the
// upstream servers are the test's, on the host's loopback.

// blockedNotes are the network/blocked notifications the client got.
func blockedNotes(t testing.TB, c *client) []protocol.NetworkBlockedParams {
	t.Helper()
	c.mu.Lock()
	notes := append([]note(nil), c.notes...)
	c.mu.Unlock()
	var out []protocol.NetworkBlockedParams
	for _, n := range notes {
		if n.method != protocol.MethodNetworkBlocked {
			continue
		}
		var p protocol.NetworkBlockedParams
		if err := json.Unmarshal(n.params, &p); err != nil {
			t.Fatalf("bad network/blocked %s: %v", n.params, err)
		}
		out = append(out, p)
	}
	return out
}

// waitBlocked waits for a network/blocked of host:port and returns it.
func waitBlocked(t testing.TB, c *client, host string, port int) protocol.NetworkBlockedParams {
	t.Helper()
	var got protocol.NetworkBlockedParams
	waitFor(t, 20*time.Second, fmt.Sprintf("network/blocked for %s:%d", host, port), func() bool {
		for _, b := range blockedNotes(t, c) {
			if b.Host == host && b.Port == port {
				got = b
				return true
			}
		}
		return false
	})
	return got
}

// upstream is an HTTP server on the host's loopback that says who it is.
func upstream(t *testing.T, name string) (*httptest.Server, int) {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from %s", name)
	}))
	t.Cleanup(s.Close)
	return s, s.Listener.Addr().(*net.TCPAddr).Port
}

// pyProxyGet is python that GETs url through the sandbox's HTTP proxy
// explicitly (the environment's NO_PROXY keeps loopback direct, for
// servers inside the sandbox) and prints the status and body.
func pyProxyGet(url string) string {
	return fmt.Sprintf(`
import os, urllib.request, urllib.error
os.environ.pop('no_proxy', None), os.environ.pop('NO_PROXY', None)  # urllib bypasses even a given proxy for them
op = urllib.request.build_opener(urllib.request.ProxyHandler({'http': os.environ['HTTP_PROXY']}))
try:
    r = op.open(%q, timeout=20)
    print(r.status, r.read().decode())
except urllib.error.HTTPError as e:
    print(e.code, e.read().decode())
`, url)
}

func TestNetworkAllowlist(t *testing.T) {
	asUsers(t, testNetworkAllowlist)
}

func testNetworkAllowlist(t *testing.T, asUser bool) {
	d := newFilesDaemon(t, asUser, map[string]string{"data.txt": "project\n"})
	_, portA := upstream(t, "A")
	_, portB := upstream(t, "B")
	ws := openWorkspace(t, d.c, d.project, "net")
	k := startKernel(t, d.c, protocol.KernelStartParams{Language: "python", WorkspaceID: ws,
		Network: protocol.NetworkModeAllowlist, Allow: []string{fmt.Sprintf("127.0.0.1:%d", portA), "localhost", "127.0.0.1:443"}})
	kid := k.KernelID

	t.Run("the environment names the proxies", func(t *testing.T) {
		names := []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "all_proxy", "no_proxy",
			"npm_config_proxy", "npm_config_https_proxy", "NODE_USE_ENV_PROXY", "PIP_INDEX_URL", "npm_config_registry"}
		got := printed(t, d.c, kid, fmt.Sprintf("import os\nprint(' '.join(n for n in %q.split() if n not in os.environ))", strings.Join(names, " ")))
		if got != "\n" {
			t.Fatalf("not in the kernel's environment: %s", got)
		}
	})

	t.Run("allowed", func(t *testing.T) {
		if got := printed(t, d.c, kid, pyProxyGet(fmt.Sprintf("http://127.0.0.1:%d/", portA))); got != "200 hello from A\n" {
			t.Fatalf("GET of an allowed address: %q", got)
		}
	})

	t.Run("a name not in the allowlist, unmodified urllib", func(t *testing.T) {
		got := printed(t, d.c, kid, `
import urllib.request, urllib.error
try:
    urllib.request.urlopen('http://blocked.example/', timeout=20)
except urllib.error.HTTPError as e:
    print(e.code, e.read().decode())
`)
		if !strings.HasPrefix(got, "403 ") || !strings.Contains(got, "blocked.example") {
			t.Fatalf("urlopen of a name not allowed: %q", got)
		}
		b := waitBlocked(t, d.c, "blocked.example", 80)
		if b.WorkspaceID != ws || b.KernelID != kid || b.ExecutionID == "" || b.Reason == "" || b.Rule != "blocked.example:80" {
			t.Fatalf("network/blocked: %+v", b)
		}
	})

	t.Run("an address of the same host not in the allowlist", func(t *testing.T) {
		if got := printed(t, d.c, kid, pyProxyGet(fmt.Sprintf("http://127.0.0.1:%d/", portB))); !strings.HasPrefix(got, "403 ") {
			t.Fatalf("GET of another port: %q", got)
		}
		waitBlocked(t, d.c, "127.0.0.1", portB)
	})

	t.Run("an allowed name that resolves to loopback", func(t *testing.T) {
		got := printed(t, d.c, kid, pyProxyGet(fmt.Sprintf("http://localhost:%d/", portB)))
		if !strings.HasPrefix(got, "403 ") || strings.Contains(got, "hello from") {
			t.Fatalf("GET of an allowed name that resolves to loopback: %q", got)
		}
	})

	t.Run("the metadata address", func(t *testing.T) {
		got := printed(t, d.c, kid, pyProxyGet("http://169.254.169.254/latest/meta-data/"))
		if !strings.HasPrefix(got, "403 ") {
			t.Fatalf("GET of the metadata address: %q", got)
		}
		waitBlocked(t, d.c, "169.254.169.254", 80)
	})

	t.Run("CONNECT with another SNI", func(t *testing.T) {
		// The CONNECT names an allowed host (its address named by a
		// literal rule too); the TLS ClientHello that follows names
		// another: refused before anything is dialled.
		got := printed(t, d.c, kid, `
import os, socket, ssl
s = socket.create_connection(('127.0.0.1', 3128), timeout=20)
s.sendall(b'CONNECT localhost:443 HTTP/1.1\r\nHost: localhost:443\r\n\r\n')
head = s.recv(4096).decode()
print(head.split('\r\n')[0])
ctx = ssl.create_default_context()
try:
    ctx.wrap_socket(s, server_hostname='evil.example').do_handshake()
    print('handshake done')
except (ssl.SSLError, OSError) as e:
    print('closed')
`)
		if !strings.HasSuffix(got, "closed\n") {
			t.Fatalf("CONNECT with another SNI: %q", got)
		}
		b := waitBlocked(t, d.c, "localhost", 443)
		if !strings.Contains(b.Reason, "evil.example") {
			t.Fatalf("the refusal does not name the SNI: %+v", b)
		}
	})

	t.Run("direct connections, DNS and UDP", func(t *testing.T) {
		// What the sandbox guarantees: nothing leaves but through the
		// proxies (the error differs by kernel: no route, Landlock).
		got := printed(t, d.c, kid, `
import socket
def tcp(addr):
    try:
        socket.create_connection(addr, timeout=5).close()
        return 'connected'
    except OSError:
        return 'refused'
def dns(name):
    try:
        socket.getaddrinfo(name, 80)
        return 'resolved'
    except OSError:
        return 'unresolved'
def udp(addr):
    fam = socket.AF_INET6 if ':' in addr[0] else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_DGRAM)
    s.settimeout(3)
    try:
        s.sendto(b'\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x07example\x03com\x00\x00\x01\x00\x01', addr)
        s.recvfrom(512)
        return 'answered'
    except OSError:
        return 'unanswered'
print(tcp(('1.1.1.1', 80)), tcp(('2606:4700:4700::1111', 80)), tcp(('169.254.169.254', 80)),
      dns('cellbox-random-8c1f3a.example.com'), udp(('8.8.8.8', 53)), udp(('2001:4860:4860::8888', 53)))
`)
		if got != "refused refused refused unresolved unanswered unanswered\n" {
			t.Fatalf("direct connections: %q", got)
		}
	})

	t.Run("SOCKS5", func(t *testing.T) {
		got := printed(t, d.c, kid, fmt.Sprintf(`
import socket, struct
def socks(cmd, atyp_addr, port):
    s = socket.create_connection(('127.0.0.1', 1080), timeout=20)
    s.sendall(b'\x05\x01\x00')
    assert s.recv(2) == b'\x05\x00'
    s.sendall(b'\x05' + bytes([cmd]) + b'\x00' + atyp_addr + struct.pack('>H', port))
    rep = s.recv(10)
    return s, rep[1]
s, rep = socks(1, b'\x01' + socket.inet_aton('127.0.0.1'), %d)
s.sendall(b'GET / HTTP/1.0\r\n\r\n')
body = b''
while True:
    b = s.recv(4096)
    if not b: break
    body += b
print(rep, body.decode().split('\r\n\r\n', 1)[1])
print(socks(1, b'\x03' + bytes([15]) + b'blocked.example', 443)[1])
print(socks(3, b'\x01' + socket.inet_aton('0.0.0.0'), 0)[1])
print(socks(2, b'\x01' + socket.inet_aton('127.0.0.1'), %d)[1])
s = socket.create_connection(('127.0.0.1', 1080), timeout=20)
s.sendall(b'\x05\x01\x02')
print(s.recv(2)[1])
`, portA, portA))
		// 0: granted; 2: not allowed by the ruleset; 7: command not
		// supported (UDP ASSOCIATE, BIND); 255: no acceptable method.
		if got != "0 hello from A\n2\n7\n7\n255\n" {
			t.Fatalf("SOCKS5: %q", got)
		}
	})

	t.Run("a relay in the sandbox", func(t *testing.T) {
		// A program that relays to the proxy gains nothing: the policy
		// is the proxy's. (Where Landlock forbids binding, the relay
		// cannot even start; either way the host is not reached.)
		got := printed(t, d.c, kid, `
import socket, threading
try:
    srv = socket.socket()
    srv.bind(('127.0.0.1', 9999))
    srv.listen()
except OSError:
    print('no relay')
else:
    def relay():
        c, _ = srv.accept()
        u = socket.create_connection(('127.0.0.1', 3128))
        def pump(a, b):
            while True:
                d = a.recv(4096)
                if not d:
                    b.shutdown(socket.SHUT_WR); return
                b.sendall(d)
        threading.Thread(target=pump, args=(u, c), daemon=True).start()
        pump(c, u)
    threading.Thread(target=relay, daemon=True).start()
    s = socket.create_connection(('127.0.0.1', 9999), timeout=20)
    s.sendall(b'GET http://blocked.example/ HTTP/1.1\r\nHost: blocked.example\r\nConnection: close\r\n\r\n')
    head = b''
    while len(head) < 12:
        b = s.recv(12 - len(head))
        if not b: break
        head += b
    print(head.decode().split(' ')[1])
`)
		if got != "no relay\n" && got != "403\n" {
			t.Fatalf("through a relay: %q", got)
		}
	})

	t.Run("live changes", func(t *testing.T) {
		url := fmt.Sprintf("http://127.0.0.1:%d/", portB)
		d.c.mustCall(t, protocol.MethodWorkspaceSetNetwork, protocol.WorkspaceSetNetworkParams{WorkspaceID: ws,
			Network: protocol.NetworkModeAllowlist, Allow: []string{fmt.Sprintf("127.0.0.1:%d", portB)}}, nil)
		if got := printed(t, d.c, kid, pyProxyGet(url)); got != "200 hello from B\n" {
			t.Fatalf("after allowing it: %q", got)
		}
		if got := printed(t, d.c, kid, pyProxyGet(fmt.Sprintf("http://127.0.0.1:%d/", portA))); !strings.HasPrefix(got, "403 ") {
			t.Fatalf("a rule replaced is still in force: %q", got)
		}
		d.c.mustCall(t, protocol.MethodWorkspaceSetNetwork, protocol.WorkspaceSetNetworkParams{WorkspaceID: ws, Network: protocol.NetworkModeNone}, nil)
		got := printed(t, d.c, kid, pyProxyGet(url))
		if !strings.HasPrefix(got, "403 ") || !strings.Contains(got, "network is off") {
			t.Fatalf("with network none: %q", got)
		}
	})

	t.Run("bad input", func(t *testing.T) {
		for _, p := range []protocol.WorkspaceSetNetworkParams{
			{WorkspaceID: ws, Network: "everything"},
			{WorkspaceID: ws, Network: protocol.NetworkModeAllowlist, Allow: []string{"*"}},
			{WorkspaceID: ws, Network: protocol.NetworkModeAllowlist, Allow: []string{"host:99999"}},
			{WorkspaceID: ws, Network: protocol.NetworkModeNone, Allow: []string{"example.com"}},
			{WorkspaceID: ws, Network: protocol.NetworkModeHost},
		} {
			err := d.c.call(t, protocol.MethodWorkspaceSetNetwork, p, nil)
			wantCode(t, err, protocol.CodeInvalidParams)
		}
		err := d.c.call(t, protocol.MethodKernelStart, protocol.KernelStartParams{Language: "python", WorkspaceID: ws,
			Network: protocol.NetworkModeAllowlist, Allow: []string{"a b"}}, nil)
		wantCode(t, err, protocol.CodeInvalidParams)
		// The kernel and its workspace are unharmed.
		if got := printed(t, d.c, kid, "print(open('data.txt').read())"); got != "project\n\n" {
			t.Fatalf("after bad input: %q", got)
		}
	})
}

// TestNetworkUpstreamCredentials: an upstream proxy's credentials are the
// daemon's: a program of the sandbox never sees them.
func TestNetworkUpstreamCredentials(t *testing.T) {
	asUsers(t, func(t *testing.T, asUser bool) {
		d := newFilesDaemon(t, asUser, map[string]string{"data.txt": "project\n"},
			"--upstream-proxy", "http://user:upstream-secret@127.0.0.1:9/")
		ws := openWorkspace(t, d.c, d.project, "creds")
		k := startKernel(t, d.c, protocol.KernelStartParams{Language: "python", WorkspaceID: ws,
			Network: protocol.NetworkModeAllowlist, Allow: []string{"example.com"}})
		got := printed(t, d.c, k.KernelID, `
import os
blob = b''
for pid in os.listdir('/proc'):
    if pid.isdigit():
        for f in ('environ', 'cmdline'):
            try:
                blob += open('/proc/%s/%s' % (pid, f), 'rb').read()
            except OSError:
                pass
print(b'upstream-secret' in blob, 'upstream-secret' in repr(dict(os.environ)))
`)
		if got != "False False\n" {
			t.Fatalf("the upstream proxy's credentials in the sandbox: %q", got)
		}
	})
}

// TestNetworkTokenNotVisible: the websocket daemon's token (the key to the
// daemon, which runs code) is nowhere a program of an allowlisted sandbox
// can read: not in any process's environment or command line, not in a
// file it can reach, not in the proxies' answers.
func TestNetworkTokenNotVisible(t *testing.T) {
	d := startReviewDaemon(t)
	servers, err := rpc.FindServers(rpc.RuntimeDir(envValue(d.env, "CELLBOX_STATE_DIR")))
	if err != nil || len(servers) != 1 || len(servers[0].Token) < 16 {
		t.Fatalf("the daemon's runtime file: %v %+v", err, servers)
	}
	token := servers[0].Token
	ctx := t.Context()
	var ws protocol.WorkspaceInfo
	if err := d.c.Call(ctx, protocol.MethodWorkspaceOpen, protocol.WorkspaceOpenParams{Root: t.TempDir()}, &ws); err != nil {
		t.Fatal(err)
	}
	var k protocol.KernelStartResult
	if err := d.c.Call(ctx, protocol.MethodKernelStart, protocol.KernelStartParams{Language: "python", WorkspaceID: ws.WorkspaceID,
		Network: protocol.NetworkModeAllowlist, Allow: []string{"example.com"}}, &k); err != nil {
		t.Fatal(err)
	}
	code := fmt.Sprintf(`
import os, socket
tok = %q.encode()
hits = []
for pid in os.listdir('/proc'):
    if pid.isdigit():
        for f in ('environ', 'cmdline'):
            try:
                if tok in open('/proc/%%s/%%s' %% (pid, f), 'rb').read():
                    hits.append(pid + '/' + f)
            except OSError:
                pass
for top in ('/', ):
    for root, dirs, files in os.walk(top):
        dirs[:] = [x for x in dirs if os.path.join(root, x) not in ('/proc', '/sys', '/dev', '/usr')]
        for f in files:
            p = os.path.join(root, f)
            try:
                if os.path.getsize(p) < 1 << 20 and tok in open(p, 'rb').read():
                    hits.append(p)
            except OSError:
                pass
for port in (3128, 1080, 3141):
    s = socket.create_connection(('127.0.0.1', port), timeout=10)
    s.sendall(b'GET / HTTP/1.0\r\n\r\n')
    data = b''
    try:
        while True:
            b = s.recv(4096)
            if not b: break
            data += b
    except OSError:
        pass  # SOCKS5 drops what is not SOCKS5
    if tok in data:
        hits.append('port %%d' %% port)
assert not hits, 'the token is readable at %%s' %% hits
`, token)
	var res protocol.ExecuteResult
	if err := d.c.Call(ctx, protocol.MethodKernelExecute, protocol.KernelExecuteParams{KernelID: k.KernelID, Code: code, ExecutionID: "scan"}, &res); err != nil {
		t.Fatal(err)
	}
	if res.Status != protocol.ExecutionStatusOK {
		t.Fatalf("the scan: %s %+v", res.Status, res.Error)
	}
}
