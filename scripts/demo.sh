#!/usr/bin/env bash
# kernelgate's main job on the bundled demo, from a fresh clone:
#   1. builds kernelgate and its harness (cargo),
#   2. creates .venv with torch (scripts/setup-python.sh),
#   3. builds a demo kernel repository (git, from the bundled KernelBench/ problems) with a base
#      commit of honest kernels and a head commit that brings an improved kernel, a regression,
#      a reward hack and a broken kernel (plus CUDA kernels when a GPU is present),
#   4. runs `kernelgate pr` on it (CUDA when present, CPU otherwise), publishing to files,
#   5. writes the GitHub payloads (`kernelgate publish --publish files`) and prints where the PR
#      comment, job summary, SARIF and check-run payloads were written.
#
# Environment (all optional):
#   KG_DEMO_OUT=DIR        where the demo repository and the report go (default: kg-out/)
#   KG_DEMO_DEVICE=cpu     auto (default), cpu or cuda
#   KERNELGATE_BIN=PATH    use this kernelgate binary instead of building one
#   KERNELGATE_PYTHON=PATH the interpreter that holds torch (default: .venv/bin/python, created)
#   CARGO_PROFILE=release  cargo profile for the build (default: dev, the quickest to build)
#   KG_DEMO_ARGS="..."     extra arguments for `kernelgate pr` (e.g. --no-timing)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

out="${KG_DEMO_OUT:-$root/kg-out}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
device="${KG_DEMO_DEVICE:-auto}"
profile="${CARGO_PROFILE:-dev}"
start=$SECONDS

step() { printf '\n\033[1m==> [%s/5] %s\033[0m  (%ss)\n' "$1" "$2" "$((SECONDS - start))"; }

step 1 "building kernelgate and its harness"
if [ -n "${KERNELGATE_BIN:-}" ]; then
  bin="$KERNELGATE_BIN"
  echo "using KERNELGATE_BIN=$bin"
else
  command -v cargo >/dev/null || {
    echo "error: cargo not found. Install a Rust toolchain: https://rustup.rs (curl https://sh.rustup.rs -sSf | sh)" >&2
    exit 1
  }
  cargo build --profile "$profile" -p kernelgate -p kernelgate-harness
  dir=$([ "$profile" = dev ] && echo debug || echo "$profile")
  bin="$root/target/$dir/kernelgate"
fi
[ -x "$bin" ] || { echo "error: $bin is not an executable kernelgate binary" >&2; exit 1; }

step 2 "Python with torch"
if [ -z "${KERNELGATE_PYTHON:-}" ]; then
  KERNELGATE_SKIP_ACTIONLINT=1 bash scripts/setup-python.sh
  KERNELGATE_PYTHON="$root/.venv/bin/python"
fi
export KERNELGATE_PYTHON
# load_inline runs ninja and the compiler from PATH: put the interpreter's bin/ (ninja) first.
PATH="$(dirname "$KERNELGATE_PYTHON"):$PATH"
export PATH

# What kernelgate is asked for: `auto` runs CUDA kernels on the GPU and CPU-only C++ kernels on
# the CPU; `cuda` would force the CPU kernels onto the GPU too.
pr_device="$device"
if [ "$device" = auto ]; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 &&
    "$KERNELGATE_PYTHON" -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
    device=cuda
  else
    device=cpu
  fi
fi
echo "device: $device"

step 3 "building the demo repository"
repo="$out/demo-repo"
report="$out/report"
rm -rf "$repo" "$report"
gpu_kernels=0
[ "$device" = cuda ] && gpu_kernels=1
KG_DEMO_GPU=$gpu_kernels bash scripts/demo/make-repo.sh "$repo"
base=$(git -C "$repo" rev-parse demo-base)
head=$(git -C "$repo" rev-parse demo-head)
echo "base $base (honest kernels)"
echo "head $head (improved, regression, hack, broken)"
git -C "$repo" --no-pager diff --stat "$base" "$head"

step 4 "kernelgate pr --device $pr_device (compiles each kernel: a minute or more per kernel on 2 cores)"
set +e
read -r -a extra <<< "${KG_DEMO_ARGS:-}"
"$bin" --repo "$repo" pr --base "$base" --head "$head" --out "$report" --publish files --device "$pr_device" "${extra[@]}"
rc=$?
set -e

step 5 "results"
if [ ! -f "$report/report.json" ]; then
  echo "error: kernelgate pr exited with $rc and wrote no $report/report.json" >&2
  exit 1
fi
echo "kernelgate pr exited with $rc (1 = the gate failed the PR: the head commit carries a hack and a broken kernel)"
if [ ! -f "$report/check_run.json" ]; then
  # What `kernelgate publish` would send to GitHub (the check run with its annotations, the
  # sticky comment), written as files: the second stage of the fork-safe setup, run locally.
  "$bin" publish --report "$report/report.json" --publish files
fi
echo
show() { # label file
  if [ -f "$2" ]; then printf '%-18s %s\n' "$1" "$2"; else printf '%-18s %s (not written)\n' "$1" "$2"; fi
}
show "PR comment:" "$report/comment.md"
show "job summary:" "$report/summary.md"
show "SARIF:" "$report/results.sarif"
show "report (JSON):" "$report/report.json"
show "check run:" "$report/check_run.json"
show "comment payload:" "$report/comment.json"
for f in "$report"/*; do
  case "$(basename "$f")" in
    comment.md | summary.md | results.sarif | report.json | check_run.json | comment.json) ;;
    *) printf '%-18s %s\n' "payload:" "$f" ;;
  esac
done
echo
echo "demo repository:   $repo  (git log demo-base..demo-head)"
echo "done in $((SECONDS - start))s — open comment.md to see what the PR would show."
# 0 or 1 is a verdict; anything else is an error of the demo itself.
[ "$rc" -le 1 ] || exit "$rc"
