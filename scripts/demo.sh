#!/usr/bin/env bash
# The main job on an embedded default: builds fastpull, serves a sample multi-layer image from a
# real registry on loopback, pulls and unpacks it, and prints where it landed.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
exec node scripts/demo.mjs "$@"
