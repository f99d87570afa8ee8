#!/usr/bin/env bash
# The bytecode tree's A/B on the GPU runner in about two minutes (issue 29): builds the tree as
# `kernelgate pch` does (kg_bytecode.build, without the header), then `import torch` and
# `kernelgate eval` (a PyTorch-only kernel on CUDA: no build) with KERNELGATE_PCH_DIR=off and
# with the tree, alternating. A benchmark, not a test.
# Usage:   OUT=dir bash scripts/gpu-bytecode-ab.sh
# Needs:   target/device/{kernelgate,libkernelgate_harness.so}, python3 with torch.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$(mktemp -d)}
export KERNELGATE_PYTHON=python3 PYTHONDONTWRITEBYTECODE=1
export KERNELGATE_HARNESS=${KERNELGATE_HARNESS:-$PWD/target/device/libkernelgate_harness.so}
B=${KERNELGATE_BIN:-$PWD/target/device/kernelgate}
root=$(mktemp -d)
lib=$PWD/crates/harness/python/kg_bytecode.py
load="import importlib.util as u; s = u.spec_from_file_location('kg_bytecode', '$lib'); m = u.module_from_spec(s); s.loader.exec_module(m)"
nvidia-smi -L
python3 -c "$load; import torch; print('torch', torch.__version__, 'own bytecode:', m.has_own_bytecode())"
python3 -c "$load; print(m.build('$root')[1])"
for i in 1 2 3; do
  for mode in off tree; do
    r=off; [ $mode = tree ] && r=$root
    python3 -c "$load
import time; t = time.perf_counter(); m.use('$r' if '$r' != 'off' else None)
import torch
print(f'import torch ($mode): {time.perf_counter() - t:.2f} s')"
  done
done
for i in 1 2; do
  for mode in off tree; do
    r=off; [ $mode = tree ] && r=$root
    t0=$(date +%s.%N)
    KERNELGATE_PCH_DIR=$r "$B" eval --problem tests/fixtures/eval/problems/relu.py \
      --kernel tests/fixtures/eval/kernels/python_relu.py --device cuda --format json >"$OUT/eval-$mode-$i.json" 2>/dev/null
    t1=$(date +%s.%N)
    python3 - "$OUT/eval-$mode-$i.json" "$mode" "$(python3 -c "print(f'{$t1 - $t0:.1f}')")" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
ph = {p["name"]: p["ms"] for p in r.get("phases", [])}
big = " ".join(f"{k}={v/1000:.1f}" for k, v in ph.items() if v > 250 and k != "total")
print(f"kernelgate eval ({sys.argv[2]}): wall {sys.argv[3]} s, {r['outcome']['kind']}, sandbox {r.get('sandbox')}, device {r.get('device')}: {big}")
PY
  done
done
rm -rf "$root"
