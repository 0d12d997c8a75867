// The daemon's languages (initialize's capabilities.languages) as VS Code sees them: which one a
// document or notebook cell runs in, their labels, what each can answer (`unsupported`) and the
// kernel picker's entries. Pure: no `vscode` import, no daemon call.
import type { InterpreterInfo, LanguageCapability, RequestMethod } from "../../protocol/protocol";

/** The prefix of an installed Jupyter kernel's language id: jupyter:NAME (PROTOCOL.md §8). */
export const JUPYTER_PREFIX = "jupyter:";

export function isJupyter(id: string): boolean {
  return id.startsWith(JUPYTER_PREFIX);
}

/** VS Code languageIds that are a cellbox language under another name. */
const ALIASES: Record<string, string> = { shellscript: "bash", sh: "bash" };

/**
 * VS Code languageIds -> the file extension of that language, as the daemon gives it to a
 * Jupyter kernel from its kernelspec's language. A document without a file name (untitled) or with
 * another extension still finds its kernel through its languageId.
 */
export const LANGUAGE_ID_EXTENSIONS: Record<string, string> = {
  python: ".py",
  javascript: ".js",
  typescript: ".ts",
  shellscript: ".sh",
  r: ".r",
  julia: ".jl",
  ruby: ".rb",
  go: ".go",
  scala: ".scala",
  cpp: ".cpp",
  sql: ".sql",
};

/** The extension of a file name with its dot (`.R`), or "" (`Makefile`, `.bashrc`). */
export function extensionOf(fileName: string): string {
  const base = fileName.slice(Math.max(fileName.lastIndexOf("/"), fileName.lastIndexOf("\\")) + 1);
  const i = base.lastIndexOf(".");
  return i > 0 ? base.slice(i) : "";
}

/** Available before unavailable, then cellbox's own languages before Jupyter kernels. */
function rank(l: LanguageCapability): number {
  return (l.available ? 0 : 2) + (isJupyter(l.id) ? 1 : 0);
}

/**
 * The language a document of VS Code languageId (and file fileName) runs in: the cellbox language
 * of the same id; else one whose fileExtensions include the file's extension, or the extension of
 * the languageId's language (so `r` documents run in `jupyter:ir`). cellbox's own language wins
 * over a Jupyter kernel of the same language (`.py` runs in `python`, not `jupyter:python3`), and
 * an available one over one that is not. A language that is not available is returned only when
 * nothing else fits, so that starting it says why.
 */
export function resolveLanguage(langs: LanguageCapability[], languageId: string, fileName?: string): string | undefined {
  const id = ALIASES[languageId] ?? languageId;
  const byId = langs.find((l) => l.id === id || l.id === languageId);
  if (byId?.available) return byId.id;
  const exts = [fileName ? extensionOf(fileName) : "", LANGUAGE_ID_EXTENSIONS[languageId] ?? ""].filter((x) => x !== "");
  const matches = (l: LanguageCapability, exact: boolean) =>
    exts.some((x) => l.fileExtensions.some((e) => (exact ? e === x : e.toLowerCase() === x.toLowerCase())));
  for (const exact of [true, false]) {
    const found = langs.filter((l) => matches(l, exact)).sort((a, b) => rank(a) - rank(b))[0];
    if (found && (found.available || !byId)) return found.id;
  }
  return byId?.id;
}

/** The capability of a language id, if the daemon lists it. */
export function capabilityOf(langs: LanguageCapability[], id: string): LanguageCapability | undefined {
  return langs.find((l) => l.id === id);
}

/** Whether a language's kernels answer method (languages[].unsupported, PROTOCOL.md §8). */
export function supports(langs: LanguageCapability[], id: string, method: RequestMethod): boolean {
  return !capabilityOf(langs, id)?.unsupported?.includes(method);
}

/** A short name for a language: `python`, or a Jupyter kernel's display name (`R (Jupyter)`). */
export function languageLabel(langs: LanguageCapability[], id: string): string {
  const l = capabilityOf(langs, id);
  return l && isJupyter(id) ? `${l.displayName} (Jupyter)` : id;
}

/** What a user can do with a kernel, for messages: "list variables". */
const ACTIONS: Partial<Record<RequestMethod | "kernel/inputRequest", string>> = {
  "kernel/variables": "list variables",
  "kernel/complete": "complete code",
  "kernel/inspect": "show documentation",
  "kernel/isComplete": "tell whether code is complete",
  "kernel/interrupt": "be interrupted",
  "kernel/restart": "be restarted",
  "kernel/history": "list its history",
  "kernel/inputRequest": "read input",
};

/** "This kernel (R (Jupyter)) cannot list variables." */
export function unsupportedMessage(langs: LanguageCapability[], id: string, method: RequestMethod): string {
  return `This kernel (${languageLabel(langs, id)}) cannot ${ACTIONS[method] ?? `answer ${method}`}.`;
}

/** The VS Code languageIds the available languages run (for the notebook controller). */
export function vscodeLanguageIds(langs: LanguageCapability[]): string[] {
  const out = new Set<string>();
  const reverse = new Map(Object.entries(LANGUAGE_ID_EXTENSIONS).map(([id, ext]) => [ext, id]));
  for (const l of langs) {
    if (!l.available) continue;
    if (!isJupyter(l.id)) out.add(l.id === "bash" ? "shellscript" : l.id);
    for (const e of l.fileExtensions) {
      const id = reverse.get(e.toLowerCase());
      if (id) out.add(id);
    }
  }
  return [...out];
}

/** An entry of the kernel picker for a new kernel. */
export interface KernelChoice {
  /**
   * "cellbox" for cellbox's own languages, "jupyter" for installed Jupyter kernels,
   * "interpreter" for the host's other interpreters of a language.
   */
  group: "cellbox" | "jupyter" | "interpreter";
  language: string;
  /** kernel/start's interpreter (group "interpreter"). */
  interpreter?: string;
  label: string;
  description: string;
  detail?: string;
}

/** The groups of the kernel picker, in order, with their titles. */
export const CHOICE_GROUPS: { group: KernelChoice["group"]; title: string }[] = [
  { group: "cellbox", title: "cellbox kernels (sandboxed)" },
  { group: "jupyter", title: "Jupyter kernels (sandboxed)" },
  { group: "interpreter", title: "Other interpreters of this host (sandboxed)" },
];

/**
 * The picker's new-kernel entries: every available language, cellbox's own first; then the
 * host's interpreters that a language's kernel would not run anyway (as notebookKernelSpecs).
 */
export function kernelChoices(langs: LanguageCapability[], interpreters: InterpreterInfo[] = [], defaults: InterpreterInfo[] = []): KernelChoice[] {
  const own = langs
    .filter((l) => l.available)
    .map((l): KernelChoice => {
      const jupyter = isJupyter(l.id);
      const cannot = (l.unsupported ?? []).map((m) => ACTIONS[m as RequestMethod] ?? m);
      return {
        group: jupyter ? "jupyter" : "cellbox",
        language: l.id,
        label: `New ${l.displayName} kernel`,
        description: jupyter ? `Jupyter kernel (sandboxed) · ${l.id}` : [l.version, l.id].filter(Boolean).join(" · "),
        detail: cannot.length ? `cannot ${cannot.join(", ")}` : undefined,
      };
    })
    .sort((a, b) => (a.group === b.group ? 0 : a.group === "cellbox" ? -1 : 1));
  const others = notebookKernelSpecs(langs, interpreters, defaults)
    .specs.filter((x) => x.interpreter)
    .map((x): KernelChoice => ({ group: "interpreter", language: x.language, interpreter: x.interpreter, label: `New ${x.label} kernel`, description: x.description.replace(/^cellbox \(sandboxed\) · /, ""), detail: x.detail }));
  return [...own, ...others];
}

/**
 * A notebook controller's kernel (VS Code's kernel picker): a language of initialize's list, or
 * one of the host's interpreters of a language (capabilities.interpreters: pyenv's, uv's, nvm's
 * versions, the system's), started with kernel/start's interpreter.
 */
export interface NotebookKernelSpec {
  /** Stable within a daemon: the language id, or `language@interpreter-path`. */
  key: string;
  language: string;
  /** kernel/start's interpreter (an absolute host path). */
  interpreter?: string;
  label: string;
  description: string;
  detail?: string;
  /** The VS Code languageIds of its cells; empty: any. */
  cellLanguages: string[];
}

/** The key of a kernel spec: what a notebook's kernel was started for. */
export function specKey(language: string, interpreter?: string): string {
  return interpreter ? `${language}@${interpreter}` : language;
}

/** "pyenv 3.12.1", "the host's", "the project's .venv". */
function interpreterSource(i: InterpreterInfo): string {
  switch (i.source) {
    case "system":
      return "the host's";
    case "venv":
      return "the project's virtual environment";
    case "version-file":
      return "the project's version file";
    default:
      return i.source;
  }
}

/**
 * The kernel picker's entries for notebooks: every available language of initialize (cellbox's
 * own, then Jupyter kernels), then every interpreter the host has that a kernel of its language
 * would not run anyway (defaults: workspace/open's interpreters, the one each language runs in
 * this workspace; without them, the system's). A language that is not available is left out,
 * with a line for the log saying why (leftOut): picking it could only fail.
 */
export function notebookKernelSpecs(langs: LanguageCapability[], interpreters: InterpreterInfo[] = [], defaults: InterpreterInfo[] = []): { specs: NotebookKernelSpec[]; leftOut: string[] } {
  const specs: NotebookKernelSpec[] = [];
  const leftOut: string[] = [];
  const cannot = (l: LanguageCapability) => {
    const list = (l.unsupported ?? []).map((m) => ACTIONS[m as RequestMethod] ?? m);
    return list.length ? `cannot ${list.join(", ")}` : undefined;
  };
  const ordered = [...langs].sort((a, b) => rank(a) - rank(b));
  for (const l of ordered) {
    if (!l.available) {
      leftOut.push(`notebook kernels: ${l.id} (${l.displayName}) is not offered: ${l.reason || "not available on this host"}`);
      continue;
    }
    const def = defaults.find((d) => d.language === l.id);
    const runs = def && def.source !== "system" ? ` · ${interpreterSource(def)}` : "";
    specs.push({
      key: specKey(l.id),
      language: l.id,
      label: isJupyter(l.id) ? l.displayName : [l.displayName, l.version].filter(Boolean).join(" "),
      description: isJupyter(l.id) ? `Jupyter kernel in cellbox's sandbox · ${l.id}` : `cellbox (sandboxed)${runs}`,
      detail: cannot(l),
      cellLanguages: vscodeLanguageIds([l]),
    });
  }
  for (const i of interpreters) {
    const l = i.language ? capabilityOf(langs, i.language) : undefined;
    if (!l || !l.available || isJupyter(l.id) || !i.path) continue;
    // The language's own entry runs the workspace's default (else the system's): no second entry.
    const def = defaults.find((d) => d.language === l.id);
    if (def ? def.path === i.path : i.source === "system") continue;
    if (specs.some((s) => s.key === specKey(l.id, i.path))) continue;
    specs.push({
      key: specKey(l.id, i.path),
      language: l.id,
      interpreter: i.path,
      label: [l.displayName, i.version].filter(Boolean).join(" "),
      description: `cellbox (sandboxed) · ${interpreterSource(i)} · ${i.path}`,
      detail: cannot(l),
      cellLanguages: vscodeLanguageIds([l]),
    });
  }
  return { specs, leftOut };
}
