#!/usr/bin/env bash
# Keyed baselines on a GPU machine, in one call: `kernelgate baseline --kernels` on a main made
# of the demo's base and its CUDA ReLU (as the baselines workflow on main does), committed, then
# `kernelgate pr` on a pull request touching that kernel. Prints every row's vs_baseline and baseline_mismatch flags, and
# the hardware keys stored, so a key the gate builds differently from the one the baseline
# command wrote (driver, CUDA, torch strings) shows up as a refused comparison.
# Usage:   bash scripts/gpu-baselines-pr.sh
# Needs:   target/device/{kernelgate,libkernelgate_harness.so}
#          (cargo build --profile device -p kernelgate -p kernelgate-harness), python3 with torch,
#          nvcc and ninja on PATH, git.
# Output:  $OUT/summary.txt, $OUT/logs.tgz.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
OUT=${OUT:-$root/kg-gpu-baselines}
mkdir -p "$OUT"
BIN=${KERNELGATE_BIN:-$root/target/device/kernelgate}
export KERNELGATE_HARNESS=${KERNELGATE_HARNESS:-$root/target/device/libkernelgate_harness.so}
export KERNELGATE_PYTHON=${KERNELGATE_PYTHON:-python3}
export MAX_JOBS=${MAX_JOBS:-$(nproc)}
export GIT_AUTHOR_NAME=kg GIT_AUTHOR_EMAIL=kg@kernelgate.invalid
export GIT_COMMITTER_NAME=kg GIT_COMMITTER_EMAIL=kg@kernelgate.invalid
work=$(mktemp -d)
repo="$work/repo"
summary="$OUT/summary.txt"
T0=$SECONDS
export TORCH_EXTENSIONS_DIR="$work/ext"

{
  echo "# keyed baselines through kernelgate pr ($(date -u +%FT%TZ))"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  "$KERNELGATE_PYTHON" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"
} >"$summary" 2>&1

KG_DEMO_GPU=1 bash scripts/demo/make-repo.sh "$repo" >"$work/make.log" 2>&1
g() { git -C "$repo" -c commit.gpgsign=false -c core.hooksPath=/dev/null "$@"; }
# main: the demo's base plus its CUDA ReLU as an accepted kernel.
g checkout -q -B mainline demo-base
g checkout demo-head -- kernels/level1/3_ReLU/cuda.py
g commit -q -m "Accept the CUDA ReLU"

timeout 150 "$BIN" --repo "$repo" baseline --kernels --device cuda \
  --problem level1/3_ReLU >"$work/baseline.log" 2>&1
echo "baseline --kernels: exit $?, $((SECONDS - T0)) s" | tee -a "$summary"
tail -n 12 "$work/baseline.log" >>"$summary"
g add results
g commit -q -m "Refresh timing baselines"
base=$(g rev-parse HEAD)
# The pull request touches the CUDA ReLU outside its CUDA source (the extension is reused).
g checkout -q -b feature
echo "# touched by the pull request" >>"$repo/kernels/level1/3_ReLU/cuda.py"
g commit -q -am "Touch the CUDA ReLU"
head=$(g rev-parse HEAD)

t=$SECONDS
timeout 120 "$BIN" --repo "$repo" pr --base "$base" --head "$head" --out "$work/pr" \
  --publish files --device cuda >"$work/pr.log" 2>&1
echo "pr: exit $?, $((SECONDS - t)) s" | tee -a "$summary"

"$KERNELGATE_PYTHON" - "$repo" "$work/pr/report.json" >>"$summary" 2>&1 <<'PY'
import glob, json, sys
repo, report = sys.argv[1], sys.argv[2]
print("\n## stored keys")
for f in sorted(glob.glob(f"{repo}/results/timing/*/kernelgate_*.json")):
    for e in json.load(open(f))["entries"]:
        h = e["hardware"]
        print(f"{f.split('/')[-2]:<28} {e['variant']:<7} {e.get('kernel') or e['problem']:<40} "
              f"{h['gpu']} / {h['driver']} / {h['cuda']} / {h['torch']} / {h['precision']} "
              f"median {e['stats']['median']:.4f} ms n={e['stats']['n']}")
print("\n## rows")
try:
    r = json.load(open(report))
except Exception as e:
    print("no report:", e); sys.exit(0)
print("hardware:", r["run"].get("hardware"))
for k in r["kernels"]:
    vs = k.get("vs_baseline") or {}
    against = (vs.get("against") or {}).get("kind", "-")
    ratio = vs.get("ratio")
    ratio = f"{ratio:.3f}" if isinstance(ratio, (int, float)) else str(ratio)
    print(f"{k['path']:<40} {k['outcome']['kind']:<14} device={k['outcome'].get('details', {}).get('device', '-')!s:<24} "
          f"vs_baseline {ratio} {vs.get('verdict', '-')} ({against}) -> {k['verdict']}")
    if vs.get("against"):
        print("    detail:", vs["against"]["detail"])
    for f in k.get("flags", []):
        if f["code"] == "baseline_mismatch":
            print("    FLAG:", f["message"])
PY
echo "total $((SECONDS - T0)) s" | tee -a "$summary"
tar -czf "$OUT/logs.tgz" -C "$work" baseline.log pr.log pr/report.json pr/comment.md 2>/dev/null
cat "$summary"
