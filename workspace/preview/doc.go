// Package preview serves a server that runs in a sandbox to the host's
// browser: one loopback listener per preview, an HTTP reverse proxy
// (websockets included) whose every connection to the server is opened by
// the sandbox's init inside the sandbox's network namespace and passed to
// the daemon ([Options.Dial]).
//
// It imports nothing of cellbox's own.
//
// # Origins apart
//
// What a preview serves is untrusted: the sandboxed app writes it. So each
// preview is its own origin (its own port), never the IDE's, and carries
// its own token:
//
//   - The URL has the token in the query ([Param]). A request with it gets
//     HttpOnly cookies for the preview's origin, named after its port,
//     which the page's own later requests (its scripts, styles, fetches
//     and websockets) carry: one SameSite=Strict (a tab, or a frame of the
//     browser IDE, the same site), and one SameSite=None; Secure for a
//     frame of another site (an editor's webview; browsers take Secure
//     cookies from loopback origins over http). The token is taken out of the
//     query before the request reaches the app. (No redirect to a URL
//     without it: the IDE that opens a preview is a same-site page, and a
//     redirected navigation would count as coming from it.)
//   - A request with the cookie alone is taken only when it does not come
//     from another origin (Sec-Fetch-Site "same-origin" or "none", or a
//     client that sends no Sec-Fetch-Site, and an Origin header, when
//     there is one, naming the preview itself): cookies ignore ports, so
//     every preview's cookie reaches every other loopback port, and one
//     preview's script must not drive another preview with it.
//   - The preview's cookies and token never reach the app's server:
//     stripped from the request's Cookie, query and Referer. (The page's
//     own scripts can read its URL, token included; it opens only this
//     preview, which the app serves anyway.) The app cannot set or replace
//     a cookie of those names, nor send Clear-Site-Data (which would clear
//     every loopback origin's cookies).
//   - The Host header must name a loopback address or localhost (DNS
//     rebinding).
//
// What is not apart: the cookies an app sets itself. Browsers keep cookies
// by host, not port, so a cookie one preview's app sets (or any other
// server on 127.0.0.1 does) is sent to every preview on 127.0.0.1 and
// reaches its app, as it does between any two local dev servers. A host
// name per preview would separate them, but *.localhost names are not
// resolved everywhere a preview URL is opened.
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
