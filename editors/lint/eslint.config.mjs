// ESLint for the TypeScript (and build and test JavaScript) of the VS Code extension, the
// browser IDE and their shared generated protocol. editors/lint.sh runs it:
//   cd editors && lint/node_modules/.bin/eslint --config lint/eslint.config.mjs --max-warnings 0 .
// typescript-eslint parses with the `typescript` installed here (6.0): the projects compile
// with TypeScript 7, whose compiler typescript-eslint cannot load yet. The rules need no type
// information, so both projects' code is linted the same way without their tsconfigs.
import js from "@eslint/js";
import { defineConfig } from "eslint/config";
import tseslint from "typescript-eslint";
import globals from "globals";
import { dirname } from "node:path";
import { fileURLToPath } from "node:url";

// Patterns below are relative to editors/, wherever eslint runs from.
const editors = dirname(dirname(fileURLToPath(import.meta.url)));

export default defineConfig(
  {
    basePath: editors,
    ignores: ["**/node_modules/", "**/dist/", "**/out/"],
  },
  js.configs.recommended,
  tseslint.configs.recommended,
  {
    rules: {
      // Unused names are mistakes, except those that say so: _x, and the rest of a
      // destructuring that leaves fields out.
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_", caughtErrors: "none", ignoreRestSiblings: true }],
    },
  },
  {
    // The tests fake VS Code's host objects and read loosely typed JSON: `any` is at home there.
    basePath: editors,
    files: ["*/test/**"],
    rules: { "@typescript-eslint/no-explicit-any": "off" },
  },
  {
    // Node: the extension, the build scripts and the tests that drive the daemon and browsers.
    basePath: editors,
    files: ["vscode/**", "**/*.mjs", "browser/test/**"],
    languageOptions: { globals: { ...globals.node } },
  },
  {
    // The page, and the code playwright evaluates in it.
    basePath: editors,
    files: ["browser/src/**", "browser/client/**", "browser/test/**", "vscode/test/e2e/**"],
    languageOptions: { globals: { ...globals.browser } },
  },
);
