#!/usr/bin/env bash
# Time to verdict as a contributor feels it (issue 29), beside scripts/bench-pr.sh (the cold
# 13-kernel pull request):
#   eval     `python kernel.py`-style build of one CUDA kernel in torch's own build directory,
#            then `kernelgate eval` of it twice: the build it loads (or why not, one line), the
#            wall time and the harness's phases;
#   edit     `kernelgate pr` on a pull request that edits that kernel, on a runner whose
#            extensions cache already holds the base version (a first pr added it).
# A benchmark, not a test: run it on the GPU machine.
# Usage:   CASES="eval edit" bash scripts/bench-verdict.sh      (OUT=dir keeps everything)
# Needs:   KERNELGATE_BIN (default target/device/kernelgate) and its harness beside it or in
#          KERNELGATE_HARNESS, KERNELGATE_PYTHON with torch, nvcc + ninja, git.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
bin=${KERNELGATE_BIN:-$root/target/device/kernelgate}
py=${KERNELGATE_PYTHON:-python3}
export KERNELGATE_PYTHON=$py
kernel=${KERNEL:-kernels/level1/3_ReLU/cuda.py}
problem=${PROBLEM:-level1/3_ReLU}
cases=${CASES:-eval edit}
now() { date +%s.%N; }
secs() { python3 -c "print(f'{$2 - $1:.1f}')"; }

if [[ " $cases " == *" eval "* ]]; then
  # The contributor's own build, in torch's default directory of a fresh home.
  export HOME="$OUT/home" XDG_CACHE_HOME=""
  unset XDG_CACHE_HOME TORCH_EXTENSIONS_DIR
  mkdir -p "$HOME"
  t0=$(now)
  (cd "$root" && "$py" -c "import importlib.util as u, sys; s = u.spec_from_file_location('k', sys.argv[1]); s.loader.exec_module(u.module_from_spec(s))" "$kernel") >"$OUT/contributor-build.log" 2>&1
  t1=$(now)
  echo "== eval: python kernel.py (the contributor's build): $(secs "$t0" "$t1") s"
  # EVAL_RUNS: one label per run; a label starting with `off` runs without `kernelgate pch`'s
  # header and bytecode (KERNELGATE_PCH_DIR=off), for an A/B in one call.
  for run in ${EVAL_RUNS:-1 2}; do
    pch=()
    [[ $run == off* ]] && pch=(env KERNELGATE_PCH_DIR=off)
    # Each eval timed on its own: the whole process, as a contributor's shell sees it.
    t0=$(now)
    set +e
    (cd "$root" && "${pch[@]}" "$bin" eval --kernel "$kernel" --problem "$problem" --device cuda) >"$OUT/eval-$run.txt" 2>"$OUT/eval-$run.err"
    rc=$?
    t1=$(now)
    (cd "$root" && "${pch[@]}" "$bin" eval --kernel "$kernel" --problem "$problem" --device cuda --format json) >"$OUT/eval-$run.json" 2>/dev/null
    set -e
    t2=$(now)
    echo "== eval $run: kernelgate eval wall $(secs "$t0" "$t1") s (human), $(secs "$t1" "$t2") s (json), exit $rc"
    grep -E '^(outcome|build|sandbox) ' "$OUT/eval-$run.txt" || true
    python3 - "$OUT/eval-$run.json" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except Exception as e:
    print(f"   (no JSON: {e})"); sys.exit(0)
ph = {p["name"]: p["ms"] for p in r.get("phases", [])}
big = " ".join(f"{k}={v/1000:.1f}" for k, v in ph.items() if v > 200 and k not in ("total",))
print(f"   json eval: build {r.get('build')!r}")
print(f"   phases (s): {big}")
PY
  done
fi

if [[ " $cases " == *" edit "* ]]; then
  repo="$OUT/repo-edit"
  rm -rf "$repo"
  mkdir -p "$repo/$(dirname "$kernel")"
  cp -r "$root/KernelBench" "$repo/"
  printf '[dataset]\nroot = "KernelBench"\n\n[kernels]\nglobs = ["kernels/**/*.py"]\n' >"$repo/kernelgate.toml"
  git_() { git -C "$repo" -c user.name=bench -c user.email=bench@localhost "$@"; }
  git_ init -q -b main
  git_ add -A && git_ commit -qm base
  git_ branch -q empty
  cp "$root/$kernel" "$repo/$kernel"
  git_ add -A && git_ commit -qm "add the kernel"
  git_ branch -q with-kernel
  # A real edit of the CUDA source: the block size.
  sed -i 's/const int threads = 256;/const int threads = 512;/' "$repo/$kernel"
  git_ commit -qam "edit the kernel"
  export KERNELGATE_BUILD_STORE="$OUT/store-edit"
  rm -rf "$KERNELGATE_BUILD_STORE"
  for step in "add:empty:with-kernel" "edit:with-kernel:HEAD"; do
    IFS=: read -r name base head <<<"$step"
    t0=$(now)
    set +e
    "$bin" --repo "$repo" pr --base "$base" --head "$head" --device cuda --publish files --out "$OUT/report-$name" >"$OUT/log-$name.txt" 2>&1
    rc=$?
    set -e
    t1=$(now)
    echo "== edit: pr $name ($base..$head): wall $(secs "$t0" "$t1") s (exit $rc)"
    python3 - "$OUT/report-$name/report.json" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except Exception as e:
    print(f"   (no report: {e})"); sys.exit(0)
for k in r["kernels"]:
    t = k.get("time_spent") or {}
    print(f"   {k['path']} {k['verdict']} build {t.get('build_ms', 0)/1000:.1f} s, eval {t.get('eval_ms', 0)/1000:.1f} s, total {t.get('total_ms', 0)/1000:.1f} s")
    vs = k.get("vs_base") or {}
    if vs:
        print(f"   vs base: {vs.get('verdict')} ratio {vs.get('ratio')}")
    for f in k.get("findings", []):
        if f.get("rule", "").startswith("eval/"):
            print(f"   finding {f['rule']}: {f.get('message', '')[:200]}")
PY
    # The build's parts (ninja's log: start and end in ms of each compile and the link), each
    # extension directory of the cache; a directory built earlier shows its old entries.
    # Whether nvcc's steps ran side by side (kg_nvcc named in the build's nvcc line).
    echo "   build.ninja naming kg_nvcc: $(grep -l kg_nvcc "$KERNELGATE_BUILD_STORE"/*/*/build.ninja 2>/dev/null | wc -l)" \
      "of $(ls "$KERNELGATE_BUILD_STORE"/*/*/build.ninja 2>/dev/null | wc -l)"
    for t in "$KERNELGATE_BUILD_STORE"/*/*/*.kg_nvcc.json; do
      [ -f "$t" ] || continue
      python3 - "$t" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
steps = ", ".join(f"{s['chain']} {s['tool']} {s['start_s']:.1f}-{s['end_s']:.1f}" for s in sorted(t["steps"], key=lambda s: s["start_s"]))
print(f"   kg_nvcc {t['total_s']:.1f} s: {steps}")
PY
    done
    for log in "$KERNELGATE_BUILD_STORE"/*/*/.ninja_log; do
      [ -f "$log" ] || continue
      echo "   ninja $(basename "$(dirname "$(dirname "$log")")")/$(basename "$(dirname "$log")"):" \
        "$(awk '!/^#/ {printf "%s %.1f s; ", $4, ($2 - $1) / 1000}' "$log")"
    done
  done
fi
