package workspace

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cellbox-dev/cellbox/protocol"
)

func TestBlockedThrottle(t *testing.T) {
	var th blockedThrottle
	now := time.Unix(1000, 0)
	// A retry is announced again.
	if !th.allow(now) || !th.allow(now.Add(10*time.Millisecond)) {
		t.Fatal("a refusal and its retry were not both announced")
	}
	// A flood: at most blockedPerSecond a second.
	later := now.Add(5 * time.Second)
	n := 0
	for range 1000 {
		if th.allow(later) {
			n++
		}
	}
	if n != blockedPerSecond {
		t.Fatalf("%d of a flood announced in one second, want %d", n, blockedPerSecond)
	}
	if !th.allow(later.Add(time.Second)) {
		t.Fatal("a refusal the next second was dropped")
	}
}

func TestWithNetworkEnv(t *testing.T) {
	env := func(kv []string, k string) string {
		for _, e := range kv {
			if v, ok := strings.CutPrefix(e, k+"="); ok {
				return v
			}
		}
		return "<unset>"
	}
	base := []string{"PATH=/usr/bin:/bin", "HTTP_PROXY=http://mine:1"}
	got := withNetworkEnv(base, true)
	if env(got, "HTTP_PROXY") != "http://mine:1" {
		t.Errorf("the program's own HTTP_PROXY was replaced: %s", env(got, "HTTP_PROXY"))
	}
	if env(got, "https_proxy") != proxyURL || env(got, "PIP_INDEX_URL") != PipIndexURL || env(got, "NO_PROXY") != noProxy {
		t.Errorf("the proxies are not in the environment: %q", got)
	}
	if p := env(got, "PATH"); p != "/env/bin:/env/npm/node_modules/.bin:/usr/bin:/bin" {
		t.Errorf("PATH = %s", p)
	}
	venv := withNetworkEnv([]string{"PATH=/workspace/.venv/bin:/usr/bin", "VIRTUAL_ENV=/workspace/.venv"}, false)
	if p := env(venv, "PATH"); p != "/workspace/.venv/bin:/env/bin:/env/npm/node_modules/.bin:/usr/bin" {
		t.Errorf("with a project's environment, PATH = %s", p)
	}
	if p := withEnvPath("/opt/node/bin:/home/me/bin"); p != "/opt/node/bin:/home/me/bin:/env/bin:/env/npm/node_modules/.bin" {
		t.Errorf("a PATH without system directories: %s", p)
	}
	if env(venv, "HTTP_PROXY") != "<unset>" || env(venv, "NODE_PATH") != "/env/npm/node_modules" {
		t.Errorf("the host's network got the proxies, or no NODE_PATH: %q", venv)
	}
	if slices.Contains(base, "NODE_PATH=/env/npm/node_modules") {
		t.Error("withNetworkEnv changed its argument")
	}
}

func TestParseNetwork(t *testing.T) {
	for _, c := range []struct {
		mode  protocol.NetworkMode
		allow []string
		ok    bool
	}{
		{"", nil, true},
		{protocol.NetworkModeNone, nil, true},
		{protocol.NetworkModeHost, nil, true},
		{protocol.NetworkModeAllowlist, []string{"pypi.org", "*.github.com", "10.0.0.0/8:5432"}, true},
		{protocol.NetworkModeAllowlist, nil, true},
		{protocol.NetworkModeNone, []string{"pypi.org"}, false},
		{"", []string{"pypi.org"}, false},
		{"everything", nil, false},
		{protocol.NetworkModeAllowlist, []string{"bad rule"}, false},
		{protocol.NetworkModeAllowlist, slices.Repeat([]string{"a.example"}, maxRules+1), false},
	} {
		_, _, err := ParseNetwork(c.mode, c.allow)
		if (err == nil) != c.ok {
			t.Errorf("ParseNetwork(%q, %d rules): %v", c.mode, len(c.allow), err)
		}
	}
}
