#!/usr/bin/env bash
# The timed calls' precision audit on real TF32 tensor cores (issue 46): the judge46 checked-call
# fixtures and the honest control on the 4096^2 non-negative matmul, one eval each, with the
# audit's evidence (`precision_audit.timed`) printed.
# Usage:   OUT=dir bash scripts/gpu-precision.sh BIN
set -u
OUT=${OUT:?set OUT to a directory}
bin=$1
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
export KERNELGATE_PYTHON=${KERNELGATE_PYTHON:-python3}
for k in checked_calls_tf32 checked_calls_tf32_rounded honest_matmul; do
  timeout 100 "$bin" eval --problem tests/fixtures/eval/problems/matmul_4096.py \
    --kernel "tests/fixtures/eval/cuda/judge46/$k.py" --device cuda --no-audit --format json \
    >"$OUT/precision-$k.json" 2>"$OUT/precision-$k.err"
  python3 - "$k" "$OUT/precision-$k.json" >>"$OUT/precision.txt" <<'PY'
import json, sys
k, path = sys.argv[1:3]
try:
    d = json.load(open(path))
except Exception as e:
    print(k, "no JSON", e)
    sys.exit()
f = [x["rule"] for x in d.get("findings", []) if x.get("severity") == "error" and x["rule"].startswith("eval/")]
print(k, d["outcome"]["kind"], f)
for t in (d.get("precision_audit") or {}).get("timed", []):
    print("   timed: cand %.2e ref %.2e" % (t["candidate_error"], t["reference_error"]),
          " ".join("%s:%.2e/b=%.2f+-%.2g/r=%.2f" % (n["format"], n["error"], n["coefficient"], n["stderr"], n["correlation"])
                   for n in t.get("narrowed", [])))
PY
done
cat "$OUT/precision.txt"
