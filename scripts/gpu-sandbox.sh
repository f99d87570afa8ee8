#!/usr/bin/env bash
# GPU proof of the candidate sandbox (docs/sandbox.md), one device call, under 4 minutes on an
# H200: every GPU eval fixture of scripts/gpu-eval.sh through the real CLI with the sandbox off
# and on (interleaved, same shared extensions cache), a CUDA kernel compiled from scratch inside
# the sandbox (nvcc + ninja), and the CPU escape fixtures with the sandbox on. Writes
# $OUT/summary.txt: per fixture the outcome off and on, the sandbox level, the wall time of
# each eval, and the median cost of the sandbox per eval.
# Needs target/device/{kernelgate,libkernelgate_harness.so} (cargo build --profile device).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/kg-gpu-sandbox}
mkdir -p "$OUT"
export KERNELGATE_BIN=${KERNELGATE_BIN:-$PWD/target/device/kernelgate}
export KERNELGATE_HARNESS=${KERNELGATE_HARNESS:-$PWD/target/device/libkernelgate_harness.so}
export KERNELGATE_PYTHON=${KERNELGATE_PYTHON:-python3}
EXT=/tmp/kg-gpu-sandbox-ext
rm -rf "$EXT" /tmp/kg-gpu-sandbox-fresh-on /tmp/kg-gpu-sandbox-fresh-off
mkdir -p "$EXT" "$OUT/runs"
C=tests/fixtures/eval/cuda
P=tests/fixtures/eval/problems
S=tests/fixtures/eval/kernels/sandbox
{ uname -r; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; "$KERNELGATE_PYTHON" -c "import torch, sys; print(sys.version.split()[0], torch.__version__, torch.version.cuda)"; } >"$OUT/summary.txt" 2>&1

# A CUDA extension built from nothing inside the sandbox (nvcc, ninja, the compiler's temp
# files), and the same outside it, beside the precompile of the shared cache.
t0=$(date +%s%N)
for mode in auto off; do
  ( t=$(date +%s%N)
    KERNELGATE_SANDBOX=$mode "$KERNELGATE_BIN" eval --problem "$P/relu.py" --kernel "$C/honest_relu_cuda.py" \
      --seed 42 --no-timing --device cuda --format json --extensions-dir "/tmp/kg-gpu-sandbox-fresh-${mode/auto/on}" \
      >"$OUT/runs/fresh_compile.$mode.json" 2>>"$OUT/stderr.log"
    echo "fresh_compile $mode $(( ($(date +%s%N) - t) / 1000000 )) $?" >>"$OUT/times.tsv" ) &
done
for f in honest_relu_cuda never_written_cuda side_stream illegal_address inplace_cuda inputs_zeroed_cuda ptr_cache_cuda ptr_cache_timed_cuda phase_detect_cuda bg_thread_cuda precision_half_cuda side_stream_py; do
  TORCH_EXTENSIONS_DIR=$EXT "$KERNELGATE_PYTHON" "$C/$f.py" >>"$OUT/precompile.log" 2>&1 &
done
wait
echo "precompile and fresh compiles (in parallel): $(( ($(date +%s%N) - t0) / 1000000 )) ms" >>"$OUT/summary.txt"

one() { # mode name problem kernel args...
  local mode=$1 name=$2 problem=$3 kernel=$4; shift 4
  local t=$(date +%s%N)
  KERNELGATE_SANDBOX=$mode "$KERNELGATE_BIN" eval --problem "$problem" --kernel "$kernel" --seed 42 \
    --format json --extensions-dir "$EXT" "$@" >"$OUT/runs/$name.$mode.json" 2>>"$OUT/stderr.log"
  local code=$?
  echo "$name $mode $(( ($(date +%s%N) - t) / 1000000 )) $code" >>"$OUT/times.tsv"
}
run() { # name expected problem kernel args... (off, then on)
  local name=$1 expect=$2; shift 2
  echo "$name $expect" >>"$OUT/expected.tsv"
  one off "$name" "$@"
  one auto "$name" "$@"
}

run honest_cuda        passed "$P/relu.py" "$C/honest_relu_cuda.py" --device cuda
run honest_triton      passed "$P/relu.py" "$C/honest_relu_triton.py" --device cuda
run never_written_cuda incorrect "$P/relu.py" "$C/never_written_cuda.py" --no-timing --device cuda
run inplace_cuda       output_aliased "$P/relu.py" "$C/inplace_cuda.py" --no-timing --device cuda
run side_stream        passed+timing/work-outside-timed-stream "$P/relu.py" "$C/side_stream.py" --device cuda
run inputs_zeroed_cuda input_mutated "$P/relu.py" "$C/inputs_zeroed_cuda.py" --no-timing --device cuda
run ptr_cache_cuda     output_aliased "$P/relu.py" "$C/ptr_cache_cuda.py" --no-timing --device cuda
run ptr_cache_timed    "incorrect|output_aliased" "$P/relu.py" "$C/ptr_cache_timed_cuda.py" --device cuda
run phase_detect_cuda  incorrect "$P/relu.py" "$C/phase_detect_cuda.py" --device cuda
run bg_thread_cuda     incorrect "$P/relu.py" "$C/bg_thread_cuda.py" --no-timing --device cuda
run precision_half     incorrect "$P/relu.py" "$C/precision_half_cuda.py" --no-timing --device cuda
run side_stream_py     passed+timing/work-outside-timed-stream "$P/relu.py" "$C/side_stream_py.py" --device cuda
run illegal_address    crash "$P/relu.py" "$C/illegal_address.py" --no-timing --device cuda
run honest_after_crash passed "$P/relu.py" "$C/honest_relu_cuda.py" --no-timing --device cuda
run cpp_on_gpu_host    passed "$P/relu.py" tests/fixtures/eval/kernels/python_relu.py --device cpu --no-timing

# The escapes on this machine too (sandbox on only): each must be reported as sandbox-denied.
SECRET_DIR=$(mktemp -d); echo "gpu-host-secret-31337" >"$SECRET_DIR/secret.txt"
export GITHUB_TOKEN=ghs_kernelgateFakeToken0123456789
for e in read_outside parent_environ write_pth write_checkout ptrace_parent read_opt; do
  echo "escape_$e passed+eval/sandbox-denied" >>"$OUT/expected.tsv"
  KERNELGATE_CHILD_ENV=KG_FIXTURE_PATHS KG_FIXTURE_PATHS="$SECRET_DIR/secret.txt:$PWD/Cargo.toml" \
    one auto "escape_$e" "$P/relu.py" "$S/$e.py" --device cpu --no-timing
done
unset GITHUB_TOKEN
rm -f "$("$KERNELGATE_PYTHON" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")/kg_sandbox_escape.pth"
PWNED=$( [ -e PWNED.txt ] && echo "yes (BAD)" || echo no ); rm -f PWNED.txt

"$KERNELGATE_PYTHON" - "$OUT" "$PWNED" >>"$OUT/summary.txt" <<'PY'
import json, os, statistics, sys
out, pwned = sys.argv[1], sys.argv[2]
times = {}
for line in open(f"{out}/times.tsv"):
    name, mode, ms, code = line.split()
    times[(name, mode)] = (int(ms) / 1000, int(code))
def load(name, mode):
    try:
        return json.load(open(f"{out}/runs/{name}.{mode}.json"))
    except Exception:
        return None
def cell(r):
    if r is None:
        return "NO-JSON", "-", "-"
    rules = sorted({f["rule"] for f in r["findings"] if f["severity"] == "error"})
    return r["outcome"]["kind"], ",".join(rules) or "-", r.get("sandbox", "?")
print(f"\n{'fixture':22} {'expected':42} {'off: outcome':16} {'s':>6} {'on: outcome':16} {'s':>6} {'level':6} errors (on)")
costs, bad = [], 0
for line in open(f"{out}/expected.tsv"):
    name, expect = line.split()
    kinds, _, rule = expect.partition("+")
    off, on = load(name, "off"), load(name, "auto")
    (ko, ro, _), (kn, rn, level) = cell(off), cell(on)
    ok_on = kn in kinds.split("|") and (not rule or rule in rn) and level == "full"
    same = off is None or (ko == kn and ro == rn)
    flag = "OK " if ok_on and same else "BAD"
    bad += flag == "BAD"
    to = times.get((name, "off"), (float("nan"), 0))[0]
    tn = times.get((name, "auto"), (float("nan"), 0))[0]
    if off is not None:
        costs.append(tn - to)
    print(f"{flag} {name:18} {expect:42} {ko:16} {to:6.1f} {kn:16} {tn:6.1f} {level:6} {rn}")
    if on is not None and name.startswith("escape_"):
        for f in on["findings"]:
            if f["rule"] == "eval/sandbox-denied":
                print("      " + f["message"][:160])
        if "STOLEN" in on.get("stdout_tail", "") or "ghs_kernelgate" in on.get("stdout_tail", ""):
            print("      BAD: the escape got data: " + on["stdout_tail"][:200]); bad += 1
for mode in ("auto", "off"):
    r = load("fresh_compile", mode)
    t = times.get(("fresh_compile", mode), (float("nan"), 0))[0]
    k, rules, level = cell(r)
    print(f"fresh CUDA compile, sandbox {mode:4}: {k} in {t:.1f}s (level {level})")
if costs:
    print(f"sandbox cost per eval (on - off wall time, {len(costs)} fixtures): median {statistics.median(costs):+.2f}s, "
          f"mean {statistics.mean(costs):+.2f}s")
print(f"checkout written through /proc/<ppid>/cwd: {pwned}")
print(f"{bad} row(s) BAD")
PY
cat "$OUT/summary.txt"
