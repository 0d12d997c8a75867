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
// Instead the page lays out a copy of the html, sanitized by DOMPurify (no
// script, no handler), in a hidden shadow root (its styles stay inside) of
// the iframe's width with the iframe's style, and gives the iframe that
// height; again when the width changes or an image of the copy loads. No
// script of the output runs anywhere: not in the iframe (sandbox), not in
// the copy (sanitized, and never shown).
function sizeHTML(f: HTMLIFrameElement, html: string) {
  const host = document.createElement("div");
  host.className = "out-html-measure";
  host.setAttribute("aria-hidden", "true");
  const shadow = host.attachShadow({ mode: "open" });
  shadow.innerHTML = `<style>:host{all:initial;display:block}${htmlStyle.replace(/\bbody\b/, ".body")}</style><div class="body">${sanitizeHTML(html)}</div>`;
  const body = shadow.querySelector(".body") as HTMLElement;
  const measure = () => {
    if (!f.isConnected) return;
    const w = f.clientWidth;
    if (!w) return;
    host.style.width = `${w}px`;
    // The body's margins (4px each side) and the iframe's border.
    const h = Math.ceil(body.getBoundingClientRect().height) + 8 + 4;
    f.style.height = `${Math.min(maxHTMLHeight, Math.max(24, h))}px`;
  };
  document.body.append(host);
  for (const img of shadow.querySelectorAll("img")) img.addEventListener("load", measure);
  const ro = new ResizeObserver(() => {
    if (!f.isConnected) {
      ro.disconnect();
      host.remove();
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
