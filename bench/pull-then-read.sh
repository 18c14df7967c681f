#!/usr/bin/env bash
# A pull, then what the container started from it does first: read its large files in full (a model
# load). Compares settings that trade one for the other, such as FASTPULL_DIRECT_WRITES=1, which
# writes large files past the page cache: the pull is cheaper, the first read comes from the device.
#
#   bash bench/pull-then-read.sh REF ROUNDS NAME=ENV[,ENV...] [NAME=ENV...]
#   bash bench/pull-then-read.sh 127.0.0.1:5000/bench/single-fp16:TAG 3 buffered=FASTPULL_DIRECT_WRITES=0 direct=FASTPULL_DIRECT_WRITES=1
#
# Each round runs every setting once, in turn, each into a fresh store under a temporary directory
# (removed after its run), page cache dropped before the pull (as root) and not between the pull and
# the read. Prints per run: pull wall, user and system CPU, peak RSS; the read's wall time, and how
# many files of 100 MiB or more it read. Runs `fastpull` from this checkout (build it first); the
# reference is pulled with --plain-http, so serve it from a loopback registry (`pnpm bench` leaves one
# configured under bench/.cache/registry).
set -euo pipefail
if [ $# -lt 3 ]; then sed -n '6,7p' "$0" >&2; exit 2; fi
ref=$1
rounds=$2
shift 2
here=$(cd "$(dirname "$0")/.." && pwd)
cli=$here/packages/cli/dist/launch.cjs
[ -f "$cli" ] || { echo "pull-then-read: build first (pnpm build): $cli is missing" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/fastpull-pull-read.XXXXXX")
trap 'rm -rf "$work"' EXIT
for ((round = 1; round <= rounds; round++)); do
  for setting in "$@"; do
    name=${setting%%=*}
    envs=${setting#*=}
    root=$work/$name-$round
    sync
    if [ -w /proc/sys/vm/drop_caches ]; then echo 3 > /proc/sys/vm/drop_caches; fi
    IFS=, read -r -a vars <<< "$envs"
    env "${vars[@]}" /usr/bin/time -f '%e %U %S %M' -o "$work/time" \
      node "$cli" pull --plain-http --root "$root" "$ref" > /dev/null 2> "$work/err" \
      || { cat "$work/err" >&2; exit 1; }
    read -r wall user sys rss < "$work/time"
    find "$root" -type f -size +100M -print0 > "$work/files"
    files=$(tr -cd '\0' < "$work/files" | wc -c)
    start=$(date +%s%N)
    xargs -0 -r cat < "$work/files" > /dev/null
    end=$(date +%s%N)
    printf '%s round %d: pull %s s (user %s s, system %s s, peak RSS %d MiB); read %d files in %s s\n' \
      "$name" "$round" "$wall" "$user" "$sys" $((rss / 1024)) "$files" "$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.2f", (b - a) / 1e9 }')"
    rm -rf "$root"
  done
done
