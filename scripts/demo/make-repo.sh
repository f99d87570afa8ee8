#!/usr/bin/env bash
# Builds the demo kernel repository: a git repository at DIR with the bundled KernelBench/
# problems and two commits, tagged demo-base and demo-head.
#   base: honest CPU C++ kernels (scripts/demo/base/)
#   head: the pull request (scripts/demo/head/): an improved kernel, a regression, a reward
#         hack and a broken kernel; with KG_DEMO_GPU=1 also CUDA kernels (scripts/demo/gpu/).
# Usage: bash scripts/demo/make-repo.sh DIR
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
dir="${1:?usage: make-repo.sh DIR}"

[ -d "$root/KernelBench" ] && ls "$root"/KernelBench/level*/*.py >/dev/null 2>&1 || {
  echo "error: no problems in $root/KernelBench/level*/: the demo is built from the bundled problem set" >&2
  exit 1
}
if [ -e "$dir" ] && [ -n "$(ls -A "$dir" 2>/dev/null)" ]; then
  echo "error: $dir exists and is not empty: remove it or choose another directory" >&2
  exit 1
fi
mkdir -p "$dir"

# Reproducible commits, whoever runs the demo.
export GIT_AUTHOR_NAME="kernelgate demo" GIT_AUTHOR_EMAIL="demo@kernelgate.invalid"
export GIT_COMMITTER_NAME="kernelgate demo" GIT_COMMITTER_EMAIL="demo@kernelgate.invalid"
export GIT_AUTHOR_DATE="2026-01-01T00:00:00Z" GIT_COMMITTER_DATE="2026-01-01T00:00:00Z"
g() { git -C "$dir" -c init.defaultBranch=main -c commit.gpgsign=false -c core.hooksPath=/dev/null "$@"; }

g init -q
cp -R "$root/KernelBench" "$dir/KernelBench"
cp "$here/kernelgate.toml" "$dir/kernelgate.toml"
cp -R "$here/base/." "$dir/"
g add -A
g commit -q -m "Honest CPU kernels for ReLU and softmax"
g tag demo-base

GIT_AUTHOR_DATE="2026-01-02T00:00:00Z" GIT_COMMITTER_DATE="2026-01-02T00:00:00Z"
cp -R "$here/head/." "$dir/"
msg="Faster ReLU, refactored softmax, new sigmoid and square-matmul kernels"
if [ "${KG_DEMO_GPU:-0}" = 1 ]; then
  cp -R "$here/gpu/." "$dir/"
  msg="$msg, CUDA kernels"
fi
g add -A
g commit -q -m "$msg"
g tag demo-head
echo "demo repository: $dir"
