#!/usr/bin/env bash
# The test command, and what CI runs (.ci/run): sets up everything the tests need (the system
# programs they run, installed with apt-get where missing; the Python venv with torch; the
# workspace build, including the harness extension) and runs every test, then says which steps
# failed, if any.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cargo >/dev/null || { echo "error: cargo is missing: install a Rust toolchain (https://rustup.rs) and try again" >&2; exit 1; }
# Chromium, jq, a C++ compiler, Python's venv module and headers...: found or installed before
# anything is built; where that cannot be, one line says what is missing and how to install it.
bash scripts/system-packages.sh
# One build per run (CI's case): incremental state would only take disk. CARGO_INCREMENTAL=1 keeps it.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
# The venv (mostly downloads) is set up while cargo compiles (CPU): about a minute and a half
# off a fresh machine's run. Its output is shown when it is done, or when it failed.
mkdir -p target
bash scripts/setup-python.sh >target/setup-python.log 2>&1 &
setup=$!
cargo fetch --locked
# Every target, tests too: the tests' dev-dependencies turn on features of shared crates (tokio,
# hyper, serde_json, ...), and a plain `cargo build` would compile those ~100 crates a second
# time for `cargo test` below (70 s on 2 cores). One feature set: `cargo test` builds nothing.
cargo build --workspace --all-targets --locked
if ! wait "$setup"; then
  cat target/setup-python.log
  echo "error: scripts/setup-python.sh failed (its output is above)" >&2
  exit 1
fi
cat target/setup-python.log
export KERNELGATE_PYTHON="$PWD/.venv/bin/python"
# torch's extension header precompiled once (docs/eval.md): the fixtures' C++ builds read it
# instead of parsing it again (about 60 s -> 24 s each on 2 cores).
export KERNELGATE_PCH_DIR="$PWD/target/kernelgate-pch"
target/debug/kernelgate pch
# Every step runs, and every test binary (--no-fail-fast), whatever failed before: one missing
# tool costs its tests, not the rest of the report. The summary at the end names what failed.
failed=()
step() {
  local name=$1
  shift
  "$@" || failed+=("$name (exit $?)")
}
step "cargo test" cargo test --workspace --locked --no-fail-fast
# The harness's Python: lint, then its unit tests on CPU torch (the job protocol, the memory plan).
step "ruff" .venv/bin/ruff check crates/harness/python
step "ruff format" .venv/bin/ruff format --check crates/harness/python
step "python unittest" .venv/bin/python -m unittest discover -s crates/harness/python/tests
# The wheel (issue #20): built with maturin, installed into a fresh venv, kernelgate eval and pr
# on the demo from the installed package with no cargo on PATH. KERNELGATE_SKIP_WHEEL_TEST=1 skips.
if [ "${KERNELGATE_SKIP_WHEEL_TEST:-0}" != 1 ]; then
  step "wheel test" bash scripts/test-wheel.sh
fi
if [ ${#failed[@]} -gt 0 ]; then
  summary=$(printf '%s, ' "${failed[@]}")
  echo "==> scripts/test.sh: FAILED: ${summary%, }" >&2
  exit 1
fi
echo "==> scripts/test.sh: every step passed"
