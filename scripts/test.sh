#!/usr/bin/env bash
# The test command: sets up what the tests need (Python venv with torch, the workspace build,
# including the harness extension) and runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-python.sh
export KERNELGATE_PYTHON="$PWD/.venv/bin/python"
cargo build --workspace --locked
cargo test --workspace --locked
# The harness's Python on CPU torch (its memory decisions).
.venv/bin/python -m unittest discover -s crates/harness/python/tests
