package network

import "net/netip"

// special is a range of addresses refused as an answer, or as the target,
// unless a literal rule inside the range names them.
type special struct {
	prefix netip.Prefix
	what   string // "a loopback address", used in reasons
}

// specials lists the refused ranges, the most specific first: the first
// that contains an address classifies it. Metadata endpoints come before
// the ranges that hold them, so only a rule naming the endpoint itself
// allows it ("169.254.0.0/16" does not open 169.254.169.254).
var specials = func() []special {
	list := []struct{ cidr, what string }{
		{"169.254.169.254/32", "a cloud metadata address"}, // AWS, GCP, Azure, OpenStack, ...
		{"fd00:ec2::254/128", "a cloud metadata address"},  // AWS over IPv6
		{"100.100.100.200/32", "a cloud metadata address"}, // Alibaba
		{"168.63.129.16/32", "a cloud metadata address"},   // Azure's wire server
		{"169.254.170.2/32", "a cloud metadata address"},   // AWS ECS task credentials
		{"0.0.0.0/8", "an unspecified address"},            // "this network"; 0.0.0.0 reaches the host
		{"127.0.0.0/8", "a loopback address"},              //
		{"10.0.0.0/8", "a private address"},                //
		{"172.16.0.0/12", "a private address"},             //
		{"192.168.0.0/16", "a private address"},            //
		{"100.64.0.0/10", "a shared (CGNAT) address"},      //
		{"169.254.0.0/16", "a link-local address"},         //
		{"192.0.0.0/24", "a reserved address"},             // IETF protocol assignments
		{"198.18.0.0/15", "a reserved address"},            // benchmarking
		{"224.0.0.0/4", "a multicast address"},             //
		{"240.0.0.0/4", "a reserved address"},              // and 255.255.255.255, broadcast
		{"::/128", "an unspecified address"},               //
		{"::1/128", "a loopback address"},                  //
		{"::/96", "a reserved address"},                    // deprecated IPv4-compatible
		{"fc00::/7", "a private address"},                  // unique local
		{"fe80::/10", "a link-local address"},              //
		{"fec0::/10", "a reserved address"},                // deprecated site-local
		{"ff00::/8", "a multicast address"},                //
		{"100::/64", "a reserved address"},                 // discard-only
	}
	out := make([]special, len(list))
	for i, s := range list {
		out[i] = special{netip.MustParsePrefix(s.cidr), s.what}
	}
	return out
}()

// Prefixes whose addresses carry an IPv4 address that a gateway may reach
// for them; the embedded address is classified too.
var (
	nat64Prefix  = netip.MustParsePrefix("64:ff9b::/96")   // RFC 6052, well-known
	nat64Local   = netip.MustParsePrefix("64:ff9b:1::/48") // RFC 8215, local use
	sixToFour    = netip.MustParsePrefix("2002::/16")      // RFC 3056
	teredoPrefix = netip.MustParsePrefix("2001::/32")      // RFC 4380
)

// classify reports whether a (unmapped) is special: what it is, and the
// range a rule must lie within to name it.
func classify(a netip.Addr) (what string, within netip.Prefix, ok bool) {
	for _, s := range specials {
		if s.prefix.Contains(a) {
			return s.what, s.prefix, true
		}
	}
	if a.Is6() {
		// An IPv6 address that a translator turns into a special IPv4
		// address is as special as that one; only a rule naming the exact
		// IPv6 address allows it.
		if v4, via, ok := embeddedIPv4(a); ok {
			if what, _, ok := classify(v4); ok {
				return what + " (" + via + ")", netip.PrefixFrom(a, 128), true
			}
		}
		if teredoPrefix.Contains(a) {
			return "a Teredo address", teredoPrefix, true
		}
	}
	return "", netip.Prefix{}, false
}

// embeddedIPv4 returns the IPv4 address inside a NAT64 or 6to4 address.
func embeddedIPv4(a netip.Addr) (netip.Addr, string, bool) {
	b := a.As16()
	switch {
	case nat64Prefix.Contains(a), nat64Local.Contains(a):
		return netip.AddrFrom4([4]byte(b[12:16])), "NAT64", true
	case sixToFour.Contains(a):
		return netip.AddrFrom4([4]byte(b[2:6])), "6to4", true
	}
	return netip.Addr{}, "", false
}

// names reports whether a literal or CIDR rule names a special address:
// it covers the address, lies inside the address's special range and allows
// port. So "127.0.0.1" or "10.0.0.0/8" name addresses, "0.0.0.0/0" names no
// special one.
func (r Rule) names(a netip.Addr, within netip.Prefix, port int) bool {
	return r.matchesAddr(a, port) && within.Bits() <= r.prefix.Bits() && within.Contains(r.prefix.Addr())
}
