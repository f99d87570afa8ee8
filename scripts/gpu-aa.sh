#!/usr/bin/env bash
# The timing method through the whole judge/worker path (issue 46): `kernelgate eval
# --base-kernel` N times with the kernel against itself (A/A: any verdict but `unchanged` is a
# false alarm) and N times against a copy that sleeps about 3% of its runtime on the GPU after
# each call (detection: `slower` is a hit), interleaved, in fresh processes as a pull request
# runs them. Also the CV of the candidate's median across the A/A evals (a cross-process CV).
# Usage:   OUT=dir N=40 bash scripts/gpu-aa.sh LABEL BIN [LABEL BIN ...]
#          KERNEL=kernels/LEVEL/NAME/k.py (its problem from the path) or KERNEL=... PROBLEM=...;
#          default: scripts/aa/square_matmul.py on level1/1_Square_matmul (no build per eval).
# Results: $OUT/aa-LABEL.txt (the summary) and $OUT/aa-LABEL.jsonl (one line per eval).
# Needs:   each BIN with its harness beside it, python3 with torch, nvcc + ninja.
set -u
OUT=${OUT:?set OUT to a directory}
mkdir -p "$OUT"
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
export KERNELGATE_PYTHON=${KERNELGATE_PYTHON:-python3} PYTHONUNBUFFERED=1
N=${N:-40}
if [ -z "${KERNEL:-}" ]; then
  KERNEL=scripts/aa/square_matmul.py
  PROBLEM=${PROBLEM:-level1/1_Square_matmul}
fi
# The problem the kernel maps to by its path (kernels/LEVEL/NAME/...), for the slowed copy too.
PROBLEM=${PROBLEM:-$(echo "$KERNEL" | cut -d/ -f2-3)}
work=$(mktemp -d)
ext=$work/ext
mkdir -p "$ext"
# eval_pair LABEL BIN KIND HEAD: one eval of HEAD against KERNEL as base; one JSON line out.
eval_pair() {
  timeout 120 "$2" eval --problem "$PROBLEM" --kernel "$4" --base-kernel "$KERNEL" --device "${DEVICE:-cuda}" --no-audit --format json \
    --extensions-dir "$ext" >"$work/e.json" 2>"$work/e.err"
  python3 - "$3" "$work/e.json" "$work/e.err" >>"$OUT/aa-$1.jsonl" <<'PY'
import json, statistics, sys
kind, path, err = sys.argv[1:4]
try:
    d = json.load(open(path))
except Exception as e:
    print(json.dumps({"kind": kind, "error": f"no JSON ({e})", "stderr": open(err).read()[-800:]}))
    sys.exit()
t = d.get("timing") or {}
vb = t.get("vs_base") or {}
s = t.get("samples") or {}
med = lambda k: statistics.median(x["ms"] for x in s[k]) if s.get(k) else None
print(json.dumps({"kind": kind, "outcome": d["outcome"]["kind"], "verdict": vb.get("verdict"),
                  "ratio": vb.get("ratio"), "p": vb.get("p_value"), "base_ms": med("base"),
                  "head_ms": med("candidate"), "n": len(s.get("candidate") or []),
                  "errors": [f["rule"] for f in d.get("findings", []) if f.get("severity") == "error"]}))
PY
}
while [ $# -ge 2 ]; do
  label=$1 bin=$2
  shift 2
  : >"$OUT/aa-$label.jsonl"
  t0=$SECONDS
  # The first A/A eval builds the extension and gives the median that sizes the sleep.
  eval_pair "$label" "$bin" warmup "$KERNEL"
  ms=$(python3 -c "import json,sys; print(json.loads(open(sys.argv[1]).readline()).get('head_ms') or 0.1)" "$OUT/aa-$label.jsonl")
  clock_mhz=$(nvidia-smi --query-gpu=clocks.sm --format=csv,noheader,nounits 2>/dev/null | head -1)
  clock_mhz=${clock_mhz:-1980}
  cycles=$(python3 -c "print(max(1, int(0.03 * $ms * 1e-3 * $clock_mhz * 1e6)))")
  slow=$work/slow_$(basename "$KERNEL")
  cat "$KERNEL" - >"$slow" <<PY

# gpu-aa.sh: the same kernel, then a GPU sleep of $cycles cycles (about 3% of $ms ms).
_kg_aa_forward = ModelNew.forward


def _kg_aa_slower(self, *args):
    out = _kg_aa_forward(self, *args)
    torch.cuda._sleep($cycles) if torch.cuda.is_available() else None
    return out


ModelNew.forward = _kg_aa_slower
PY
  kept=0
  for i in $(seq "$N"); do
    for kind in aa slow; do
      if [ "$kind" = aa ]; then eval_pair "$label" "$bin" aa "$KERNEL"; else eval_pair "$label" "$bin" slow "$slow"; fi
      # An eval off its expected verdict or far from 1 keeps its whole JSON (its samples), up to 8.
      if [ "$kept" -lt 8 ] && python3 -c "import json,sys; d=json.loads(open(sys.argv[1]).readlines()[-1]); want='unchanged' if sys.argv[2]=='aa' else 'slower'; sys.exit(0 if d.get('verdict')!=want or abs((d.get('ratio') or 1)-1)>0.15 else 1)" "$OUT/aa-$label.jsonl" "$kind"; then
        kept=$((kept + 1)); cp "$work/e.json" "$OUT/aa-$label-off-$i-$kind.json"
      fi
    done
    # A time budget (AA_SECONDS) ends the pairs early with the summary still written.
    if [ -n "${AA_SECONDS:-}" ] && [ $((SECONDS - t0)) -gt "$AA_SECONDS" ]; then break; fi
  done
  python3 - "$OUT/aa-$label.jsonl" "$label" "$KERNEL" "$cycles" "$((SECONDS - t0))" >"$OUT/aa-$label.txt" <<'PY'
import json, statistics, sys
path, label, kernel, cycles, wall = sys.argv[1:6]
rows = [json.loads(l) for l in open(path)]
aa = [r for r in rows if r["kind"] == "aa"]
slow = [r for r in rows if r["kind"] == "slow"]
bad = [r for r in rows if r.get("error") or r.get("outcome") != "passed"]
fa = sum(1 for r in aa if r.get("verdict") != "unchanged")
hit = sum(1 for r in slow if r.get("verdict") == "slower")
meds = [r["head_ms"] for r in aa if r.get("head_ms")]
cv = statistics.pstdev(meds) / statistics.mean(meds) * 100 if len(meds) > 1 else float("nan")
change = [100 * (r["head_ms"] / r["base_ms"] - 1) for r in slow if r.get("head_ms") and r.get("base_ms")]
print(f"# scripts/gpu-aa.sh {label}: {kernel}, {len(aa)} A/A and {len(slow)} slowed evals in {wall} s")
print(f"A/A false alarms: {fa}/{len(aa)} ({100 * fa / max(1, len(aa)):.1f}%)")
print(f"CV of the candidate's median across A/A evals: {cv:.2f}% (median {statistics.median(meds) if meds else float('nan'):.4f} ms)")
print(f"slowdown of {cycles} sleep cycles, measured change median {statistics.median(change) if change else float('nan'):+.2f}%: detected {hit}/{len(slow)} ({100 * hit / max(1, len(slow)):.1f}%)")
print(f"evals that did not pass: {len(bad)}")
for r in bad[:5]:
    print("  ", json.dumps(r)[:400])
PY
  cat "$OUT/aa-$label.txt"
done
