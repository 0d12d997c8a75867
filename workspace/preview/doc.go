// Package preview serves a server that runs in a sandbox to the host's
// browsers and programs: one loopback listener per preview, an HTTP reverse proxy
// (websockets included) whose every connection to the server is opened by
// the sandbox's init inside the sandbox's network namespace and passed to
// the daemon ([Options.Dial]).
//
// It imports nothing of cellbox's own.
//
// # Origins apart
//
// What a preview serves is untrusted: the sandboxed app writes it. So each
// preview is its own origin, never the IDE's, and carries its own tokens.
// It answers at two URLs, each with a token of its own:
//
//   - [Server.BrowserURL], what the editors open in a browser: a name of
//     its own under .localhost ([Options.Name], "pv-ID.localhost"), which
//     browsers resolve to the loopback themselves. A site of its own:
//     browsers keep cookies by host, so neither the preview's cookies nor
//     the ones its app sets are sent to, or readable by, another preview
//     or anything else served on the loopback (the IDE, a dev server, a
//     Jupyter server), and theirs never reach it. A cookie for
//     "localhost" itself is refused by browsers (a top-level name).
//   - [Server.URL], for programs, whose resolvers do not know such names:
//     the loopback address. A page at the browser URL reads its token
//     from its address, but that token does not open this URL (where
//     every loopback service's cookies would come along), nor does this
//     URL's token open the name.
//
// The rules, at either URL:
//
//   - The URL has the token in the query ([Param]). A request with it gets
//     HttpOnly cookies for the URL's host, named after the port, which the
//     page's own later requests (its scripts, styles, fetches and
//     websockets) carry: one SameSite=Strict (a tab), and one
//     SameSite=None; Secure; Partitioned for a frame of another site (the
//     browser IDE, an editor's webview; browsers take Secure cookies from
//     loopback origins over http, and a partitioned cookie is kept in a
//     frame where third-party cookies are blocked). The token is taken out
//     of the query before the request reaches the app. (No redirect to a
//     URL without it: a redirected navigation would count as coming from
//     the page that opened the preview.)
//   - A request with the cookie alone is taken only when it does not come
//     from another origin (Sec-Fetch-Site "same-origin" or "none", or a
//     client that sends no Sec-Fetch-Site, and an Origin header, when
//     there is one, naming the preview itself). At the loopback address,
//     cookies ignore ports: every preview's cookie reaches every other
//     loopback port, and one page must not drive another preview with it.
//   - The preview's cookies and tokens never reach the app's server:
//     stripped from the request's Cookie (the app's own cookies pass byte
//     for byte), query and Referer. The app cannot set or replace a cookie
//     of those names, nor send Clear-Site-Data (at the loopback address it
//     would clear every loopback origin's cookies).
//   - The Host header must name the preview's own name, a loopback address
//     or localhost (DNS rebinding; another name under .localhost is
//     another preview's).
//
// What is still shared at the loopback URL: cookies set there, by the app
// or by any other server on 127.0.0.1, as between any two local dev
// servers. The clients open the browser URL.
//
// The IDE holds its own token in its origin's sessionStorage and sends it
// with every request; no cookie of the IDE's exists for a preview to
// spend, and the IDE forbids framing (frame-ancestors 'none').
//
// # Untrusted input
//
// The app's response heads are at most 1 MiB; at most [Options.MaxConns]
// browser connections are served at once; request heads must arrive within
// 10 s. Bodies and upgraded (websocket) connections stream both ways
// without buffering.
package preview
