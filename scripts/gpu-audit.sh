#!/usr/bin/env bash
# The runtime op audit on the GPU: `kernelgate eval` (correctness + audit, no timing) on every
# bundled CUDA/Triton kernel (kernels/) and on the audit's GPU fixtures (tests/fixtures/audit/cuda:
# two honest partial replacements keeping nn.Conv2d / nn.Linear, one add-zero decoy), then a
# table: kernel, outcome, custom share, ops left to PyTorch with their share, the audit phase
# (ms) and the job's wall time. Two kernels also run with --no-audit: the wall-time difference
# is the audit's cost per eval. Results in $OUT: summary.txt (the table), results.jsonl.
# Needs target/device/{kernelgate,libkernelgate_harness.so} (cargo build --profile device).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/kg-gpu-audit}
mkdir -p "$OUT"
export KERNELGATE_BIN=${KERNELGATE_BIN:-$PWD/target/device/kernelgate}
export KERNELGATE_HARNESS=${KERNELGATE_HARNESS:-$PWD/target/device/libkernelgate_harness.so}
export KERNELGATE_PYTHON=${KERNELGATE_PYTHON:-python3}
EXT=/tmp/kg-gpu-audit-ext
mkdir -p "$EXT"
A=tests/fixtures/audit
: >"$OUT/results.jsonl"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; "$KERNELGATE_PYTHON" -c "import torch, sys; print(sys.version.split()[0], torch.__version__, torch.version.cuda)"; } >"$OUT/summary.txt" 2>&1

# (name, problem, kernel): bundled kernels first, then the audit fixtures.
JOBS=()
# FIXTURES_ONLY=1: the audit fixtures alone (a decoy and two partial replacements), no cost rows.
for k in kernels/level*/*/cuda.py kernels/level*/*/triton.py; do
  [ -f "$k" ] && [ "${FIXTURES_ONLY:-0}" != 1 ] || continue
  d=$(dirname "$k"); lvl=$(basename "$(dirname "$d")")
  JOBS+=("$(basename "$d")/$(basename "$k" .py)|KernelBench/$lvl/$(basename "$d").py|$k")
done
JOBS+=("partial_conv_relu_scale|KernelBench/level2/2_Conv2d_ReLU_Scale.py|$A/cuda/partial_conv_relu_scale_cuda.py")
JOBS+=("partial_mnist_cuda|$A/problems/mnist_like.py|$A/cuda/partial_mnist_cuda.py")
JOBS+=("decoy_add_zero_cuda|$A/problems/matmul_gpu.py|$A/cuda/decoy_add_zero_cuda.py")

# Build every CUDA extension once, in parallel (importing a kernel file builds it into $EXT).
t0=$(date +%s%N)
for j in "${JOBS[@]}"; do
  k=${j##*|}
  case "$k" in *triton*) continue ;; esac
  TORCH_EXTENSIONS_DIR=$EXT "$KERNELGATE_PYTHON" -c "import importlib.util as u, sys; s = u.spec_from_file_location('m', sys.argv[1]); s.loader.exec_module(u.module_from_spec(s))" "$k" >>"$OUT/precompile.log" 2>&1 &
done
wait
echo "precompile (parallel): $(( ($(date +%s%N) - t0) / 1000000 )) ms" >>"$OUT/summary.txt"

evaluate() { # name problem kernel [args...]: one eval JSON line into results.jsonl
  local name=$1 problem=$2 kernel=$3; shift 3
  local t=$(date +%s%N)
  "$KERNELGATE_BIN" eval --problem "$problem" --kernel "$kernel" --seed 42 --device cuda \
    --no-timing --shifted-trials 0 --format json --extensions-dir "$EXT" "$@" >"$OUT/one.json" 2>>"$OUT/stderr.log"
  local dt=$(( ($(date +%s%N) - t) / 1000000 ))
  "$KERNELGATE_PYTHON" - "$OUT/one.json" "$name" "$dt" "$*" >>"$OUT/results.jsonl" <<'PY'
import json, sys
path, name, dt, args = sys.argv[1:]
try:
    r = json.load(open(path))
except Exception as e:
    r = {"outcome": {"kind": "no-json", "message": str(e)}}
r["_name"], r["_cli_ms"], r["_args"] = name, int(dt), args
print(json.dumps(r))
PY
}

for j in "${JOBS[@]}"; do
  IFS='|' read -r name problem kernel <<<"$j"
  evaluate "$name" "$problem" "$kernel"
done
# The audit's cost: the same evals without it.
[ "${FIXTURES_ONLY:-0}" = 1 ] || evaluate "level1/3_ReLU/cuda" "KernelBench/level1/3_ReLU.py" kernels/level1/3_ReLU/cuda.py --no-audit
[ "${FIXTURES_ONLY:-0}" = 1 ] || evaluate "partial_mnist_cuda" "$A/problems/mnist_like.py" "$A/cuda/partial_mnist_cuda.py" --no-audit

"$KERNELGATE_PYTHON" - "$OUT/results.jsonl" >>"$OUT/summary.txt" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print(f"\n{'kernel':34} {'outcome':10} {'custom':>7}  {'audit ms':>8} {'wall ms':>8}  ops left to PyTorch (share)")
walls = {}
for r in rows:
    ph = {p["name"]: p["ms"] for p in r.get("phases", [])}
    wall = ph.get("job_wall", r["_cli_ms"])
    a = r.get("audit")
    if "--no-audit" in r["_args"]:
        walls.setdefault(r["_name"], {})["without"] = wall
        continue
    walls.setdefault(r["_name"], {})["with"] = wall
    kind = r["outcome"]["kind"]
    if a is None:
        why = "; ".join(f["message"][:120] for f in r.get("findings", []) if "audit" in f["rule"]) or r["outcome"].get("message", "")[:120]
        print(f"{r['_name']:34} {kind:10} {'n/a':>7}  {ph.get('audit', 0):8.1f} {wall:8.0f}  no audit: {why}")
        continue
    share = a.get("custom_share")
    left = [e for e in a["entries"] if e["class"] != "custom"]
    desc = ", ".join(
        f"{e['op'][:40]} → {e.get('library') or e['class']} {100 * (e['share'] or 0):.0f}%" + (f" (by {e['by_extension']})" if e.get("by_extension") else "")
        for e in left[:4]
    ) or "-"
    noeff = [f"{c['function']}: {c['reason']}" for c in a.get("extension_calls", []) if c.get("ineffective")]
    if noeff:
        desc += " | no effect: " + "; ".join(noeff)
    s = f"{100 * share:.0f}%" if share is not None else "n/a"
    print(f"{r['_name']:34} {kind:10} {s:>7}  {a.get('audit_ms', ph.get('audit', 0)):8.1f} {wall:8.0f}  {desc}")
    for e in a["entries"][:8]:
        print(f"    {e['class']:11} {e['ms']:9.4f} ms {100 * (e['share'] or 0):5.1f}%  {e['op'][:70]} {e.get('library') or ''}")
print("\naudit cost (job wall with / without the audit, ms):")
for n, w in walls.items():
    if "with" in w and "without" in w:
        print(f"  {n:34} {w['with']:8.0f} / {w['without']:8.0f}  = +{w['with'] - w['without']:.0f} ms")
PY
cat "$OUT/summary.txt"
