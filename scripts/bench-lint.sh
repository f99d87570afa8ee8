#!/usr/bin/env bash
# Lint throughput on one core: 1,000 generated KernelBench-size candidates through `lint_file`
# (parse + Python rules + embedded C++/CUDA + Triton + suppressions). Target: >= 5 MB/s.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo bench -q -p kernelgate-lint --bench lint_throughput --no-run
pin=()
if command -v taskset >/dev/null; then pin=(taskset -c 0); fi
"${pin[@]}" cargo bench -q -p kernelgate-lint --bench lint_throughput
