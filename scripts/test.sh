#!/usr/bin/env bash
# Runs every test of the workspace after installing and building what they need.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
# What the containerd suites need, which bootstrap installs where it can: here a missing piece fails
# the run, saying what, instead of leaving its tests to skip.
command -v go >/dev/null || [ ! -x /usr/local/go/bin/go ] || export PATH="$PATH:/usr/local/go/bin"
for bin in containerd runc busybox go; do
  command -v "$bin" >/dev/null || { echo "test: $bin is required by the containerd suites and is not installed" >&2; exit 1; }
done
# containerd 1.7, 2.0 and 2.2, crictl, the SOCI snapshotter and cosign from their pinned Go modules
# (scripts/peers/pins.txt); nothing is rebuilt while the pins are unchanged.
bash scripts/peers.sh
# Test files are outside the build: type-check them too, so they cannot rot unnoticed.
pnpm run typecheck
# Lint: the formatting (Prettier, .prettierrc.json; `pnpm run format` applies it), then ESLint's and
# typescript-eslint's type-checked rules (eslint.config.mjs), product and tests.
pnpm run lint
# The import graph keeps the floors of docs/architecture.md and has no cycle (.dependency-cruiser.cjs).
pnpm run depcheck
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
