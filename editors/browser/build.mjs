// Builds dist/index.html: the page's TypeScript and CSS (with xterm's)
// bundled by esbuild and inlined into one self-contained HTML file, so the
// daemon serves a single request (/?token=...) and nothing is fetched from
// the internet at run time. Also writes dist/csp: the Content-Security-Policy
// the daemon sends with it, allowing exactly this inline script (by hash).
import { build } from "esbuild";
import { createHash } from "node:crypto";
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const res = await build({
  entryPoints: [join(here, "src/main.ts")],
  bundle: true,
  minify: true,
  format: "iife",
  target: ["es2022"],
  write: false,
  outdir: join(here, "out"),
  loader: { ".css": "css" },
  legalComments: "none",
  logLevel: "warning",
});
let js = "";
let css = "";
for (const f of res.outputFiles) {
  if (f.path.endsWith(".js")) js = f.text;
  else if (f.path.endsWith(".css")) css = f.text;
}
if (!js) throw new Error("esbuild produced no script");
// Inline: a script must not contain "</script" (it would end the element).
js = js.replace(/<\/script/gi, "<\\/script").replace(/<!--/g, "<\\!--");
css = css.replace(/<\/style/gi, "<\\/style");
const hash = createHash("sha256").update(js, "utf8").digest("base64");
const csp = [
  "default-src 'none'",
  `script-src 'sha256-${hash}'`,
  // xterm.js sets element styles and adds <style> elements at run time.
  "style-src 'unsafe-inline'",
  "img-src data: blob:",
  "connect-src 'self'",
  // html outputs are srcdoc iframes (sandboxed, no allow-same-origin),
  // which frame-src does not govern; they inherit this policy, so no
  // script of theirs runs. Previews of the sandbox's servers are framed
  // from their own loopback origins (a port of their own, never this
  // page's origin, at a name of their own under .localhost, which the
  // browser resolves to the loopback itself): loopback is all that may be
  // framed, nothing else. IPv6's [::1] cannot be named: CSP's host
  // grammar has no IPv6 literal (chromium ignores http://[::1]:* with a
  // console error), so previews are served on 127.0.0.1.
  "frame-src http://127.0.0.1:* http://localhost:* http://*.localhost:*",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join("; ");
const html = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>cellbox</title>
<style>${css}</style>
</head>
<body>
<div id="app"></div>
<script>${js}</script>
</body>
</html>
`;
mkdirSync(join(here, "dist"), { recursive: true });
writeFileSync(join(here, "dist/index.html"), html);
writeFileSync(join(here, "dist/csp"), csp + "\n");
writeFileSync(join(here, "dist/sources.sha256"), sourcesHash() + "\n");
console.log(`dist/index.html: ${(html.length / 1024).toFixed(0)} KiB, script sha256-${hash}`);

// sourcesHash is the SHA-256 of what the page is built from, so that a Go
// test (embed_test.go, which computes the same) fails when the committed
// dist/ is older than its sources: every file under src/, client/ and
// ../protocol/, plus build.mjs, tsconfig.json and package-lock.json, in
// sorted order of their paths relative to editors/, each hashed as
// path NUL content NUL.
function sourcesHash() {
  const editors = join(here, "..");
  const files = ["browser/build.mjs", "browser/tsconfig.json", "browser/package-lock.json"];
  for (const dir of ["browser/src", "browser/client", "protocol"]) {
    for (const e of readdirSync(join(editors, dir), { recursive: true, withFileTypes: true })) {
      if (e.isFile()) files.push(join(e.parentPath ?? e.path, e.name).slice(editors.length + 1));
    }
  }
  files.sort();
  const h = createHash("sha256");
  for (const f of files) {
    h.update(f + "\0");
    h.update(readFileSync(join(editors, f)));
    h.update("\0");
  }
  return h.digest("hex");
}
