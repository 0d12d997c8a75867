// Which cellbox language runs a notebook, and the kernelspec and
// language_info a notebook gets for its language, so that JupyterLab opens
// it on the matching kernel and this page reads its language back.
import type { InterpreterInfo, LanguageCapability, LanguageInfo } from "../client/client";
import type { JsonObject } from "./ipynb";

/** The prefix of the languages that are the host's Jupyter kernelspecs (PROTOCOL.md §8). */
export const jupyterPrefix = "jupyter:";
export const isJupyter = (id: string) => id.startsWith(jupyterPrefix);

export const isObj = (v: unknown): v is JsonObject => typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * A notebook's language is a cellbox language id ("python", "jupyter:ir"),
 * or LANGUAGE@PATH: that language on one of the host's interpreters
 * (initialize's interpreters: pyenv's, uv's, nvm's...), started with
 * kernel/start's interpreter.
 */
export const baseLanguage = (id: string) => (isJupyter(id) ? id : id.split("@")[0]);
export const interpreterOf = (id: string): string | undefined => (isJupyter(id) || !id.includes("@") ? undefined : id.slice(id.indexOf("@") + 1));

/** Whether a notebook language (an id, or LANGUAGE@PATH) runs here. */
export function available(id: string, languages: LanguageCapability[], interpreters: InterpreterInfo[] = []): boolean {
  const base = baseLanguage(id);
  if (!languages.some((l) => l.id === base && l.available)) return false;
  const path = interpreterOf(id);
  return !path || interpreters.some((i) => i.language === base && i.path === path);
}

/**
 * languageFor picks the cellbox language of a notebook from its metadata:
 * metadata.cellbox.language (what this page saves); else the kernelspec's
 * language when cellbox has it natively (python3 runs on cellbox's python),
 * else the same Jupyter kernel (jupyter:NAME) if the host has it. A
 * notebook without a kernelspec gets the default; undefined: nothing here
 * runs it (the user chooses).
 */
export function languageFor(meta: JsonObject, languages: LanguageCapability[], fallback: string | undefined, interpreters: InterpreterInfo[] = []): string | undefined {
  const avail = (id: string) => available(id, languages, interpreters);
  const cb = isObj(meta.cellbox) ? meta.cellbox.language : undefined;
  const interp = isObj(meta.cellbox) ? meta.cellbox.interpreter : undefined;
  // The interpreter it ran on, when this host has it too; else the language's default one.
  if (typeof cb === "string" && typeof interp === "string" && avail(`${cb}@${interp}`)) return `${cb}@${interp}`;
  if (typeof cb === "string" && avail(cb)) return cb;
  const ks = isObj(meta.kernelspec) ? meta.kernelspec : undefined;
  const li = isObj(meta.language_info) ? meta.language_info : undefined;
  if (!ks && !li) return typeof cb === "string" ? undefined : fallback;
  const name = typeof ks?.name === "string" ? ks.name : "";
  if (name.startsWith("cellbox-") && avail(name.slice("cellbox-".length))) return name.slice("cellbox-".length);
  const lang = String(ks?.language ?? li?.name ?? "").toLowerCase();
  if (lang && avail(lang)) return lang;
  if (name && avail(jupyterPrefix + name)) return jupyterPrefix + name;
  return undefined;
}

/** The default language of a new notebook: python, else the first available. */
export function defaultLanguage(languages: LanguageCapability[]): string | undefined {
  const avail = languages.filter((l) => l.available);
  return (avail.find((l) => l.id === "python") ?? avail.find((l) => !isJupyter(l.id)) ?? avail[0])?.id;
}

/**
 * kernelMetadata is the notebook's metadata with kernelspec, language_info
 * and cellbox.language for language: what JupyterLab needs to pick a kernel
 * (python3 for cellbox's python, the same kernelspec for jupyter:NAME,
 * cellbox-LANGUAGE, as `cellbox jupyter install` names them, otherwise),
 * and what this page reads back. A kernelspec that already means the
 * language is kept as it is.
 */
export function kernelMetadata(meta: JsonObject, id: string, languages: LanguageCapability[], info: LanguageInfo | undefined): JsonObject {
  const language = baseLanguage(id);
  const interpreter = interpreterOf(id);
  const out: JsonObject = { ...meta };
  const cap = languages.find((l) => l.id === language);
  const keep = isObj(meta.kernelspec) && languageFor({ kernelspec: meta.kernelspec }, languages, undefined) === language;
  if (!keep) {
    if (isJupyter(language)) {
      out.kernelspec = { name: language.slice(jupyterPrefix.length), display_name: cap?.displayName ?? language, language: info?.name ?? "" };
    } else if (language === "python") {
      out.kernelspec = { name: "python3", display_name: "Python 3 (ipykernel)", language: "python" };
    } else {
      let display = cap?.displayName ?? language;
      display = display.endsWith(")") && display.includes("(") ? `${display.slice(0, -1)}, cellbox sandbox)` : `${display} (cellbox sandbox)`;
      out.kernelspec = { name: `cellbox-${language}`, display_name: display, language: language === "r" ? "R" : language };
    }
  }
  const li = isObj(meta.language_info) ? meta.language_info : undefined;
  if (info) {
    const same = li && String(li.name ?? "").toLowerCase() === info.name.toLowerCase();
    const extra: JsonObject = info.name === "python" ? { codemirror_mode: { name: "ipython", version: 3 }, nbconvert_exporter: "python", pygments_lexer: "ipython3" } : {};
    out.language_info = { ...extra, ...(same ? li : {}), name: info.name, version: info.version, file_extension: info.fileExtension, mimetype: info.mimetype };
  } else if (!li || !keep) {
    const name = isJupyter(language) ? String((out.kernelspec as JsonObject).language || language.slice(jupyterPrefix.length)) : language;
    if (!li || String(li.name ?? "").toLowerCase() !== name.toLowerCase()) out.language_info = { name };
  }
  const cellbox: JsonObject = { ...(isObj(meta.cellbox) ? meta.cellbox : {}), language };
  if (interpreter) cellbox.interpreter = interpreter;
  else delete cellbox.interpreter;
  out.cellbox = cellbox;
  return out;
}

