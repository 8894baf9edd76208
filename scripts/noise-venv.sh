#!/usr/bin/env bash
# Creates the Python virtual environment with the `noiseprotocol` package (from PyPI) that
# NoiseInteropTests runs as an independent Noise implementation against a real node, when it is
# missing: `scripts/noise-venv.sh [DIR]` (default .build/noise-venv). Quick and silent when present.
# `make test` runs it and passes DIR/bin/python to the tests as HUDDLE_NOISE_PYTHON.
# Fails (exit 1, with the reason) when the environment cannot be made: the tests must not skip it.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/python-venv.sh
# Pinned: the versions the interop test was written against (noiseprotocol's last release).
python_venv "${1:-.build/noise-venv}" noiseprotocol \
  'from noise.connection import NoiseConnection, Keypair; NoiseConnection.from_name(b"Noise_XXpsk0_25519_ChaChaPoly_BLAKE2b")' \
  noiseprotocol==0.3.1 cryptography==50.0.2
