// CodeEditor: CodeMirror 6 set up the one way the page uses it, for
// notebook cells and for project files: highlighting for the language,
// auto-indent, bracket matching and closing, search, undo history, a theme
// that follows the system's light or dark setting, and hooks for the
// kernel's completion (Tab) and help (Shift+Tab).
import { autocompletion, closeBrackets, closeBracketsKeymap, completionKeymap, startCompletion, type CompletionContext, type CompletionResult } from "@codemirror/autocomplete";
import { defaultKeymap, history, historyKeymap, indentLess, indentMore, insertNewlineAndIndent } from "@codemirror/commands";
import { javascript } from "@codemirror/lang-javascript";
import { json } from "@codemirror/lang-json";
import { markdown } from "@codemirror/lang-markdown";
import { python } from "@codemirror/lang-python";
import { bracketMatching, defaultHighlightStyle, foldGutter, foldKeymap, indentOnInput, indentUnit, StreamLanguage, syntaxHighlighting, type LanguageSupport } from "@codemirror/language";
import { go } from "@codemirror/legacy-modes/mode/go";
import { julia } from "@codemirror/legacy-modes/mode/julia";
import { r } from "@codemirror/legacy-modes/mode/r";
import { ruby } from "@codemirror/legacy-modes/mode/ruby";
import { shell } from "@codemirror/legacy-modes/mode/shell";
import { standardSQL } from "@codemirror/legacy-modes/mode/sql";
import { toml } from "@codemirror/legacy-modes/mode/toml";
import { yaml } from "@codemirror/legacy-modes/mode/yaml";
import { highlightSelectionMatches, searchKeymap } from "@codemirror/search";
import { Compartment, EditorState, Prec, type Extension } from "@codemirror/state";
import { oneDark } from "@codemirror/theme-one-dark";
import { drawSelection, EditorView, highlightActiveLine, highlightActiveLineGutter, keymap, lineNumbers, placeholder as placeholderExt, type KeyBinding } from "@codemirror/view";

export type { KeyBinding } from "@codemirror/view";
export { EditorView } from "@codemirror/view";

/** What the kernel completes at a position: matches replace doc[from:to] (UTF-16 offsets). */
export interface Completion {
  matches: string[];
  from: number;
  to: number;
}

export interface CodeEditorOptions {
  parent: HTMLElement;
  doc?: string;
  /**
   * The language: a cellbox language id ("python", "jupyter:ir", "bash"), a
   * kernel's languageInfo name, or a file path (its extension decides). See languageFor.
   */
  language?: string;
  /** Called after every change of the text. */
  onChange?: (doc: string) => void;
  /** The kernel's completions at pos (UTF-16 offset of the doc); Tab asks, and typing a "." does. */
  complete?: (doc: string, pos: number) => Promise<Completion | null>;
  /** The kernel's help at pos, shown under the editor by the caller; Shift+Tab asks. */
  inspect?: (doc: string, pos: number) => void;
  /** Keys that come before CodeMirror's own (Shift+Enter to run, Escape to command mode). */
  keys?: KeyBinding[];
  readOnly?: boolean;
  /** Line numbers and folding: on for files, off for cells. */
  gutters?: boolean;
  placeholder?: string;
  /** The accessible name of the editable area. */
  label?: string;
  onFocus?: () => void;
  onBlur?: () => void;
}

const legacy = (mode: Parameters<typeof StreamLanguage.define>[0]): LanguageSupport | Extension => StreamLanguage.define(mode);

/** Highlighting and indentation for a language id, a kernel's language name, or a file path. */
export function languageFor(what: string | undefined): Extension {
  if (!what) return [];
  let key = what.toLowerCase();
  if (key.startsWith("jupyter:")) key = key.slice("jupyter:".length);
  // A file path: its extension; an interpreter choice such as "python@/usr/bin/python3.12": its language.
  const ext = /\.([a-z0-9]+)$/.exec(key)?.[1];
  key = (ext ?? key).replace(/[@:/].*$/, "").replace(/[0-9.]+$/, "");
  switch (key) {
    case "python":
    case "py":
    case "ipython":
    case "pyi":
      return python();
    case "javascript":
    case "js":
    case "mjs":
    case "cjs":
    case "node":
    case "deno":
      return javascript();
    case "jsx":
      return javascript({ jsx: true });
    case "typescript":
    case "ts":
    case "mts":
    case "cts":
      return javascript({ typescript: true });
    case "tsx":
      return javascript({ typescript: true, jsx: true });
    case "json":
    case "ipynb":
    case "jsonl":
      return json();
    case "markdown":
    case "md":
      return markdown();
    case "r":
    case "ir":
      return legacy(r);
    case "ruby":
    case "rb":
      return legacy(ruby);
    case "julia":
    case "jl":
      return legacy(julia);
    case "bash":
    case "sh":
    case "shell":
    case "zsh":
      return legacy(shell);
    case "go":
    case "gonb":
      return legacy(go);
    case "sql":
      return legacy(standardSQL);
    case "toml":
      return legacy(toml);
    case "yaml":
    case "yml":
      return legacy(yaml);
    default:
      return [];
  }
}

const dark = window.matchMedia?.("(prefers-color-scheme: dark)");
/** Every live editor's theme compartment, switched when the system's setting changes. */
const themed = new Set<{ view: EditorView; theme: Compartment }>();
const themeFor = () => (dark?.matches ? oneDark : syntaxHighlighting(defaultHighlightStyle, { fallback: true }));
dark?.addEventListener?.("change", () => {
  for (const t of themed) t.view.dispatch({ effects: t.theme.reconfigure(themeFor()) });
});

const base = EditorView.theme({
  "&": { fontSize: "13px", backgroundColor: "transparent" },
  ".cm-content": { fontFamily: "ui-monospace, Menlo, Consolas, monospace", padding: "6px 0" },
  ".cm-scroller": { fontFamily: "ui-monospace, Menlo, Consolas, monospace", lineHeight: "1.4" },
  "&.cm-focused": { outline: "none" },
});

/** A CodeMirror 6 editor with the page's setup. */
export class CodeEditor {
  readonly view: EditorView;
  private language = new Compartment();
  private theme = new Compartment();
  private editable = new Compartment();
  private entry: { view: EditorView; theme: Compartment };

  constructor(opts: CodeEditorOptions) {
    const complete = opts.complete;
    const source = complete
      ? async (ctx: CompletionContext): Promise<CompletionResult | null> => {
          // Only when asked (Tab) or after a ".", not on every key.
          if (!ctx.explicit && !ctx.matchBefore(/\.\w*$/)) return null;
          const r = await complete(ctx.state.doc.toString(), ctx.pos);
          if (!r || !r.matches.length) return null;
          return { from: r.from, to: r.to, options: r.matches.map((m) => ({ label: m })), filter: false };
        }
      : undefined;
    const tab: KeyBinding[] = [
      {
        key: "Tab",
        run: (v) => {
          // Tab completes after a word character or a dot and indents elsewhere, as in Jupyter.
          const sel = v.state.selection.main;
          const before = v.state.sliceDoc(Math.max(0, sel.head - 1), sel.head);
          if (source && sel.empty && /[\w.]/.test(before)) return startCompletion(v);
          return indentMore(v);
        },
        shift: (v) => {
          if (opts.inspect && v.state.selection.main.empty) {
            opts.inspect(v.state.doc.toString(), v.state.selection.main.head);
            return true;
          }
          return indentLess(v);
        },
      },
    ];
    const extensions: Extension[] = [
      Prec.highest(keymap.of(opts.keys ?? [])),
      history(),
      drawSelection(),
      indentOnInput(),
      indentUnit.of("    "),
      bracketMatching(),
      closeBrackets(),
      highlightSelectionMatches(),
      EditorState.tabSize.of(4),
      ...(source ? [autocompletion({ override: [source], activateOnTyping: true, icons: false })] : []),
      Prec.high(keymap.of([...completionKeymap, ...tab])),
      keymap.of([...closeBracketsKeymap, ...defaultKeymap, ...searchKeymap, ...historyKeymap, ...foldKeymap, { key: "Enter", run: insertNewlineAndIndent }]),
      base,
      this.theme.of(themeFor()),
      this.language.of(languageFor(opts.language)),
      this.editable.of([EditorState.readOnly.of(!!opts.readOnly), EditorView.editable.of(!opts.readOnly)]),
      EditorView.lineWrapping,
      EditorView.contentAttributes.of({ "aria-label": opts.label ?? "code", spellcheck: "false" }),
      ...(opts.placeholder ? [placeholderExt(opts.placeholder)] : []),
      ...(opts.gutters ? [lineNumbers(), foldGutter(), highlightActiveLine(), highlightActiveLineGutter()] : []),
      EditorView.updateListener.of((u) => {
        if (u.docChanged) opts.onChange?.(u.state.doc.toString());
        if (u.focusChanged) (u.view.hasFocus ? opts.onFocus : opts.onBlur)?.();
      }),
    ];
    this.view = new EditorView({ state: EditorState.create({ doc: opts.doc ?? "", extensions }), parent: opts.parent });
    this.entry = { view: this.view, theme: this.theme };
    themed.add(this.entry);
  }

  get value(): string {
    return this.view.state.doc.toString();
  }

  /** Replaces the whole text (as one undoable change). */
  set value(s: string) {
    if (s === this.value) return;
    this.view.dispatch({ changes: { from: 0, to: this.view.state.doc.length, insert: s } });
  }

  /** The cursor's offset (UTF-16) in the text. */
  get cursor(): number {
    return this.view.state.selection.main.head;
  }

  setCursor(pos: number) {
    this.view.dispatch({ selection: { anchor: Math.max(0, Math.min(pos, this.view.state.doc.length)) } });
  }

  setLanguage(what: string | undefined) {
    this.view.dispatch({ effects: this.language.reconfigure(languageFor(what)) });
  }

  setReadOnly(ro: boolean) {
    this.view.dispatch({ effects: this.editable.reconfigure([EditorState.readOnly.of(ro), EditorView.editable.of(!ro)]) });
  }

  focus() {
    this.view.focus();
  }

  get hasFocus(): boolean {
    return this.view.hasFocus;
  }

  destroy() {
    themed.delete(this.entry);
    this.view.destroy();
  }
}
