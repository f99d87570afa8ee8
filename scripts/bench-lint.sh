#!/usr/bin/env bash
# Lint throughput on one core: 1,000 generated KernelBench-size candidates through `lint_file`
# (parse + Python rules + embedded C++/CUDA + Triton + suppressions). Target: >= 5 MB/s.
#
#   scripts/bench-lint.sh          this checkout
#   scripts/bench-lint.sh REV      also the linter at git revision REV, alternating runs of the
#                                  two on the same files (this checkout's fixtures), so a
#                                  before/after comes from one run on one machine
#
# KG_REFERENCE_CHECKER=PATH/kernel_static_checker.py adds a row for that checker (e.g.
# KernelBench's regex checker, not part of kernelgate) on the same files, timed right after ours
# in each round (scripts/bench-lint-reference.py): machine speed varies, the ratio does not.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
pin=()
if command -v taskset >/dev/null; then pin=(taskset -c 0); fi

bench_exe() { # build the bench in directory $1 with target dir $2, copy the executable to $3
  local exe
  exe=$( (cd "$1" && CARGO_TARGET_DIR="$2" cargo bench -p kernelgate-lint \
    --bench lint_throughput --no-run 2>&1) | sed -n 's/.*Executable .*(\(.*\)).*/\1/p' | tail -1)
  [[ $exe = /* ]] || exe="$1/$exe"
  cp "$exe" "$3"
}

reference_row() { # the other checker on the same files, when KG_REFERENCE_CHECKER names it
  if [[ -n ${KG_REFERENCE_CHECKER:-} ]]; then
    "${pin[@]}" "${PYTHON:-python3}" scripts/bench-lint-reference.py "$KG_REFERENCE_CHECKER" "$root"
  fi
}

mkdir -p target/bench-base
if [[ $# -eq 0 ]]; then
  bench_exe "$root" "$root/target" target/bench-base/lint_throughput-new
  for round in 1 2 3; do
    echo "== round $round"
    "${pin[@]}" target/bench-base/lint_throughput-new
    reference_row
  done
  exit 0
fi

rev=$(git rev-parse --short "$1")
base="$root/target/bench-base/$rev"
if [[ ! -d $base ]]; then
  mkdir -p "$base"
  git archive "$rev" | tar -x -C "$base"
fi
# REV's own bench, so REV is measured with the allocator and build it shipped with; a REV older
# than KG_BENCH_ROOT gets the current bench source (it uses only the crate's public API).
if ! grep -q KG_BENCH_ROOT "$base/crates/lint/benches/lint_throughput.rs" 2>/dev/null; then
  cp crates/lint/benches/lint_throughput.rs "$base/crates/lint/benches/lint_throughput.rs"
fi
old="target/bench-base/lint_throughput-$rev"
new=target/bench-base/lint_throughput-new
# REV builds in a target dir of its own (the first build compiles the dependencies, minutes):
# in one target dir both would build to the same artifact, which cargo may think fresh.
bench_exe "$base" "$root/target/bench-base/target" "$old"
bench_exe "$root" "$root/target" "$new"
for round in 1 2 3; do
  echo "== round $round: $rev (before)"
  KG_BENCH_ROOT="$root" "${pin[@]}" "$old"
  echo "== round $round: working tree (after)"
  KG_BENCH_ROOT="$root" "${pin[@]}" "$new"
  reference_row
done
