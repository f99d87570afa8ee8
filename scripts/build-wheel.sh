#!/usr/bin/env bash
# Builds the kernelgate wheel into target/wheels/ (or $KG_WHEEL_OUT): the `kernelgate` CLI as
# the package's script, the harness extension (module kernelgate_harness, abi3) inside.
#   bash scripts/build-wheel.sh                      # release profile
#   KG_WHEEL_PROFILE=dev bash scripts/build-wheel.sh # reuses the debug build (CI's wheel test)
# Needs cargo and maturin (MATURIN=/path/to/maturin, default: maturin on PATH).
set -euo pipefail
cd "$(dirname "$0")/.."
profile="${KG_WHEEL_PROFILE:-release}"
out="${KG_WHEEL_OUT:-target/wheels}"
maturin="${MATURIN:-maturin}"
command -v "$maturin" >/dev/null || {
  echo "error: maturin not found: 'pip install maturin==1.16.0' (or set MATURIN=/path/to/maturin)" >&2
  exit 1
}
export KERNELGATE_COMMIT="${KERNELGATE_COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}"
bash scripts/stage-wheel-cli.sh "$profile"
# abi3: one wheel for every CPython >= 3.9; no interpreter is needed to build it.
PYO3_NO_PYTHON=1 "$maturin" build --locked --profile "$profile" --out "$out" "$@"
