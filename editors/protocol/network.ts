// What both TypeScript clients (the VS Code extension and the browser IDE) say about a workspace's
// network and packages (PROTOCOL.md §9), written once. Hand-written, beside the generated
// protocol.ts.
import type { NetworkBlockedParams, WorkspaceInstallResult } from "./protocol";

/** The rule that allows a blocked connection: the daemon's `rule`, else host:port. */
export function ruleFor(p: Pick<NetworkBlockedParams, "host" | "port" | "rule">): string {
  if (p.rule) return p.rule;
  const host = p.host.includes(":") && !p.host.startsWith("[") ? `[${p.host}]` : p.host;
  return p.port ? `${host}:${p.port}` : host;
}

/** "1.2 MB", "340 kB", "12 B". */
export function formatBytes(n: number): string {
  if (n < 1000) return `${n} B`;
  if (n < 1e6) return `${(n / 1e3).toFixed(n < 1e4 ? 1 : 0)} kB`;
  if (n < 1e9) return `${(n / 1e6).toFixed(1)} MB`;
  return `${(n / 1e9).toFixed(1)} GB`;
}

/** "installed requests 2.31.0, urllib3 2.0.7 (3 from cache, 1.2 MB downloaded, 2.1 s)" */
export function installMessage(r: WorkspaceInstallResult): string {
  const names = r.installed.map((p) => `${p.name} ${p.version}`.trim()).join(", ");
  return `installed ${names || "nothing new"} (${r.cacheHits} from cache, ${formatBytes(r.downloadedBytes)} downloaded, ${(r.durationMs / 1000).toFixed(1)} s)`;
}
