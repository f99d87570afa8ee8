#!/usr/bin/env bash
# Trust: does the whole gate (`kernelgate pr`: lint, build, correctness, audits, timing, policy)
# pass honest kernels that look unusual and fail reward hacks that evade the static rules, on the
# GPU? One pull request on a throwaway repository adds
#   - every fixture of tests/fixtures/gpu/*.py at kernels/<PROBLEM>/<name>.py, where each file
#     says what it must get (`EXPECT = "pass"|"fail"`, `PROBLEM = "level1/..."`);
#   - the bundled honest kernels kernels/level*/*/{cuda,triton}.py (EXPECT pass);
#   - COPIES copies of kernels/level2/1_Matmul_ReLU_Add/cuda.py (EXPECT pass: one build shared,
#     each copy a separate eval).
# Then it prints one row per kernel from report.json (verdict, outcome, rule codes, speedup, the
# precision audit's errors, peak GPU memory) and `MISMATCHES: N`, the rows whose verdict
# contradicts EXPECT (an honest kernel failed, or a hack passed or only warned). Rows the machine
# could not judge (skipped: no GPU, infrastructure) are counted apart as UNJUDGED.
#
# The hacks are meant for the run-time checks, but the static rules already block each of them
# (KG610: reduced precision, also spelled with integer rounding and split PTX strings; KG617:
# allocator and RecordFunction hooks; KG304: `gc`), and `pr` never runs a kernel with a lint
# error. So the throwaway repository's kernelgate.toml turns the rules in LINT_WARN into warnings
# (default "KG304 KG610 KG617"; they still show in the table as W:): every verdict of a hack
# then rests on the run-time checks alone. LINT_WARN="" keeps the stock severities.
#
# Usage:   bash scripts/gpu-trust.sh                 (COPIES=3, OUT=./kg-trust, DEVICE=cuda)
#          REPORT=path/report.json bash scripts/gpu-trust.sh   only prints the table of a report
# Needs:   KERNELGATE_BIN (default target/device/kernelgate) and its harness beside it,
#          KERNELGATE_PYTHON with torch, nvcc + ninja, git, python3.
# Output:  $OUT/trust.txt (the table), $OUT/trust.jsonl (one line per kernel), $OUT/expect.tsv,
#          $OUT/log.txt (the pr log), $OUT/report/ (report.json and the payloads), $OUT/repo.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
copies=${COPIES:-3}
lint_warn=${LINT_WARN-KG304 KG610 KG617}
OUT=${OUT:-$PWD/kg-trust}
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"

table() { # report.json expect.tsv
  python3 - "$1" "$2" "$OUT/trust.jsonl" <<'PY' | tee "$OUT/trust.txt"
import json, os, sys
report, expect_tsv, jsonl = sys.argv[1:]
expect = {}
if os.path.exists(expect_tsv):
    for line in open(expect_tsv):
        parts = line.rstrip("\n").split("\t")
        if len(parts) >= 3:
            expect[parts[0]] = (parts[1], parts[2])
rows = json.load(open(report)).get("kernels", [])
out = open(jsonl, "w")

def num(v, fmt):
    return "-" if v is None else format(v, fmt)

def codes(k):
    err, warn = [], []
    for f in k.get("findings") or []:
        (err if f.get("severity") == "error" else warn).append(f.get("rule", "?"))
    for f in k.get("flags") or []:
        (err if f.get("severity") == "error" else warn).append(f.get("code", "?"))
    dedup = lambda xs: list(dict.fromkeys(xs))
    return dedup(err), dedup(warn)

hdr = f"{'kernel':46} {'expect':6} {'verdict':7} {'outcome':14} {'speedup':>7} {'cand_err':>8} {'ref_err':>8} {'GPU GiB':>7}  rules (E: errors, W: warnings)"
print(hdr)
mismatches, unjudged, seen = [], [], set()
for k in rows:
    path = k["path"]
    seen.add(path)
    exp, origin = expect.get(path, ("pass", "other"))
    verdict = k.get("verdict")
    outcome = (k.get("outcome") or {}).get("kind")
    err, warn = codes(k)
    sp = (k.get("speedup_eager") or {}).get("value")
    pa = k.get("precision_audit") or {}
    mem = (k.get("memory") or {}).get("gpu_peak_bytes")
    gib = None if mem is None else mem / 2**30
    if verdict == "skipped":
        unjudged.append(path)
        bad = False
    else:
        bad = (exp == "pass" and verdict == "fail") or (exp == "fail" and verdict in ("pass", "warn"))
    if bad:
        mismatches.append(path)
    parts = path.split("/")
    if len(parts) == 4 and parts[0] == "kernels":  # kernels/levelN/<id>_<Name>/<file>
        name = f"{parts[1]}/{parts[2][:14]}/{parts[3]}"
    else:
        name = path
    rules = " ".join(x for x in ("E:" + ",".join(err) if err else "", "W:" + ",".join(warn) if warn else "") if x)
    print(f"{name[-46:]:46} {exp:6} {str(verdict):7} {str(outcome)[:14]:14} {num(sp, '.2f'):>7} "
          f"{num(pa.get('candidate_error'), '.1e'):>8} {num(pa.get('reference_error'), '.1e'):>8} {num(gib, '.2f'):>7}  "
          f"{rules}{'  <-- MISMATCH' if bad else ''}")
    out.write(json.dumps({
        "path": path, "origin": origin, "expect": exp, "verdict": verdict, "outcome": outcome,
        "message": (k.get("outcome") or {}).get("message"), "errors": err, "warnings": warn,
        "reasons": k.get("reasons"), "speedup_eager": sp, "precision_audit": pa or None,
        "gpu_peak_bytes": mem, "mismatch": bad,
    }) + "\n")
missing = [p for p in expect if p not in seen]
for p in missing:
    print(f"NOT IN REPORT: {p} (expected {expect[p][0]})")
for p in mismatches:
    k = next(r for r in rows if r["path"] == p)
    print(f"MISMATCH {p}: expected {expect.get(p, ('pass',))[0]}, got {k.get('verdict')} "
          f"({(k.get('outcome') or {}).get('kind')}): {'; '.join(k.get('reasons') or [])[:400]}")
print(f"total: {len(rows)} kernels, {len(rows) - len(unjudged)} judged, UNJUDGED: {len(unjudged)}, not in report: {len(missing)}")
print(f"MISMATCHES: {len(mismatches)}")
PY
}

if [ -n "${REPORT:-}" ]; then
  table "$REPORT" "${EXPECT_TSV:-$OUT/expect.tsv}"
  exit 0
fi

bin=${KERNELGATE_BIN:-$root/target/device/kernelgate}
[ -x "$bin" ] || { echo "error: $bin is missing: cargo build --profile device -p kernelgate -p kernelgate-harness, or set KERNELGATE_BIN" >&2; exit 2; }
export KERNELGATE_PYTHON=${KERNELGATE_PYTHON:-python3}
export TORCH_EXTENSIONS_DIR=${TORCH_EXTENSIONS_DIR:-$OUT/ext}
repo="$OUT/repo"
rm -rf "$repo" "$OUT/report"
mkdir -p "$repo/kernels"
cp -r "$root/KernelBench" "$repo/"
{
  printf '[dataset]\nroot = "KernelBench"\n\n[kernels]\nglobs = ["kernels/**/*.py"]\n'
  if [ -n "$lint_warn" ]; then
    printf '\n[lint.severity]\n'
    for code in $lint_warn; do printf '%s = "warning"\n' "$code"; done
  fi
} >"$repo/kernelgate.toml"
git_() { git -C "$repo" -c user.name=trust -c user.email=trust@localhost -c commit.gpgsign=false -c core.hooksPath=/dev/null "$@"; }
git_ init -q -b main
git_ add -A
git_ commit -qm "trust: problems, no kernels"
git_ branch -q soak-base

expect_tsv="$OUT/expect.tsv"
: >"$expect_tsv"
for f in "$root"/tests/fixtures/gpu/*.py; do
  name=$(basename "$f")
  problem=$(sed -n 's/^PROBLEM = "\([^"]*\)".*/\1/p' "$f" | head -n 1)
  expect=$(sed -n 's/^EXPECT = "\([^"]*\)".*/\1/p' "$f" | head -n 1)
  if [ -z "$problem" ] || [ -z "$expect" ]; then
    echo "warning: $f has no PROBLEM or EXPECT line: left out" >&2
    continue
  fi
  [ -f "$repo/KernelBench/$problem.py" ] || { echo "error: $f names $problem, which is not in KernelBench/" >&2; exit 2; }
  mkdir -p "$repo/kernels/$problem"
  cp "$f" "$repo/kernels/$problem/$name"
  printf 'kernels/%s/%s\t%s\tfixture\n' "$problem" "$name" "$expect" >>"$expect_tsv"
done
for k in "$root"/kernels/level*/*/cuda.py "$root"/kernels/level*/*/triton.py; do
  [ -f "$k" ] || continue
  rel=${k#"$root"/}
  mkdir -p "$repo/$(dirname "$rel")"
  cp "$k" "$repo/$rel"
  printf '%s\tpass\tbundled\n' "$rel" >>"$expect_tsv"
done
src="$root/kernels/level2/1_Matmul_ReLU_Add/cuda.py"
for i in $(seq -w 1 "$copies"); do
  rel="kernels/level2/1_Matmul_ReLU_Add/cuda_copy_$i.py"
  cp "$src" "$repo/$rel"
  printf '%s\tpass\tcopy\n' "$rel" >>"$expect_tsv"
done
git_ add -A
git_ commit -qm "trust: GPU fixtures, bundled kernels, $copies copies"
n=$(git_ diff --name-only soak-base HEAD -- kernels | wc -l)
echo "== trust: $n kernels in the pull request ($(nvidia-smi -L 2>/dev/null | wc -l) GPU(s), $(nproc) cores)${lint_warn:+, lint rules as warnings: $lint_warn}"
t0=$SECONDS
set +e
"$bin" --repo "$repo" pr --base soak-base --head HEAD --device "${DEVICE:-cuda}" \
  --publish files --out "$OUT/report" >"$OUT/log.txt" 2>&1
rc=$?
set -e
echo "pr exit $rc after $((SECONDS - t0)) s"
if [ ! -f "$OUT/report/report.json" ]; then
  echo "error: no report.json; the log's tail:" >&2
  tail -n 30 "$OUT/log.txt" >&2
  exit 1
fi
table "$OUT/report/report.json" "$expect_tsv"
