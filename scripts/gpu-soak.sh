#!/usr/bin/env bash
# Soak: honest kernels judged again and again by the whole gate on the GPU (`kernelgate pr`:
# lint, build, correctness, audit, timing, policy), every row kept with its outcome, reasons and
# log tail, and the peak GPU and host memory of each eval. Any row that does not pass is a
# spurious failure of the gate: every kernel here is honest.
#
# One `pr` per round on a throwaway repository whose pull request holds COPIES copies of each
# kernel of the chosen set. Copies share their source, so they share one extension build, and
# each copy is a separate eval in its own fresh process (started ahead while the GPU is busy).
#   SET=bundled  the bundled CUDA and Triton kernels (kernels/level*/*/{cuda,triton}.py) at their
#                problems' sizes, added by the pull request (no base version)
#   SET=kb       KernelBench's level1/19_ReLU at its own size (4096 x 393216 fp32, 6.4 GB per
#                tensor) with an honest CUDA ReLU: COPIES copies added, and COPIES copies that
#                the pull request edits (each timed against its base version, an A/A comparison)
#   SET=all      both in one pull request (KB_COPIES copies of the KernelBench-size ReLU)
#   SET=short    only the short level2/1_Matmul_ReLU_Add CUDA kernel (0.055 ms reference)
# HARNESS_TOML="start_ahead = false" adds lines to the throwaway repository's [harness] table.
# Usage:   SET=bundled COPIES=10 bash scripts/gpu-soak.sh      (OUT=dir keeps everything)
# Needs:   KERNELGATE_BIN (default target/device/kernelgate) and its harness beside it,
#          KERNELGATE_PYTHON with torch, nvcc + ninja, git.
# Output:  $OUT/soak-$SET.jsonl (one line per eval) and $OUT/soak-$SET.txt (the table).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
set_name=${SET:-bundled}
copies=${COPIES:-10}
OUT=${OUT:-$root/kg-soak}
mkdir -p "$OUT"
bin=${KERNELGATE_BIN:-$root/target/device/kernelgate}
export KERNELGATE_PYTHON=${KERNELGATE_PYTHON:-python3}
export TORCH_EXTENSIONS_DIR=${TORCH_EXTENSIONS_DIR:-$OUT/ext}
repo="$OUT/repo-$set_name"
rm -rf "$repo"
mkdir -p "$repo/kernels"
cp -r "$root/KernelBench" "$repo/"
printf '[dataset]\nroot = "KernelBench"\n\n[kernels]\nglobs = ["kernels/**/*.py"]\n\n[harness]\n%s\n' "${HARNESS_TOML:-}" >"$repo/kernelgate.toml"
git_() { git -C "$repo" -c user.name=soak -c user.email=soak@localhost "$@"; }
relu="$root/tests/fixtures/eval/cuda/honest_relu_cuda.py"
if [ "$set_name" = kb ] || [ "$set_name" = all ]; then
  cp "$root/tests/fixtures/eval/problems/relu_kb_size.py" "$repo/KernelBench/level1/19_ReLU.py"
  mkdir -p "$repo/kernels/level1/19_ReLU"
  for i in $(seq -w 1 "${KB_COPIES:-$copies}"); do
    cp "$relu" "$repo/kernels/level1/19_ReLU/edited_$i.py"
  done
fi
git_ init -q -b main
git_ add -A
git_ commit -qm base
git_ branch -q soak-base
if [ "$set_name" = kb ] || [ "$set_name" = all ]; then
  for i in $(seq -w 1 "${KB_COPIES:-$copies}"); do
    cp "$relu" "$repo/kernels/level1/19_ReLU/added_$i.py"
    # The same edit in every copy: the head/base pair, and so the build, is shared.
    printf '\n# edited by the pull request (comment only)\n' >>"$repo/kernels/level1/19_ReLU/edited_$i.py"
  done
fi
if [ "$set_name" != kb ]; then
  kernels=("$root"/kernels/level*/*/cuda.py "$root"/kernels/level*/*/triton.py)
  [ "$set_name" = short ] && kernels=("$root"/kernels/level2/1_Matmul_ReLU_Add/cuda.py)
  for k in "${kernels[@]}"; do
    rel=${k#"$root"/}
    dir="$repo/$(dirname "$rel")"
    mkdir -p "$dir"
    b=$(basename "$k" .py)
    for i in $(seq -w 1 "$copies"); do cp "$k" "$dir/${b}_$i.py"; done
  done
fi
git_ add -A
git_ commit -qm "soak: $set_name x $copies"
n=$(git_ diff --name-only soak-base HEAD -- kernels | wc -l)
echo "== soak $set_name: $n kernels in the pull request ($(nvidia-smi -L 2>/dev/null | wc -l) GPU(s), $(nproc) cores)"
t0=$SECONDS
set +e
"$bin" --repo "$repo" pr --base soak-base --head HEAD --device "${DEVICE:-cuda}" \
  --publish files --out "$OUT/report-$set_name" >"$OUT/log-$set_name.txt" 2>&1
rc=$?
set -e
echo "pr exit $rc after $((SECONDS - t0)) s"
python3 - "$OUT/report-$set_name/report.json" "$OUT/soak-$set_name.jsonl" <<'PY' | tee "$OUT/soak-$set_name.txt"
import collections, json, re, sys
report, jsonl = sys.argv[1:]
rows = json.load(open(report))["kernels"]
out = open(jsonl, "w")
by = collections.defaultdict(list)
bad = []
for k in rows:
    m = k.get("memory") or {}
    t = k.get("time_spent") or {}
    rec = {
        "path": k["path"], "change": (k.get("change") or {}).get("kind"), "verdict": k.get("verdict"),
        "outcome": k["outcome"].get("kind"), "outcome_full": k["outcome"],
        "reasons": k.get("reasons"), "flags": k.get("flags"),
        "errors": [f for f in k.get("findings", []) if f.get("severity") == "error"],
        "gpu_peak_gib": (m.get("gpu_peak_bytes") or 0) / 2**30,
        "host_peak_gib": (m.get("host_peak_bytes") or 0) / 2**30,
        "eval_s": (t.get("eval_ms") or 0) / 1000, "retries": t.get("retries", 0),
        "speedup": k.get("speedup_eager"), "reference_check": k.get("reference_check"),
    }
    out.write(json.dumps(rec) + "\n")
    group = re.sub(r"_\d+\.py$", ".py", k["path"])
    by[(group, rec["change"])].append(rec)
    if rec["verdict"] != "pass":
        bad.append(rec)
print(f"{'kernel (copies)':48} {'change':8} {'n':>3} {'pass':>4} {'other':>5} {'eval s':>6} {'retries':>7} {'GPU peak GiB':>12} {'host peak GiB':>13}")
for (g, change), rs in sorted(by.items()):
    ok = sum(r["verdict"] == "pass" for r in rs)
    med = sorted(r["eval_s"] for r in rs)[len(rs) // 2]
    print(f"{g[-48:]:48} {str(change):8} {len(rs):3} {ok:4} {len(rs) - ok:5} {med:6.1f} {sum(r['retries'] for r in rs):7} "
          f"{max(r['gpu_peak_gib'] for r in rs):12.2f} {max(r['host_peak_gib'] for r in rs):13.2f}")
print(f"total: {len(rows)} evals, {len(rows) - len(bad)} passed, {len(bad)} not")
for r in bad:
    print("NOT PASSED:", json.dumps(r)[:3000])
PY
