#!/usr/bin/env bash
# Installs what Huddle needs from Debian's packages when it is missing: libsodium-dev (crypto),
# iproute2 and nftables (the multi-host test suite). Needs root (or sudo) only when something is missing.
set -euo pipefail
missing=()
pkg-config --exists libsodium 2>/dev/null || missing+=(libsodium-dev pkg-config)
command -v ip >/dev/null 2>&1 || missing+=(iproute2)
command -v nft >/dev/null 2>&1 || missing+=(nftables)
if [ ${#missing[@]} -eq 0 ]; then
  echo "deps: libsodium $(pkg-config --modversion libsodium), iproute2, nftables present"
  exit 0
fi
echo "deps: installing ${missing[*]}"
if [ "$(id -u)" -eq 0 ]; then sudo=""; elif command -v sudo >/dev/null; then sudo="sudo"; else
  echo "deps: missing ${missing[*]} and not root: install them with apt-get" >&2; exit 1
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq "${missing[@]}" >/dev/null
echo "deps: installed ${missing[*]}"
