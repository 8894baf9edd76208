#!/usr/bin/env bash
# Sourced by scripts/noise-venv.sh and scripts/browser-venv.sh: `python_venv DIR LABEL CHECK PACKAGES…`
# makes the virtual environment DIR with PACKAGES from PyPI unless DIR/bin/python already runs the
# Python code CHECK; LABEL names what it holds in the messages. Installs python3-venv (apt) when
# `python3 -m venv` needs it. Exits 1 with the reason when it cannot: the tests must not skip.
python_venv() {
  local venv=$1 label=$2 check=$3; shift 3
  local python=${HUDDLE_SYSTEM_PYTHON:-python3}
  if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "$check" 2>/dev/null; then
    echo "deps: $label present in $venv"
    return 0
  fi
  echo "deps: creating $venv with $*"
  if ! "$python" -m venv --clear "$venv" 2>/dev/null; then
    # Debian's own python3 needs python3-venv for `-m venv` (pyenv's and python.org's have it built in).
    local sudo
    if [ "$(id -u)" -eq 0 ]; then sudo=""; elif command -v sudo >/dev/null; then sudo="sudo"; else
      echo "deps: '$python -m venv' failed and not root: install python3-venv" >&2; exit 1
    fi
    echo "deps: '$python -m venv' failed: installing python3-venv"
    $sudo apt-get update -qq || true
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
    "$python" -m venv --clear "$venv" || { echo "deps: could not create a virtual environment with $python" >&2; exit 1; }
  fi
  if ! "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$@"; then
    echo "deps: could not install $* into $venv (needs PyPI)" >&2
    exit 1
  fi
  if ! "$venv/bin/python" -c "$check" 2>/dev/null; then
    echo "deps: $venv has $* but the check failed: $check" >&2
    exit 1
  fi
  echo "deps: installed $label into $venv"
}
