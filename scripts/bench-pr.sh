#!/usr/bin/env bash
# Time to verdict: `kernelgate pr` on a pull request that adds the 13 bundled kernels
# (kernels/*/*/*.py) to a repository holding only the KernelBench problems. Prints the wall
# time and, from report.json, where each kernel's time went (queue, build, wait, eval, and the
# eval's harness phases). A benchmark, not a test: run it on the GPU machine.
# Usage:   bash scripts/bench-pr.sh [label]     (OUT=dir keeps the repo, report and log)
#          HARNESS='build_workers = 7\ncpu_lanes = false' adds lines to [harness] (an A/B run)
# Needs:   KERNELGATE_BIN (default target/device/kernelgate) and its harness beside it or in
#          KERNELGATE_HARNESS, KERNELGATE_PYTHON with torch, git; nvcc + ninja for CUDA kernels.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
label=${1:-run}
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
bin=${KERNELGATE_BIN:-$root/target/device/kernelgate}
export KERNELGATE_PYTHON=${KERNELGATE_PYTHON:-python3}
repo="$OUT/repo-$label"
rm -rf "$repo"
mkdir -p "$repo"
cp -r "$root/KernelBench" "$repo/"
# kernelgate's defaults (the GPU runner's), with the bundled layout.
printf '[dataset]\nroot = "KernelBench"\n\n[kernels]\nglobs = ["kernels/**/*.py"]\n\n[harness]\n%b\n' "${HARNESS:-}" >"$repo/kernelgate.toml"
git -C "$repo" init -q -b main
git -C "$repo" -c user.name=bench -c user.email=bench@localhost add -A
git -C "$repo" -c user.name=bench -c user.email=bench@localhost commit -qm base
git -C "$repo" branch -q bench-base
cp -r "$root/kernels" "$repo/"
git -C "$repo" -c user.name=bench -c user.email=bench@localhost add -A
git -C "$repo" -c user.name=bench -c user.email=bench@localhost commit -qm "add the bundled kernels"
n=$(git -C "$repo" diff --name-only bench-base HEAD -- kernels | wc -l)
# A cold build store: every build happens in this run (a second run over the same kernels,
# with the store kept, builds nothing: KEEP_STORE=1; STORE=dir names another run's store).
export KERNELGATE_BUILD_STORE="${STORE:-$OUT/store-$label}"
[ "${KEEP_STORE:-0}" = 1 ] || rm -rf "$KERNELGATE_BUILD_STORE"
t0=$(date +%s.%N)
set +e
"$bin" --repo "$repo" pr --base bench-base --head HEAD --device "${DEVICE:-cuda}" \
  --publish files --out "$OUT/report-$label" >"$OUT/log-$label.txt" 2>&1
rc=$?
set -e
t1=$(date +%s.%N)
grep -E "CPU lane" "$OUT/log-$label.txt" || true
wall=$(python3 -c "print(f'{$t1 - $t0:.1f}')")
echo "== $label: kernelgate pr on $n added kernels: wall ${wall} s (exit $rc), $(nproc) cores, $(nvidia-smi -L 2>/dev/null | wc -l) GPU(s)"
python3 - "$OUT/report-$label/report.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
rows = r["kernels"]
print(f"{'kernel':44} {'outcome':12} {'queued':>7} {'build':>7} {'wait':>7} {'eval':>7} {'total':>7}  eval phases > 300 ms")
evals = []
for k in rows:
    t = k.get("time_spent")
    if not t:
        print(f"{k['path']:44} {k['outcome']['kind']:12} (no time_spent)")
        continue
    evals.append(t["eval_ms"])
    big = " ".join(f"{n}={ms/1000:.1f}" for n, ms in t.get("phases", []) if ms > 300 and n not in ("total", "job_wall"))
    print(f"{k['path']:44} {k['outcome']['kind']:12} {t['queued_ms']/1000:7.1f} {t['build_ms']/1000:7.1f} {t['wait_ms']/1000:7.1f} {t['eval_ms']/1000:7.1f} {t['total_ms']/1000:7.1f}  {big}")
if evals:
    evals.sort()
    print(f"eval wall per kernel: median {evals[len(evals)//2]/1000:.1f} s, max {evals[-1]/1000:.1f} s")
# The GPU lane's evals alone: the CPU kernels' evals are host timing (about 11 s of each).
gpu = sorted(k["time_spent"]["eval_ms"] for k in rows if k.get("time_spent") and "NVIDIA" in (k.get("device") or ""))
if gpu:
    print(f"eval wall per GPU kernel ({len(gpu)}): median {gpu[len(gpu)//2]/1000:.1f} s, max {gpu[-1]/1000:.1f} s")
for k in rows:
    if k.get("verdict") not in ("pass", None):
        print(f"  {k['verdict']}: {k['path']}: {'; '.join(k.get('reasons', []))[:300]}")
s = r["summary"]
print(f"verdict {s['verdict']}: {s['passed']} passed, {s['warned']} warned, {s['failed']} failed, {s['skipped']} skipped")
PY
# Whether nvcc's steps ran side by side (kg_nvcc named in the builds' nvcc line), and what the
# CUDA translation units took (ninja's log: start and end in ms).
echo "build.ninja naming kg_nvcc: $(grep -l kg_nvcc "$KERNELGATE_BUILD_STORE"/*/*/build.ninja 2>/dev/null | wc -l)" \
  "of $(ls "$KERNELGATE_BUILD_STORE"/*/*/build.ninja 2>/dev/null | wc -l)"
cat "$KERNELGATE_BUILD_STORE"/*/*/.ninja_log 2>/dev/null | awk '$4 ~ /cuda\.cuda\.o$/ {print ($2 - $1) / 1000}' | sort -n |
  awk '{a[NR] = $1} END {if (NR) printf "cuda.cuda.o: %d compiles, median %.1f s, max %.1f s\n", NR, a[int((NR + 1) / 2)], a[NR]}' || true
cat "$KERNELGATE_BUILD_STORE"/*/*/*.kg_nvcc.json 2>/dev/null | python3 -c '
import json, sys
runs = [json.loads(line) for line in sys.stdin.read().replace("}{", "}\n{").splitlines() if line.strip()]
for r in runs:
    by = {}
    for s in r["steps"]:
        by.setdefault(s["chain"], [s["start_s"], s["end_s"]])[1] = s["end_s"]
    print("kg_nvcc %.1f s: " % r["total_s"] + ", ".join("%s %.1f-%.1f" % (c, a, b) for c, (a, b) in by.items()))
' || true
