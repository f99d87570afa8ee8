#!/usr/bin/env bash
# A pull request that edits only CUDA sources, gated on the GPU (one device call).
#
# main holds two CUDA kernels built from `.cu` files: kernels/level1/3_ReLU/sib.py loads
# csrc/relu.cu through a module-level `_here`, kernels/level1/19_ReLU/cu.py loads relu_b.cu
# beside it through pathlib; both `.cu` files include the shared header include/act.cuh, which
# sets how many passes the kernels make (8 on main). The pull request changes only that header
# (1 pass). `kernelgate pr` must plan both kernels (sources_changed, via include/act.cuh), build
# each head from the edited header and each base from main's (two builds per kernel), and time
# head against base (faster). A second pull request edits only csrc/relu.cu and must plan the
# first kernel alone. Everything goes to $OUT/sources.txt, report.json files beside it.
# Usage:   OUT=dir bash scripts/gpu-sources.sh
# Needs:   KERNELGATE_BIN (default .device/kernelgate) with its harness beside it or in
#          KERNELGATE_HARNESS, python3 with torch, nvcc + ninja, git.
set -u
OUT=${OUT:?set OUT to a directory}
mkdir -p "$OUT"
root="$(cd "$(dirname "$0")/.." && pwd)"
bin=${KERNELGATE_BIN:-$root/.device/kernelgate}
export KERNELGATE_PYTHON=${KERNELGATE_PYTHON:-python3} PYTHONUNBUFFERED=1
log=$OUT/sources.txt
# Builds, logs and report folders stay out of $OUT (only sources.txt and the reports come back).
work=$(mktemp -d)
repo=$work/repo
mkdir -p "$repo"
g() { git -C "$repo" -c user.name=kg -c user.email=kg@localhost "$@"; }
{
  echo "# scripts/gpu-sources.sh, $("$bin" --version 2>/dev/null || echo 'kernelgate ?'), $(date -u +%FT%TZ)"
  nvidia-smi -L
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"
  git --version
} >"$log" 2>&1

mkdir -p "$repo/KernelBench/level1" "$repo/kernels/level1/3_ReLU" "$repo/kernels/level1/19_ReLU" \
  "$repo/csrc" "$repo/include"
cp "$root/KernelBench/level1/3_ReLU.py" "$repo/KernelBench/level1/3_ReLU.py"
cp "$root/KernelBench/level1/3_ReLU.py" "$repo/KernelBench/level1/19_ReLU.py"
printf '[timing]\nbudget_s = 3.0\n' >"$repo/kernelgate.toml"
cat >"$repo/include/act.cuh" <<'EOF'
#pragma once
// Passes over the output: the pull request tunes this, and nothing else.
#define KG_PASSES 8
__device__ __forceinline__ float kg_relu(float v) { return v > 0.0f ? v : 0.0f; }
EOF
relu_cu() { # $1: the include line
  cat <<EOF
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
$1

__global__ void relu_kernel(const float* __restrict__ x, float* y, int64_t n) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    volatile float* out = y;
    for (int p = 0; p < KG_PASSES; ++p) out[i] = kg_relu(x[i]);
}

torch::Tensor relu(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.is_contiguous() && x.scalar_type() == torch::kFloat32, "relu: contiguous CUDA float32");
    torch::Tensor y = torch::empty_like(x);
    const int64_t n = x.numel();
    if (n == 0) return y;
    relu_kernel<<<(unsigned)((n + 255) / 256), 256, 0, at::cuda::getCurrentCUDAStream()>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("relu", &relu); }
EOF
}
relu_cu '#include "act.cuh"' >"$repo/csrc/relu.cu"
relu_cu '#include "../../../include/act.cuh"' >"$repo/kernels/level1/19_ReLU/relu_b.cu"
model_new='

class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu(x)
'
cat >"$repo/kernels/level1/3_ReLU/sib.py" <<EOF
import os
import torch.nn as nn
from torch.utils.cpp_extension import load

_here = os.path.dirname(os.path.abspath(__file__))
_root = os.path.join(_here, "..", "..", "..")
ext = load(
    name="kg_sources_relu",
    sources=[os.path.join(_root, "csrc", "relu.cu")],
    extra_include_paths=[os.path.join(_root, "include")],
    verbose=False,
)
$model_new
EOF
cat >"$repo/kernels/level1/19_ReLU/cu.py" <<EOF
from pathlib import Path
import torch.nn as nn
from torch.utils.cpp_extension import load

ext = load(name="kg_sources_relu_b", sources=[str(Path(__file__).parent / "relu_b.cu")], verbose=False)
$model_new
EOF
g init -q -b main
g add -A
g commit -qm main

# gate BRANCH SECONDS: plan, then the gate on the GPU; one line per row from report.json.
gate() {
  local name=$1 limit=$2
  export TORCH_EXTENSIONS_DIR=$work/ext-$name
  rm -rf "$TORCH_EXTENSIONS_DIR"
  {
    echo "== $name: $(g log -1 --format=%s) ($(g diff --name-only main HEAD | tr '\n' ' '))"
    "$bin" --repo "$repo" kernels --changed main
    "$bin" --repo "$repo" pr --plan --base main | python3 -c 'import json,sys
for j in json.load(sys.stdin)["jobs"]:
    print("plan:", j["path"], j["status"], "via", j["changed_sources"], "sources", j["sources"])'
  } >>"$log" 2>&1
  local t0=$SECONDS
  timeout "$limit" "$bin" --repo "$repo" pr --base main --device cuda --publish files \
    --out "$work/report-$name" >"$work/pr-$name.log" 2>&1
  local rc=$?
  echo "pr exited $rc after $((SECONDS - t0)) s" >>"$log"
  [ "$rc" = 0 ] || tail -20 "$work/pr-$name.log" >>"$log"
  cp "$work/report-$name/report.json" "$OUT/sources-$name.json" 2>/dev/null
  python3 - "$work/report-$name/report.json" >>"$log" 2>&1 <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
for k in r["kernels"]:
    vb = k.get("vs_base") or {}
    sp = k.get("speedup_eager") or {}
    print(f"row: {k['path']} change={k['change']['kind']} via={k.get('changed_sources')} "
          f"outcome={k['outcome']['kind']} verdict={k['verdict']} time_ms={k.get('time_ms')} "
          f"speedup={sp.get('value')} vs_base={vb.get('ratio')} {vb.get('verdict')} device={k.get('device')}")
    for reason in k.get("reasons", []):
        print("    reason:", reason[:300])
print("verdict:", r["summary"]["verdict"])
PY
  echo "builds kept per dependency set: $(ls "$TORCH_EXTENSIONS_DIR" | wc -l)" >>"$log"
}

g checkout -q -b header
sed -i 's/#define KG_PASSES 8/#define KG_PASSES 1/' "$repo/include/act.cuh"
g commit -qam "one pass (include/act.cuh only)"
gate header 330

g checkout -q -b cu main
sed -i 's/volatile float\* out = y;/float* out = y;/' "$repo/csrc/relu.cu"
g commit -qam "plain stores (csrc/relu.cu only)"
gate cu 220
echo "== done" >>"$log"
