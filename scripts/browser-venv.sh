#!/usr/bin/env bash
# Makes what the DrawTogether browser test (Tests/browser/drawtogether_browser.py) needs, when it is
# missing: Debian's `chromium` and `chromium-driver` (apt), and a Python virtual environment with
# Selenium and Pillow from PyPI: `scripts/browser-venv.sh [DIR]` (default .build/browser-venv).
# Quick and silent when present. `make test` runs it and passes DIR/bin/python to the tests as
# HUDDLE_BROWSER_PYTHON. Fails (exit 1, with the reason) when something cannot be installed:
# the browser test must not skip.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${1:-.build/browser-venv}
# Pinned: the versions the test was written against.
packages=(selenium==4.51.0 pillow==13.0.0)

if [ "$(id -u)" -eq 0 ]; then sudo=""; elif command -v sudo >/dev/null; then sudo="sudo"; else sudo="none"; fi
apt_install() {
  if [ "$sudo" = "none" ]; then echo "deps: missing $* and not root: install them with apt-get" >&2; exit 1; fi
  echo "deps: installing $*"
  $sudo apt-get update -qq || true
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null || { echo "deps: could not install $*" >&2; exit 1; }
}

missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v chromedriver >/dev/null 2>&1 || missing+=(chromium-driver)
if [ ${#missing[@]} -gt 0 ]; then apt_install "${missing[@]}"; fi

source scripts/python-venv.sh
python_venv "$venv" "selenium and pillow" 'import selenium, PIL; from selenium.webdriver.chrome.service import Service' "${packages[@]}"
