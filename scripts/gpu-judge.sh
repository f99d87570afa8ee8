#!/usr/bin/env bash
# One device call for the judge (issue 46): the adversarial fixtures of tests/fixtures/eval/
# kernels/judge/ and honest kernels through `kernelgate eval --device cuda`, then the 13-kernel
# pull request (scripts/bench-pr.sh) through `kernelgate pr`. Everything goes to $OUT/judge.txt.
# Usage:   OUT=dir LIMIT=540 bash scripts/gpu-judge.sh   (PR=0: the evals only;
#          KERNELGATE_BIN: another kernelgate, its harness beside it; BEFORE_BIN: a kernelgate
#          from before the judge, whose rows of the same cheats come first, "before:")
# Needs:   target/device/{kernelgate,libkernelgate_harness.so} (cargo build --profile device
#          -p kernelgate -p kernelgate-harness), python3 with torch, nvcc + ninja, git.
set -u
OUT=${OUT:?set OUT to a directory}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
export KERNELGATE_PYTHON=python3 PYTHONUNBUFFERED=1
B=${KERNELGATE_BIN:-$PWD/target/device/kernelgate}
LIMIT=${LIMIT:-540}
S=$SECONDS
log=$OUT/judge.txt
{
  echo "# scripts/gpu-judge.sh, $("$B" --version 2>/dev/null || echo 'kernelgate ?'), $(date -u +%FT%TZ)"
  nvidia-smi -L; echo "cores $(nproc)"
  python3 -c "import torch;print('torch', torch.__version__, 'cuda', torch.version.cuda)"
} >"$log" 2>&1
# Builds and the last eval's raw output stay out of $OUT (only the logs come back).
tmp=$(mktemp -d)
ext=$tmp/ext
mkdir -p "$ext"
fx=tests/fixtures/eval
# eval PROBLEM KERNEL: one line per eval: outcome, error findings, medians of ms and judge_ms.
eval_one() {
  local left=$((LIMIT - (SECONDS - S))) bin=${EVAL_BIN:-$B}
  [ "$left" -gt 60 ] || { echo "skipped $2 ($left s left)" >>"$log"; return; }
  timeout 240 "$bin" eval --problem "$1" --kernel "$2" --device "${DEVICE:-cuda}" --format json --seed 1 \
    --extensions-dir "$ext" >"$tmp/eval.json" 2>"$tmp/eval.err"
  python3 - "${LABEL:-}$2" "$tmp/eval.json" "$tmp/eval.err" >>"$log" 2>&1 <<'PY'
import json, statistics, sys
name, path, err = sys.argv[1:4]
try:
    d = json.load(open(path))
except Exception as e:
    print(f"{name}: no JSON ({e}); stderr: {open(err).read()[-1500:]}")
    sys.exit()
o = d["outcome"]
errors = [f["rule"] for f in d.get("findings", []) if f.get("severity") == "error"]
line = f"{name}: {o['kind']} errors={errors} sandbox={d.get('sandbox')} device={d.get('device')}"
s = (d.get("timing") or {}).get("samples") or {}
for k in ("reference", "candidate"):
    v = s.get(k) or []
    if v:
        ms = statistics.median(x["ms"] for x in v)
        j = [x["judge_ms"] for x in v if x.get("judge_ms") is not None]
        line += f" | {k} n={len(v)} ms={ms:.4f} judge_ms={statistics.median(j) if j else float('nan'):.4f}"
vr = (d.get("timing") or {}).get("vs_reference") or {}
if vr:
    line += f" | speedup={vr.get('speedup')} verdict={vr.get('verdict')}"
print(line)
warnings = [f["rule"] for f in d.get("findings", []) if f.get("severity") != "error"]
if warnings:
    print("     warnings:", warnings)
for f in d.get("findings", []):
    if f.get("severity") == "error" or f["rule"] == "eval/worker-confinement":
        print("    ", f["rule"], f["message"][:400])
if o["kind"] not in ("passed", "incorrect"):
    print("    ", json.dumps(o)[:800])
PY
}
cheats() {
  for k in honest_relu.py judge/pool_lookup.py judge/timer_patch.py judge/profile_hook.py judge/forged_result.py judge/judge_memory.py; do
    eval_one $fx/problems/relu_large.py $fx/kernels/$k
  done
  eval_one $fx/problems/small_matmul.py $fx/kernels/judge/checked_calls.py
}
if [ -n "${BEFORE_BIN:-}" ]; then
  echo "== before the judge: $("$BEFORE_BIN" --version 2>/dev/null | head -2 | tr '\n' ' ') (at $((SECONDS - S)) s)" >>"$log"
  EVAL_BIN=$BEFORE_BIN LABEL="before: " cheats
fi
echo "== evals (at $((SECONDS - S)) s)" >>"$log"
cheats
eval_one KernelBench/level1/3_ReLU.py kernels/level1/3_ReLU/cuda.py
eval_one KernelBench/level1/3_ReLU.py kernels/level1/3_ReLU/triton.py
[ "${PR:-1}" = 1 ] || { echo "== done at $((SECONDS - S)) s (no pr: PR=0)" >>"$log"; exit 0; }
echo "== pr: 13 bundled kernels (at $((SECONDS - S)) s)" >>"$log"
left=$((LIMIT - (SECONDS - S)))
OUT=$tmp/pr KERNELGATE_BIN=$B timeout "$left" bash scripts/bench-pr.sh judge >>"$log" 2>&1 || echo "   (pr exited $?)" >>"$log"
cp "$tmp/pr/report-judge/report.json" "$OUT/pr-report.json" 2>/dev/null
echo "== done at $((SECONDS - S)) s" >>"$log"
