#!/usr/bin/env bash
# Installs what Huddle needs from Debian's packages when it is missing: libsodium-dev (crypto),
# libsqlite3-dev (the node's state, through GRDB),
# iproute2 and nftables (the multi-host test suite), prometheus (the metrics test scrapes real
# nodes with it, and checks their output with its promtool); then the peers huddle-bench compares against:
# serf and python3-libtorrent. Needs root (or sudo) only when something is missing.
# `scripts/deps.sh --bench` installs only the benchmark peers (huddle-bench runs it when they are missing).
# A benchmark peer that cannot be installed is a warning, not a failure: huddle-bench then says so.
set -euo pipefail

if [ "$(id -u)" -eq 0 ]; then sudo=""; elif command -v sudo >/dev/null; then sudo="sudo"; else sudo="none"; fi
export DEBIAN_FRONTEND=noninteractive
updated=0

install() { # install <required:0|1> <packages...>
  local required=$1; shift
  if [ "$sudo" = "none" ]; then
    echo "deps: missing $* and not root: install them with apt-get" >&2
    [ "$required" -eq 1 ] && exit 1 || return 0
  fi
  echo "deps: installing $*"
  if [ $updated -eq 0 ]; then $sudo apt-get update -qq || true; updated=1; fi
  if $sudo apt-get install -y -qq "$@" >/dev/null; then
    echo "deps: installed $*"
  elif [ "$required" -eq 1 ]; then
    echo "deps: could not install $*" >&2; exit 1
  else
    echo "deps: warning: could not install $* (huddle-bench will skip those comparisons)" >&2
  fi
}

if [ "${1:-}" != "--bench" ]; then
  missing=()
  pkg-config --exists libsodium 2>/dev/null || missing+=(libsodium-dev pkg-config)
  pkg-config --exists sqlite3 2>/dev/null || missing+=(libsqlite3-dev pkg-config)
  command -v ip >/dev/null 2>&1 || missing+=(iproute2)
  command -v nft >/dev/null 2>&1 || missing+=(nftables)
  { command -v prometheus && command -v promtool; } >/dev/null 2>&1 || missing+=(prometheus)
  if [ ${#missing[@]} -gt 0 ]; then install 1 "${missing[@]}"; fi
  echo "deps: libsodium $(pkg-config --modversion libsodium), sqlite $(pkg-config --modversion sqlite3), iproute2, nftables, prometheus present"
fi

bench=()
command -v serf >/dev/null 2>&1 || bench+=(serf)
/usr/bin/python3 -c 'import libtorrent' >/dev/null 2>&1 || bench+=(python3-libtorrent)
if [ ${#bench[@]} -gt 0 ]; then install 0 "${bench[@]}"; fi
if command -v serf >/dev/null 2>&1 && /usr/bin/python3 -c 'import libtorrent' >/dev/null 2>&1; then
  echo "deps: benchmark peers serf and python3-libtorrent present"
fi
