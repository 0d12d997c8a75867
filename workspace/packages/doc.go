// Package packages is the daemon's verified, shared package cache: what
// sandboxes reach as their pip index and npm registry
// (PIP_INDEX_URL=http://127.0.0.1:3141/pypi/simple/,
// npm_config_registry=http://127.0.0.1:3141/npm/).
//
// A [Cache] fetches project pages (PEP 503 HTML or PEP 691 JSON) and
// packuments from the registries the host is configured for
// ([HostPipIndex], [HostNPMRegistry]), answers each sandbox through its own
// [Cache.Handler] with every file pointed back at the cache, and fetches a
// file only from the URL its upstream page gave. It stores the file only
// when its hash is the one published (sha256 for wheels and sdists, the
// integrity of npm tarballs), content-addressed under Dir, shared by every
// workspace and evicted least-recently-used past the size cap. Pages are
// kept too, so a cached package installs with the upstream away.
//
// What a sandbox sends is untrusted input: only GET and HEAD, paths parsed
// by hand, names and hashes checked, and nothing it sends is ever written to
// the cache. README.md tells the layout on disk and the rules in full.
//
// The package imports nothing of cellbox's own.
package packages
