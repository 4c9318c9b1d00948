// Builds the notebook view (ipykeep/mcp_server/app/notebook.html, shipped in the package) and
// the browser tests' host page (tests/mcp_server/app_host/host.html), each one self-contained
// HTML file, stamped with the hash of the sources they were built from (a test compares it).
import { createHash } from "node:crypto";
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "vite";
import { viteSingleFile } from "vite-plugin-singlefile";

const here = dirname(fileURLToPath(import.meta.url));
const repo = resolve(here, "..");
/** What the built files depend on; tests/mcp_server/test_notebook_app.py hashes the same. */
const SOURCES = ["package.json", "package-lock.json", "build.mjs", "src", "test-host"];

function files(path) {
  if (statSync(path).isDirectory()) return readdirSync(path).flatMap((name) => files(join(path, name)));
  return [path];
}

function sourceHash() {
  const all = SOURCES.flatMap((p) => files(join(here, p))).map((f) => relative(here, f).split("\\").join("/")).sort();
  const digest = createHash("sha256");
  for (const rel of all) {
    const content = createHash("sha256").update(readFileSync(join(here, rel))).digest("hex");
    digest.update(`${rel}\n${content}\n`);
  }
  return digest.digest("hex");
}

const hash = sourceHash();
const stamp = {
  name: "ipykeep-source-stamp",
  transformIndexHtml: (html) => html.replace("<head>", `<head>\n<meta name="ipykeep-app-source" content="${hash}">`),
};

async function bundle(root, page, target) {
  const out = mkdtempSync(join(tmpdir(), "ipykeep-app-"));
  try {
    await build({
      root: join(here, root),
      configFile: false,
      logLevel: "warn",
      base: "./",
      plugins: [viteSingleFile({ removeViteModuleLoader: true }), stamp],
      build: { outDir: out, emptyOutDir: true, rollupOptions: { input: join(here, root, page) }, reportCompressedSize: false },
    });
    mkdirSync(dirname(join(repo, target)), { recursive: true });
    copyFileSync(join(out, page), join(repo, target));
    console.log(`built ${target}`);
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
}

await bundle("src", "notebook.html", "ipykeep/mcp_server/app/notebook.html");
await bundle("test-host", "host.html", "tests/mcp_server/app_host/host.html");
