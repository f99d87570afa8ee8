#!/usr/bin/env bash
# `import torch` in a fresh process, as every job's child starts (PYTHONDONTWRITEBYTECODE=1),
# with and without the bytecode tree `kernelgate pch` compiles (crates/harness/python/
# kg_bytecode.py). Prints a table; a benchmark, not a test.
# Usage:   PY=/path/to/python N=5 bash scripts/bench-bytecode.sh
#          (a torch installed without bytecode: python -m venv v && v/bin/pip install --no-compile torch)
set -euo pipefail
root_dir="$(cd "$(dirname "$0")/.." && pwd)"
PY=${PY:-python3}
N=${N:-5}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export PYTHONDONTWRITEBYTECODE=1
unset PYTHONPYCACHEPREFIX
lib="$root_dir/crates/harness/python/kg_bytecode.py"
load="import importlib.util as u, sys; s = u.spec_from_file_location('kg_bytecode', '$lib'); m = u.module_from_spec(s); s.loader.exec_module(m)"
"$PY" -c "$load; import torch; print('torch', torch.__version__, 'own bytecode:', m.has_own_bytecode())"
t0=$(date +%s.%N)
"$PY" -c "$load; tree, line = m.build('$work', force=True); print(line)"
t1=$(date +%s.%N)
echo "build (kernelgate pch's step): $(python3 -c "print(f'{$t1 - $t0:.1f}')") s"
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
time_import() { # $1: root ('' for none)
  for _ in $(seq "$N"); do
    "$PY" -c "$load
import time; t = time.perf_counter(); used = m.use('$1') if '$1' else None
import torch
print(f'{time.perf_counter() - t:.3f}')"
  done | median
}
without=$(time_import "")
with=$(time_import "$work")
printf '%-40s %8s\n' "import torch, median of $N" "s"
printf '%-40s %8s\n' "without the tree" "$without"
printf '%-40s %8s\n' "with the tree (sys.pycache_prefix)" "$with"
python3 -c "print(f'ratio without/with: {$without / $with:.2f}')"
