#!/usr/bin/env bash
# Why an honest short reference reads slower after (or between) a candidate's calls, measured in
# the whole gate (issue 28): `kernelgate pr` on COPIES copies of the short
# level2/1_Matmul_ReLU_Add CUDA kernel (a 0.055 ms, launch-bound reference), once per variant,
# every row's `reference_check` (report.json) tabulated.
#   default    as shipped (no profiler warm-up)
#   warm_on    KERNELGATE_WARM_PROFILER=1: the profiler started at each process's load (the
#              default until issue 28's measurement)
#   no_ahead   warm_on, and [harness] start_ahead = false: no process started while another
#              eval runs (the warm-up in each eval's own process only)
# Usage:   VARIANTS="default warm_on no_ahead" COPIES=12 bash scripts/gpu-reference-cause.sh
# Needs:   what scripts/gpu-soak.sh needs.
# Output:  the table on stdout; every variant's soak under $OUT/<variant>.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
OUT=${OUT:-$root/kg-cause}
mkdir -p "$OUT"
export TORCH_EXTENSIONS_DIR=${TORCH_EXTENSIONS_DIR:-$OUT/ext}
for v in ${VARIANTS:-default warm_on no_ahead}; do
  case $v in
    default) env_=(KERNELGATE_WARM_PROFILER=0) toml="" ;;
    warm_on) env_=(KERNELGATE_WARM_PROFILER=1) toml="" ;;
    no_ahead) env_=(KERNELGATE_WARM_PROFILER=1) toml="start_ahead = false" ;;
    *) echo "unknown variant $v (default, warm_on, no_ahead)" >&2; exit 2 ;;
  esac
  echo "== variant $v"
  env "${env_[@]}" OUT="$OUT/$v" SET=short COPIES="${COPIES:-12}" HARNESS_TOML="$toml" \
    bash "$root/scripts/gpu-soak.sh" 2>&1 | grep -E '^(==|pr exit|total)'
done
python3 - "$OUT" ${VARIANTS:-default warm_on no_ahead} <<'PY'
import json, os, statistics, sys
out, variants = sys.argv[1], sys.argv[2:]
def q(xs):
    xs = sorted(x for x in xs if x is not None)
    return f"{xs[0]:.2f}/{statistics.median(xs):.2f}/{xs[-1]:.2f}" if xs else "-"
print(f"{'variant':10} {'n':>3} {'warned':>6} {'failed':>6} {'after/before min/med/max':>25} {'between/before':>16} {'speedup':>16} {'eval s':>6}")
for v in variants:
    path = os.path.join(out, v, "soak-short.jsonl")
    if not os.path.exists(path):
        print(f"{v:10} no result")
        continue
    rows = [json.loads(l) for l in open(path)]
    rc = [r.get("reference_check") or {} for r in rows]
    warned = sum(any("reference" in x for x in (r.get("reasons") or [])) for r in rows)
    failed = sum(r["verdict"] == "fail" for r in rows)
    print(f"{v:10} {len(rows):3} {warned:6} {failed:6} {q([c.get('after_ratio') for c in rc]):>25} "
          f"{q([c.get('interleaved_ratio') for c in rc]):>16} {q([(r.get('speedup') or {}).get('value') for r in rows]):>16} "
          f"{statistics.median(r['eval_s'] for r in rows):6.1f}")
PY
