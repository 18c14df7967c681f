#!/usr/bin/env bash
# Runs every test of the workspace after installing and building what they need.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
# Test files are outside the build: type-check them too, so they cannot rot unnoticed.
pnpm run typecheck
report="$(mktemp -d)/vitest.json"
status=0
pnpm exec vitest run --reporter=default --reporter=json --outputFile.json="$report" "$@" || status=$?
if [ -s "$report" ]; then
  node -e '
    const r = JSON.parse(require("node:fs").readFileSync(process.argv[1], "utf8"));
    const skipped = r.numPendingTests + r.numTodoTests;
    console.log(`${r.numPassedTests} passed, ${r.numFailedTests} failed, ${skipped} skipped`);
  ' "$report"
fi
exit $status
