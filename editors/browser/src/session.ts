// Session: what the page keeps in localStorage per workspace, so that a
// reload or a second tab (opened with the URL cellbox printed) finds the
// same notebooks, files and terminals open, and re-attaches to their kernels
// and ptys instead of starting new ones.
export class Session {
  private prefix: string;

  constructor(workspaceId: string) {
    this.prefix = `cellbox:${workspaceId}:`;
  }

  get<T>(key: string, fallback: T): T {
    try {
      const s = localStorage.getItem(this.prefix + key);
      return s === null ? fallback : (JSON.parse(s) as T);
    } catch {
      return fallback;
    }
  }

  set(key: string, value: unknown) {
    try {
      if (value === undefined) localStorage.removeItem(this.prefix + key);
      else localStorage.setItem(this.prefix + key, JSON.stringify(value));
    } catch {
      // Storage full or disabled: the page still works, a reload starts fresh.
    }
  }
}
