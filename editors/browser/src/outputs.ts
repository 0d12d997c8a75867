// Rendering of kernel outputs (PROTOCOL.md §4 MimeBundle): html in a
// sandboxed iframe (srcdoc, no allow-same-origin, no scripts), images as
// data: URLs, svg as an <img> (scripts in it never run), markdown through
// the tiny safe renderer, json and text as text.
import { renderMarkdown } from "./markdown";

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

export function renderBundle(data: Record<string, unknown>): HTMLElement {
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
      const html = str(v);
      f.srcdoc = `<!doctype html><meta charset="utf-8"><style>body{font:13px system-ui,sans-serif;margin:4px;color:#222}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}</style>${html}`;
      const rows = (html.match(/<tr|<br|<p|<li|<h\d|<div/gi) ?? []).length;
      f.style.height = `${Math.min(480, Math.max(40, 26 + rows * 24))}px`;
      wrap.append(f);
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
