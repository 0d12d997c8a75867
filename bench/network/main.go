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
}

func run(args []string) error {
	var o options
	fs := flag.NewFlagSet("network-bench", flag.ContinueOnError)
	fs.IntVar(&o.n, "n", 500, "measured requests per side")
	fs.IntVar(&o.mb, "mb", 100, "the download's size in MB")
	fs.IntVar(&o.installs, "installs", 5, "measured installs per side (0: skip the install benchmark)")
	fs.StringVar(&o.cellbox, "cellbox", "", "the cellbox `binary` (for the install benchmark)")
	fs.StringVar(&o.pkg, "package", "left-pad@1.3.0", "the npm `package` to install")
	if err := fs.Parse(args); err != nil {
		return err
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

func proxies(o options) error {
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
	proxyURL := &url.URL{Scheme: "http", Host: hl.Addr().String()}
	socks, err := proxy.SOCKS5("tcp", sl.Addr().String(), nil, &net.Dialer{})
	if err != nil {
		return err
	}
	socksDial := socks.(proxy.ContextDialer).DialContext

	pool := tlsSrv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	client := func(via func(*http.Transport)) *http.Client {
		tr := &http.Transport{DisableKeepAlives: true, Proxy: nil, TLSClientConfig: &tls.Config{RootCAs: pool}}
		if via != nil {
			via(tr)
		}
		return &http.Client{Transport: tr}
	}
	direct := client(nil)
	viaHTTP := client(func(tr *http.Transport) { tr.Proxy = http.ProxyURL(proxyURL) })
	viaSOCKS := client(func(tr *http.Transport) { tr.DialContext = socksDial })

	sides := []struct {
		name   string
		c      *http.Client
		base   string
		direct bool
	}{
		{"direct, http", direct, plain.URL, true},
		{"HTTP proxy, forwarded request", viaHTTP, plain.URL, false},
		{"direct, https", direct, tlsSrv.URL, true},
		{"HTTP proxy, CONNECT tunnel (https)", viaHTTP, tlsSrv.URL, false},
		{"SOCKS5 (http)", viaSOCKS, plain.URL, false},
	}
	get := func(c *http.Client, u string) (int64, error) {
		resp, err := c.Get(u)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			return 0, fmt.Errorf("GET %s: %s", u, resp.Status)
		}
		return io.Copy(io.Discard, resp.Body)
	}
	// Warm up every side, then interleave.
	lat := make([][]time.Duration, len(sides))
	for _, s := range sides {
		for range 20 {
			if _, err := get(s.c, s.base+"/small"); err != nil {
				return fmt.Errorf("%s: %w", s.name, err)
			}
		}
	}
	for range o.n {
		for i, s := range sides {
			t0 := time.Now()
			if _, err := get(s.c, s.base+"/small"); err != nil {
				return fmt.Errorf("%s: %w", s.name, err)
			}
			lat[i] = append(lat[i], time.Since(t0))
		}
	}
	const runs = 5
	thr := make([][]float64, len(sides))
	for range runs {
		for i, s := range sides {
			t0 := time.Now()
			n, err := get(s.c, s.base+"/big")
			if err != nil {
				return fmt.Errorf("%s: %w", s.name, err)
			}
			thr[i] = append(thr[i], float64(n)/(1<<20)/time.Since(t0).Seconds())
		}
	}
	fmt.Printf("proxies: %d requests per side, each on a new connection; a %d MB download %d times per side (median)\n\n", o.n, o.mb, runs)
	fmt.Printf("| path | request p50 | request p99 | added p50 vs direct | %d MB download | vs direct |\n|---|---|---|---|---|---|\n", o.mb)
	var refLat time.Duration
	var refThr float64
	for i, s := range sides {
		p50, p99 := pct(lat[i], 50), pct(lat[i], 99)
		slices.Sort(thr[i])
		mbps := thr[i][len(thr[i])/2]
		if s.direct {
			refLat, refThr = p50, mbps
			fmt.Printf("| %s | %s | %s | | %.0f MB/s | |\n", s.name, ms(p50), ms(p99), mbps)
			continue
		}
		fmt.Printf("| %s | %s | %s | %+.3f ms | %.0f MB/s | %.0f%% |\n", s.name, ms(p50), ms(p99), float64(p50-refLat)/1e6, mbps, 100*mbps/refThr)
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
	matches, _ := filepath.Glob(filepath.Join(state, "run", "cellbox", "server-*.json"))
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
