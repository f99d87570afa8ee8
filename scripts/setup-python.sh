#!/usr/bin/env bash
# Creates .venv with torch (the runner's Python for the harness) unless it is already there.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if ! .venv/bin/python -c "import torch, ninja" >/dev/null 2>&1; then
  echo "==> creating .venv with torch (one-time, about a minute)"
  "$PY" -m venv .venv
  .venv/bin/pip install --quiet --upgrade pip
  .venv/bin/pip install --quiet torch numpy ninja
fi
.venv/bin/python -c "import torch; print('==> python', torch.__version__, 'cuda' if torch.cuda.is_available() else 'cpu')"
