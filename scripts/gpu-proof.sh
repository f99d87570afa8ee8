#!/usr/bin/env bash
# The whole gate on a GPU machine, in one call, from artifacts built elsewhere:
#   eval    every GPU fixture of `kernelgate eval` (honest CUDA and Triton kernels, every runtime
#           hack, an illegal address followed by an honest kernel) and the phase table at
#           KernelBench's ReLU size: scripts/gpu-eval.sh;
#   timing  the timing method's figures (CV of the median, A/A false alarms, detection of an
#           injected 3% slowdown, side stream vs honest kernels) and `kernelgate baseline`
#           (eager and torch.compile) into results/timing/<HARDWARE>/: scripts/gpu-timing.sh;
#   bench   only the phase table of one eval at KernelBench's ReLU size (part of eval);
#   keys    keyed baselines through `kernelgate pr`: `baseline --kernels` on a main, then a PR
#           judged against main's kernel timing (scripts/gpu-baselines-pr.sh);
#   pr      `kernelgate pr --device cuda` on the demo repository with its CUDA kernels, on one GPU
#           and, where the machine has more, on all of them; the verdicts of the two runs compared.
# Usage:   STAGES="eval timing keys pr" bash scripts/gpu-proof.sh   (the default runs all four;
#          one call of at most 10 minutes holds about two of them)
# Needs:   target/device/{kernelgate,libkernelgate_harness.so}
#          (cargo build --profile device -p kernelgate -p kernelgate-harness), python3 with torch,
#          nvcc and ninja on PATH, git.
# Output:  $OUT/summary.txt (every table) and $OUT/proof.tgz (logs, eval JSON, timing samples,
#          baselines, both pr reports). Two files, so the device tool brings them back.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
OUT=${OUT:-$root/kg-gpu-proof}
mkdir -p "$OUT"
work=$(mktemp -d)
stages=${STAGES:-eval timing keys pr}
export KERNELGATE_BIN=${KERNELGATE_BIN:-$root/target/device/kernelgate}
export KERNELGATE_HARNESS=${KERNELGATE_HARNESS:-$root/target/device/libkernelgate_harness.so}
export KERNELGATE_PYTHON=${KERNELGATE_PYTHON:-python3}
export PYTHONUNBUFFERED=1
export MAX_JOBS=${MAX_JOBS:-$(nproc)}
summary="$OUT/summary.txt"
T0=$SECONDS

for f in "$KERNELGATE_BIN" "$KERNELGATE_HARNESS"; do
  [ -f "$f" ] || { echo "error: $f is missing: build it with cargo build --profile device -p kernelgate -p kernelgate-harness" | tee "$summary"; exit 2; }
done
{
  echo "# kernelgate GPU proof ($(date -u +%FT%TZ), stages: $stages)"
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader
  "$KERNELGATE_PYTHON" -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda)"
  echo "git $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
} >"$summary" 2>&1
stage() { printf '\n## %s (started at %s s)\n' "$1" "$((SECONDS - T0))" | tee -a "$summary"; }

if [[ " $stages " == *" eval "* ]]; then
  stage "eval: GPU fixtures (scripts/gpu-eval.sh)"
  t=$SECONDS
  OUT="$work/eval" KERNELGATE_BIN="$KERNELGATE_BIN" bash scripts/gpu-eval.sh >"$work/eval.log" 2>&1
  cat "$work/eval/summary.txt" "$work/eval/bench.txt" >>"$summary" 2>/dev/null
  echo "eval stage: $((SECONDS - t)) s, $(grep -c '^OK ' "$work/eval/summary.txt") OK, $(grep -c '^BAD' "$work/eval/summary.txt") BAD" | tee -a "$summary"
fi

if [[ " $stages " == *" bench "* ]] && [[ " $stages " != *" eval "* ]]; then
  stage "bench: phase table of one eval at KernelBench's ReLU size (scripts/gpu-eval.sh)"
  t=$SECONDS
  OUT="$work/eval" ONLY=none PRECOMPILE=honest_relu_cuda KERNELGATE_BIN="$KERNELGATE_BIN" \
    bash scripts/gpu-eval.sh >"$work/eval.log" 2>&1
  cat "$work/eval/bench.txt" >>"$summary" 2>/dev/null
  echo "bench stage: $((SECONDS - t)) s" | tee -a "$summary"
fi

if [[ " $stages " == *" timing "* ]]; then
  stage "timing: method figures and baselines (scripts/gpu-timing.sh)"
  t=$SECONDS
  OUT="$work/timing" bash scripts/gpu-timing.sh >"$work/timing.log" 2>&1
  tail -n 60 "$work/timing/log.txt" >>"$summary" 2>/dev/null
  echo "timing stage: $((SECONDS - t)) s" | tee -a "$summary"
fi

if [[ " $stages " == *" keys "* ]]; then
  stage "keys: keyed baselines through kernelgate pr (scripts/gpu-baselines-pr.sh)"
  t=$SECONDS
  OUT="$work/keys" KERNELGATE_BIN="$KERNELGATE_BIN" bash scripts/gpu-baselines-pr.sh >"$work/keys.log" 2>&1
  cat "$work/keys/summary.txt" >>"$summary" 2>/dev/null
  echo "keys stage: $((SECONDS - t)) s" | tee -a "$summary"
fi

if [[ " $stages " == *" pr "* ]]; then
  stage "pr: the demo repository through kernelgate pr --device cuda"
  repo="$work/demo-repo"
  KG_DEMO_GPU=1 bash scripts/demo/make-repo.sh "$repo" >>"$work/pr.log" 2>&1
  base=$(git -C "$repo" rev-parse demo-base)
  head=$(git -C "$repo" rev-parse demo-head)
  n_gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
  runs="1"
  [ "$n_gpus" -gt 1 ] && runs="1 $n_gpus"
  for n in $runs; do
    visible=$(seq -s, 0 $((n - 1)))
    # Each run compiles from scratch (its own extensions cache), so wall times compare fairly.
    t=$SECONDS
    CUDA_VISIBLE_DEVICES=$visible TORCH_EXTENSIONS_DIR="$work/ext-$n" \
      "$KERNELGATE_BIN" --repo "$repo" pr --base "$base" --head "$head" --out "$work/pr-${n}gpu" \
      --publish files --device cuda >"$work/pr-${n}gpu.log" 2>&1
    rc=$?
    echo "pr on $n GPU(s) (CUDA_VISIBLE_DEVICES=$visible): exit $rc, wall $((SECONDS - t)) s" | tee -a "$summary"
  done
  "$KERNELGATE_PYTHON" - "$work" $runs >>"$summary" 2>&1 <<'PY'
import json, sys
work, runs = sys.argv[1], sys.argv[2:]
reports = {}
for n in runs:
    try:
        reports[n] = json.load(open(f"{work}/pr-{n}gpu/report.json"))
    except Exception as e:
        print(f"no report for {n} GPU(s): {e}")
if not reports:
    sys.exit()
def cell(k):
    vb = (k.get("vs_base") or {}).get("verdict", "-")
    sp = k.get("speedup_eager") or {}
    spv = f"{sp['value']:.2f}x" if sp.get("value") is not None else "-"
    t = f"{k['time_ms']:.4f}" if k.get("time_ms") is not None else "-"
    dev = (k["outcome"].get("details") or {}).get("device", "-") if isinstance(k["outcome"].get("details"), dict) else "-"
    return k["verdict"], k["outcome"]["kind"], vb, spv, t, dev
first = reports[runs[0]]
print(f"\n{'kernel':44} " + " | ".join(f"{n} GPU: verdict outcome vs_base speedup ms device" for n in reports))
agree = True
for k in first["kernels"]:
    cells = []
    for n, r in reports.items():
        other = next((x for x in r["kernels"] if x["path"] == k["path"]), None)
        cells.append(cell(other) if other else ("missing",) * 6)
    same = all(c[:2] == cells[0][:2] for c in cells) and all(c[2] == cells[0][2] for c in cells)
    agree &= same
    print(f"{'' if same else '!! '}{k['path']:44} " + " | ".join(" ".join(c) for c in cells))
for n, r in reports.items():
    s = r.get("summary", {})
    print(f"{n} GPU(s): summary {json.dumps(s)[:300]}")
if len(reports) > 1:
    print("verdicts, outcomes and vs-base verdicts " + ("MATCH" if agree else "DIFFER") + " between the runs")
PY
  if [ -f "$work/pr-1gpu/comment.md" ]; then
    printf '\n### comment.md of the one-GPU run\n' >>"$summary"
    cat "$work/pr-1gpu/comment.md" >>"$summary"
  fi
  echo "pr stage: done at $((SECONDS - T0)) s" | tee -a "$summary"
fi

echo "total: $((SECONDS - T0)) s" | tee -a "$summary"
# Baselines written by the timing stage live in the checkout: bring them back too.
mkdir -p "$work/results"
cp -R results/timing "$work/results/" 2>/dev/null
tar -czf "$OUT/proof.tgz" -C "$work" --exclude='ext-*' --exclude='demo-repo' . 2>/dev/null
cat "$summary"
