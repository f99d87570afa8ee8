#!/usr/bin/env bash
# The precompiled torch header (docs/eval.md): `kernelgate eval` of the bundled CPU C++ kernels
# (kernels/*/*/cpp.py, -O3) with a cold extensions directory each, without the header
# (KERNELGATE_PCH_DIR=off) and with it, one after the other in one run. Prints the compile
# phase and the eval's wall time per kernel and their ratios. A benchmark, not a test.
# Usage:   bash scripts/bench-pch.sh                  (KERNELS="a.py b.py" for others)
#          PCH_COLD=1 also times `kernelgate pch` into a fresh root first.
# Needs:   KERNELGATE_BIN (default target/debug/kernelgate) with its harness beside it,
#          KERNELGATE_PYTHON with torch, a C++ compiler (gcc) and ninja.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
bin=${KERNELGATE_BIN:-$root/target/debug/kernelgate}
export KERNELGATE_PYTHON=${KERNELGATE_PYTHON:-$root/.venv/bin/python}
kernels=${KERNELS:-$(ls kernels/*/*/cpp.py)}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pch=${KERNELGATE_PCH_DIR:-}
if [ "${PCH_COLD:-0}" = 1 ] || [ -z "$pch" ] || [ "$pch" = off ]; then
  pch=${PCH_COLD:+$work/pch}
  pch=${pch:-$HOME/.cache/kernelgate/pch}
fi
t0=$(date +%s.%N)
"$bin" pch --dir "$pch" >"$work/pch.txt" 2>&1 || { cat "$work/pch.txt"; exit 1; }
t1=$(date +%s.%N)
echo "kernelgate pch --dir $pch: $(python3 -c "print(f'{$t1 - $t0:.1f}')") s: $(tail -1 "$work/pch.txt")"
echo "$(nproc) cores, $(c++ --version | head -1)"
printf '%-40s %-5s %9s %9s\n' kernel pch compile_s wall_s
for k in $kernels; do
  for mode in off on; do
    dir="$work/ext-$mode-$(echo "$k" | tr / _)"
    [ "$mode" = off ] && root_env=off || root_env=$pch
    s=$(date +%s.%N)
    KERNELGATE_PCH_DIR=$root_env "$bin" eval --kernel "$k" --device cpu --no-timing --format json \
      --extensions-dir "$dir" >"$work/out.json" 2>"$work/err.txt" || true
    e=$(date +%s.%N)
    python3 - "$work/out.json" "$k" "$mode" "$s" "$e" >>"$work/table.txt" <<'PY'
import json, sys
path, kernel, mode, s, e = sys.argv[1:]
try:
    v = json.load(open(path))
except ValueError:
    print(f"{kernel:40} {mode:5} {'no result':>9}")
    raise SystemExit
ms = next((p["ms"] for p in v.get("phases", []) if p["name"] == "compile"), float("nan"))
kind = v["outcome"]["kind"]
print(f"{kernel:40} {mode:5} {ms / 1000:9.1f} {float(e) - float(s):9.1f}  {kind}")
PY
    tail -1 "$work/table.txt"
  done
done
python3 - "$work/table.txt" <<'PY'
import sys
rows = [l.split() for l in open(sys.argv[1]) if len(l.split()) >= 4]
by = {}
for k, mode, c, w, *_ in rows:
    by.setdefault(k, {})[mode] = (float(c), float(w))
ratios = [(v["off"][0] / v["on"][0], v["off"][1] / v["on"][1]) for v in by.values() if "off" in v and "on" in v]
for (k, v), (rc, rw) in zip(by.items(), ratios):
    print(f"{k:40} compile {rc:4.2f}x faster, eval wall {rw:4.2f}x")
if ratios:
    print(f"all: compile {sum(v['off'][0] for v in by.values()):.1f} s -> {sum(v['on'][0] for v in by.values()):.1f} s")
PY
