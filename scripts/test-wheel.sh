#!/usr/bin/env bash
# The wheel test (issue #20), run last by scripts/test.sh: builds the kernelgate wheel with
# maturin, installs it into a fresh venv that has torch, and runs `kernelgate eval` and
# `kernelgate pr` on the demo with the installed package's `kernelgate`, with no cargo on PATH.
#   bash scripts/test-wheel.sh                 # after scripts/setup-python.sh (.venv with torch)
#   KERNELGATE_PYTHON=/path/to/python          # the Python with torch (default: .venv/bin/python)
#   KG_WHEEL_PROFILE=release                   # cargo profile of the wheel (default: dev, which
#                                              # reuses most of the test build)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
start=$SECONDS
say() { printf '==> [wheel test %ss] %s\n' "$((SECONDS - start))" "$*"; }
fail() { echo "error: wheel test: $*" >&2; exit 1; }

py="${KERNELGATE_PYTHON:-$root/.venv/bin/python}"
"$py" -c "import torch" 2>/dev/null || fail "$py cannot import torch: run 'bash scripts/setup-python.sh' or set KERNELGATE_PYTHON"
work="$root/target/wheel-test"
mkdir -p "$work"

# maturin from PyPI, pinned, in a tools venv of its own (kept between runs).
maturin_version=1.16.0
tools="$work/tools"
if [ "$("$tools/bin/maturin" --version 2>/dev/null)" != "maturin $maturin_version" ]; then
  say "installing maturin==$maturin_version into $tools"
  rm -rf "$tools"
  "$py" -m venv "$tools"
  "$tools/bin/pip" install --quiet --disable-pip-version-check "maturin==$maturin_version"
fi

say "building the wheel (profile ${KG_WHEEL_PROFILE:-dev})"
rm -rf "$work/dist"
KG_WHEEL_PROFILE="${KG_WHEEL_PROFILE:-dev}" KG_WHEEL_OUT="$work/dist" MATURIN="$tools/bin/maturin" \
  bash scripts/build-wheel.sh 2>&1 | tee "$work/build.log"
# After the test build, the dev-profile wheel compiles only kernelgate (its commit), pyo3 and the
# harness; many more means the harness's feature unification (crates/harness/Cargo.toml) is stale.
compiled=$(grep -c '^ *Compiling ' "$work/build.log" || true)
say "the wheel build compiled $compiled crate(s)"
[ "$compiled" -le 8 ] || echo "warning: the wheel build compiled $compiled crates: see the feature unification in crates/harness/Cargo.toml" >&2
wheel=$(ls "$work"/dist/kernelgate-*-cp39-abi3-*.whl 2>/dev/null | head -n 1)
[ -n "$wheel" ] || fail "maturin wrote no cp39-abi3 wheel into $work/dist"
say "built $(basename "$wheel") ($(du -h "$wheel" | cut -f1))"

# A fresh venv. torch comes from the Python that already has it: a .pth file puts that
# site-packages after the venv's own (no second multi-GB torch download). ninja, which torch's
# extension builds run, is installed from PyPI: the sandbox lets a job execute only from its
# own Python's prefix. Everything kernelgate ships comes from the wheel alone.
venv="$work/venv"
rm -rf "$venv"
"$py" -m venv "$venv"
ninja_version=$("$py" -c 'import importlib.metadata as m; print(m.version("ninja"))' 2>/dev/null || echo 1.13.2)
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "ninja==$ninja_version"
# (after ninja: with the .pth in place pip would find the other venv's ninja and install none)
torch_site=$("$py" -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))')
venv_site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
echo "$torch_site" > "$venv_site/zz-kernelgate-test-torch.pth"
say "installing the wheel into the fresh venv $venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-index --no-deps "$wheel"
[ -x "$venv/bin/kernelgate" ] || fail "the wheel installed no $venv/bin/kernelgate script"

# The rest runs as a user without Rust would: the venv's bin first, no cargo, no rustc, and
# nothing that points kernelgate at a build tree.
path="$venv/bin"
IFS=: read -r -a dirs <<< "$PATH"
for d in "${dirs[@]}"; do
  [ -n "$d" ] && [ ! -x "$d/cargo" ] && [ ! -x "$d/rustc" ] && path="$path:$d"
done
run() { env -u KERNELGATE_PYTHON -u KERNELGATE_HARNESS -u KERNELGATE_BIN -u CARGO_HOME -u RUSTUP_HOME PATH="$path" "$@"; }
run bash -c '! command -v cargo >/dev/null && ! command -v rustc >/dev/null' || fail "cargo is still on PATH"
[ "$(run bash -c 'command -v kernelgate')" = "$venv/bin/kernelgate" ] || fail "kernelgate on PATH is not the venv's"

say "kernelgate --version"
# The protocol the harness speaks, read from its one owner (so a bump cannot leave this behind).
protocol=$(sed -n 's/^pub const HARNESS_PROTOCOL: u32 = \([0-9]*\);/\1/p' crates/eval/src/protocol.rs)
[ -n "$protocol" ] || fail "cannot read HARNESS_PROTOCOL from crates/eval/src/protocol.rs"
version=$(cd "$work" && run kernelgate --version)
echo "$version"
grep -q "^commit: $(git rev-parse HEAD)" <<< "$version" || fail "--version does not name commit $(git rev-parse HEAD)"
grep -q "abi3-py39, protocol $protocol)" <<< "$version" || fail "--version does not name the harness ABI"
grep -q "^harness module: $venv_site/kernelgate_harness/kernelgate_harness" <<< "$version" ||
  fail "kernelgate does not find the harness in the installed package ($venv_site/kernelgate_harness)"
grep -q "^python: $venv/bin/python" <<< "$version" || fail "kernelgate does not pick the venv's Python"
run "$venv/bin/python" -c "import kernelgate_harness as h; assert h.PROTOCOL == $protocol, h.PROTOCOL; assert h.__version__ == '$(run kernelgate -V | cut -d' ' -f2)'" ||
  fail "the installed kernelgate_harness does not match the CLI"

say "kernelgate eval (installed package, CPU, correctness only)"
eval_out="$work/eval.json"
run kernelgate --repo "$root" eval --problem level1/3_ReLU --kernel scripts/demo/head/kernels/level1/3_ReLU/cpp.py \
  --device cpu --seed 42 --no-timing --format json > "$eval_out" || fail "kernelgate eval exited with $? ($eval_out)"
run "$venv/bin/python" - "$eval_out" <<'PY' || fail "kernelgate eval did not find the kernel correct: $eval_out"
import json, sys
r = json.load(open(sys.argv[1]))
kind = (r.get("outcome") or {}).get("kind")
assert kind == "passed", kind  # correct on every trial
PY

say "kernelgate pr on the demo (installed package, CPU, correctness only)"
demo="$work/demo"
rm -rf "$demo"
# Timing is the test suite's business (tests/it/demo.rs); here every kernel is built or loaded,
# checked and reported through the installed package, without the timed trials (minutes of CPU
# on 2 cores). The builds are the test suite's (its build store, keyed by the kernels' files,
# torch and the toolchain, where tests/it/demo.rs built the same demo): the eval above compiled
# through the package.
mkdir -p "$root/target/kernelgate-test-torch-extensions"
run env KERNELGATE_BIN="$venv/bin/kernelgate" KERNELGATE_PYTHON="$venv/bin/python" KG_DEMO_OUT="$demo" KG_DEMO_DEVICE=cpu \
  KG_DEMO_ARGS=--no-timing TORCH_EXTENSIONS_DIR="$root/target/kernelgate-test-torch-extensions" \
  KERNELGATE_BUILD_STORE="$root/target/kernelgate-test-build-store" \
  bash scripts/demo.sh > "$work/demo.log" 2>&1 || { tail -n 40 "$work/demo.log" >&2; fail "scripts/demo.sh failed ($work/demo.log)"; }
run "$venv/bin/python" - "$demo/report/report.json" <<'PY' || fail "the demo's report is not what the demo's head commit should give ($demo/report)"
import json, sys
r = json.load(open(sys.argv[1]))
rows = {k["path"]: k for k in r["kernels"]}
assert r["run"]["complete"] is True, r["run"]
assert rows["kernels/level1/3_ReLU/cpp.py"]["outcome"]["kind"] == "correct"
assert rows["kernels/level1/5_Sigmoid/cpp.py"]["outcome"]["kind"] == "incorrect"
assert rows["kernels/level1/1_Square_matmul/cpp.py"]["verdict"] == "fail"
assert r["summary"]["verdict"] == "fail", r["summary"]
PY
say "ok: the wheel's kernelgate gated the demo without cargo"
