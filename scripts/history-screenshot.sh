#!/usr/bin/env bash
# The showcase picture of docs/history.md (docs/img/history-dashboard.png), from a real history:
#   1. a kernel repository built in a temporary directory (the bundled ReLU problem, cut to 16
#      rows so a CPU times it in seconds, and a C++ kernel for it);
#   2. COMMITS commits on its main branch: the problem, then COMMITS - 1 real revisions of the
#      kernel: equivalent rewrites, then a defensive copy of the input (a real slowdown), then
#      its removal;
#   3. every commit timed by a real `kernelgate pr --device cpu` against its parent and recorded
#      with `kernelgate history append`, as a run of main would be;
#   4. `kernelgate dashboard` over that store, rendered by headless Chromium.
# The times are this machine's measurements. The commit dates are set one or two a day, so the
# date axis reads like a project's; the kernel revisions themselves take minutes, not weeks.
#
#   bash scripts/history-screenshot.sh
# Environment (all optional):
#   KERNELGATE_BIN=PATH       the kernelgate binary (default: built with cargo, dev profile)
#   KERNELGATE_PYTHON=PATH    a Python with torch (default: .venv/bin/python)
#   KERNELGATE_CHROMIUM=PATH  the browser (default: chromium, chromium-browser or google-chrome)
#   COMMITS=16                commits (the first adds the problem; every later one is recorded)
#   OUT=docs/img/history-dashboard.png
#   KEEP=DIR                  keep the repository, the store and the site there
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
commits="${COMMITS:-16}"
out="${OUT:-$root/docs/img/history-dashboard.png}"
[ "$commits" -ge 8 ] || { echo "error: COMMITS=$commits: at least 8, to show a step and its fix" >&2; exit 1; }

if [ -n "${KERNELGATE_BIN:-}" ]; then
  bin="$KERNELGATE_BIN"
else
  cargo build --locked -p kernelgate
  bin="${CARGO_TARGET_DIR:-$root/target}/debug/kernelgate"
fi
[ -x "$bin" ] || { echo "error: $bin is not an executable kernelgate binary" >&2; exit 1; }
export KERNELGATE_PYTHON="${KERNELGATE_PYTHON:-$root/.venv/bin/python}"
[ -x "$KERNELGATE_PYTHON" ] || { echo "error: no Python with torch at $KERNELGATE_PYTHON: run scripts/setup-python.sh or set KERNELGATE_PYTHON" >&2; exit 1; }
# load_inline runs ninja from the interpreter's bin/.
PATH="$(dirname "$KERNELGATE_PYTHON"):$PATH"
chromium="${KERNELGATE_CHROMIUM:-}"
if [ -z "$chromium" ]; then
  for b in chromium chromium-browser google-chrome google-chrome-stable; do
    command -v "$b" >/dev/null && { chromium="$b"; break; }
  done
fi
[ -n "$chromium" ] || { echo "error: no Chromium: apt-get install chromium, or set KERNELGATE_CHROMIUM" >&2; exit 1; }

work="${KEEP:-$(mktemp -d)}"
[ -n "${KEEP:-}" ] || trap 'rm -rf "$work"' EXIT
mkdir -p "$work"
repo="$work/repo" store="$work/store" site="$work/site"
rm -rf "$repo" "$store" "$site"
mkdir -p "$repo"
export GIT_AUTHOR_NAME="kernelgate demo" GIT_AUTHOR_EMAIL="demo@kernelgate.invalid"
export GIT_COMMITTER_NAME="kernelgate demo" GIT_COMMITTER_EMAIL="demo@kernelgate.invalid"
g() { git -C "$repo" -c init.defaultBranch=main -c commit.gpgsign=false -c core.hooksPath=/dev/null "$@"; }
# Commit n's date: from 2026-10-01, three commits every two days (10:00 and 16:00, then 10:00).
commit_at() {
  local n=$1 day hour
  day=$((1 + n * 2 / 3)) hour=$([ $((n % 3)) = 1 ] && echo 16 || echo 10)
  GIT_AUTHOR_DATE=$(printf '2026-10-%02dT%02d:00:00Z' "$day" "$hour") \
    GIT_COMMITTER_DATE=$(printf '2026-10-%02dT%02d:00:00Z' "$day" "$hour") \
    g commit -q -m "$2"
  g rev-parse HEAD
}

# The problem, as in tests/it/history.rs: the bundled ReLU with 16 rows.
g init -q
mkdir -p "$repo/KernelBench/level1" "$repo/kernels/level1/3_ReLU"
sed 's/batch_size = 4096/batch_size = 16/' KernelBench/level1/3_ReLU.py >"$repo/KernelBench/level1/3_ReLU.py"
grep -q 'batch_size = 16' "$repo/KernelBench/level1/3_ReLU.py" || { echo "error: the bundled ReLU's size changed" >&2; exit 1; }
cat >"$repo/kernelgate.toml" <<'EOF'
[harness]
trials = 2

[timing]
threshold_pct = 5.0  # a CPU shared with other work is noisier than a GPU
budget_s = 1.0
warmup = 2
min_samples = 15
max_samples = 60
EOF
g add -A
base=$(commit_at 0 "The ReLU problem")

# kernel BODY: the C++ extension with BODY as relu_forward's body.
kernel() {
  cat <<EOF
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
torch::Tensor relu_forward(torch::Tensor x) {
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "float32 expected");
$1
}
"""

relu_ops = load_inline(
    name="kg_showcase_relu",
    cpp_sources=cpp_source,
    functions=["relu_forward"],
    extra_cflags=["-O2"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return relu_ops.relu_forward(x)
EOF
}
loop='    torch::Tensor in_ = x.contiguous();
    torch::Tensor out = torch::empty_like(in_);
    const float* in = in_.data_ptr<float>();
    float* o = out.data_ptr<float>();
    const int64_t n = in_.numel();
    for (int64_t i = 0; i < n; ++i) o[i] = in[i] > 0.0f ? in[i] : 0.0f;
    return out;'
with_max="${loop/"in[i] > 0.0f ? in[i] : 0.0f"/"std::max(in[i], 0.0f)"}"
# The slowdown: the input copied before the loop (an extra pass over memory and an allocation).
with_copy="${with_max/"x.contiguous()"/"x.contiguous().clone()"}"

subjects=() bodies=()
third=$((commits / 3))
for ((i = 1; i < commits; i++)); do
  if [ "$i" = 1 ]; then
    subjects+=("ReLU: a C++ loop") bodies+=("$loop")
  elif [ "$i" -lt "$third" ]; then
    subjects+=("ReLU: std::max (revision $i)") bodies+=("$with_max
    // revision $i")
  elif [ "$i" = "$third" ]; then
    subjects+=("ReLU: copy the input first, in case it is aliased") bodies+=("$with_copy")
  elif [ "$i" -lt $((2 * third)) ]; then
    subjects+=("ReLU: tidy (revision $i)") bodies+=("$with_copy
    // revision $i")
  elif [ "$i" = $((2 * third)) ]; then
    subjects+=("ReLU: drop the defensive copy") bodies+=("$with_max")
  else
    subjects+=("ReLU: tidy (revision $i)") bodies+=("$with_max
    // revision $i")
  fi
done

parent=$base
for ((i = 0; i < commits - 1; i++)); do
  kernel "${bodies[$i]}" >"$repo/kernels/level1/3_ReLU/cpp.py"
  g add -A
  sha=$(commit_at $((i + 1)) "${subjects[$i]}")
  rm -rf "$work/run"
  rc=0
  "$bin" --repo "$repo" pr --base "$parent" --head "$sha" --device cpu --out "$work/run" \
    --ack-label kernelgate:ack-speedup >"$work/pr.log" 2>&1 || rc=$?
  [ "$rc" -le 1 ] && [ -f "$work/run/report.json" ] || { cat "$work/pr.log" >&2; exit 1; }
  "$bin" --repo "$repo" history append --report "$work/run/report.json" --commit "$sha" --store "$store"
  parent=$sha
done

"$bin" --repo "$repo" history --store "$store"
"$bin" --repo "$repo" history drift --store "$store" || true
"$bin" --repo "$repo" dashboard --store "$store" --out "$site" \
  --name "local demo repository (scripts/history-screenshot.sh)" ${REPO_URL:+--repo-url "$REPO_URL"}

profile=$(mktemp -d)
mkdir -p "$(dirname "$out")"
"$chromium" --headless=new --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir="$profile" \
  --window-size=1280,1400 --screenshot="$out" "file://$site/index.html" >/dev/null 2>&1
rm -rf "$profile"
[ -s "$out" ] || { echo "error: Chromium wrote no screenshot" >&2; exit 1; }
echo "wrote $out"
