#!/usr/bin/env bash
# Phase table of one `kernelgate eval`: process start + torch import, input generation, compile,
# reference, candidate trials, checks, timing, total, and the harness's own overhead (everything
# but the compile and the kernels' own time).
#
#   scripts/bench-eval.sh [PROBLEM] [KERNEL] [extra kernelgate eval args...]
#
# Defaults: the small ReLU fixture with the honest C++ kernel on the CPU. The compile is warmed
# first (a shared extensions cache) so the table shows a steady-state eval plus the cold compile.
# Env: KERNELGATE_BIN (default target/debug/kernelgate), KERNELGATE_PYTHON, KERNELGATE_HARNESS.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${KERNELGATE_BIN:-target/debug/kernelgate}
PROBLEM=${1:-tests/fixtures/eval/problems/relu.py}
KERNEL=${2:-tests/fixtures/eval/kernels/honest_relu.py}
shift $(( $# > 2 ? 2 : $# ))
EXT=${KG_BENCH_EXT:-$PWD/target/kernelgate-bench-torch-extensions}
PY=${KERNELGATE_PYTHON:-$( [ -x .venv/bin/python ] && echo $PWD/.venv/bin/python || echo python3 )}
export KERNELGATE_PYTHON=$PY
mkdir -p "$EXT"
cold=$(mktemp); warm=$(mktemp)
"$BIN" eval --problem "$PROBLEM" --kernel "$KERNEL" --seed 42 --format json --extensions-dir "$EXT" "$@" >"$cold" || true
"$BIN" eval --problem "$PROBLEM" --kernel "$KERNEL" --seed 42 --format json --extensions-dir "$EXT" "$@" >"$warm" || true
"$PY" - "$cold" "$warm" <<'PY'
import json, sys
cold, warm = (json.load(open(p)) for p in sys.argv[1:3])
def phases(r): return {p["name"]: p["ms"] for p in r["phases"]}
pc, pw = phases(cold), phases(warm)
rows = ["process_start", "torch_import", "device_init", "problem_load", "reference_init", "input_generation", "reference",
        "shifted_reference", "poison", "compile", "construct", "candidate_trials", "checks", "shifted_trials",
        "timing", "total", "job_wall"]
print(f"problem {warm['problem']}  kernel {warm['kernel']}  device {warm['device']}  outcome {warm['outcome']['kind']}")
print(f"{'phase':20} {'cold (ms)':>12} {'warm (ms)':>12}")
for r in rows:
    if r in pc or r in pw:
        print(f"{r:20} {pc.get(r, float('nan')):12.1f} {pw.get(r, float('nan')):12.1f}")
kernel = pw.get("candidate_trials", 0.0) + pw.get("reference", 0.0)
t = warm.get("timing") or {}
timed_ms = sum(s["ms"] for series in (t.get("samples") or {}).values() for s in series)
wall = pw.get("job_wall", 0.0)
print(f"{'eval excl. compile':20} {pc.get('job_wall', 0) - pc.get('compile', 0):12.1f} {wall - pw.get('compile', 0):12.1f}")
print(f"{'kernels own time':20} {'':12} {kernel + timed_ms:12.1f}   (reference + candidate trials + timed calls)")
print(f"{'harness overhead':20} {'':12} {wall - pw.get('compile', 0) - kernel - timed_ms:12.1f}   (wall - compile - kernels)")
PY
rm -f "$cold" "$warm"
