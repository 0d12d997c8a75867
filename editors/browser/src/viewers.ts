// Viewers of project files: images (as data: URLs; an SVG as an <img>, so
// none of its scripts runs), CSV/TSV as a table, JSON as a tree whose
// objects and arrays fold, and the pane of a file too large or not text.
// Each returns an element; the file editor puts it in the file's tab.
import { el } from "./dom";

/** The kind of viewer a path gets, by its extension. */
export type ViewKind = "image" | "csv" | "json" | "text";

const imageTypes: Record<string, string> = {
  png: "image/png",
  jpg: "image/jpeg",
  jpeg: "image/jpeg",
  gif: "image/gif",
  webp: "image/webp",
  svg: "image/svg+xml",
  bmp: "image/bmp",
  ico: "image/x-icon",
  avif: "image/avif",
};

export const extOf = (path: string) => /\.([^./]+)$/.exec(path)?.[1]?.toLowerCase() ?? "";

export function viewKind(path: string): ViewKind {
  const ext = extOf(path);
  if (ext in imageTypes) return "image";
  if (ext === "csv" || ext === "tsv") return "csv";
  if (ext === "json" || ext === "geojson" || ext === "webmanifest") return "json";
  return "text";
}

export function imageType(path: string): string {
  return imageTypes[extOf(path)] ?? "application/octet-stream";
}

/** "1.2 MiB", "340 bytes". */
export function formatSize(n: number): string {
  if (n < 1024) return `${n} byte${n === 1 ? "" : "s"}`;
  const units = ["KiB", "MiB", "GiB"];
  let v = n / 1024;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return `${v < 10 ? v.toFixed(1) : Math.round(v)} ${units[u]}`;
}

/** Standard base64 of bytes (chunked: String.fromCharCode takes a bounded argument list). */
export function bytesToBase64(bytes: Uint8Array): string {
  let s = "";
  for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(s);
}

export function base64ToBytes(b64: string): Uint8Array<ArrayBuffer> {
  const s = atob(b64);
  const out = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
  return out;
}

/** Saves bytes as a file through a download link. */
export function downloadBytes(name: string, bytes: Uint8Array<ArrayBuffer>, type = "application/octet-stream") {
  const url = URL.createObjectURL(new Blob([bytes], { type }));
  const a = el("a", { href: url, download: name });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

/** An image from its bytes in base64. */
export function imageView(path: string, base64: string, size: number): HTMLElement {
  const img = el("img", { class: "image-view", alt: path, src: `data:${imageType(path)};base64,${base64}` }) as HTMLImageElement;
  const info = el("div", { class: "view-info" }, formatSize(size));
  img.onload = () => (info.textContent = `${img.naturalWidth} × ${img.naturalHeight} · ${formatSize(size)}`);
  img.onerror = () => (info.textContent = `${formatSize(size)} · the browser cannot show this image`);
  return el("div", { class: "image-pane" }, info, el("div", { class: "image-frame" }, img));
}

/** The pane of a file not put in an editor: binary, or over the editor's size limit. */
export function binaryPane(path: string, size: number, why: "binary" | "large", download: () => void): HTMLElement {
  const b = el("button", { class: "download" }, "Download");
  b.onclick = download;
  const what = why === "binary" ? `binary, ${formatSize(size)}` : `${formatSize(size)}, too large to edit here`;
  return el("div", { class: "binary-pane" }, el("p", {}, el("strong", {}, path.split("/").pop() || path), ` — ${what}`), b);
}

/** The first max+1 records of CSV text (RFC 4180: quoted fields, "" in quotes, newlines in quotes). */
export function parseCSV(text: string, sep: string, max: number): { rows: string[][]; more: boolean } {
  const rows: string[][] = [];
  let row: string[] = [];
  let field = "";
  let quoted = false;
  let i = 0;
  const n = text.length;
  if (text.charCodeAt(0) === 0xfeff) i = 1;
  while (i < n) {
    const c = text[i];
    if (quoted) {
      if (c === '"') {
        if (text[i + 1] === '"') {
          field += '"';
          i += 2;
          continue;
        }
        quoted = false;
      } else {
        field += c;
      }
      i++;
      continue;
    }
    if (c === '"' && field === "") {
      quoted = true;
    } else if (c === sep) {
      row.push(field);
      field = "";
    } else if (c === "\n" || c === "\r") {
      row.push(field);
      field = "";
      rows.push(row);
      row = [];
      if (c === "\r" && text[i + 1] === "\n") i++;
      if (rows.length > max) return { rows: rows.slice(0, max), more: true };
    } else {
      field += c;
    }
    i++;
  }
  if (field !== "" || row.length) {
    row.push(field);
    rows.push(row);
  }
  return { rows: rows.slice(0, max), more: rows.length > max };
}

export const maxTableRows = 1000;

/** A CSV or TSV file as a table: its first row the header, the first 1,000 records. */
export function csvTable(path: string, text: string): HTMLElement {
  const sep = extOf(path) === "tsv" ? "\t" : ",";
  const { rows, more } = parseCSV(text, sep, maxTableRows + 1);
  const [head, ...body] = rows;
  const table = el("table", { class: "csv-table" });
  if (head) {
    table.append(el("thead", {}, el("tr", {}, el("th", { class: "rownum" }, ""), ...head.map((h) => el("th", {}, h)))));
  }
  const tbody = el("tbody");
  body.forEach((r, i) => tbody.append(el("tr", {}, el("td", { class: "rownum" }, String(i + 1)), ...r.map((c) => el("td", {}, c)))));
  table.append(tbody);
  const info = `${body.length}${more ? "+" : ""} row${body.length === 1 ? "" : "s"}${head ? `, ${head.length} column${head.length === 1 ? "" : "s"}` : ""}${more ? ` (the first ${maxTableRows} shown)` : ""}`;
  return el("div", { class: "csv-pane" }, el("div", { class: "view-info" }, info), table);
}

const maxChildren = 500;

/** A JSON value as a tree: objects and arrays fold (the first two levels open); long ones show their first 500 entries, built when opened. */
export function jsonTree(value: unknown): HTMLElement {
  return el("div", { class: "json-tree" }, jsonNode(undefined, value, 0, 1));
}

/** A node; it starts open at the first level, and at the second when its parent has few entries (a long array of objects starts folded). */
function jsonNode(key: string | undefined, value: unknown, depth: number, siblings: number): HTMLElement {
  const label = key === undefined ? [] : [el("span", { class: "json-key" }, key), ": "];
  if (value === null || typeof value !== "object") {
    const kind = value === null ? "null" : typeof value;
    return el("div", { class: "json-leaf" }, ...label, el("span", { class: `json-${kind}` }, JSON.stringify(value)));
  }
  const isArray = Array.isArray(value);
  const entries: [string, unknown][] = isArray ? (value as unknown[]).map((v, i) => [String(i), v]) : Object.entries(value as object);
  const summary = isArray ? `[${entries.length}]` : `{${entries.length}}`;
  const details = el("details", { class: `json-node ${isArray ? "json-array" : "json-object"}` }, el("summary", {}, ...label, el("span", { class: "json-count" }, summary))) as HTMLDetailsElement;
  const body = el("div", { class: "json-children" });
  details.append(body);
  let filled = false;
  const fill = () => {
    if (filled) return;
    filled = true;
    for (const [k, v] of entries.slice(0, maxChildren)) body.append(jsonNode(k, v, depth + 1, entries.length));
    if (entries.length > maxChildren) body.append(el("div", { class: "json-more" }, `… ${entries.length - maxChildren} more`));
  };
  // Children are built when first opened, so a large file shows at once.
  details.addEventListener("toggle", () => details.open && fill());
  if (depth === 0 || (depth === 1 && siblings <= 50)) {
    fill();
    details.open = true;
  }
  return details;
}
