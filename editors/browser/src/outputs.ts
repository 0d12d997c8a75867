// Rendering of kernel outputs (PROTOCOL.md §4 MimeBundle): html in a
// sandboxed iframe (srcdoc, no allow-same-origin, no scripts) sized to its
// content (see sizeHTML), images as
// data: URLs, svg as an <img> (scripts in it never run), markdown through
// the tiny safe renderer, json and text as text.
import { renderMarkdown } from "./markdown";
import { sanitizeHTML } from "./mdcell";

// eslint-disable-next-line no-control-regex -- an ANSI escape sequence starts with ESC
export const stripANSI = (s: string) => s.replace(/\x1b\[[0-9;?]*[ -/]*[@-~]/g, "");

const order = ["text/html", "text/markdown", "image/svg+xml", "image/png", "image/jpeg", "image/gif", "application/json", "text/plain"];

function text(s: string, cls = "out-text"): HTMLElement {
  const pre = document.createElement("pre");
  pre.className = cls;
  pre.textContent = s;
  return pre;
}

function str(v: unknown): string {
  return Array.isArray(v) ? v.join("") : typeof v === "string" ? v : JSON.stringify(v, null, 2);
}

/** The style of an html output's document (in its iframe, and in the copy that measures it). */
const htmlStyle = "body{font:13px system-ui,sans-serif;margin:4px;color:#222;background:#fff;display:flow-root}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}img{max-width:100%}";

/** The largest height an html output takes before its iframe scrolls. */
const maxHTMLHeight = 1200;

// sizeHTML sizes an html output's iframe to its content. The iframe is
// sandboxed without allow-same-origin and without scripts, so the page can
// neither look into it nor be told its height by a script of its own.
// Instead the page lays out a copy of the html (sanitized by DOMPurify as
// well) in a measuring iframe of its own, off screen, of the output's width:
// sandboxed too, without scripts, but with allow-same-origin so that the
// page can read its height. Nothing of the copy can reach the page: an
// iframe's content is drawn inside its box, whatever its CSS says (a copy in
// the page itself, even in a shadow root, could be styled out of hiding
// with position: fixed or :host rules). The copy is gone once measured; it
// is made again when the output's width changes. No script of the output
// runs anywhere.
function sizeHTML(f: HTMLIFrameElement, html: string) {
  const copy = `<!doctype html><meta charset="utf-8"><style>${htmlStyle}</style>${sanitizeHTML(html)}`;
  let width = 0;
  let measuring: HTMLIFrameElement | undefined;
  const measure = () => {
    if (!f.isConnected) return;
    const w = f.clientWidth;
    if (!w || w === width) return;
    width = w;
    measuring?.remove();
    const m = document.createElement("iframe");
    measuring = m;
    m.setAttribute("sandbox", "allow-same-origin");
    m.setAttribute("aria-hidden", "true");
    m.tabIndex = -1;
    m.className = "out-html-measure";
    m.style.width = `${w}px`;
    m.addEventListener("load", () => {
      const doc = m.contentDocument;
      if (doc && f.isConnected) {
        // The document's height and the iframe's border.
        const h = Math.ceil(doc.documentElement.scrollHeight) + 4;
        f.style.height = `${Math.min(maxHTMLHeight, Math.max(24, h))}px`;
      }
      m.remove();
      if (measuring === m) measuring = undefined;
    });
    m.srcdoc = copy;
    document.body.append(m);
  };
  const ro = new ResizeObserver(() => {
    if (!f.isConnected) {
      ro.disconnect();
      measuring?.remove();
      return;
    }
    measure();
  });
  ro.observe(f);
  // Once in the page: its width is known then.
  requestAnimationFrame(measure);
}

export function renderBundle(data: Record<string, unknown>, metadata: Record<string, unknown> = {}): HTMLElement {
  const mime = order.find((m) => m in data) ?? Object.keys(data)[0];
  const v = data[mime];
  const wrap = document.createElement("div");
  wrap.className = "out-rich";
  wrap.dataset.mime = mime ?? "";
  switch (mime) {
    case "text/html": {
      const f = document.createElement("iframe");
      f.setAttribute("sandbox", "");
      f.setAttribute("referrerpolicy", "no-referrer");
      f.className = "out-html";
      // Out of the keyboard's way: Tab and the notebook's keys stay with the page.
      f.tabIndex = -1;
      const html = str(v);
      f.srcdoc = `<!doctype html><meta charset="utf-8"><style>${htmlStyle}</style>${html}`;
      f.style.height = "40px";
      wrap.append(f);
      sizeHTML(f, html);
      break;
    }
    case "text/markdown": {
      const d = document.createElement("div");
      d.className = "out-markdown";
      d.innerHTML = renderMarkdown(str(v)); // escaped by the renderer
      wrap.append(d);
      break;
    }
    case "image/svg+xml": {
      const img = document.createElement("img");
      img.className = "out-image";
      img.alt = "svg output";
      img.src = "data:image/svg+xml;charset=utf-8," + encodeURIComponent(str(v));
      wrap.append(img);
      break;
    }
    case "image/png":
    case "image/jpeg":
    case "image/gif": {
      const img = document.createElement("img");
      img.className = "out-image";
      img.alt = `${mime} output`;
      img.src = `data:${mime};base64,${str(v).replace(/\s/g, "")}`;
      // display(Image(..., width=...)): the size the output asks for.
      const m = metadata[mime] as { width?: number; height?: number } | undefined;
      if (m && typeof m.width === "number") img.width = m.width;
      if (m && typeof m.height === "number") img.height = m.height;
      wrap.append(img);
      break;
    }
    case "application/json":
      wrap.append(text(JSON.stringify(v, null, 2)));
      break;
    default:
      wrap.append(text(str(v ?? "")));
  }
  return wrap;
}
