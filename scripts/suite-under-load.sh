#!/usr/bin/env bash
# The whole suite, several times in a row, each from a fresh clone of one commit, while busy loops
# hold every core: a test that passes only on an idle machine (a timer used as a barrier, a limit
# too tight for a slow start) fails here. Each run is `.ci/run` as CI runs it.
#
#   bash scripts/suite-under-load.sh [RUNS] [COMMIT]     (defaults: 3 runs of HEAD)
#
# FASTPULL_PEERS (a folder of built peers) is passed on, so the runs need not rebuild them. The
# runs' logs and a summary go to a temporary folder, named at the start; the exit status is 0 only
# when every run passed.
set -uo pipefail
RUNS="${1:-3}"
REPO="$(cd "$(dirname "$0")/.." && pwd)"
COMMIT="$(git -C "$REPO" rev-parse "${2:-HEAD}")"
OUT="$(mktemp -d "${TMPDIR:-/tmp}/fastpull-under-load-XXXXXX")"
echo "suite under load: $RUNS run(s) of $COMMIT, logs in $OUT"

busy=()
for _ in $(seq "$(nproc)"); do
  ( while :; do :; done ) &
  busy+=($!)
done
trap 'kill "${busy[@]}" 2>/dev/null' EXIT

failed=0
for i in $(seq "$RUNS"); do
  clone="$OUT/clone-$i"
  git clone -q "$REPO" "$clone" && git -C "$clone" checkout -q "$COMMIT"
  start=$(date +%s)
  (cd "$clone" && bash .ci/run) > "$OUT/run-$i.log" 2>&1
  rc=$?
  line="run $i: exit $rc in $(( $(date +%s) - start )) s, load $(cut -d' ' -f1-3 /proc/loadavg): $(grep -E '^ +Tests ' "$OUT/run-$i.log" | tail -1 | sed 's/^ *//')"
  echo "$line" | tee -a "$OUT/summary.txt"
  [ "$rc" -eq 0 ] || failed=1
  rm -rf "$clone"
done
exit "$failed"
