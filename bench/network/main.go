//go:build linux

// Command network measures what PROTOCOL.md §9's network costs, side by
// side with its peers in one run, interleaved:
//
//   - the proxies a sandbox's programs go through (workspace/network: the
//     HTTP proxy's forwarding of a plain request and its CONNECT tunnel,
//     and SOCKS5), against a direct connection to the same loopback
//     server: the latency a request gains (each on a new connection, as
//     curl or pip's first request) and the throughput of a 100 MB
//     download;
//   - an npm install through the daemon's package cache (workspace/install
//     in a fresh workspace, the cache warm), against a plain `npm install`
//     of the same package on the host with npm's own cache warm
//     (--prefer-offline).
//
// bench/network.sh builds it and runs it.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/net/proxy"

	"github.com/cellbox-dev/cellbox/protocol"
	"github.com/cellbox-dev/cellbox/rpc"
	"github.com/cellbox-dev/cellbox/workspace/network"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "network-bench:", err)
		os.Exit(1)
	}
}

type options struct {
	n, mb, installs int
	cellbox, pkg    string
	// the child processes' roles (see upstreamMain, clientMain)
	role, via, proxy, url, ca string
}

func run(args []string) error {
	var o options
	fs := flag.NewFlagSet("network-bench", flag.ContinueOnError)
	fs.IntVar(&o.n, "n", 500, "measured requests per side")
	fs.IntVar(&o.mb, "mb", 100, "the download's size in MB")
	fs.IntVar(&o.installs, "installs", 5, "measured installs per side (0: skip the install benchmark)")
	fs.StringVar(&o.cellbox, "cellbox", "", "the cellbox `binary` (for the install benchmark)")
	fs.StringVar(&o.pkg, "package", "left-pad@1.3.0", "the npm `package` to install")
	fs.StringVar(&o.role, "role", "", "internal: upstream or client (a child process of the benchmark)")
	fs.StringVar(&o.via, "via", "direct", "internal: the client's path: direct, http or socks")
	fs.StringVar(&o.proxy, "proxy", "", "internal: the proxy's address")
	fs.StringVar(&o.url, "url", "", "internal: what the client gets")
	fs.StringVar(&o.ca, "ca", "", "internal: the upstream's certificate (PEM)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch o.role {
	case "upstream":
		return upstreamMain(o)
	case "client":
		return clientMain(o)
	}
	if err := proxies(o); err != nil {
		return err
	}
	if o.installs > 0 {
		if o.cellbox == "" {
			return errors.New("-cellbox is required for the install benchmark")
		}
		return installs(o)
	}
	return nil
}

// zeros is an endless reader of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// upstreamMain serves the download in a process of its own (a plain and
// a TLS server on loopback), prints their URLs and the TLS certificate's
// file, and serves until its stdin closes.
func upstreamMain(o options) error {
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			w.Header().Set("Content-Length", fmt.Sprint(o.mb<<20))
			_, _ = io.CopyN(w, zeros{}, int64(o.mb)<<20)
			return
		}
		_, _ = io.WriteString(w, "ok")
	})
	plain := httptest.NewServer(handler)
	defer plain.Close()
	tlsSrv := httptest.NewTLSServer(handler)
	defer tlsSrv.Close()
	ca, err := os.CreateTemp("", "cellbox-network-bench-ca-*.pem")
	if err != nil {
		return err
	}
	defer os.Remove(ca.Name())
	if err := pem.Encode(ca, &pem.Block{Type: "CERTIFICATE", Bytes: tlsSrv.Certificate().Raw}); err != nil {
		return err
	}
	ca.Close()
	fmt.Println(plain.URL, tlsSrv.URL, ca.Name())
	_, _ = io.Copy(io.Discard, os.Stdin)
	return nil
}

// clientMain is the program in the sandbox's place, a process of its own:
// it GETs o.url o.n times (each on a new connection) by o.via, and prints
// each request's nanoseconds and bytes.
func clientMain(o options) error {
	tr := &http.Transport{DisableKeepAlives: true, Proxy: nil}
	if o.ca != "" {
		b, err := os.ReadFile(o.ca)
		if err != nil {
			return err
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(b)
		tr.TLSClientConfig = &tls.Config{RootCAs: pool}
	}
	switch o.via {
	case "http":
		tr.Proxy = http.ProxyURL(&url.URL{Scheme: "http", Host: o.proxy})
	case "socks":
		d, err := proxy.SOCKS5("tcp", o.proxy, nil, &net.Dialer{})
		if err != nil {
			return err
		}
		tr.DialContext = d.(proxy.ContextDialer).DialContext
	}
	c := &http.Client{Transport: tr}
	for range o.n {
		t0 := time.Now()
		resp, err := c.Get(o.url)
		if err != nil {
			return err
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			return fmt.Errorf("GET %s: %s %v", o.url, resp.Status, err)
		}
		fmt.Println(time.Since(t0).Nanoseconds(), n)
	}
	return nil
}

func proxies(o options) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	up := exec.Command(self, "-role", "upstream", "-mb", fmt.Sprint(o.mb))
	upIn, err := up.StdinPipe()
	if err != nil {
		return err
	}
	upOut, err := up.StdoutPipe()
	if err != nil {
		return err
	}
	up.Stderr = os.Stderr
	if err := up.Start(); err != nil {
		return err
	}
	defer func() { upIn.Close(); _ = up.Wait() }()
	var plainURL, tlsURL, caFile string
	if _, err := fmt.Fscanln(upOut, &plainURL, &tlsURL, &caFile); err != nil {
		return fmt.Errorf("the upstream process: %w", err)
	}

	srv := network.NewServer(network.Options{Policy: func() network.Policy {
		rules, _ := network.ParseRules([]string{"127.0.0.1"})
		return network.Policy{Mode: network.ModeAllowlist, Rules: rules}
	}})
	defer srv.Close()
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	sl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go func() { _ = srv.ServeHTTP(hl) }()
	go func() { _ = srv.ServeSOCKS(sl) }()

	// ref is the direct side each proxied side is compared with.
	sides := []struct {
		name, via, proxy, base string
		ref                    int
	}{
		{"direct, http", "direct", "", plainURL, -1},
		{"HTTP proxy, forwarded request", "http", hl.Addr().String(), plainURL, 0},
		{"SOCKS5 (http)", "socks", sl.Addr().String(), plainURL, 0},
		{"direct, https", "direct", "", tlsURL, -1},
		{"HTTP proxy, CONNECT tunnel (https)", "http", hl.Addr().String(), tlsURL, 3},
	}
	client := func(i int, path string, n int) ([]time.Duration, []float64, error) {
		s := sides[i]
		out, err := exec.Command(self, "-role", "client", "-via", s.via, "-proxy", s.proxy, "-url", s.base+path, "-n", fmt.Sprint(n), "-ca", caFile).Output()
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", s.name, err)
		}
		var ds []time.Duration
		var mbps []float64
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			var ns, bytes int64
			if _, err := fmt.Sscan(line, &ns, &bytes); err != nil {
				return nil, nil, fmt.Errorf("%s: %q: %w", s.name, line, err)
			}
			ds = append(ds, time.Duration(ns))
			mbps = append(mbps, float64(bytes)/(1<<20)/time.Duration(ns).Seconds())
		}
		return ds, mbps, nil
	}
	lat := make([][]time.Duration, len(sides))
	thr := make([][]float64, len(sides))
	const rounds, runs = 10, 7
	for i := range sides { // warm up
		if _, _, err := client(i, "/small", 20); err != nil {
			return err
		}
	}
	for range rounds {
		for i := range sides {
			ds, _, err := client(i, "/small", max(1, o.n/rounds))
			if err != nil {
				return err
			}
			lat[i] = append(lat[i], ds...)
		}
	}
	for range runs {
		for i := range sides {
			_, m, err := client(i, "/big", 1)
			if err != nil {
				return err
			}
			thr[i] = append(thr[i], m...)
		}
	}
	fmt.Printf("proxies (the client, the proxy and the server each a process): %d requests per side, each on a new connection; a %d MB download %d times per side (median)\n\n", rounds*max(1, o.n/rounds), o.mb, runs)
	fmt.Printf("| path | request p50 | request p99 | added p50 vs direct | %d MB download | vs direct |\n|---|---|---|---|---|---|\n", o.mb)
	med := func(i int) float64 {
		s := slices.Clone(thr[i])
		slices.Sort(s)
		return s[len(s)/2]
	}
	for i, s := range sides {
		p50, p99 := pct(lat[i], 50), pct(lat[i], 99)
		if s.ref < 0 {
			fmt.Printf("| %s | %s | %s | | %.0f MB/s | |\n", s.name, ms(p50), ms(p99), med(i))
			continue
		}
		fmt.Printf("| %s | %s | %s | %+.3f ms | %.0f MB/s | %.0f%% |\n", s.name, ms(p50), ms(p99),
			float64(p50-pct(lat[s.ref], 50))/1e6, med(i), 100*med(i)/med(s.ref))
	}
	fmt.Println()
	return nil
}

func installs(o options) error {
	base, err := os.MkdirTemp("", "cellbox-network-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(base)
	state := filepath.Join(base, "state")
	// A daemon of its own: its runtime file under its state dir, never
	// the user's daemon found through XDG_RUNTIME_DIR.
	os.Unsetenv("XDG_RUNTIME_DIR")
	ctx := context.Background()
	c, err := rpc.Dial(ctx, rpc.ClientOptions{StateDir: state, Executable: o.cellbox,
		ServeArgs:  []string{"--package-cache", filepath.Join(base, "cache")},
		ClientInfo: protocol.ClientInfo{Name: "network-bench"}})
	if err != nil {
		return err
	}
	defer stopDaemon(state, c)
	install := func(i int) (time.Duration, error) {
		var ws protocol.WorkspaceInfo
		if err := c.Call(ctx, protocol.MethodWorkspaceOpen, protocol.WorkspaceOpenParams{Mode: protocol.WorkspaceModeScratch, Name: fmt.Sprint("bench-", i)}, &ws); err != nil {
			return 0, err
		}
		// The sandbox starts first (a bash kernel), as a workspace in use has it.
		var k protocol.KernelStartResult
		if err := c.Call(ctx, protocol.MethodKernelStart, protocol.KernelStartParams{Language: "bash", WorkspaceID: ws.WorkspaceID}, &k); err != nil {
			return 0, err
		}
		defer func() {
			_ = c.Call(ctx, protocol.MethodKernelShutdown, protocol.KernelIDParams{KernelID: k.KernelID}, nil)
		}()
		t0 := time.Now()
		var res protocol.WorkspaceInstallResult
		if err := c.Call(ctx, protocol.MethodWorkspaceInstall, protocol.WorkspaceInstallParams{WorkspaceID: ws.WorkspaceID, Manager: protocol.PackageManagerNpm, Packages: []string{o.pkg}}, &res); err != nil {
			return 0, err
		}
		d := time.Since(t0)
		if i > 0 && res.CacheHits == 0 {
			return 0, fmt.Errorf("install %d: not from the cache: %+v", i, res)
		}
		return d, nil
	}
	npmCache := filepath.Join(base, "npm-cache")
	plain := func(i int) (time.Duration, error) {
		prefix := filepath.Join(base, fmt.Sprint("plain-", i))
		cmd := exec.Command("npm", "install", "--prefix", prefix, "--prefer-offline", "--no-audit", "--no-fund", "--ignore-scripts", "--loglevel", "error", o.pkg)
		cmd.Env = append(os.Environ(), "npm_config_cache="+npmCache)
		t0 := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			return 0, fmt.Errorf("npm install: %v: %s", err, out)
		}
		return time.Since(t0), nil
	}
	// Warm both caches.
	if _, err := install(0); err != nil {
		return fmt.Errorf("warm the package cache: %w", err)
	}
	if _, err := plain(0); err != nil {
		return fmt.Errorf("warm npm's cache: %w", err)
	}
	var cb, np []time.Duration
	for i := 1; i <= o.installs; i++ {
		d, err := install(i)
		if err != nil {
			return err
		}
		cb = append(cb, d)
		if d, err = plain(i); err != nil {
			return err
		}
		np = append(np, d)
	}
	a, b := pct(cb, 50), pct(np, 50)
	fmt.Printf("npm install %s, caches warm, %d times per side (median):\n\n", o.pkg, o.installs)
	fmt.Printf("| path | median | ratio |\n|---|---|---|\n")
	fmt.Printf("| cellbox workspace/install (package cache, in the sandbox) | %s | %.2fx |\n", ms(a), float64(a)/float64(b))
	fmt.Printf("| plain npm install --prefer-offline (npm's cache, on the host) | %s | 1.00x |\n", ms(b))
	return nil
}

// stopDaemon ends the daemon Dial started.
func stopDaemon(state string, c *rpc.Client) {
	_ = c.Close()
	matches, _ := filepath.Glob(filepath.Join(rpc.RuntimeDir(state), "server-*.json"))
	for _, m := range matches {
		var pid int
		if _, err := fmt.Sscanf(filepath.Base(m), "server-%d.json", &pid); err == nil {
			if p, err := os.FindProcess(pid); err == nil {
				_ = p.Signal(os.Interrupt)
			}
		}
	}
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3f ms", float64(d)/1e6) }

func pct(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[max(0, min(len(s)-1, i-1))]
}
