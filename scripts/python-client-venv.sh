#!/usr/bin/env bash
# Makes the Python virtual environment `make python-test` runs the Python client's checks in:
# pytest, mypy and setuptools from PyPI (pinned), and the client (clients/python) installed into it
# as a user installs it: `scripts/python-client-venv.sh [DIR]` (default .build/python-venv).
# The tools are installed once (quick and silent when present); the client is installed again on
# every run, from a copy of its source, so the tests always import the working tree's client and
# the tree gets no build/ or *.egg-info directories. Installing it needs nothing from the network
# (--no-build-isolation: the venv's own setuptools builds it).
# `make test` runs it, then `make python-test`'s commands with DIR/bin/pytest and DIR/bin/mypy.
# Fails (exit 1, with the reason) when the environment cannot be made: the tests must not skip.
# (scripts/python-venv.sh is the helper every *-venv.sh script sources.)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/python-venv.sh
venv=${1:-.build/python-venv}
# Pinned: the versions the client's tests and type checks were written against.
python_venv "$venv" "pytest, mypy and setuptools" \
  'import pytest, mypy.version, setuptools; assert (pytest.__version__, mypy.version.__version__, setuptools.__version__) == ("9.2.0", "2.4.1", "80.9.0")' \
  pytest==9.2.0 mypy==2.4.1 setuptools==80.9.0

copy=$(mktemp -d "${TMPDIR:-/tmp}/huddle-client-XXXXXX")
trap 'rm -rf "$copy"' EXIT
cp clients/python/pyproject.toml clients/python/README.md "$copy/"
cp -R clients/python/src "$copy/src"
find "$copy" \( -name __pycache__ -o -name '*.egg-info' \) -prune -exec rm -rf {} +
if ! "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation \
     --force-reinstall "$copy" >"$copy.log" 2>&1; then
  cat "$copy.log" >&2; rm -f "$copy.log"
  echo "deps: could not install clients/python into $venv" >&2
  exit 1
fi
rm -f "$copy.log"
echo "deps: installed clients/python ($("$venv/bin/python" -c 'import huddle; print(huddle.__version__)')) into $venv"
