// A small .gitignore matcher for the project tree (gitignore(5)): the tree
// dims and folds what the project ignores. The daemon decides what
// workspace/changes hides with git itself (`git check-ignore`); this only
// shapes the tree, so a pattern it reads differently costs a row's colour,
// never a change.
//
// What it does: comments, blank lines, trailing spaces (unless escaped),
// `!` negation, a trailing `/` for directories only, a `/` at the start or
// in the middle anchoring the pattern to its .gitignore's directory, `*`,
// `?`, `[...]` classes (`[!...]` too), `**/` leading, `/**` trailing and
// `/**/` in the middle, backslash escapes. Rules of deeper .gitignore files
// come after those of their parents, and the last rule that matches wins.
// A path inside an ignored directory is ignored (git does not look inside
// it, so no `!` brings it back): the tree inherits that from the parent row.

export interface IgnoreRule {
  /** The directory of the .gitignore, relative to the workspace ("" for the root). */
  base: string;
  negate: boolean;
  dirOnly: boolean;
  re: RegExp;
  /** The line as written (for tooltips). */
  source: string;
}

/** The rules of one .gitignore file (or .git/info/exclude, with base ""). */
export function parseGitignore(text: string, base: string): IgnoreRule[] {
  const rules: IgnoreRule[] = [];
  for (const raw of text.split(/\r?\n/)) {
    let line = raw;
    if (!line || line.startsWith("#")) continue;
    // Trailing spaces go, unless the last one is escaped.
    line = line.replace(/(?<!\\)\s+$/, "");
    if (line.endsWith("\\ ")) line = line.slice(0, -2) + " ";
    if (!line) continue;
    let negate = false;
    if (line.startsWith("!")) {
      negate = true;
      line = line.slice(1);
    } else if (line.startsWith("\\!") || line.startsWith("\\#")) {
      line = line.slice(1);
    }
    let dirOnly = false;
    if (line.endsWith("/") && !line.endsWith("\\/")) {
      dirOnly = true;
      line = line.replace(/\/+$/, "");
    }
    if (!line) continue;
    const anchored = line.includes("/");
    if (line.startsWith("/")) line = line.slice(1);
    const body = globToRegExp(line);
    if (body === undefined) continue;
    rules.push({ base, negate, dirOnly, re: new RegExp(anchored ? `^${body}$` : `(?:^|/)${body}$`), source: raw.trim() });
  }
  return rules;
}

/** The regular expression of a glob (no anchors); undefined for a pattern it cannot read. */
function globToRegExp(glob: string): string | undefined {
  let out = "";
  let i = 0;
  while (i < glob.length) {
    const c = glob[i];
    if (c === "*") {
      if (glob[i + 1] === "*") {
        const before = i === 0 || glob[i - 1] === "/";
        let j = i;
        while (glob[j] === "*") j++;
        const after = j === glob.length || glob[j] === "/";
        if (before && after) {
          if (j === glob.length) {
            // "**" at the end: everything inside (at least one character).
            out += ".+";
            i = j;
          } else {
            // "**/": zero or more directories.
            out += "(?:.*/)?";
            i = j + 1;
          }
          continue;
        }
        // Other runs of stars are one star.
        out += "[^/]*";
        i = j;
        continue;
      }
      out += "[^/]*";
    } else if (c === "?") {
      out += "[^/]";
    } else if (c === "\\") {
      i++;
      if (i < glob.length) out += escapeRe(glob[i]);
    } else if (c === "[") {
      const end = glob.indexOf("]", i + 2);
      if (end < 0) {
        out += "\\[";
      } else {
        let cls = glob.slice(i + 1, end);
        let neg = false;
        if (cls.startsWith("!") || cls.startsWith("^")) {
          neg = true;
          cls = cls.slice(1);
        }
        cls = cls.replace(/[\\\]^]/g, "\\$&");
        out += `[${neg ? "^/" : ""}${cls}]`;
        i = end;
      }
    } else {
      out += escapeRe(c);
    }
    i++;
  }
  return out;
}

function escapeRe(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");
}

/**
 * Whether the rules ignore a path (relative to the workspace): the last rule
 * that matches decides; undefined when none matches. Rules must come in
 * order: a parent directory's before its children's.
 */
export function matchIgnore(rules: IgnoreRule[], path: string, isDir: boolean): IgnoreRule | undefined {
  let hit: IgnoreRule | undefined;
  for (const r of rules) {
    if (r.dirOnly && !isDir) continue;
    let rel = path;
    if (r.base) {
      if (!path.startsWith(r.base + "/")) continue;
      rel = path.slice(r.base.length + 1);
    }
    if (r.re.test(rel)) hit = r;
  }
  return hit;
}
