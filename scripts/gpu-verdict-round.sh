#!/usr/bin/env bash
# One device call for time to verdict (issue 29), stage by stage, each skipped when the call's
# time left is under its estimate. Everything goes to $OUT/round.txt (stage outputs in order)
# plus the reports of the pull requests.
#   start    the child's start-up: python, `import torch`, the harness's load (import times)
#   nvcc     scripts/gpu-nvcc-trajectory.py: nvcc's steps, serial and side by side
#   wrapper  scripts/gpu-nvcc-wrapper.py: kg_nvcc against nvcc itself on one kernel (its
#            listing, any fallback's reason, its steps, the objects' symbols)
#   pch      `kernelgate pch` cold, then again (nothing to do)
#   before   the 13-kernel pull request, cold, without the precompiled header and nvcc's steps
#            side by side (KERNELGATE_PCH_DIR=off KERNELGATE_NVCC_PARALLEL=0)
#   pr       the same pull request with both (as kernelgate runs by default)
#   bytecode scripts/bench-bytecode.sh: `import torch` with and without kernelgate's bytecode tree
#   verdict  scripts/bench-verdict.sh: `kernelgate eval` of a built kernel, and the one-kernel edit
#            (CASES and EVAL_RUNS pass through)
#   timing   scripts/gpu-timing-integrity.sh on the input-reuse fixtures (a fingerprint cache that
#            must be caught, honest Triton and CUDA kernels that must pass): the refill's figures
#            after a harness change (TIMING_ONLY passes through as ONLY)
# Usage:   OUT=dir STAGES="start nvcc pch pr" LIMIT=560 bash scripts/gpu-verdict-round.sh
#          (next: STAGES="wrapper pch pr verdict" CASES=edit proves kg_nvcc in about 6 minutes)
# Needs:   target/device/{kernelgate,libkernelgate_harness.so}, python3 with torch, nvcc, ninja.
set -u
OUT=${OUT:?set OUT to a directory}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
export KERNELGATE_PYTHON=python3 PYTHONUNBUFFERED=1
# Named, not derived from HOME: bench-verdict.sh's eval gives the contributor a fresh HOME.
export KERNELGATE_PCH_DIR=${KERNELGATE_PCH_DIR:-$HOME/.cache/kernelgate/pch}
B=$PWD/target/device/kernelgate
STAGES=${STAGES:-start nvcc pch before pr verdict}
LIMIT=${LIMIT:-560}
S=$SECONDS
log=$OUT/round.txt
{
  # The binaries' commit (the device's copy of the tree may carry another git state).
  echo "# scripts/gpu-verdict-round.sh, $("$B" --version 2>/dev/null || echo 'kernelgate ?'), $(date -u +%FT%TZ)"
  nvidia-smi -L; echo "cores $(nproc)"
  python3 -c "import torch;print('torch', torch.__version__, 'cuda', torch.version.cuda)"
  c++ --version | head -1; nvcc --version | tail -1
} >"$log" 2>&1
# stage NAME ESTIMATE_S COMMAND...: runs it when the time left covers the estimate.
stage() {
  local name=$1 est=$2
  shift 2
  [[ " $STAGES " == *" $name "* ]] || return 0
  local left=$((LIMIT - (SECONDS - S)))
  if [ "$left" -lt "$est" ]; then
    echo "== $name: skipped ($left s left, needs about $est s)" >>"$log"
    return 0
  fi
  echo "== $name (at $((SECONDS - S)) s)" >>"$log"
  timeout "$left" "$@" >>"$log" 2>&1 || echo "   ($name exited $?)" >>"$log"
}
start_up() {
  for i in 1 2 3; do
    TIMEFORMAT="python3 -c 'import torch': %R s wall"; time python3 -c "import torch"
  done
  # Whether torch's bytecode is there to read (jobs run with PYTHONDONTWRITEBYTECODE=1: none is
  # written, so a missing cache is paid by every child) and what the import costs without it.
  python3 -c "import torch, os, glob; d = os.path.dirname(torch.__file__); print('torch .pyc files:', len(glob.glob(d + '/**/__pycache__/*.pyc', recursive=True)), 'of', len(glob.glob(d + '/**/*.py', recursive=True)), '.py')"
  python3 -X importtime -c "import torch" 2>&1 | sort -t'|' -k2 -n | tail -8
  # The harness's own load: torch, the embedded runner and its modules (kernelgate_harness.main
  # does the same before it reads its job).
  d=$(mktemp -d)
  cp target/device/libkernelgate_harness.so "$d/kernelgate_harness.so"
  for i in 1 2; do
    TIMEFORMAT="import torch, kernelgate_harness: %R s wall"
    time PYTHONPATH=$d python3 -c "import torch, kernelgate_harness"
    TIMEFORMAT="import torch; a CUDA tensor: %R s wall"
    time python3 -c "import torch; torch.zeros(1, device='cuda')"
  done
  rm -rf "$d"
}
pr_run() {
  local label=$1
  OUT=$OUT/w-$label bash scripts/bench-pr.sh "$label"
  cp "$OUT/w-$label/report-$label/report.json" "$OUT/report-$label.json" 2>/dev/null
  grep -h "precompiled\|nvcc" "$OUT/w-$label/log-$label.txt" | sort | uniq -c | head -8
  rm -rf "$OUT/w-$label"
}
verdict() {
  OUT=$OUT/w-verdict CASES="${CASES:-eval edit}" bash scripts/bench-verdict.sh
  cp "$OUT/w-verdict/report-edit/report.json" "$OUT/report-edit.json" 2>/dev/null
  rm -rf "$OUT/w-verdict"
}
export OUT B
export -f start_up pr_run verdict
stage start 30 bash -c start_up
stage nvcc 130 python3 scripts/gpu-nvcc-trajectory.py
stage wrapper 120 python3 scripts/gpu-nvcc-wrapper.py
stage bytecode 60 env PY=python3 N=3 bash scripts/bench-bytecode.sh
stage pch 90 bash -c 'time $B pch; time $B pch'
stage before 130 env KERNELGATE_PCH_DIR=off KERNELGATE_NVCC_PARALLEL=0 bash -c 'pr_run before'
stage pr 130 bash -c 'pr_run pr'
# About 70 s for the eval case (the contributor's build, two evals), 90 s for the edit (two prs).
verdict_s=0
[[ " ${CASES:-eval edit} " == *" eval "* ]] && verdict_s=$((verdict_s + 70))
[[ " ${CASES:-eval edit} " == *" edit "* ]] && verdict_s=$((verdict_s + 90))
stage verdict "$verdict_s" bash -c verdict
stage timing 120 env OUT="$OUT/timing" ONLY="${TIMING_ONLY:-fingerprint_cache honest_autotune honest_workspace side_stream 3_ReLU_cuda 7_Softmax_triton}" bash scripts/gpu-timing-integrity.sh
echo "== all done at $((SECONDS - S)) s" >>"$log"
tail -60 "$log"
