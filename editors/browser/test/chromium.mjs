// Debian's chromium (headless) with playwright-core, set up once for every
// page test file: a fresh profile, the page's console errors collected, and
// where screenshots go ($CELLBOX_ARTIFACTS; run.sh: artifacts/browser/ at
// the repository root).
import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";

export const artifacts = process.env.CELLBOX_ARTIFACTS ?? join(tmpdir(), "cellbox-browser-artifacts");
mkdirSync(artifacts, { recursive: true });
const executablePath = process.env.CHROMIUM ?? "/usr/bin/chromium";
const flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"];

/** Pushes a page's console errors and uncaught exceptions into errors. */
export function collectErrors(page, errors) {
  page.on("console", (m) => m.type() === "error" && errors.push(m.text()));
  page.on("pageerror", (e) => errors.push(String(e)));
}

/**
 * launchChromium starts chromium with a fresh profile (a persistent context:
 * --user-data-dir is the profile) and its first page, whose console errors go
 * to consoleErrors. options are playwright's (viewport, acceptDownloads).
 */
export async function launchChromium(options = {}) {
  assert.ok(existsSync(executablePath), `${executablePath} missing: apt-get install chromium`);
  const profile = mkdtempSync(join(tmpdir(), "cellbox-chromium-"));
  const context = await chromium.launchPersistentContext(profile, { executablePath, headless: true, args: flags, viewport: { width: 1400, height: 900 }, ...options });
  const page = context.pages()[0] ?? (await context.newPage());
  const consoleErrors = [];
  collectErrors(page, consoleErrors);
  return {
    context,
    page,
    consoleErrors,
    async close() {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}
