package network

import (
	"errors"
	"strings"
	"testing"
)

func TestParseRule(t *testing.T) {
	valid := []struct{ in, want string }{
		{"github.com", "github.com"},
		{"GitHub.COM.", "github.com"},
		{"github.com:443", "github.com:443"},
		{"*.example.com", "*.example.com"},
		{"*.Example.com:8443", "*.example.com:8443"},
		{"*.com", "*.com"},
		{"localhost", "localhost"},
		{"_acme.example.com", "_acme.example.com"},
		{"xn--bcher-kva.example", "xn--bcher-kva.example"},
		{"1.2.3.4", "1.2.3.4"},
		{"1.2.3.4:80", "1.2.3.4:80"},
		{"1.2.3.4/32", "1.2.3.4"},
		{"10.0.0.0/8", "10.0.0.0/8"},
		{"10.0.0.0/8:5432", "10.0.0.0/8:5432"},
		{"0.0.0.0/0", "0.0.0.0/0"},
		{"::1", "::1"},
		{"[::1]:8080", "[::1]:8080"},
		{"fd00::/8", "fd00::/8"},
		{"[fd00::/8]:5432", "[fd00::/8]:5432"},
		{"2001:DB8::1", "2001:db8::1"},
		{"host:65535", "host:65535"},
		{"host:1", "host:1"},
	}
	for _, tt := range valid {
		t.Run(tt.in, func(t *testing.T) {
			r, err := ParseRule(tt.in)
			if err != nil {
				t.Fatalf("ParseRule: %v", err)
			}
			if got := r.String(); got != tt.want {
				t.Fatalf("String() = %q, want %q", got, tt.want)
			}
			again, err := ParseRule(r.String())
			if err != nil || again != r {
				t.Fatalf("round trip: %v, %v != %v", err, again, r)
			}
		})
	}

	invalid := []struct{ in, why string }{
		{"", "empty"},
		{" github.com", "white space"},
		{"github.com ", "white space"},
		{"git hub.com", "white space"},
		{"*", "wildcard"},
		{"*.", "after *."},
		{"*.*.example.com", "after *."},
		{"a.*.example.com", "wildcard"},
		{"*example.com", "wildcard"},
		{"a..b", "empty label"},
		{".example.com", "empty label"},
		{"-a.example.com", "starts or ends"},
		{"host:", "empty port"},
		{"host:http", "bad port"},
		{"host:+80", "bad port"},
		{"host:0", "out of range"},
		{"host:70000", "out of range"},
		{"host:123456", "bad port"},
		{"10.0.0.0/8:0", "out of range"},
		{"10.0.0.1/8", "bits set past"},
		{"10.0.0.0/33", "not a host name"},
		{"[::1]", "brackets are for"},
		{"[::1]x", "expected :port"},
		{"[1.2.3.4]:80", "only an IPv6"},
		{"[::1:80", "unclosed"},
		{"::ffff:127.0.0.1", "IPv4-mapped"},
		{"fe80::1%eth0", "zone"},
		{"https://github.com", "URL"},
		{"github.com/path", "not a host name"},
		{"user@github.com", "URL"},
		{"127.1", "numeric last label"},
		{"1.2.3.256", "numeric last label"},
		{"exa_mple!.com", "not allowed"},
		{"bücher.example", "not allowed"},
		{"a:b:c", "too many colons"},
		{strings.Repeat("a", 64) + ".com", "longer than 63"},
		{strings.Repeat("a.", 127) + "com", "longer than 253"},
		{strings.Repeat("a", 400), "longer than 300"},
	}
	for _, tt := range invalid {
		t.Run("invalid/"+tt.in, func(t *testing.T) {
			_, err := ParseRule(tt.in)
			if !errors.Is(err, ErrInvalidRule) {
				t.Fatalf("ParseRule(%q) = %v, want ErrInvalidRule", tt.in, err)
			}
			if !strings.Contains(err.Error(), tt.why) {
				t.Fatalf("error %q does not say %q", err, tt.why)
			}
			if len(tt.in) < 100 && !strings.Contains(err.Error(), tt.in) {
				t.Fatalf("error %q does not name the rule", err)
			}
		})
	}
}

func TestParseRules(t *testing.T) {
	rs, err := ParseRules([]string{"a.com", "10.0.0.0/8"})
	if err != nil || len(rs) != 2 {
		t.Fatalf("ParseRules = %v, %v", rs, err)
	}
	if _, err := ParseRules([]string{"a.com", "b..com"}); !errors.Is(err, ErrInvalidRule) || !strings.Contains(err.Error(), "b..com") {
		t.Fatalf("ParseRules with a bad rule = %v", err)
	}
}
