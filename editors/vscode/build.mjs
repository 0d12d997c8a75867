// Bundles the extension into dist/extension.js (CommonJS, `vscode` external) with esbuild.
import { build } from "esbuild";
await build({
  entryPoints: ["src/extension.ts"],
  bundle: true,
  platform: "node",
  format: "cjs",
  target: "node18",
  external: ["vscode", "bufferutil", "utf-8-validate"],
  outfile: "dist/extension.js",
  sourcemap: true,
  logLevel: "warning",
});
