#!/usr/bin/env bash
# One device call (issue 14, docs/timing.md "Fresh content"): `kernelgate eval` with timing on
#   - the device-side fingerprint cache on a 4096 fp32 matmul (must fail: input-reuse-speedup),
#   - an honest autotuned Triton ReLU and an honest CUDA row sum with a kept workspace (pass),
#   - the side-stream fixture (still caught), and the bundled
#     kernels/level*/*/{cuda,triton}.py on their KernelBench problems (as before),
# printing per fixture: outcome, error findings, speedup, the per-call refill cost (device time
# of one refill, median of the `input_refill` series) and the eval's wall time.
# Results: $OUT/summary.txt (the table) and $OUT/results.jsonl (one eval JSON per line).
# ONLY="name ..." runs a subset. Under 4 minutes on one H200 (9 CUDA builds in parallel, 12 evals).
# Needs target/device/{kernelgate,libkernelgate_harness.so} (cargo build --profile device).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/kg-gpu-timing-integrity}
mkdir -p "$OUT"
export KERNELGATE_BIN=${KERNELGATE_BIN:-$PWD/target/device/kernelgate}
export KERNELGATE_HARNESS=${KERNELGATE_HARNESS:-$PWD/target/device/libkernelgate_harness.so}
export KERNELGATE_PYTHON=${KERNELGATE_PYTHON:-python3}
export MAX_JOBS=8
EXT=/tmp/kg-gpu-ext
mkdir -p "$EXT"
C=tests/fixtures/eval/cuda
P=tests/fixtures/eval/problems
T0=$SECONDS
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; "$KERNELGATE_PYTHON" -c "import torch, sys; print(sys.version.split()[0], torch.__version__, torch.version.cuda)"; } >"$OUT/summary.txt" 2>&1

# Build every CUDA extension once, in parallel (importing the module builds it into $EXT).
# wanted NAME: whether ONLY (when set) names the fixture.
wanted() { [ -z "${ONLY:-}" ] || [[ " $ONLY " == *" $1 "* ]]; }
for pair in fingerprint_cache:$C/fingerprint_cache_matmul_cuda.py honest_workspace:$C/honest_workspace_cuda.py side_stream:$C/side_stream.py $(for k in kernels/*/*/cuda.py; do echo "$(basename "$(dirname "$k")")_cuda:$k"; done); do
  f=${pair#*:}
  wanted "${pair%%:*}" || continue
  TORCH_EXTENSIONS_DIR=$EXT "$KERNELGATE_PYTHON" -c "import importlib.util as u, sys; s=u.spec_from_file_location('k', sys.argv[1]); m=u.module_from_spec(s); s.loader.exec_module(m)" "$f" >>"$OUT/precompile.log" 2>&1 &
done
wait
echo "precompile: $((SECONDS - T0)) s" >>"$OUT/summary.txt"

run() { # name expected(kind[+error-rule]) problem kernel args...
  local name=$1 expect=$2 problem=$3 kernel=$4; shift 4
  wanted "$name" || return 0
  local t=$(date +%s%N)
  # torch's own directory, where the precompile built (`--extensions-dir` keys builds by source
  # and would compile each again).
  TORCH_EXTENSIONS_DIR=$EXT timeout 150 "$KERNELGATE_BIN" eval --problem "$problem" --kernel "$kernel" --seed 42 \
    --format json --device cuda "$@" >"$OUT/$name.json" 2>>"$OUT/stderr.log"
  local code=$?
  local dt=$(( ($(date +%s%N) - t) / 1000000 ))
  local lint
  lint=$("$KERNELGATE_BIN" lint --precision fp32 --format json "$kernel" 2>/dev/null | "$KERNELGATE_PYTHON" -c \
    'import json,sys; r=json.load(sys.stdin); print(",".join(sorted({f["rule"] for f in r["findings"] if f["severity"]=="error"})) or "-")' 2>/dev/null)
  "$KERNELGATE_PYTHON" - "$OUT/$name.json" "$name" "$expect" "$code" "$dt" "${lint:-?}" >>"$OUT/summary.txt" <<'PY'
import json, statistics, sys
path, name, expect, code, dt, lint = sys.argv[1:]
try:
    r = json.load(open(path))
except Exception as e:
    print(f"BAD {name:28} expected {expect:16} got NO-JSON ({e})"); sys.exit()
k = r["outcome"]["kind"]
rules = ",".join(f["rule"] for f in r["findings"] if f["severity"] == "error") or "-"
t = r.get("timing") or {}
s = t.get("samples") or {}
med = lambda key: statistics.median(x["ms"] for x in s[key]) if s.get(key) else float("nan")
sp = ""
if t.get("vs_reference"):
    c = t["vs_reference"]; sp = f" speedup {1/c['ratio']:.3f}x"
kinds, _, rule = expect.partition("+")
ok = "OK " if k in kinds.split("|") and (not rule or rule in rules) and (rule or rules == "-") else "BAD"
print(f"{ok} {name:24} expected {expect:40} got {k:8} exit {code} wall {int(dt)/1000:6.1f}s errors {rules} lint {lint}{sp}")
print(f"    ms: cand {med('candidate'):.4f} repeated {med('candidate_repeated'):.4f} ref {med('reference'):.4f} ref-before-import {med('reference_before_import'):.4f}"
      f" | refill/call {med('input_refill'):.4f} ms (n={len(s.get('input_refill', []))})"
      f" | verified cand {sum(1 for x in s.get('candidate', []) if x.get('verified'))}/{len(s.get('candidate', []))}")
ph = {p["name"]: p["ms"] for p in r.get("phases", [])}
print("    phases ms: " + " ".join(f"{n}={ph[n]:.0f}" for n in ("reference_alone_timing", "timing", "total", "job_wall") if n in ph))
for f in r["findings"]:
    if f["rule"].startswith("timing/"):
        print(f"    {f['rule']}: {f['message'][:260]}")
if k not in ("passed",):
    print("    " + str(r["outcome"].get("message", ""))[:300].replace("\n", " "))
PY
  tr -d '\n' <"$OUT/$name.json" >>"$OUT/results.jsonl"; echo >>"$OUT/results.jsonl"; rm -f "$OUT/$name.json"
}

run fingerprint_cache  passed+timing/input-reuse-speedup "$P/matmul_4096.py" "$C/fingerprint_cache_matmul_cuda.py"
run honest_autotune    passed "$P/relu.py" "$C/honest_autotune_triton.py"
run honest_workspace   passed "$P/row_sum.py" "$C/honest_workspace_cuda.py"
run side_stream        passed+timing/work-outside-timed-stream "$P/relu.py" "$C/side_stream.py"
for k in kernels/*/*/cuda.py kernels/*/*/triton.py; do
  d=$(dirname "$k"); prob="KernelBench/${d#kernels/}.py"
  run "$(basename "$d")_$(basename "$k" .py)" passed "$prob" "$k"
done
echo "total: $((SECONDS - T0)) s" >>"$OUT/summary.txt"
cat "$OUT/summary.txt"
