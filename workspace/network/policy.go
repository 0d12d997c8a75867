package network

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
)

// Mode is a workspace's network policy mode.
type Mode string

// The modes a Server serves. PROTOCOL.md's "host" mode keeps the host's
// network and never reaches these proxies.
const (
	ModeNone      Mode = "none"
	ModeAllowlist Mode = "allowlist"
)

// Policy is an immutable snapshot of a workspace's network policy; a
// Server reads the current one for every connection.
type Policy struct {
	Mode  Mode
	Rules []Rule
}

// Resolver looks names up. *net.Resolver satisfies it.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// ReasonNone is the reason every connection is refused under ModeNone.
const ReasonNone = "network is off for this workspace (network: none)"

// maxAnswers bounds how many resolved addresses are kept and dialled.
const maxAnswers = 16

// Check decides whether host:port may be reached, and which addresses may be
// dialled for it.
//
// host is a DNS name or an IP literal (IPv6 with or without brackets). The
// name is checked against the rules before any lookup, so a name that is not
// allowed never reaches the resolver. An allowed name is resolved with r, and
// answers that are special (loopback, private, link-local, metadata,
// unspecified, multicast, CGNAT, reserved, or an IPv6 form of one: see
// addr.go) are dropped unless a literal rule names them; so a literal rule
// also makes its address acceptable as the answer for an allowed name. An
// IP literal target is allowed only when a literal or CIDR rule covers it;
// a special one only when such a rule lies inside its special range
// ("0.0.0.0/0" does not open loopback). IPv4-mapped IPv6 addresses are
// taken as the IPv4 address they carry.
//
// When allowed, addrs holds at least one address to dial, in the
// resolver's order, and err is nil. When the policy refuses, err wraps
// ErrRefused and reason is a short sentence for the user ("github.com is not
// in the allowlist"). A lookup that fails returns its error (not
// ErrRefused) with a reason too.
func (p Policy) Check(ctx context.Context, r Resolver, host string, port int) (addrs []netip.Addr, reason string, err error) {
	refuse := func(format string, args ...any) ([]netip.Addr, string, error) {
		reason := fmt.Sprintf(format, args...)
		return nil, reason, fmt.Errorf("%w: %s", ErrRefused, reason)
	}
	switch p.Mode {
	case ModeAllowlist:
	case ModeNone:
		return refuse("%s", ReasonNone)
	default:
		return refuse("network mode %q is not served by the proxy", p.Mode)
	}
	if port < 1 || port > 65535 {
		return refuse("port %d is out of range", port)
	}

	if a, ok := parseTargetIP(host); ok {
		if a.Zone() != "" {
			return refuse("%s: an IPv6 zone is not allowed", quoteHost(host))
		}
		a = a.Unmap()
		what, within, special := classify(a)
		for _, rule := range p.Rules {
			if !rule.matchesAddr(a, port) {
				continue
			}
			if special && !rule.names(a, within, port) {
				continue
			}
			return []netip.Addr{a}, "", nil
		}
		if special {
			return refuse("%s is %s, and no literal rule names it", hostPort(a.String(), port), what)
		}
		return refuse("%s is not in the allowlist", hostPort(a.String(), port))
	}

	name, why := canonicalName(host)
	if why != "" {
		return refuse("%s is not a valid host name: %s", quoteHost(host), why)
	}
	allowed := false
	for _, rule := range p.Rules {
		if rule.matchesName(name, port) {
			allowed = true
			break
		}
	}
	if !allowed {
		if p.nameAllowedOnSomePort(name) {
			return refuse("%s is not in the allowlist (other ports of %s are)", hostPort(name, port), name)
		}
		return refuse("%s is not in the allowlist", name)
	}

	answers, err := r.LookupNetIP(ctx, "ip", name)
	if err != nil {
		return nil, fmt.Sprintf("cannot resolve %s: %v", name, err), fmt.Errorf("look up %s: %w", name, err)
	}
	if len(answers) == 0 {
		return nil, fmt.Sprintf("%s has no addresses", name), fmt.Errorf("look up %s: no addresses", name)
	}
	var firstDropped netip.Addr
	var firstWhat string
	for _, a := range answers {
		a = a.Unmap().WithZone("")
		if !a.IsValid() {
			continue
		}
		if what, within, special := classify(a); special && !p.namesLiteral(a, within, port) {
			if !firstDropped.IsValid() {
				firstDropped, firstWhat = a, what
			}
			continue
		}
		if len(addrs) < maxAnswers && !containsAddr(addrs, a) {
			addrs = append(addrs, a)
		}
	}
	if len(addrs) == 0 {
		if firstDropped.IsValid() {
			return refuse("%s resolves to %s, %s", name, firstDropped, firstWhat)
		}
		return nil, fmt.Sprintf("%s has no usable addresses", name), fmt.Errorf("look up %s: no usable addresses", name)
	}
	return addrs, "", nil
}

func (p Policy) namesLiteral(a netip.Addr, within netip.Prefix, port int) bool {
	for _, rule := range p.Rules {
		if rule.names(a, within, port) {
			return true
		}
	}
	return false
}

func (p Policy) nameAllowedOnSomePort(name string) bool {
	for _, rule := range p.Rules {
		if rule.port != 0 && rule.matchesName(name, int(rule.port)) {
			return true
		}
	}
	return false
}

// parseTargetIP parses an IP literal target: "1.2.3.4", "::1", "[::1]".
func parseTargetIP(host string) (netip.Addr, bool) {
	if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		host = host[1 : len(host)-1]
	}
	a, err := netip.ParseAddr(host)
	return a, err == nil
}

func containsAddr(list []netip.Addr, a netip.Addr) bool {
	for _, b := range list {
		if a == b {
			return true
		}
	}
	return false
}

// hostPort joins host and port, bracketing an IPv6 address.
func hostPort(host string, port int) string {
	if strings.Contains(host, ":") {
		return fmt.Sprintf("[%s]:%d", host, port)
	}
	return fmt.Sprintf("%s:%d", host, port)
}

// quoteHost quotes an untrusted host for a reason, bounded.
func quoteHost(host string) string {
	if len(host) > 80 {
		host = host[:80] + "..."
	}
	return fmt.Sprintf("%q", host)
}
