#!/usr/bin/env bash
# Builds the peers that tests and benchmarks run beside fastpull (containerd 1.7 and 2.2, crictl, the
# SOCI snapshotter, cosign) from their released Go modules, at the versions pinned in
# scripts/peers/pins.txt, into one git-ignored prefix: $FASTPULL_PEERS, default .peers/ in the
# repository. Each peer lands in PREFIX/NAME/bin; a peer whose pin, Go version and recipe are
# unchanged since its last build is not rebuilt.
#
#   bash scripts/peers.sh            # every peer
#   bash scripts/peers.sh NAME...    # only these (names as in pins.txt)
#   bash scripts/peers.sh --list     # NAME VERSION BINDIR of every pin, built or not
#
# Each peer is built inside a small Go module of this repository's own, generated under
# PREFIX/NAME/src, that requires the pinned module: a `go install` of a module whose go.mod carries
# replace directives is refused, and replace directives of a dependency are ignored, so this module
# carries over the upstream module's own replace and exclude directives (those naming other modules).
# Nothing of the peers' source is kept in this repository; a peer built from a program of our own
# (a directory scripts/peers/NAME/) compiles that program against the pinned module.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
pins="$repo/scripts/peers/pins.txt"
prefix="${FASTPULL_PEERS:-$repo/.peers}"

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
    echo "peers: need root (or sudo) to run: $*" >&2; return 1; fi
}
# Go's own installer puts it in /usr/local/go, which a non-login shell's PATH may lack.
command -v go >/dev/null || [ ! -x /usr/local/go/bin/go ] || export PATH="$PATH:/usr/local/go/bin"
command -v go >/dev/null || { echo "peers: the Go toolchain (go) is not on PATH, nor in /usr/local/go/bin" >&2; exit 1; }
export GOFLAGS="-mod=mod -buildvcs=false"
export GOTOOLCHAIN=local
# The btrfs snapshotter (C, needing libbtrfs headers) is left out of containerd.
tags="no_btrfs"

# The recipe: this script and the programs of our own. A change to either rebuilds what it touches.
recipe_hash() { # NAME
  { cat "$0"; if [ -d "$repo/scripts/peers/$1" ]; then cat "$repo/scripts/peers/$1"/*; fi; } | sha256sum | cut -c1-16
}

mapfile -t lines < <(grep -vE '^\s*(#|$)' "$pins")
if [ "${1:-}" = --list ]; then
  for line in "${lines[@]}"; do read -r name module version _ <<<"$line"; echo "$name $version $prefix/$name/bin"; done
  exit 0
fi
wanted=("$@")
selected() { [ ${#wanted[@]} -eq 0 ] && return 0; local w; for w in "${wanted[@]}"; do [ "$w" = "$1" ] && return 0; done; return 1; }
for w in "${wanted[@]}"; do
  grep -qE "^$w\s" "$pins" || { echo "peers: no pin named $w in scripts/peers/pins.txt" >&2; exit 2; }
done

go_version="$(go env GOVERSION)"
total_start=$SECONDS
built=0
for line in "${lines[@]}"; do
  read -r name module version link packages <<<"$line"
  selected "$name" || continue
  dir="$prefix/$name"
  stamp="$name $module $version $link $packages | $go_version | $(recipe_hash "$name")"
  if [ -f "$dir/stamp" ] && [ "$(cat "$dir/stamp")" = "$stamp" ]; then
    echo "peers: $name $version up to date ($dir/bin)"
    continue
  fi
  start=$SECONDS
  echo "peers: building $name $version ($module) with $go_version"
  if [ "$link" = cgo ]; then
    # The module's C code links zlib statically from a directory its own Makefile fills; Debian's
    # static zlib stands in for it.
    export CGO_ENABLED=1 CGO_LDFLAGS="-L/usr/lib/$(gcc -print-multiarch)"
    if [ ! -f /usr/include/zlib.h ]; then
      echo "peers: installing zlib1g-dev (static zlib for $name)"
      as_root apt-get update -qq && as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends zlib1g-dev >/dev/null
    fi
  else
    export CGO_ENABLED=0
    unset CGO_LDFLAGS
  fi
  rm -rf "$dir"
  mkdir -p "$dir/src" "$dir/bin"
  src="$dir/src"
  (
    cd "$src"
    go mod init "fastpull-peers/$name" >/dev/null 2>&1
    go mod edit -go="${go_version#go}"
    own="$repo/scripts/peers/$name"
    [ "$packages" = "." ] && cp "$own"/*.go .
    # The pinned module first, so that its requirements are the build list's floor.
    go get "$module@$version" >/dev/null 2>&1 || go get "$module@$version"
    upstream="$(go list -m -f '{{.GoMod}}' "$module")"
    go mod edit -json "$upstream" | node -e '
      const m = JSON.parse(require("node:fs").readFileSync(0, "utf8"));
      const edits = [];
      for (const r of m.Replace ?? []) if (r.New.Version) edits.push(`-replace=${r.Old.Path}${r.Old.Version ? "@" + r.Old.Version : ""}=${r.New.Path}@${r.New.Version}`);
      for (const e of m.Exclude ?? []) edits.push(`-exclude=${e.Path}@${e.Version}`);
      console.log(edits.join("\n"));
    ' | while read -r edit; do if [ -n "$edit" ]; then go mod edit "$edit"; fi; done
    ldflags="-s -w"
    # Where each module keeps its version string; -X of a symbol a program lacks is ignored.
    for symbol in "$module/version.Version" "sigs.k8s.io/cri-tools/pkg/version.Version" "sigs.k8s.io/release-utils/version.gitVersion"; do
      ldflags="$ldflags -X $symbol=$version"
    done
    if [ "$packages" = "." ]; then
      go mod tidy >/dev/null 2>&1 || go mod tidy
      go build -tags "$tags" -trimpath -ldflags "$ldflags" -o "$dir/bin/$name" .
    else
      for pkg in $packages; do go get -tool "$module/$pkg@$version" >/dev/null 2>&1 || go get -tool "$module/$pkg@$version"; done
      GOBIN="$dir/bin" go install -tags "$tags" -trimpath -ldflags "$ldflags" tool
    fi
  )
  echo "$stamp" >"$dir/stamp"
  built=$((built + 1))
  echo "peers: built $name $version in $((SECONDS - start)) s: $(ls "$dir/bin" | tr '\n' ' ')"
done
echo "peers: $built built, $((SECONDS - total_start)) s in all, in $prefix"
