package network

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	r := newResolver(
		"github.com", "140.82.112.3",
		"api.github.com", "140.82.112.6",
		"evil.test", "127.0.0.1",
		"mixed.test", "10.1.2.3",
		"mixed.test", "93.184.215.14",
		"meta.test", "169.254.169.254",
		"v6loop.test", "::1",
		"mapped.test", "::ffff:127.0.0.1",
		"nat64.test", "64:ff9b::7f00:1",
		"sixtofour.test", "2002:a9fe:a9fe::1",
		"cgnat.test", "100.64.1.1",
		"alibaba.test", "100.100.100.200",
		"zero.test", "0.0.0.0",
		"backend.test", "127.0.0.1",
		"lan.test", "192.168.1.20",
		"localhost", "127.0.0.1",
	)
	tests := []struct {
		name   string
		mode   Mode
		rules  []string
		host   string
		port   int
		want   []string // allowed addresses; nil: refused
		reason string   // part of the reason when refused
		lookup bool     // the resolver is asked
		notRef bool     // an error that is not a refusal (lookup failure)
	}{
		{name: "none", mode: ModeNone, rules: []string{"github.com"}, host: "github.com", port: 443, reason: ReasonNone},
		{name: "empty mode", mode: "", rules: []string{"github.com"}, host: "github.com", port: 443, reason: "not served"},
		{name: "name allowed", rules: []string{"github.com"}, host: "github.com", port: 443, want: []string{"140.82.112.3"}, lookup: true},
		{name: "case and dot", rules: []string{"github.com"}, host: "GitHub.com.", port: 443, want: []string{"140.82.112.3"}, lookup: true},
		{name: "not in allowlist", rules: []string{"github.com"}, host: "gitlab.com", port: 443, reason: "gitlab.com is not in the allowlist"},
		{name: "port rule", rules: []string{"github.com:443"}, host: "github.com", port: 22, reason: "github.com:22 is not in the allowlist"},
		{name: "port rule ok", rules: []string{"github.com:443"}, host: "github.com", port: 443, want: []string{"140.82.112.3"}, lookup: true},
		{name: "wildcard sub", rules: []string{"*.github.com"}, host: "api.github.com", port: 443, want: []string{"140.82.112.6"}, lookup: true},
		{name: "wildcard not apex", rules: []string{"*.github.com"}, host: "github.com", port: 443, reason: "not in the allowlist"},
		{name: "wildcard suffix trick", rules: []string{"*.github.com"}, host: "evilgithub.com", port: 443, reason: "not in the allowlist"},
		{name: "name to loopback", rules: []string{"evil.test"}, host: "evil.test", port: 80, reason: "evil.test resolves to 127.0.0.1, a loopback address", lookup: true},
		{name: "name to loopback, literal rule", rules: []string{"backend.test", "127.0.0.1"}, host: "backend.test", port: 80, want: []string{"127.0.0.1"}, lookup: true},
		{name: "literal rule with other port", rules: []string{"backend.test", "127.0.0.1:8080"}, host: "backend.test", port: 80, reason: "loopback", lookup: true},
		{name: "name to loopback, any-address rule", rules: []string{"evil.test", "0.0.0.0/0"}, host: "evil.test", port: 80, reason: "loopback", lookup: true},
		{name: "localhost", rules: []string{"localhost"}, host: "localhost", port: 80, reason: "loopback", lookup: true},
		{name: "private answer dropped", rules: []string{"mixed.test"}, host: "mixed.test", port: 443, want: []string{"93.184.215.14"}, lookup: true},
		{name: "private answer by CIDR", rules: []string{"mixed.test", "10.0.0.0/8"}, host: "mixed.test", port: 443, want: []string{"10.1.2.3", "93.184.215.14"}, lookup: true},
		{name: "metadata answer", rules: []string{"meta.test", "169.254.0.0/16"}, host: "meta.test", port: 80, reason: "metadata", lookup: true},
		{name: "v6 loopback answer", rules: []string{"v6loop.test"}, host: "v6loop.test", port: 80, reason: "loopback", lookup: true},
		{name: "mapped answer", rules: []string{"mapped.test"}, host: "mapped.test", port: 80, reason: "resolves to 127.0.0.1, a loopback", lookup: true},
		{name: "nat64 answer", rules: []string{"nat64.test"}, host: "nat64.test", port: 80, reason: "loopback address (NAT64)", lookup: true},
		{name: "6to4 answer", rules: []string{"sixtofour.test"}, host: "sixtofour.test", port: 80, reason: "metadata address (6to4)", lookup: true},
		{name: "cgnat answer", rules: []string{"cgnat.test"}, host: "cgnat.test", port: 80, reason: "CGNAT", lookup: true},
		{name: "alibaba metadata", rules: []string{"alibaba.test", "100.64.0.0/10"}, host: "alibaba.test", port: 80, reason: "metadata", lookup: true},
		{name: "unspecified answer", rules: []string{"zero.test"}, host: "zero.test", port: 80, reason: "unspecified", lookup: true},
		{name: "lan answer", rules: []string{"lan.test"}, host: "lan.test", port: 80, reason: "private", lookup: true},
		{name: "lookup fails", rules: []string{"nx.test"}, host: "nx.test", port: 80, reason: "cannot resolve nx.test", lookup: true, notRef: true},

		{name: "metadata literal", rules: []string{"github.com"}, host: "169.254.169.254", port: 80, reason: "169.254.169.254:80 is a cloud metadata address"},
		{name: "metadata literal, wide rules", rules: []string{"0.0.0.0/0", "169.254.0.0/16"}, host: "169.254.169.254", port: 80, reason: "metadata"},
		{name: "metadata literal named", rules: []string{"169.254.169.254"}, host: "169.254.169.254", port: 80, want: []string{"169.254.169.254"}},
		{name: "aws v6 metadata", rules: []string{"::/0", "fd00::/8"}, host: "fd00:ec2::254", port: 80, reason: "metadata"},
		{name: "public literal, any rule", rules: []string{"0.0.0.0/0"}, host: "93.184.215.14", port: 80, want: []string{"93.184.215.14"}},
		{name: "public literal, no rule", rules: []string{"github.com"}, host: "93.184.215.14", port: 80, reason: "93.184.215.14:80 is not in the allowlist"},
		{name: "loopback literal named", rules: []string{"127.0.0.1"}, host: "127.0.0.1", port: 8080, want: []string{"127.0.0.1"}},
		{name: "loopback literal, any rule", rules: []string{"0.0.0.0/0"}, host: "127.0.0.1", port: 8080, reason: "loopback"},
		{name: "mapped loopback literal", rules: []string{"0.0.0.0/0", "::/0"}, host: "::ffff:127.0.0.1", port: 80, reason: "127.0.0.1:80 is a loopback address"},
		{name: "mapped loopback literal named", rules: []string{"127.0.0.1"}, host: "::ffff:127.0.0.1", port: 80, want: []string{"127.0.0.1"}},
		{name: "bracketed v6", rules: []string{"::1"}, host: "[::1]", port: 80, want: []string{"::1"}},
		{name: "v6 loopback, any rule", rules: []string{"::/0"}, host: "::1", port: 80, reason: "loopback"},
		{name: "zone", rules: []string{"fe80::/10"}, host: "fe80::1%eth0", port: 80, reason: "zone"},
		{name: "numeric name", rules: []string{"127.0.0.1"}, host: "127.1", port: 80, reason: "not a valid host name"},
		{name: "hex name", rules: []string{"*.com"}, host: "0x7f000001", port: 80, reason: "not in the allowlist"},
		{name: "bad name", rules: []string{"*.com"}, host: "a b.com", port: 80, reason: "not a valid host name"},
		{name: "port 0", rules: []string{"github.com"}, host: "github.com", port: 0, reason: "out of range"},
		{name: "port too big", rules: []string{"github.com"}, host: "github.com", port: 65536, reason: "out of range"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rules, err := ParseRules(tt.rules)
			if err != nil {
				t.Fatal(err)
			}
			mode := tt.mode
			if mode == "" && tt.name != "empty mode" {
				mode = ModeAllowlist
			}
			before := len(r.called())
			addrs, reason, err := Policy{Mode: mode, Rules: rules}.Check(context.Background(), r, tt.host, tt.port)
			if asked := len(r.called()) > before; asked != tt.lookup {
				t.Errorf("resolver asked = %v, want %v", asked, tt.lookup)
			}
			if tt.want != nil {
				if err != nil {
					t.Fatalf("Check = %v (%s), want allowed", err, reason)
				}
				var got []string
				for _, a := range addrs {
					got = append(got, a.String())
				}
				if !slices.Equal(got, tt.want) {
					t.Fatalf("addrs = %v, want %v", got, tt.want)
				}
				return
			}
			if err == nil || len(addrs) != 0 {
				t.Fatalf("Check allowed %v, want refused", addrs)
			}
			if errors.Is(err, ErrRefused) == tt.notRef {
				t.Fatalf("errors.Is(err, ErrRefused) = %v for %v", !tt.notRef, err)
			}
			if !strings.Contains(reason, tt.reason) {
				t.Fatalf("reason %q does not contain %q", reason, tt.reason)
			}
		})
	}
}

// A name that is not allowed never reaches the resolver, whatever it looks
// like.
func TestCheckNoLookupBeforeAllow(t *testing.T) {
	r := newResolver()
	p := Policy{Mode: ModeAllowlist, Rules: []Rule{must(ParseRule("*.allowed.test"))}}
	for _, host := range []string{"allowed.test", "x.allowed.test.evil.test", "evil.test", "allowed.test.evil", "xallowed.test", "169.254.169.254"} {
		_, reason, err := p.Check(context.Background(), r, host, 443)
		if !errors.Is(err, ErrRefused) {
			t.Errorf("%s: %v (%s), want refused", host, err, reason)
		}
	}
	if calls := r.called(); len(calls) != 0 {
		t.Fatalf("resolver asked for %v", calls)
	}
}

func TestClassify(t *testing.T) {
	for _, tt := range []struct {
		addr, what string
	}{
		{"8.8.8.8", ""},
		{"2606:4700::1111", ""},
		{"127.0.0.53", "loopback"},
		{"10.255.255.255", "private"},
		{"172.31.0.1", "private"},
		{"172.32.0.1", ""},
		{"192.168.0.1", "private"},
		{"169.254.1.1", "link-local"},
		{"169.254.169.254", "metadata"},
		{"100.100.100.200", "metadata"},
		{"168.63.129.16", "metadata"},
		{"fd00:ec2::254", "metadata"},
		{"fd12::1", "private"},
		{"fe80::1", "link-local"},
		{"ff02::1", "multicast"},
		{"224.0.0.1", "multicast"},
		{"255.255.255.255", "reserved"},
		{"::127.0.0.1", "reserved"},
		{"64:ff9b::a00:1", "private address (NAT64)"},
		{"64:ff9b::808:808", ""},
		{"2001::1", "Teredo"},
	} {
		what, _, ok := classify(netip.MustParseAddr(tt.addr))
		if ok != (tt.what != "") || !strings.Contains(what, tt.what) {
			t.Errorf("classify(%s) = %q, %v; want %q", tt.addr, what, ok, tt.what)
		}
	}
}
