// `# %%` cells (and `// %%` in JavaScript/TypeScript): pure functions over a document's lines.

/** A line that starts a cell: `# %%`, `// %%`, optionally with a title (`# %% [markdown] title`). */
export const CELL_MARKER = /^\s*(#|\/\/)\s*%%/;

export interface CellRange {
  /** 0-based first line (the marker line, or 0 for the text before the first marker). */
  start: number;
  /** 0-based last line, inclusive. */
  end: number;
  /** true when start is a marker line. */
  marker: boolean;
}

/** The cells of a document: text before the first marker is a cell of its own if it is not blank. */
export function findCells(lines: string[]): CellRange[] {
  const cells: CellRange[] = [];
  let start = 0;
  let marker = false;
  for (let i = 0; i < lines.length; i++) {
    if (CELL_MARKER.test(lines[i])) {
      if (i > start || marker) {
        if (marker || lines.slice(start, i).some((l) => l.trim() !== "")) {
          cells.push({ start, end: i - 1, marker });
        }
      }
      start = i;
      marker = true;
    }
  }
  if (lines.length > 0 && (marker || lines.slice(start).some((l) => l.trim() !== ""))) {
    cells.push({ start, end: lines.length - 1, marker });
  }
  return cells;
}

export function cellAt(cells: CellRange[], line: number): CellRange | undefined {
  return cells.find((c) => line >= c.start && line <= c.end);
}

/**
 * The code of a cell and the 1-based line it begins on: the marker line is left out, and trailing
 * blank lines too. undefined for a cell with no code (a markdown cell is skipped the same way).
 */
export function cellCode(lines: string[], c: CellRange): { code: string; line: number } | undefined {
  if (c.marker && /%%\s*\[markdown\]/.test(lines[c.start])) {
    return undefined;
  }
  let s = c.marker ? c.start + 1 : c.start;
  let e = c.end;
  while (s <= e && lines[s].trim() === "") s++;
  while (e >= s && lines[e].trim() === "") e--;
  if (s > e) {
    return undefined;
  }
  return { code: lines.slice(s, e + 1).join("\n"), line: s + 1 };
}
