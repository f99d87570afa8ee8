#!/usr/bin/env bash
# GPU proof of the timing method, in ONE device call (see docs/timing.md):
#   1. CV of the median over 20 repeated measurements of three bundled kernels;
#   2. A/A comparisons (a kernel against itself) and an injected ~3% slowdown;
#   3. the side-stream hack against honest kernels (trailing synchronisation);
#   4. `kernelgate baseline` (eager and --compile) writing results/timing/<HARDWARE>/;
#   5. `kernelgate baseline --kernels`: the bundled kernels' accepted timings.
# Raw samples go to $OUT/proof.json; the statistics are done by the Rust crate afterwards:
#   cargo run -p kernelgate-timing --example gpu_report -- <dir with proof.json>
# Needs: target/device/{kernelgate,libkernelgate_harness.so} carried, python3 with torch.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/kg-out}
mkdir -p "$OUT"
LIB=$PWD/target/device/libkernelgate_harness.so
BIN=$PWD/target/device/kernelgate
MOD=$(mktemp -d)
ln -sf "$LIB" "$MOD/kernelgate_harness.so"
export PYTHONPATH="$MOD" PYTHONUNBUFFERED=1 KERNELGATE_PYTHON=${KERNELGATE_PYTHON:-python3}
export TORCH_EXTENSIONS_DIR=${TORCH_EXTENSIONS_DIR:-/tmp/kg-ext} MAX_JOBS=8
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv >>"$OUT/log.txt" 2>&1
T0=$SECONDS

# Compile every bundled C++/CUDA kernel in the background (niced, in parallel) while the eager
# baselines run: step 5 (`baseline --kernels`) and the proof below find them built.
PRE=()
for k in kernels/*/*/cuda.py kernels/*/*/cpp.py; do
  nice -n 19 python3 -c "import importlib.util as u, sys; s=u.spec_from_file_location('k', sys.argv[1]); m=u.module_from_spec(s); s.loader.exec_module(m)" "$k" \
    >>"$OUT/precompile.txt" 2>&1 &
  PRE+=($!)
done
timeout 100 "$BIN" baseline --device cuda --timeout 95 >>"$OUT/log.txt" 2>&1
echo "baseline eager rc=$? at $((SECONDS - T0)) s" | tee -a "$OUT/log.txt"
wait "${PRE[@]}"; echo "precompile rc=$? at $((SECONDS - T0)) s" | tee -a "$OUT/log.txt"

timeout 120 python3 - "$OUT/proof.json" <<'PY' 2>&1 | tee -a "$OUT/log.txt"
import importlib.util, json, sys, time
import torch
import kernelgate_harness as h

kt = h.timing_module()
dev = "cuda"
CFG = {"warmup": 3, "min_samples": 10, "max_samples": 200, "budget_s": 10.0, "ci_target_pct": 1.0, "l2": "cold"}
timer = h.Timer(dev, "cold", int(torch.cuda.current_stream().cuda_stream))
out = {"l2_bytes": timer.l2_bytes, "flush_bytes": timer.flush_bytes,
       "bandwidth_gbs": timer.bandwidth_gbs(), "idle_sync_ms": timer.idle_sync_ms(),
       "gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "cfg": CFG}
print({k: v for k, v in out.items() if k != "cfg"})

def save():
    json.dump(out, open(sys.argv[1], "w"))

def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    m = importlib.util.module_from_spec(spec); sys.modules[name] = m; spec.loader.exec_module(m); return m

KERNELS = [("level1/3_ReLU", "KernelBench/level1/3_ReLU.py", "kernels/level1/3_ReLU/triton.py"),
           ("level1/7_Softmax", "KernelBench/level1/7_Softmax.py", "kernels/level1/7_Softmax/triton.py"),
           ("level2/1_Matmul_ReLU_Add", "KernelBench/level2/1_Matmul_ReLU_Add.py", "kernels/level2/1_Matmul_ReLU_Add/cuda.py")]
fns = {}  # name -> (candidate fn, reference fn)
def build(j, key, prob, kern, scale):
    P = load(prob, f"p{j}_{scale}"); K = load(kern, f"k{j}")
    P.batch_size = P.batch_size * scale  # more rows: the same kernel on a longer run
    torch.manual_seed(42); init = P.get_init_inputs()
    torch.manual_seed(42); model = K.ModelNew(*init).cuda()
    torch.manual_seed(42); ref = P.Model(*init).cuda()
    sets = []
    for s in range(3):
        torch.manual_seed(s); sets.append([x.cuda() if isinstance(x, torch.Tensor) else x for x in P.get_inputs()])
    with torch.no_grad():
        assert torch.allclose(model(*sets[0]), ref(*sets[0]), atol=1e-4, rtol=1e-4), key
    def f(i):
        with torch.no_grad():
            return model(*sets[i])
    def r(i):
        with torch.no_grad():
            return ref(*sets[i])
    return f, r
for j, (key, prob, kern) in enumerate(KERNELS):
    for scale in (1, 16):
        name = key if scale == 1 else f"{key} x16 rows"
        try:
            fns[name] = build(j, key, prob, kern, scale)
        except Exception as e:
            print("cannot load", name, repr(e))
print("loaded", list(fns))

# 1. CV of the median over 20 repeated measurements.
t = time.time()
out["repeat"] = {}
for key, (f, r) in fns.items():
    out["repeat"][key] = [[s["ms"] for s in kt.measure({"candidate": f}, 3, timer, CFG)["candidate"]] for _ in range(20)]
print("repeat done", time.time() - t); save()

# 2. A/A and injected slowdown on the matmul kernel (the longest of the three).
key = "level2/1_Matmul_ReLU_Add" if "level2/1_Matmul_ReLU_Add" in fns else list(fns)[-1]
out["aa_kernel"] = key
f, r = fns[key]
def with_sleep(cycles):
    def g(i):
        y = f(i)
        torch.cuda._sleep(cycles)
        return y
    return g
# Calibrate the GPU sleep so that f + sleep is ~3% slower than f (launch gap included).
base_med = kt.median([s["ms"] for s in kt.measure({"a": f}, 3, timer, dict(CFG, min_samples=50, max_samples=50))["a"]])
probe = {}
for c in (1, 20000):
    probe[c] = kt.median([s["ms"] for s in kt.measure({"b": with_sleep(c)}, 3, timer, dict(CFG, min_samples=50, max_samples=50))["b"]])
per_cycle = (probe[20000] - probe[1]) / 19999
cycles = max(1, int(1 + (1.03 * base_med - probe[1]) / per_cycle)) if per_cycle > 0 else 1
# The sleep is not linear in cycles for short sleeps (2742 cycles gave 2.55%, not 3%, on the
# H200): measure the first guess and rescale the extra time once.
def med_of(fn):
    return kt.median([s["ms"] for s in kt.measure({"b": fn}, 3, timer, dict(CFG, min_samples=50, max_samples=50))["b"]])
got = med_of(with_sleep(cycles)) - base_med
if got > 0:
    cycles = max(1, int(cycles * 0.03 * base_med / got))
out["inject"] = {"base_median_ms": base_med, "probe": probe, "cycles": cycles, "first_extra_ms": got}
print("inject", out["inject"])
slow = with_sleep(cycles)
aa, det = [], []
t = time.time()
for n in range(60):
    t0 = time.time(); s = kt.measure({"base": f, "head": f}, 3, timer, CFG)
    aa.append({"base": [x["ms"] for x in s["base"]], "head": [x["ms"] for x in s["head"]], "wall_s": time.time() - t0})
    t0 = time.time(); s = kt.measure({"base": f, "head": slow}, 3, timer, CFG)
    det.append({"base": [x["ms"] for x in s["base"]], "head": [x["ms"] for x in s["head"]], "wall_s": time.time() - t0})
out["aa"], out["detect"] = aa, det
print("aa/detect done", time.time() - t); save()

# 3. Side stream hack vs honest kernels (full samples with trailing sync).
side = torch.cuda.Stream()
def side_stream(fn):
    def g(i):
        with torch.cuda.stream(side):  # work escapes the timed stream, never joined
            return fn(i)
    return g
out["escape"] = {}
for name, fn in [("honest:" + k, v[0]) for k, v in fns.items()] + [("honest-ref:" + k, v[1]) for k, v in fns.items()] + [("side-stream:" + k, side_stream(v[0])) for k, v in fns.items()]:
    out["escape"][name] = kt.measure({"x": fn}, 3, timer, CFG)["x"]
    torch.cuda.synchronize()
# 4. Reference vs candidate once, with GPU and wall time per comparison.
out["speedup"] = {}
for k, (f, r) in fns.items():
    t0 = time.time(); s = kt.measure({"reference": r, "candidate": f}, 3, timer, CFG)
    out["speedup"][k] = {"reference": [x["ms"] for x in s["reference"]], "candidate": [x["ms"] for x in s["candidate"]], "wall_s": time.time() - t0}
save()
print("proof written")
PY
echo "proof rc=$? at $((SECONDS - T0)) s" | tee -a "$OUT/log.txt"

REM=$((280 - (SECONDS - T0)))
[ $REM -gt 20 ] && timeout $REM "$BIN" baseline --device cuda --compile-only --timeout $((REM - 8)) >>"$OUT/log.txt" 2>&1
echo "baseline --compile-only rc=$? at $((SECONDS - T0)) s" | tee -a "$OUT/log.txt"
# 5. The accepted kernels of this checkout (what a workflow on main records), through the harness.
timeout 240 "$BIN" baseline --device cuda --kernels --timeout 230 >>"$OUT/log.txt" 2>&1
echo "baseline --kernels rc=$? at $((SECONDS - T0)) s" | tee -a "$OUT/log.txt"
mkdir -p "$OUT/results"
cp results/timing/NVIDIA_H200*/*.json "$OUT/results/" 2>/dev/null
ls results/timing/ >>"$OUT/log.txt" 2>&1
tail -c 2000 "$OUT/precompile.txt" >>"$OUT/log.txt"; rm -f "$OUT/precompile.txt"
cat "$OUT/log.txt"
