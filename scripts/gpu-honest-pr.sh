#!/usr/bin/env bash
# Honest kernels KernelBench accepts, through `kernelgate pr` on the GPU with the default policy
# (issue 48): a Triton kernel behind torch.library.custom_op, an exact fp32 direct convolution
# against cuDNN's TF32 reference (level1/9_Conv2d), and the candidate's own tiled matmul named
# like a vendor kernel (`sgemm_tiled_kernel`, level1/1_Square_matmul); the bundled CUDA ReLU as
# a control. Each must pass or warn, never fail. One table per binary in $OUT/honest-pr-LABEL.txt.
# Usage:   OUT=dir bash scripts/gpu-honest-pr.sh LABEL BIN [LABEL BIN ...]
# Needs:   each BIN with its harness beside it, python3 with torch and triton, nvcc + ninja, git.
set -u
OUT=${OUT:?set OUT to a directory}
mkdir -p "$OUT"
root="$(cd "$(dirname "$0")/.." && pwd)"
export KERNELGATE_PYTHON=${KERNELGATE_PYTHON:-python3} PYTHONUNBUFFERED=1
work=$(mktemp -d)
repo=$work/repo
fx=$root/tests/fixtures/eval/cuda/honest48
g() { git -C "$repo" -c user.name=kg -c user.email=kg@localhost "$@"; }
mkdir -p "$repo/KernelBench/level1"
for p in 1_Square_matmul 3_ReLU 9_Conv2d; do cp "$root/KernelBench/level1/$p.py" "$repo/KernelBench/level1/"; done
# kernelgate's defaults: nothing loosened.
printf '[dataset]\nroot = "KernelBench"\n\n[kernels]\nglobs = ["kernels/**/*.py"]\n' >"$repo/kernelgate.toml"
g init -q -b main
g add -A
g commit -qm base
g branch -q honest-base
k=$repo/kernels/level1
mkdir -p "$k/3_ReLU" "$k/9_Conv2d" "$k/1_Square_matmul"
cp "$fx/custom_op_triton.py" "$k/3_ReLU/custom_op_triton.py"
cp "$root/kernels/level1/3_ReLU/cuda.py" "$k/3_ReLU/cuda.py"
cp "$fx/exact_conv_fp32.py" "$k/9_Conv2d/exact_fp32.py"
cp "$fx/vendor_named_sgemm.py" "$k/1_Square_matmul/sgemm_named.py"
g add -A
g commit -qm "honest kernels"
. "$root/scripts/pr-rows.sh"
while [ $# -ge 2 ]; do
  run_pr honest-pr honest-base "$1" "$2" --all-rules --details
  # What the vendor-named kernel's binary says of cuBLAS (attribution by code reads it).
  for so in $(find "$TORCH_EXTENSIONS_DIR" -name '*sgemm*.so' 2>/dev/null); do
    echo "$(basename "$so"): strings naming cublas: $(strings -a "$so" | grep -ci cublas); imports: $(strings -a "$so" | grep -E '^cublas[A-Z]' | head -5 | tr '\n' ' ')"
  done >>"$OUT/honest-pr-$1.txt"
  shift 2
done
