#!/usr/bin/env bash
# Installs what fastpull's build, demo and tests need on a fresh Debian machine with Node.js 20:
# the CNCF distribution registry (Debian package docker-registry), pnpm 10 and the workspace's
# dependencies, then builds everything. Safe to run again: it skips what is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
    echo "bootstrap: need root (or sudo) to run: $*" >&2; return 1; fi
}

# Debian packages: docker-registry (the CNCF distribution registry the tests and the demo pull from),
# isal (igzip, the external ISA-L gunzip, `--inflater igzip`), libisal-dev (ISA-L's library and
# headers: the native build links the in-process ISA-L gunzip, `--inflater isal`, against it), zstd
# (the zstd decoder, and the tests' zstd encoder), pigz (the parallel gunzip tests decode its
# streams), umoci (the reference unpacker the parity test compares against), openssl (the TLS test
# makes its certificate with it), tinyproxy (the proxy tests pull through it on loopback),
# python3-grpcio and python3-grpc-tools (the daemon's Python client test generates stubs from the
# .proto and calls fastpulld with them).
missing=()
[ -x /usr/bin/docker-registry ] || command -v registry >/dev/null || missing+=(docker-registry)
[ -x /usr/bin/igzip ] || missing+=(isal)
[ -f /usr/include/isa-l/igzip_lib.h ] || missing+=(libisal-dev)
[ -x /usr/bin/zstd ] || missing+=(zstd)
command -v pigz >/dev/null || missing+=(pigz)
command -v openssl >/dev/null || missing+=(openssl)
command -v umoci >/dev/null || missing+=(umoci)
[ -x /usr/bin/tinyproxy ] || command -v tinyproxy >/dev/null || missing+=(tinyproxy)
if [ ${#missing[@]} -gt 0 ]; then
  echo "bootstrap: installing ${missing[*]}"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# Optional: without them only the Python client test skips.
if ! /usr/bin/python3 -c 'import grpc, grpc_tools.protoc' 2>/dev/null; then
  echo "bootstrap: installing python3-grpcio python3-grpc-tools"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-grpcio python3-grpc-tools >/dev/null ||
    echo "bootstrap: python3-grpcio is not installable here; the daemon's Python client test will skip" >&2
fi

# Optional: containerd 1.6 and runc (the containerd snapshotter tests start a private containerd),
# busybox-static (a runnable test image) and strace (the durability test checks flush order with it).
# Without them those tests skip with the reason printed.
optional=()
command -v containerd >/dev/null || optional+=(containerd)
command -v runc >/dev/null || optional+=(runc)
[ -x /bin/busybox ] || optional+=(busybox-static)
command -v strace >/dev/null || optional+=(strace)
if [ ${#optional[@]} -gt 0 ]; then
  echo "bootstrap: installing ${optional[*]}"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${optional[@]}" >/dev/null ||
    echo "bootstrap: could not install ${optional[*]}; the containerd and durability tests will skip" >&2
fi

# pnpm 11 and later crash on Node 20: pin 10.
if ! command -v pnpm >/dev/null || ! pnpm --version 2>/dev/null | grep -q '^10\.'; then
  echo "bootstrap: installing pnpm 10"
  npm install -g --no-fund --no-audit pnpm@10 >/dev/null 2>&1 || as_root npm install -g --no-fund --no-audit pnpm@10 >/dev/null
fi

pnpm install --frozen-lockfile --reporter=silent
pnpm run build
