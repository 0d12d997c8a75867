// Package network serves a workspace's network in "allowlist" mode: an HTTP
// proxy (plain requests and CONNECT) and a SOCKS5 proxy on listeners that the
// sandbox's init makes inside the sandbox's network namespace
// (127.0.0.1:3128 and 127.0.0.1:1080) and hands to the daemon. Programs in
// the sandbox find them in HTTP_PROXY, HTTPS_PROXY and ALL_PROXY; the
// namespace has no other way out.
//
// It imports nothing of cellbox's own.
//
// # The policy
//
// [Policy.Check] is the one decision both proxies take, for every
// connection, with the policy current at that moment:
//
//   - The target is checked against the rules before any lookup: a name
//     that is not allowed never reaches the resolver.
//   - An allowed name is resolved by the daemon. Answers that are loopback,
//     private, link-local, cloud metadata, CGNAT, unspecified, multicast or
//     reserved (or an IPv4-mapped, NAT64 or 6to4 form of one) are dropped
//     unless a literal rule names them; none left is a refusal.
//   - The daemon dials the very addresses it checked, never the name again,
//     so a name cannot be rebound to another address between check and dial.
//   - For port 443 the tunnel must carry TLS whose ClientHello names the
//     host that was asked for (SNI), so an allowed name cannot front for
//     another server on the same address.
//
// A refusal answers 403 with the reason (HTTP and CONNECT), or SOCKS reply
// 0x02, and is reported once to [Options.OnBlocked].
//
// # Untrusted input
//
// Every byte the proxies read comes from sandboxed code. So: a request head
// is at most 32 KiB (431 past it) and must arrive within the handshake
// timeout (10 s), as must a whole SOCKS negotiation and a ClientHello; the
// ClientHello is read ahead at most 16 KiB; SOCKS lengths are the protocol's
// own single bytes; each listener serves at most [Options.MaxConns]
// connections at once (the rest wait in the backlog); names are validated
// before they are used, and reasons quote untrusted text bounded. Parsers
// are fuzzed (FuzzSOCKSHandshake, FuzzParseRule, FuzzClientHello).
//
// # Pieces
//
// Plain requests go through github.com/elazarl/goproxy, whose transport and
// CONNECT dialer (which read the daemon's own proxy variables) are replaced:
// the transport has no proxy and dials only what the request's check allowed.
// CONNECT is answered here, not by goproxy, because goproxy's hijack hands
// over the bare connection without the bytes its HTTP server read ahead, and
// a client may send its ClientHello with its CONNECT. SOCKS5 is written here:
// no Go library checks the target before resolving it. An upstream proxy for
// corporate networks is an explicit option ([Options.Upstream]), reached with
// CONNECT to the checked address.
package network
