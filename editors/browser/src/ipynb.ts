// nbformat 4: reading notebooks Jupyter wrote (4.0 to 4.5) and writing them
// back as nbformat 4.5 the way nbformat itself writes them (cell ids,
// multi-line strings as lists of lines, JSON with indent 1 and sorted keys,
// a trailing newline), so a notebook saved here opens in JupyterLab
// unchanged. Metadata the page does not know is kept verbatim, at the
// notebook's level and at each cell's.
import type { KernelOutputParams } from "../client/client";

export type CellType = "code" | "markdown" | "raw";
export type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
export type JsonObject = { [k: string]: Json };

/** An output as nbformat stores it, with its multi-line strings joined. */
export type NbOutput =
  | { output_type: "stream"; name: string; text: string }
  | { output_type: "display_data"; data: JsonObject; metadata: JsonObject }
  | { output_type: "execute_result"; data: JsonObject; metadata: JsonObject; execution_count: number | null }
  | { output_type: "error"; ename: string; evalue: string; traceback: string[] };

export interface NbCell {
  id: string;
  cell_type: CellType;
  /** The source as one string. */
  source: string;
  metadata: JsonObject;
  /** Code cells only. */
  outputs: NbOutput[];
  execution_count: number | null;
  /** Markdown and raw cells: files the text refers to as attachment:NAME. */
  attachments?: { [name: string]: JsonObject };
}

export interface NbDoc {
  cells: NbCell[];
  metadata: JsonObject;
}

/** NotebookError says what is wrong with a file that is not a notebook this page reads. */
export class NotebookError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "NotebookError";
  }
}

const isObject = (v: unknown): v is JsonObject => typeof v === "object" && v !== null && !Array.isArray(v);

/** A multi-line string of nbformat (a string or a list of lines) as one string. */
export function joinLines(v: unknown): string {
  if (Array.isArray(v)) return v.map((x) => (typeof x === "string" ? x : String(x ?? ""))).join("");
  return typeof v === "string" ? v : "";
}

// Python's str.splitlines' line boundaries (nbformat splits with it).
// eslint-disable-next-line no-control-regex -- \x1c-\x1e are line boundaries for Python
const lineEnd = /\r\n|[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]/g;

/** splitLines is Python's s.splitlines(True): lines with their line ends; "" is []. */
export function splitLines(s: string): string[] {
  const out: string[] = [];
  let start = 0;
  for (const m of s.matchAll(lineEnd)) {
    const end = m.index! + m[0].length;
    out.push(s.slice(start, end));
    start = end;
  }
  if (start < s.length) out.push(s.slice(start));
  return out;
}

/** JSON mime types keep their value as JSON; the others are strings (joined on read). */
const isJsonMime = (mime: string) => mime === "application/json" || /^application\/.+\+json$/.test(mime);
/** nbformat splits text/* and these into lines when it writes. */
const splitMimes = new Set(["application/javascript", "image/svg+xml"]);

function joinBundle(data: unknown): JsonObject {
  const out: JsonObject = {};
  if (!isObject(data)) return out;
  for (const [mime, v] of Object.entries(data)) out[mime] = !isJsonMime(mime) && Array.isArray(v) && v.every((x) => typeof x === "string") ? v.join("") : v;
  return out;
}

function splitBundle(data: JsonObject): JsonObject {
  const out: JsonObject = {};
  for (const [mime, v] of Object.entries(data)) out[mime] = typeof v === "string" && (mime.startsWith("text/") || splitMimes.has(mime)) ? splitLines(v) : v;
  return out;
}

/** A fresh cell id: nbformat 4.5 wants 1 to 64 of [a-zA-Z0-9-_], unique in the notebook. */
export function newCellId(): string {
  return crypto.randomUUID().replace(/-/g, "").slice(0, 12);
}

const validId = (id: unknown): id is string => typeof id === "string" && /^[a-zA-Z0-9-_]{1,64}$/.test(id);

function readOutput(o: unknown, where: string): NbOutput {
  if (!isObject(o)) throw new NotebookError(`${where}: an output is not an object`);
  switch (o.output_type) {
    case "stream":
      return { output_type: "stream", name: typeof o.name === "string" ? o.name : "stdout", text: joinLines(o.text) };
    case "display_data":
      return { output_type: "display_data", data: joinBundle(o.data), metadata: isObject(o.metadata) ? o.metadata : {} };
    case "execute_result":
      return { output_type: "execute_result", data: joinBundle(o.data), metadata: isObject(o.metadata) ? o.metadata : {}, execution_count: typeof o.execution_count === "number" ? o.execution_count : null };
    case "error":
      return {
        output_type: "error",
        ename: String(o.ename ?? ""),
        evalue: String(o.evalue ?? ""),
        traceback: Array.isArray(o.traceback) ? o.traceback.map((l) => String(l)) : [],
      };
    // nbformat 3's names, which some converters still write.
    case "pyout":
      return { output_type: "execute_result", data: joinBundle(o.data), metadata: isObject(o.metadata) ? o.metadata : {}, execution_count: typeof o.prompt_number === "number" ? o.prompt_number : null };
    case "pyerr":
      return readOutput({ ...o, output_type: "error" }, where);
    default:
      throw new NotebookError(`${where}: unknown output_type ${JSON.stringify(o.output_type)}`);
  }
}

/** parseNotebook reads an nbformat 4 notebook (4.0 to 4.5). */
export function parseNotebook(text: string): NbDoc {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (e) {
    throw new NotebookError(`not JSON: ${(e as Error).message}`);
  }
  if (!isObject(raw)) throw new NotebookError("not a notebook: the JSON is not an object");
  if (raw.nbformat !== 4) throw new NotebookError(`nbformat ${JSON.stringify(raw.nbformat ?? null)} is not supported (only 4; convert it with jupyter nbconvert --to notebook)`);
  if (!Array.isArray(raw.cells)) throw new NotebookError("not a notebook: no cells list");
  const seen = new Set<string>();
  const cells = raw.cells.map((c, i): NbCell => {
    const where = `cell ${i + 1}`;
    if (!isObject(c)) throw new NotebookError(`${where} is not an object`);
    const type = c.cell_type;
    if (type !== "code" && type !== "markdown" && type !== "raw") throw new NotebookError(`${where}: unknown cell_type ${JSON.stringify(type)}`);
    let id = validId(c.id) && !seen.has(c.id) ? c.id : newCellId();
    while (seen.has(id)) id = newCellId();
    seen.add(id);
    const cell: NbCell = {
      id,
      cell_type: type,
      source: joinLines(c.source),
      metadata: isObject(c.metadata) ? c.metadata : {},
      outputs: type === "code" && Array.isArray(c.outputs) ? c.outputs.map((o, j) => readOutput(o, `${where}, output ${j + 1}`)) : [],
      execution_count: type === "code" && typeof c.execution_count === "number" ? c.execution_count : null,
    };
    if (type !== "code" && isObject(c.attachments)) {
      cell.attachments = {};
      for (const [name, b] of Object.entries(c.attachments)) cell.attachments[name] = joinBundle(b);
    }
    return cell;
  });
  return { cells, metadata: isObject(raw.metadata) ? raw.metadata : {} };
}

/** sortKeys orders every object's keys as Python's json.dumps(sort_keys=True) does. */
function sortKeys(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(sortKeys);
  if (!isObject(v)) return v;
  const out: Record<string, unknown> = {};
  for (const k of Object.keys(v).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))) out[k] = sortKeys(v[k]);
  return out;
}

function writeOutput(o: NbOutput): JsonObject {
  switch (o.output_type) {
    case "stream":
      return { output_type: "stream", name: o.name, text: splitLines(o.text) };
    case "display_data":
      return { output_type: "display_data", data: splitBundle(o.data), metadata: o.metadata };
    case "execute_result":
      return { output_type: "execute_result", data: splitBundle(o.data), metadata: o.metadata, execution_count: o.execution_count };
    case "error":
      return { output_type: "error", ename: o.ename, evalue: o.evalue, traceback: o.traceback };
  }
}

/** serializeNotebook writes doc as nbformat 4.5, byte for byte as nbformat.write does. */
export function serializeNotebook(doc: NbDoc): string {
  const cells = doc.cells.map((c) => {
    const out: JsonObject = { id: c.id, cell_type: c.cell_type, metadata: c.metadata, source: splitLines(c.source) };
    if (c.cell_type === "code") {
      out.outputs = c.outputs.map(writeOutput);
      out.execution_count = c.execution_count;
    } else if (c.attachments && Object.keys(c.attachments).length) {
      const a: JsonObject = {};
      for (const [name, b] of Object.entries(c.attachments)) a[name] = splitBundle(b);
      out.attachments = a;
    }
    return out;
  });
  return JSON.stringify(sortKeys({ cells, metadata: doc.metadata, nbformat: 4, nbformat_minor: 5 }), null, 1) + "\n";
}

/** A new notebook: one empty code cell. */
export function emptyNotebook(): NbDoc {
  return { cells: [{ id: newCellId(), cell_type: "code", source: "", metadata: {}, outputs: [], execution_count: null }], metadata: {} };
}

/**
 * outputFromKernel is a kernel/output notification as an nbformat output
 * (clear and display updates are not outputs; the caller handles them).
 */
export function outputFromKernel(p: KernelOutputParams): NbOutput | undefined {
  switch (p.kind) {
    case "stream":
      return { output_type: "stream", name: p.name ?? "stdout", text: p.text ?? "" };
    case "display":
      return { output_type: "display_data", data: (p.data ?? {}) as JsonObject, metadata: (p.metadata ?? {}) as JsonObject };
    case "result":
      return { output_type: "execute_result", data: (p.data ?? {}) as JsonObject, metadata: (p.metadata ?? {}) as JsonObject, execution_count: null };
    case "error": {
      if (p.error) return { output_type: "error", ename: p.error.ename, evalue: p.error.evalue, traceback: p.error.traceback ?? [] };
      const text = p.text ?? "error";
      return { output_type: "error", ename: "Error", evalue: text.split("\n")[0], traceback: text.split("\n") };
    }
    default:
      return undefined;
  }
}
