#!/usr/bin/env bash
# Soak: honest kernels evaluated again and again on the GPU, every outcome kept with its full
# message and log tail, and the peak GPU and host memory of each eval. Any outcome other than
# `passed` is a spurious failure of the gate (the kernels are honest).
# Rounds cycle through: the bundled CUDA and Triton kernels at their problems' sizes, and the
# KernelBench-size ReLU (4096 x 393216 fp32) alone and with --base-kernel set to itself.
# Usage:   EVALS=200 SOAK_SECONDS=540 bash scripts/gpu-soak.sh
# Needs:   KERNELGATE_BIN (default target/device/kernelgate), its harness, KERNELGATE_PYTHON with
#          torch, nvcc + ninja. Output: $OUT/soak.jsonl (one line per eval) and $OUT/soak.txt.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
OUT=${OUT:-$root/kg-soak}
mkdir -p "$OUT"
bin=${KERNELGATE_BIN:-$root/target/device/kernelgate}
export KERNELGATE_PYTHON=${KERNELGATE_PYTHON:-python3}
export TORCH_EXTENSIONS_DIR=${TORCH_EXTENSIONS_DIR:-$OUT/ext}
evals=${EVALS:-200}
budget=${SOAK_SECONDS:-540}
kb=tests/fixtures/eval/problems/relu_kb_size.py
relu=tests/fixtures/eval/cuda/honest_relu_cuda.py
cases=()
for k in kernels/level*/*/cuda.py kernels/level*/*/triton.py; do
  p=$(basename "$(dirname "$k")")
  lvl=$(basename "$(dirname "$(dirname "$k")")")
  cases+=("$lvl/$p|$k|")
done
cases+=("$kb|$relu|" "$kb|$relu|$relu")
jsonl="$OUT/soak.jsonl"
: >"$jsonl"
start=$SECONDS
i=0
while [ "$i" -lt "$evals" ] && [ $((SECONDS - start)) -lt "$budget" ]; do
  IFS='|' read -r problem kernel base <<<"${cases[$((i % ${#cases[@]}))]}"
  args=(eval --problem "$problem" --kernel "$kernel" --device cuda --format json --extensions-dir "$TORCH_EXTENSIONS_DIR")
  [ -n "$base" ] && args+=(--base-kernel "$base")
  t=$SECONDS
  "$bin" "${args[@]}" >"$OUT/eval.json" 2>"$OUT/eval.err"
  rc=$?
  python3 - "$OUT/eval.json" "$OUT/eval.err" "$problem" "$kernel" "$base" "$rc" "$((SECONDS - t))" >>"$jsonl" <<'PY'
import json, sys
path, err, problem, kernel, base, rc, wall = sys.argv[1:]
try:
    r = json.load(open(path))
except Exception as e:
    r = {"outcome": {"kind": "no_json", "message": f"{e}: {open(err).read()[-2000:]}"}}
m = r.get("memory") or {}
print(json.dumps({
    "problem": problem, "kernel": kernel, "base": bool(base), "exit": int(rc), "wall_s": int(wall),
    "outcome": r["outcome"].get("kind"), "outcome_full": r["outcome"],
    "findings": [f["rule"] for f in r.get("findings", []) if f.get("severity") == "error"],
    "gpu_peak_gib": (m.get("gpu_peak_bytes") or 0) / 2**30, "host_peak_gib": (m.get("host_peak_bytes") or 0) / 2**30,
    "budget": m.get("budget"), "stderr_tail": r.get("stderr_tail", "")[-1500:],
}))
PY
  i=$((i + 1))
done
python3 - "$jsonl" <<'PY' | tee "$OUT/soak.txt"
import json, sys, collections
rows = [json.loads(l) for l in open(sys.argv[1])]
by = collections.defaultdict(list)
for r in rows:
    by[(r["problem"], r["kernel"], r["base"])].append(r)
print(f"{'problem':46} {'kernel':40} {'base':5} {'n':>4} {'passed':>6} {'other':>5} {'wall s':>6} {'GPU peak GiB':>12} {'host peak GiB':>13}")
for (p, k, b), rs in by.items():
    ok = sum(r["outcome"] == "passed" and not r["findings"] for r in rs)
    print(f"{p[-46:]:46} {k[-40:]:40} {str(b):5} {len(rs):4} {ok:6} {len(rs)-ok:5} {sorted(r['wall_s'] for r in rs)[len(rs)//2]:6} "
          f"{max(r['gpu_peak_gib'] for r in rs):12.2f} {max(r['host_peak_gib'] for r in rs):13.2f}")
bad = [r for r in rows if r["outcome"] != "passed" or r["findings"]]
print(f"total: {len(rows)} evals, {len(rows) - len(bad)} passed clean, {len(bad)} not")
for r in bad:
    print("NOT PASSED:", json.dumps(r)[:3000])
PY
