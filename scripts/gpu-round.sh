#!/usr/bin/env bash
# One device call for the trust work (issues 26-28), from artifacts built elsewhere:
#   trust  `kernelgate pr --device cuda` on a pull request holding the GPU trust fixtures
#          (tests/fixtures/gpu: honest CUDA graphs, explicit current stream, triangular and
#          symmetric matmuls, kept nn.Linear / nn.Conv2d with fused epilogues; hidden TF32 and
#          fp16 matmuls, deferred work through an ATen callback and an allocator hook), the
#          bundled CUDA and Triton kernels and copies of the short level2 kernel
#          (scripts/gpu-trust.sh);
#   drift  the short reference alone before and after each candidate factor, each in a fresh
#          process (scripts/gpu-reference-drift.py);
#   soak   honest kernels through the whole gate, COPIES copies each (scripts/gpu-soak.sh);
#   cause  the short kernel through the whole gate with and without the profiler's warm-up and
#          processes started ahead, every row's reference_check tabulated
#          (scripts/gpu-reference-cause.sh; VARIANTS, CAUSE_COPIES).
# Usage:   STAGES="trust drift" bash scripts/gpu-round.sh      (default: trust drift)
# Needs:   target/device/{kernelgate,libkernelgate_harness.so}, python3 with torch, nvcc, ninja.
# Output:  $OUT/summary.txt and $OUT/round.tgz.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
OUT=${OUT:-$root/kg-round}
mkdir -p "$OUT"
work=${WORK:-/tmp/kg-round}
mkdir -p "$work"
stages=${STAGES:-trust drift}
export KERNELGATE_BIN=${KERNELGATE_BIN:-$root/target/device/kernelgate}
export KERNELGATE_PYTHON=${KERNELGATE_PYTHON:-python3}
export PYTHONUNBUFFERED=1
# Kept across calls on a warm machine: extension builds are reused.
export TORCH_EXTENSIONS_DIR=${TORCH_EXTENSIONS_DIR:-/tmp/kg-ext}
summary="$OUT/summary.txt"
T0=$SECONDS
{
  echo "# kernelgate trust round ($(date -u +%FT%TZ), stages: $stages)"
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader
  "$KERNELGATE_PYTHON" -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda)"
  echo "git $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
} >"$summary" 2>&1
stage() { printf '\n## %s (started at %s s)\n' "$1" "$((SECONDS - T0))" | tee -a "$summary"; }

if [[ " $stages " == *" trust "* ]]; then
  stage "trust: the GPU trust fixtures through kernelgate pr (scripts/gpu-trust.sh)"
  OUT="$work/trust" bash scripts/gpu-trust.sh 2>&1 | tail -60 | tee -a "$summary"
fi
if [[ " $stages " == *" drift "* ]]; then
  stage "drift: the short reference alone before and after each factor (scripts/gpu-reference-drift.py)"
  timeout "${DRIFT_S:-240}" "$KERNELGATE_PYTHON" scripts/gpu-reference-drift.py "${REPEATS:-2}" 2>&1 | tail -20 | tee -a "$summary"
fi
if [[ " $stages " == *" cause "* ]]; then
  stage "cause: the short reference in the whole gate, by variant (scripts/gpu-reference-cause.sh)"
  OUT="$work/cause" COPIES=${CAUSE_COPIES:-12} bash scripts/gpu-reference-cause.sh 2>&1 | tail -30 | tee -a "$summary"
fi
if [[ " $stages " == *" soak "* ]]; then
  stage "soak: honest kernels, ${COPIES:-10} copies each (scripts/gpu-soak.sh)"
  OUT="$work/soak" SET=${SET:-bundled} COPIES=${COPIES:-10} bash scripts/gpu-soak.sh 2>&1 | tail -40 | tee -a "$summary"
fi
echo "round: $((SECONDS - T0)) s" | tee -a "$summary"
tar -czf "$OUT/round.tgz" -C "$work" --exclude='ext' --exclude='repo-*' --exclude='repo' . 2>/dev/null
ls -la "$OUT"
