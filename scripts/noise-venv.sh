#!/usr/bin/env bash
# Creates the Python virtual environment with the `noiseprotocol` package (from PyPI) that
# NoiseInteropTests runs as an independent Noise implementation against a real node, when it is
# missing: `scripts/noise-venv.sh [DIR]` (default .build/noise-venv). Quick and silent when present.
# `make test` runs it and passes DIR/bin/python to the tests as HUDDLE_NOISE_PYTHON.
# Fails (exit 1, with the reason) when the environment cannot be made: the tests must not skip it.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${1:-.build/noise-venv}
python=${HUDDLE_SYSTEM_PYTHON:-python3}
# Pinned: the versions the interop test was written against (noiseprotocol's last release).
packages=(noiseprotocol==0.3.1 cryptography==50.0.2)

check() { "$venv/bin/python" -c 'from noise.connection import NoiseConnection, Keypair; NoiseConnection.from_name(b"Noise_XXpsk0_25519_ChaChaPoly_BLAKE2b")' 2>/dev/null; }

if [ -x "$venv/bin/python" ] && check; then
  echo "deps: noiseprotocol present in $venv"
  exit 0
fi

echo "deps: creating $venv with ${packages[*]}"
if ! "$python" -m venv --clear "$venv" 2>/dev/null; then
  # Debian's own python3 needs python3-venv for `-m venv` (pyenv's and python.org's have it built in).
  if [ "$(id -u)" -eq 0 ]; then sudo=""; elif command -v sudo >/dev/null; then sudo="sudo"; else
    echo "deps: '$python -m venv' failed and not root: install python3-venv" >&2; exit 1
  fi
  echo "deps: '$python -m venv' failed: installing python3-venv"
  $sudo apt-get update -qq || true
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
  "$python" -m venv --clear "$venv" || { echo "deps: could not create a virtual environment with $python" >&2; exit 1; }
fi
if ! "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "${packages[@]}"; then
  echo "deps: could not install ${packages[*]} into $venv (needs PyPI)" >&2
  exit 1
fi
if ! check; then
  echo "deps: $venv has noiseprotocol but it does not load Noise_XXpsk0_25519_ChaChaPoly_BLAKE2b" >&2
  exit 1
fi
echo "deps: installed noiseprotocol into $venv"
