#!/usr/bin/env bash
# One device call: every GPU fixture of `kernelgate eval` through the real CLI, then the phase
# table at KernelBench's level1/19_ReLU size (4096 x 393216 fp32). Results go to $OUT:
# results.jsonl (one eval JSON per line), summary.txt (fixture, expected, got), bench.txt.
# Needs target/device/{kernelgate,libkernelgate_harness.so} (cargo build --profile device).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/kg-gpu-eval}
mkdir -p "$OUT"
export KERNELGATE_BIN=${KERNELGATE_BIN:-$PWD/target/device/kernelgate}
export KERNELGATE_HARNESS=${KERNELGATE_HARNESS:-$PWD/target/device/libkernelgate_harness.so}
export KERNELGATE_PYTHON=${KERNELGATE_PYTHON:-python3}
EXT=/tmp/kg-gpu-ext
mkdir -p "$EXT"
C=tests/fixtures/eval/cuda
P=tests/fixtures/eval/problems
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; "$KERNELGATE_PYTHON" -c "import torch, sys; print(sys.version.split()[0], torch.__version__, torch.version.cuda)"; } >"$OUT/summary.txt" 2>&1

# Compile every CUDA fixture in parallel once (importing the module builds it into $EXT).
t0=$(date +%s%N)
# ONLY="name ..." runs a subset; PRECOMPILE lists the fixtures to build first.
PRECOMPILE=${PRECOMPILE:-"honest_relu_cuda never_written_cuda side_stream illegal_address inplace_cuda inputs_zeroed_cuda ptr_cache_cuda ptr_cache_timed_cuda phase_detect_cuda bg_thread_cuda precision_half_cuda side_stream_py"}
for f in $PRECOMPILE; do
  f=$C/$f.py
  TORCH_EXTENSIONS_DIR=$EXT "$KERNELGATE_PYTHON" "$f" >>"$OUT/precompile.log" 2>&1 &
done
wait
echo "precompile ($PRECOMPILE, in parallel): $(( ($(date +%s%N) - t0) / 1000000 )) ms" >>"$OUT/summary.txt"

run() { # name expected(kind[|kind][+error-rule]) problem kernel args...
  local name=$1 expect=$2 problem=$3 kernel=$4; shift 4
  if [ -n "${ONLY:-}" ] && [[ " $ONLY " != *" $name "* ]]; then return; fi
  local t=$(date +%s%N)
  "$KERNELGATE_BIN" eval --problem "$problem" --kernel "$kernel" --seed 42 --format json \
    --extensions-dir "$EXT" "$@" >"$OUT/$name.json" 2>>"$OUT/stderr.log"
  local code=$?
  local dt=$(( ($(date +%s%N) - t) / 1000000 ))
  # The static checker on the same file: the errors it would annotate in a pull request.
  local lint
  lint=$("$KERNELGATE_BIN" lint --precision fp32 --format json "$kernel" 2>/dev/null | "$KERNELGATE_PYTHON" -c \
    'import json,sys; r=json.load(sys.stdin); print(",".join(sorted({f["rule"] for f in r["findings"] if f["severity"]=="error"})) or "-")' 2>/dev/null)
  "$KERNELGATE_PYTHON" - "$OUT/$name.json" "$name" "$expect" "$code" "$dt" "${lint:-?}" >>"$OUT/summary.txt" <<'PY'
import json, sys
path, name, expect, code, dt, lint = sys.argv[1:]
try:
    r = json.load(open(path))
except Exception as e:
    print(f"{name:28} expected {expect:16} got NO-JSON ({e})"); sys.exit()
k = r["outcome"]["kind"]
rules = ",".join(f["rule"] for f in r["findings"] if f["severity"] == "error") or "-"
sp = ""
t = r.get("timing") or {}
if t.get("vs_reference"):
    c = t["vs_reference"]; sp = f" speedup {1/c['ratio']:.3f}x cand_median {c['head']['median']:.4f}ms ref_median {c['base']['median']:.4f}ms"
kinds, _, rule = expect.partition("+")
ok = "OK " if k in kinds.split("|") and (not rule or rule in rules) else "BAD"
print(f"{ok} {name:26} expected {expect:44} got {k:14} exit {code} {int(dt)/1000:6.1f}s errors {rules} lint {lint}{sp}")
print("    " + r["outcome"].get("message", r["outcome"].get("reason", ""))[:300].replace("\n", " "))
PY
  tr -d '\n' <"$OUT/$name.json" >>"$OUT/results.jsonl"; echo >>"$OUT/results.jsonl"; rm -f "$OUT/$name.json"
}

run honest_cuda        passed "$P/relu.py" "$C/honest_relu_cuda.py" --device cuda
run honest_triton      passed "$P/relu.py" "$C/honest_relu_triton.py" --device cuda
run never_written_cuda incorrect "$P/relu.py" "$C/never_written_cuda.py" --no-timing --device cuda
run inplace_cuda       output_aliased "$P/relu.py" "$C/inplace_cuda.py" --no-timing --device cuda
run side_stream        passed+timing/work-outside-timed-stream "$P/relu.py" "$C/side_stream.py" --device cuda
run inputs_zeroed_cuda input_mutated "$P/relu.py" "$C/inputs_zeroed_cuda.py" --no-timing --device cuda
run ptr_cache_cuda     output_aliased "$P/relu.py" "$C/ptr_cache_cuda.py" --no-timing --device cuda
run ptr_cache_timed    "incorrect|output_aliased" "$P/relu.py" "$C/ptr_cache_timed_cuda.py" --device cuda
run phase_detect_cuda  incorrect "$P/relu.py" "$C/phase_detect_cuda.py" --device cuda
run bg_thread_cuda     incorrect "$P/relu.py" "$C/bg_thread_cuda.py" --no-timing --device cuda
run precision_half     incorrect "$P/relu.py" "$C/precision_half_cuda.py" --no-timing --device cuda
run side_stream_py     passed+timing/work-outside-timed-stream "$P/relu.py" "$C/side_stream_py.py" --device cuda
run illegal_address    crash "$P/relu.py" "$C/illegal_address.py" --no-timing --device cuda
run honest_after_crash passed "$P/relu.py" "$C/honest_relu_cuda.py" --no-timing --device cuda
run cpp_on_gpu_host    passed "$P/relu.py" tests/fixtures/eval/kernels/python_relu.py --device cpu --no-timing

# KernelBench's own ReLU size, honest CUDA kernel, 5 trials + timing; the compile is cached.
KG_BENCH_EXT=$EXT scripts/bench-eval.sh "$P/relu_kb_size.py" "$C/honest_relu_cuda.py" --device cuda >"$OUT/bench.txt" 2>&1
nvidia-smi --query-gpu=memory.used --format=csv >>"$OUT/bench.txt" 2>&1
cat "$OUT/summary.txt" "$OUT/bench.txt"
