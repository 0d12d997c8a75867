// Errors mapped back to the file: the line an error points at in the file that ran
// (kernel/execute `source` makes tracebacks name the editor's path and line). Pure.
import type { ExecuteError } from "../../protocol/protocol";
import { stripANSI } from "./outputs";

/**
 * The 1-based line of `path` that the traceback points at, or undefined. Python lists the
 * innermost frame last; Node.js and bash first. Recognises `File "PATH", line N`, `PATH:N`
 * (Node.js, also `(PATH:N:C)`) and `PATH: line N` (bash).
 */
export function errorLine(err: ExecuteError, path: string, language: string): number | undefined {
  const found: number[] = [];
  const lines = err.traceback.flatMap((l) => stripANSI(l).split("\n"));
  if (err.evalue) lines.push(stripANSI(err.evalue));
  for (const l of lines) {
    let from = 0;
    for (;;) {
      const i = l.indexOf(path, from);
      if (i < 0) break;
      const rest = l.slice(i + path.length);
      const m = /^"?,\s*line (\d+)/.exec(rest) ?? /^:(\d+)/.exec(rest) ?? /^: line (\d+)/.exec(rest) ?? /^\)?:(\d+)/.exec(rest);
      if (m) found.push(Number(m[1]));
      from = i + path.length;
    }
  }
  if (found.length === 0) return undefined;
  return language === "python" ? found[found.length - 1] : found[0];
}

export interface DiagnosticSpec {
  /** 0-based line */
  line: number;
  startCol: number;
  endCol: number;
  message: string;
}

/**
 * Where to put the diagnostic for an error of code that ran from lines [first, last] (0-based) of
 * a document: the line the traceback names if it is in the document, else the first line that ran.
 * The range spans the line's text without its indentation.
 */
export function diagnosticFor(err: ExecuteError, path: string, language: string, docLines: string[], first: number): DiagnosticSpec {
  const line = errorLine(err, path, language);
  let l = line !== undefined ? line - 1 : first;
  if (l < 0 || l >= docLines.length) l = first;
  const text = docLines[l] ?? "";
  const startCol = text.length - text.trimStart().length;
  return { line: l, startCol, endCol: Math.max(text.length, startCol + 1), message: `${err.ename}: ${stripANSI(err.evalue)}` };
}
