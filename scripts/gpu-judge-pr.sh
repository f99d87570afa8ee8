#!/usr/bin/env bash
# The judge's cheats through `kernelgate pr` (issue 46): a pull request that adds the adversarial
# kernels of tests/fixtures/eval/kernels/judge/ and honest kernels beside them, as kernels of two
# KernelBench-layout problems (the fixtures' large ReLU and small matmul), plus the bundled CUDA
# and Triton ReLUs, and the GPU versions of tests/fixtures/eval/cuda/judge46/ (one or two per
# class of issue 46, each built to buy >= 2x on the harness before the judge; spill_after_reply
# passed at 2.00x in round 11, before the judge's probes after each reply) with their honest control, as kernels of the 4096^2 fp32 matmul (902_Matmul4096). One table per binary: each
# kernel's verdict, speedup and error findings, so a kernelgate from before the judge (the
# cheats' speedups) and today's (their failures) can be read side by side in one device call.
# Usage:   OUT=dir bash scripts/gpu-judge-pr.sh LABEL BIN [LABEL BIN ...]
#          FIXTURES=judge46 (only the 902 kernels) or FIXTURES=judge (only the earlier ones);
#          default all. Each `kernelgate pr` gets PR_LIMIT s (default 480 here: the 902 kernels
#          add 12 evals of a 4096^2 fp32 matmul; FIXTURES=judge46 keeps one binary well inside it).
# Needs:   each BIN with its harness beside it, python3 with torch, nvcc + ninja, git.
set -u
OUT=${OUT:?set OUT to a directory}
mkdir -p "$OUT"
root="$(cd "$(dirname "$0")/.." && pwd)"
export KERNELGATE_PYTHON=${KERNELGATE_PYTHON:-python3} PYTHONUNBUFFERED=1
export PR_LIMIT=${PR_LIMIT:-480}
FIXTURES=${FIXTURES:-all}
work=$(mktemp -d)
repo=$work/repo
fx=$root/tests/fixtures/eval
g() { git -C "$repo" -c user.name=kg -c user.email=kg@localhost "$@"; }
mkdir -p "$repo/KernelBench/level1"
cp "$root/KernelBench/level1/3_ReLU.py" "$repo/KernelBench/level1/"
cp "$fx/problems/relu_large.py" "$repo/KernelBench/level1/900_ReLULarge.py"
cp "$fx/problems/small_matmul.py" "$repo/KernelBench/level1/901_SmallMatmul.py"
cp "$fx/problems/matmul_4096.py" "$repo/KernelBench/level1/902_Matmul4096.py"
# The fixtures are plain PyTorch (their backend is declared once), and what is proven here is the
# runtime judge: lint errors and the op audit's custom share warn instead of failing, so every
# kernel is evaluated and the cheats meet the harness, not the linter.
cat >"$repo/kernelgate.toml" <<EOF
[dataset]
root = "KernelBench"

[kernels]
globs = ["kernels/**/*.py"]

[defaults]
backend = "${BACKEND:-cuda}"

[policy]
fail_on = ["unmapped", "compile_error", "incorrect", "crash", "timeout", "escaped_work", "regression"]
warn_on = ["lint_error", "low_custom_share", "partial_replacement", "excessive_speedup", "implausible_time"]
EOF
g init -q -b main
g add -A
g commit -qm base
g branch -q judge-base
k=$repo/kernels/level1
if [ "$FIXTURES" != judge46 ]; then
  mkdir -p "$k/900_ReLULarge" "$k/901_SmallMatmul" "$k/3_ReLU"
  cp "$fx/kernels/honest_relu.py" "$k/900_ReLULarge/honest.py"
  for f in pool_lookup timer_patch profile_hook forged_result judge_memory; do
    cp "$fx/kernels/judge/$f.py" "$k/900_ReLULarge/$f.py"
  done
  cp "$fx/kernels/judge/checked_calls.py" "$k/901_SmallMatmul/checked_calls.py"
  cp "$root/kernels/level1/3_ReLU/cuda.py" "$root/kernels/level1/3_ReLU/triton.py" "$k/3_ReLU/"
fi
# Issue 46's classes on a compute-bound problem, where each cheat wins >= 2x on an H100 before
# the judge: pool lookup, harness patch (clock; output copy), interpreter hook, checked-call
# awareness (TF32; TF32 on self-rounded operands), forged result; honest_matmul is the control.
if [ "$FIXTURES" != judge ]; then
  mkdir -p "$k/902_Matmul4096"
  cp "$fx"/cuda/judge46/*.py "$k/902_Matmul4096/"
fi
g add -A
g commit -qm "the judge's cheats and honest kernels"

. "$root/scripts/pr-rows.sh"
while [ $# -ge 2 ]; do
  run_pr judge-pr judge-base "$1" "$2"
  shift 2
done
