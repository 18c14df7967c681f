#!/usr/bin/env bash
# Installs what the peers benchmark (src/peers.ts) runs besides fastpull, from Debian: the peers
# (containerd, skopeo, umoci), the limit's tools (isal for igzip, pigz, zstd, openssl, curl) and GNU
# time. Run as root; `pnpm bench` calls it when something is missing (BENCH_SETUP=0 to stop that).
set -euo pipefail
pkgs=(containerd skopeo umoci isal pigz zstd openssl curl time tar gzip docker-registry)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then echo "bench/setup.sh: all present"; exit 0; fi
if [ "$(id -u)" != 0 ]; then echo "bench/setup.sh: run as root to install: ${missing[*]}" >&2; exit 1; fi
export DEBIAN_FRONTEND=noninteractive
apt-get install -y --no-install-recommends "${missing[@]}" || { apt-get update && apt-get install -y --no-install-recommends "${missing[@]}"; }
