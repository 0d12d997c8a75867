// Markdown cells: rendered with marked (GitHub-flavoured Markdown, as
// JupyterLab renders it) and sanitized with DOMPurify, so that HTML in a
// notebook someone sent runs no script and sets no handler in the page.
// Images written attachment:NAME come from the cell's attachments as data:
// URLs (the page's CSP allows no other images, so remote ones stay blank).
import DOMPurify from "dompurify";
import { Marked, type Token } from "marked";
import type { JsonObject } from "./ipynb";

/** A DOMPurify of its own (its hooks touch no other part's). */
const purify = DOMPurify(window);
purify.addHook("afterSanitizeAttributes", (node) => {
  // A link opens elsewhere, never in place of the IDE.
  if (node.tagName === "A" && node.getAttribute("href")) {
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer");
  }
});

/**
 * sanitizeHTML is html without scripts, handlers, javascript: URLs or forms.
 * inPage: the html goes into the page itself (a markdown cell), so it also
 * loses <style> elements (they would restyle the whole IDE) and style
 * attributes (position: fixed would lay a look-alike of the IDE over it).
 */
export function sanitizeHTML(html: string, inPage = false): string {
  const forms = ["form", "input", "button", "textarea", "select"];
  return purify.sanitize(html, inPage ? { FORBID_TAGS: [...forms, "style", "link"], FORBID_ATTR: ["style"] } : { FORBID_TAGS: forms });
}

/** The data: URL of an attachment: its first image type (nbformat keeps images base64). */
function attachmentURL(bundle: JsonObject | undefined): string | undefined {
  if (!bundle) return undefined;
  for (const [mime, v] of Object.entries(bundle)) {
    if (!mime.startsWith("image/") || typeof v !== "string") continue;
    if (mime === "image/svg+xml") return `data:image/svg+xml;charset=utf-8,${encodeURIComponent(v)}`;
    return `data:${mime};base64,${v.replace(/\s/g, "")}`;
  }
  return undefined;
}

/** renderMarkdownCell renders a markdown cell's source into el. */
export function renderMarkdownCell(el: HTMLElement, source: string, attachments?: { [name: string]: JsonObject }) {
  const md = new Marked({ gfm: true, breaks: false, async: false });
  md.use({
    walkTokens(t: Token) {
      if (t.type === "image" && typeof t.href === "string" && t.href.startsWith("attachment:")) {
        const name = decodeURIComponent(t.href.slice("attachment:".length));
        t.href = attachmentURL(attachments?.[name]) ?? "";
      }
    },
  });
  const html = md.parse(source) as string;
  el.innerHTML = sanitizeHTML(html, true);
}
