#!/usr/bin/env bash
# Pulls of one image with settings taken in turn, for an A/B comparison on a noisy machine: each
# round runs every setting once, and the report is each setting's time against the first's in the
# same round (median and min-max of those ratios), not against a figure from another hour.
#
#   bash bench/pull-ab.sh REF ROUNDS NAME=ENV[,ENV...] [NAME=ENV...]
#   bash bench/pull-ab.sh 127.0.0.1:5000/bench/many-files:TAG 6 base=FASTPULL_IDLE_GC=1 nogc=FASTPULL_IDLE_GC=0
#
# A setting is environment variables for the pull (NAME= alone: none); FASTPULL_AB_CLI=PATH in a
# setting runs that build's launch.cjs instead of this checkout's (a second worktree, built, for the
# build before a change), and FASTPULL_AB_ARGS='FLAGS' adds flags to its `fastpull pull` (split at
# spaces: two='FASTPULL_AB_ARGS=--unpack-concurrency 2'). Each pull goes into a fresh store under a
# temporary directory, with the page cache dropped before it (as root), and the stores stay until
# the end: removing a tree of many files makes the next files created on the same filesystem
# several times as dear for a while (ext4 looks at each recently freed inode; 1.3-1.9 s of the
# writer threads' CPU against 0.45-0.65 s on the many-files image, 2-core VM), which would fall on
# whichever setting runs next. They are removed
# at the exit; wait a minute or two before measuring anything else. Prints per run: wall, user and
# system CPU, peak RSS; then per setting the median wall time and CPU, and the ratios to the first
# setting. The reference is pulled with --plain-http: serve it from a loopback registry (`pnpm bench`
# leaves one configured under bench/.cache/registry).
set -euo pipefail
if [ $# -lt 3 ]; then sed -n '6,7p' "$0" >&2; exit 2; fi
ref=$1
rounds=$2
shift 2
here=$(cd "$(dirname "$0")/.." && pwd)
default_cli=$here/packages/cli/dist/launch.cjs
work=$(mktemp -d "${TMPDIR:-/tmp}/fastpull-ab.XXXXXX")
trap 'rm -rf "$work"' EXIT
names=()
for setting in "$@"; do names+=("${setting%%=*}"); done
for ((round = 1; round <= rounds; round++)); do
  for setting in "$@"; do
    name=${setting%%=*}
    envs=${setting#*=}
    vars=()
    [ -n "$envs" ] && IFS=, read -r -a vars <<< "$envs"
    cli=$default_cli
    flags=()
    for v in "${vars[@]}"; do
      [[ $v == FASTPULL_AB_CLI=* ]] && cli=${v#FASTPULL_AB_CLI=}
      [[ $v == FASTPULL_AB_ARGS=* ]] && read -r -a flags <<< "${v#FASTPULL_AB_ARGS=}"
    done
    [ -f "$cli" ] || { echo "pull-ab: $cli is missing (pnpm build)" >&2; exit 1; }
    root=$work/stores/$name-$round
    sync
    if [ -w /proc/sys/vm/drop_caches ]; then echo 3 > /proc/sys/vm/drop_caches; fi
    env "${vars[@]}" /usr/bin/time -f '%e %U %S %M' -o "$work/time" \
      node "$cli" pull --plain-http "${flags[@]}" --root "$root" "$ref" > /dev/null 2> "$work/err" \
      || { cat "$work/err" >&2; exit 1; }
    read -r wall user sys rss < "$work/time"
    printf '%s round %d: %s s (user %s s, system %s s, peak RSS %d MiB)\n' "$name" "$round" "$wall" "$user" "$sys" $((rss / 1024))
    echo "$round $name $wall $user $sys" >> "$work/runs"
  done
done
awk -v first="${names[0]}" '
  function median(list, n,   i, j, t, a) {
    n = split(list, a, " ")
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  function minmax(list,   n, i, a, lo, hi) {
    n = split(list, a, " "); lo = hi = a[1]
    for (i = 2; i <= n; i++) { if (a[i] + 0 < lo + 0) lo = a[i]; if (a[i] + 0 > hi + 0) hi = a[i] }
    return sprintf("%.2f-%.2f", lo, hi)
  }
  { wall[$1, $2] = $3; cpu[$1, $2] = $4 + $5; rounds[$1] = 1; if (!($2 in seen)) { seen[$2] = 1; order[++k] = $2 } }
  END {
    for (s = 1; s <= k; s++) {
      n = order[s]; walls = cpus = wr = cr = ""
      for (r in rounds) {
        walls = walls " " wall[r, n]; cpus = cpus " " cpu[r, n]
        wr = wr " " sprintf("%.3f", wall[r, n] / wall[r, first]); cr = cr " " sprintf("%.3f", cpu[r, n] / cpu[r, first])
      }
      printf "%s: wall %.2f s, CPU %.2f s (medians)", n, median(walls), median(cpus)
      if (n != first) printf "; against %s: wall %.2fx (%s), CPU %.2fx (%s)", first, median(wr), minmax(wr), median(cr), minmax(cr)
      printf "\n"
    }
  }' "$work/runs"
