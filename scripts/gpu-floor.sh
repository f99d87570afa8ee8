#!/usr/bin/env bash
# One device call: the physical-floor check on the GPU, through the real CLI. Prints one line per
# case (outcome, error findings, candidate median, floor and its basis, the runner's `work` phase)
# and keeps every eval JSON in $OUT/floor.jsonl.
# Needs target/device/{kernelgate,libkernelgate_harness.so} (cargo build --profile device).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/kg-gpu-floor}
mkdir -p "$OUT"
BIN=${KERNELGATE_BIN:-$PWD/target/device/kernelgate}
export KERNELGATE_HARNESS=${KERNELGATE_HARNESS:-$PWD/target/device/libkernelgate_harness.so}
export KERNELGATE_PYTHON=${KERNELGATE_PYTHON:-python3}
EXT=/tmp/kg-gpu-ext
mkdir -p "$EXT"
C=tests/fixtures/eval/cuda
P=tests/fixtures/eval/problems
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for f in $C/honest_relu_cuda.py $C/side_stream.py kernels/level2/1_Matmul_ReLU_Add/cuda.py; do
  TORCH_EXTENSIONS_DIR=$EXT "$KERNELGATE_PYTHON" "$f" >>"$OUT/precompile.log" 2>&1 &
done
wait

case_() { # name problem kernel args...
  local name=$1 problem=$2 kernel=$3; shift 3
  "$BIN" eval --problem "$problem" --kernel "$kernel" --seed 42 --format json --device cuda \
    --extensions-dir "$EXT" "$@" >"$OUT/$name.json" 2>>"$OUT/stderr.log"
  local code=$?
  "$KERNELGATE_PYTHON" - "$OUT/$name.json" "$name" "$code" <<'PY'
import json, sys
path, name, code = sys.argv[1:]
try:
    r = json.load(open(path))
except Exception as e:
    print(f"{name:22} NO-JSON ({e})"); sys.exit()
t = r.get("timing") or {}
c = t.get("vs_reference") or {}
f = t.get("floor") or {}
errs = ",".join(x["rule"] for x in r["findings"] if x["severity"] == "error") or "-"
ph = {p["name"]: p["ms"] for p in r["phases"]}
cand = c.get("head", {}).get("median")
print(f"{name:22} {r['outcome']['kind']:8} exit {code} cand {cand if cand is None else round(cand, 4)} ms "
      f"ref {c.get('base', {}).get('median')} floor {r.get('floor_ms')} {f.get('bound')} "
      f"bw {f.get('bandwidth_gbs')} measured {f.get('measured_bandwidth_gbs')} work {r.get('work')} "
      f"work_phase {round(ph.get('work', -1), 1)} ms job {round(ph.get('job_wall', -1))} ms errors {errs}")
PY
  tr -d '\n' <"$OUT/$name.json" >>"$OUT/floor.jsonl"; echo >>"$OUT/floor.jsonl"
}

case_ honest_relu_small "$P/relu.py" "$C/honest_relu_cuda.py"
case_ honest_relu_kb    "$P/relu_kb_size.py" "$C/honest_relu_cuda.py"
case_ side_stream_kb    "$P/relu_kb_size.py" "$C/side_stream.py"
case_ python_matmul     "$P/small_matmul.py" tests/fixtures/eval/kernels/python_matmul.py
case_ matmul_relu_add   KernelBench/level2/1_Matmul_ReLU_Add.py kernels/level2/1_Matmul_ReLU_Add/cuda.py
# The table form for one case.
"$BIN" eval --problem "$P/relu_kb_size.py" --kernel "$C/side_stream.py" --seed 42 --device cuda \
  --extensions-dir "$EXT" 2>&1 | sed -n '/^findings/,/^phases/p'
