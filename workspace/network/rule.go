package network

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// ruleKind tells the three forms of a rule apart.
type ruleKind uint8

const (
	ruleName     ruleKind = iota + 1 // "host", "host:port"
	ruleWildcard                     // "*.domain", "*.domain:port": subdomains only
	rulePrefix                       // "1.2.3.4", "10.0.0.0/8:5432", "[::1]:8080", "fd00::/8"
)

// Rule is one parsed allowlist entry: a host name, a wildcard over a
// domain's subdomains, or an IP literal or CIDR, each with an optional port
// (none means every port). The zero Rule matches nothing.
type Rule struct {
	kind ruleKind
	// name is the host name (ruleName) or the domain under the wildcard
	// (ruleWildcard, without "*."), lower case, no trailing dot.
	name string
	// prefix is the literal (a full-length prefix) or CIDR (rulePrefix),
	// masked, never an IPv4-mapped IPv6 address.
	prefix netip.Prefix
	// port is the one port allowed; 0 allows every port.
	port uint16
}

// maxRuleLen bounds a rule's text; a DNS name is at most 253 bytes.
const maxRuleLen = 300

// ParseRule parses one allowlist entry: "host", "*.domain", "host:port",
// "*.domain:port", an IP literal or CIDR ("1.2.3.4", "10.0.0.0/8", "::1",
// "fd00::/8"), or one with a port ("1.2.3.4:443", "10.0.0.0/8:5432",
// "[::1]:8080", "[fd00::/8]:5432"). Names compare case-insensitively and lose
// a trailing dot. The error wraps ErrInvalidRule and names the rule.
func ParseRule(s string) (Rule, error) {
	r, why := parseRule(s)
	if why != "" {
		if len(s) > maxRuleLen {
			s = s[:maxRuleLen] + "..."
		}
		return Rule{}, fmt.Errorf("%w %q: %s", ErrInvalidRule, s, why)
	}
	return r, nil
}

// ParseRules parses every entry; the first error is returned.
func ParseRules(ss []string) ([]Rule, error) {
	rules := make([]Rule, 0, len(ss))
	for _, s := range ss {
		r, err := ParseRule(s)
		if err != nil {
			return nil, err
		}
		rules = append(rules, r)
	}
	return rules, nil
}

func parseRule(s string) (Rule, string) {
	switch {
	case s == "":
		return Rule{}, "empty"
	case len(s) > maxRuleLen:
		return Rule{}, fmt.Sprintf("longer than %d bytes", maxRuleLen)
	case strings.Contains(s, "://"):
		return Rule{}, "a rule is a host, not a URL (write the host alone, with :port if needed)"
	case strings.ContainsAny(s, " \t\r\n\v\f"):
		return Rule{}, "contains white space"
	case strings.ContainsAny(s, "/?#@") && !looksLikeCIDR(s):
		return Rule{}, "a rule is a host, not a URL or path"
	}

	// IP literal or CIDR, bare: "::1", "fd00::/8", "1.2.3.4", "10.0.0.0/8".
	if p, parsed, why := parseIP(s); parsed {
		if why != "" {
			return Rule{}, why
		}
		return Rule{kind: rulePrefix, prefix: p}, ""
	}
	// Bracketed IPv6 with a port: "[::1]:8080", "[fd00::/8]:5432".
	if strings.HasPrefix(s, "[") {
		end := strings.Index(s, "]")
		if end < 0 {
			return Rule{}, "unclosed ["
		}
		inner, rest := s[1:end], s[end+1:]
		p, parsed, why := parseIP(inner)
		switch {
		case !parsed || !p.Addr().Is6():
			return Rule{}, "only an IPv6 address or CIDR goes in brackets"
		case why != "":
			return Rule{}, why
		case rest == "":
			return Rule{}, "brackets are for an IPv6 address with a port; write the address alone without one"
		case rest[0] != ':':
			return Rule{}, "expected :port after ]"
		}
		port, why := parsePort(rest[1:])
		if why != "" {
			return Rule{}, why
		}
		return Rule{kind: rulePrefix, prefix: p, port: port}, ""
	}
	// Everything else has at most one colon: the port.
	host, portText, hasPort := strings.Cut(s, ":")
	var port uint16
	if hasPort {
		if strings.Contains(portText, ":") {
			return Rule{}, "too many colons (put an IPv6 address with a port in brackets: [::1]:8080)"
		}
		var why string
		if port, why = parsePort(portText); why != "" {
			return Rule{}, why
		}
	}
	if p, parsed, why := parseIP(host); parsed {
		if why != "" {
			return Rule{}, why
		}
		return Rule{kind: rulePrefix, prefix: p, port: port}, ""
	}
	if strings.ContainsAny(host, "/%") {
		return Rule{}, "not a host name, IP address or CIDR"
	}
	if rest, ok := strings.CutPrefix(host, "*."); ok {
		name, why := canonicalName(rest)
		if why != "" {
			return Rule{}, "after *.: " + why
		}
		return Rule{kind: ruleWildcard, name: name, port: port}, ""
	}
	if strings.Contains(host, "*") {
		return Rule{}, `a wildcard is only "*." at the start, as in *.example.com`
	}
	name, why := canonicalName(host)
	if why != "" {
		return Rule{}, why
	}
	return Rule{kind: ruleName, name: name, port: port}, ""
}

// parseIP parses an IP literal or CIDR. parsed reports that s is one; why is
// set when it is one that a rule may not hold.
func parseIP(s string) (p netip.Prefix, parsed bool, why string) {
	if strings.Contains(s, "/") {
		var err error
		if p, err = netip.ParsePrefix(s); err != nil {
			return netip.Prefix{}, false, ""
		}
		if p.Masked() != p {
			return p, true, fmt.Sprintf("has bits set past the prefix length (did you mean %s?)", p.Masked())
		}
	} else {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return netip.Prefix{}, false, ""
		}
		if a.Zone() != "" {
			return netip.Prefix{}, true, "an IPv6 zone is not allowed"
		}
		p = netip.PrefixFrom(a, a.BitLen())
	}
	if p.Addr().Is4In6() {
		return p, true, "an IPv4-mapped IPv6 address; write the IPv4 address"
	}
	return p, true, ""
}

// looksLikeCIDR reports whether s may be a CIDR (the "/" then belongs to it).
func looksLikeCIDR(s string) bool {
	i := strings.IndexByte(s, '/')
	return i > 0 && !strings.ContainsAny(s, "?#@") && strings.Count(s, "/") == 1
}

// parsePort parses a decimal port 1-65535.
func parsePort(s string) (uint16, string) {
	if s == "" {
		return 0, "empty port"
	}
	if len(s) > 5 || strings.Trim(s, "0123456789") != "" {
		return 0, fmt.Sprintf("bad port %q", s)
	}
	n, _ := strconv.Atoi(s)
	if n < 1 || n > 65535 {
		return 0, fmt.Sprintf("port %d is out of range 1-65535", n)
	}
	return uint16(n), ""
}

// canonicalName lower-cases a DNS host name, removes one trailing dot and
// checks it: labels of 1-63 letters, digits, '-' or '_', at most 253 bytes,
// and a last label that is not all digits (so "127.1" or "0.0.0.010" is never
// taken for a name that some resolver would read as an address).
func canonicalName(s string) (string, string) {
	s = strings.TrimSuffix(s, ".")
	switch {
	case s == "":
		return "", "empty host name"
	case len(s) > 253:
		return "", "host name longer than 253 bytes"
	}
	b := []byte(s)
	labelStart := 0
	for i := 0; i <= len(b); i++ {
		if i < len(b) && b[i] != '.' {
			c := b[i]
			switch {
			case 'A' <= c && c <= 'Z':
				b[i] = c + ('a' - 'A')
			case 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '_':
			default:
				return "", fmt.Sprintf("%q is not allowed in a host name", rune(c))
			}
			continue
		}
		n := i - labelStart
		switch {
		case n == 0:
			return "", "empty label in host name"
		case n > 63:
			return "", "label longer than 63 bytes in host name"
		case b[labelStart] == '-' || b[i-1] == '-':
			return "", "a label starts or ends with '-'"
		}
		labelStart = i + 1
	}
	last := b[strings.LastIndexByte(string(b), '.')+1:]
	if strings.Trim(string(last), "0123456789") == "" {
		return "", "numeric last label: not a host name nor a valid IP address"
	}
	return string(b), ""
}

// String returns the rule's canonical text, which ParseRule parses back to
// the same Rule.
func (r Rule) String() string {
	var host string
	switch r.kind {
	case ruleName:
		host = r.name
	case ruleWildcard:
		host = "*." + r.name
	case rulePrefix:
		if r.prefix.IsSingleIP() {
			host = r.prefix.Addr().String()
		} else {
			host = r.prefix.String()
		}
		if r.port != 0 && r.prefix.Addr().Is6() {
			return "[" + host + "]:" + strconv.Itoa(int(r.port))
		}
	default:
		return ""
	}
	if r.port != 0 {
		return host + ":" + strconv.Itoa(int(r.port))
	}
	return host
}

// matchesName reports whether the rule allows the canonical name at port.
func (r Rule) matchesName(name string, port int) bool {
	if r.port != 0 && int(r.port) != port {
		return false
	}
	switch r.kind {
	case ruleName:
		return r.name == name
	case ruleWildcard:
		return strings.HasSuffix(name, "."+r.name)
	}
	return false
}

// matchesAddr reports whether the rule is a literal or CIDR covering a at
// port. a is unmapped.
func (r Rule) matchesAddr(a netip.Addr, port int) bool {
	if r.kind != rulePrefix || (r.port != 0 && int(r.port) != port) {
		return false
	}
	return r.prefix.Contains(a)
}
