#!/usr/bin/env bash
# Builds the kernelgate CLI and stages it as the wheel's script (pyproject.toml: tool.maturin.data):
#   bash scripts/stage-wheel-cli.sh [PROFILE]   # release (default) or dev
# The release workflow runs it inside the manylinux container before maturin builds the wheel.
set -euo pipefail
cd "$(dirname "$0")/.."
profile="${1:-release}"
export KERNELGATE_COMMIT="${KERNELGATE_COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}"
# The dev profile (the wheel test, after the test build) builds every target of the workspace,
# as scripts/test.sh did: `-p kernelgate` alone, or the workspace without its tests, unifies
# features otherwise and compiles ~100 crates again (about 2 min on 2 cores); this compiles at
# most kernelgate, for its commit.
if [ "$profile" = dev ]; then
  cargo build --locked --profile dev --workspace --all-targets
else
  cargo build --locked --profile "$profile" -p kernelgate
fi
dir=$([ "$profile" = dev ] && echo debug || echo "$profile")
bin="target/${CARGO_BUILD_TARGET:+$CARGO_BUILD_TARGET/}$dir/kernelgate"
[ -x "$bin" ] || { echo "error: cargo built no $bin" >&2; exit 1; }
data=target/wheel/kernelgate.data/scripts
rm -rf "$data" && mkdir -p "$data"
# The dev profile's binary carries debug info (hundreds of MB): the wheel gets a stripped copy.
if command -v strip >/dev/null; then
  strip -o "$data/kernelgate" "$bin"
else
  cp "$bin" "$data/kernelgate"
fi
chmod 755 "$data/kernelgate"
echo "staged $("$data/kernelgate" -V) as $data/kernelgate"
