"""kernelgate timing loop, embedded in the `kernelgate_harness` extension (`timing_module()`).

`measure(callables, n_input_sets, timer, cfg, verify, inputs, repeat)` times several callables
against each other in one process: warm-up, then rounds in which every callable runs once on the
same input set, in a fresh random order (A B / B A ...), the input set rotating from round to
round. With `inputs` (`FreshInputs`) every call first gets content no earlier call saw (same
buffers, new values from the problem's own draws), outside the timed region; the callables named
in `repeat` also get a series on the content of their previous call, which the Rust side
compares with the fresh one (`timing/input-reuse-speedup`). It stops when the 95% confidence
interval of the median of every series is within `cfg["ci_target_pct"]` percent (half-width),
or the budget runs out, always between `min_samples` and `max_samples`. A random share of timed
outputs is re-verified against the reference on the call's own content (`verify` raises on a
wrong one), at least one per series. The clock is the Rust `Timer` (driver events), so nothing
a candidate patches in Python changes what is measured.

`baseline(job_json)` times a problem's reference (eager, or `torch.compile`d) for
`kernelgate baseline`, on fresh content too. No candidate code runs in that process.
"""

import gc
import json
import os
import random
import sys
import time

# Captured at load, before any candidate module exists in the process.
_monotonic = time.monotonic
_Random = random.Random
_urandom = os.urandom
_gc_disable = gc.disable
_gc_enable = gc.enable
_gc_isenabled = gc.isenabled
_gc_collect = gc.collect
_isinstance = isinstance

# The stopping rule's statistic, computed by the Rust timing crate (the one owner of the
# median's confidence interval), captured before any candidate code runs.
try:
    from kernelgate_harness import ci_half_width_pct
except ImportError:  # this file loaded on its own (unit tests of other parts)
    ci_half_width_pct = None


def _set_stream(timer):
    if not getattr(timer, "is_cuda", False):
        return
    torch = sys.modules.get("torch")
    if torch is not None:
        timer.set_stream(int(torch.cuda.current_stream().cuda_stream))


def make_timer(cfg):
    """A Timer for cfg["device"] (default: cuda when torch sees one) and cfg["l2"]."""
    import kernelgate_harness

    device = cfg.get("device")
    if not device:
        torch = sys.modules.get("torch")
        device = "cuda" if torch is not None and torch.cuda.is_available() else "cpu"
    if device.startswith("cuda"):
        torch = sys.modules.get("torch")
        stream = int(torch.cuda.current_stream().cuda_stream) if torch is not None else 0
        return kernelgate_harness.Timer(device, cfg.get("l2", "cold"), stream)
    return kernelgate_harness.Timer("cpu", cfg.get("l2", "cold"))


# Series names the Rust side reads (`Series` in crates/timing/src/sample.rs).
REPEATED_SUFFIX = "_repeated"
REFILL_SERIES = "input_refill"


# Fresh draws made for one timing: enough for every call of a full run of rounds on small
# inputs; fewer where memory or time (`draw_pool`) say so, and content then repeats.
MAX_DRAWS = 1024


def draw_pool(draw, n, input_bytes, max_bytes, max_s):
    """Up to `n` new draws of the problem's inputs (`draw()` returns one argument list), within
    `max_bytes` of inputs and `max_s` seconds; at least one."""
    n = max(1, int(n))
    if input_bytes > 0:
        n = max(1, min(n, int(max_bytes // input_bytes)))
    out = []
    t0 = _monotonic()
    while len(out) < n:
        out.append(list(draw()))
        if _monotonic() - t0 > max_s:
            break
    return out


class FreshInputs:
    """Fresh content for every timed call: whole draws of the problem's own `get_inputs()`.

    `sets` are the buffers the timed calls read (one list of arguments per input set); they are
    never reallocated, so a cache keyed by pointer still shows. `draws` are new draws of the
    problem's inputs made before any candidate code ran (`draw_pool`); each keeps everything the
    problem's inputs have (a `tril` or symmetric matrix, sorted values, a mask), because it is
    one. A call's content is a draw no earlier call saw (while unused draws remain; then the
    least recently used one, counted in `repeats`), copied into the buffers outside the timed
    region, before the timer's L2 flush, through `copy(dst, src, nbytes, wait, evict_source)`: the
    harness's own copy (the Rust timer's driver memcpy on the timed stream; on the CPU a memory
    copy that then evicts the source from the host's caches), so no PyTorch operation runs between
    timed calls that candidate code could observe. The sets' original content (seen by the
    correctness trials) is kept as well and put back by `restore`.

    The draws and the originals live in the judge's own memory, which no candidate process maps:
    the shared buffers come from a pool of their own (`kg_wire.SharedAllocator`), and a worker is
    a new process or a fork made before any draw existed. Candidate code can change the buffers
    of the call in hand, which every call refills, never the content they are refilled from.
    """

    def __init__(self, torch, sets, draws, copy=None, rng=None):
        self.torch = torch
        self.sets = sets
        self.rng = rng if rng is not None else _Random(_urandom(16))
        # Captured before any candidate code runs: a patched `copy_` must not skip the refill.
        T = torch.Tensor
        self._copy_, self._clone, self._data_ptr = T.copy_, T.clone, T.data_ptr
        self._harness_copy = copy
        with torch.no_grad():
            originals = [[self._clone(x) if _isinstance(x, torch.Tensor) else x for x in s] for s in sets]
        # pool[k]: one full argument list; the first len(sets) are the sets' own content.
        self.pool = originals + [list(d) for d in draws]
        self.first_fresh = len(originals)
        self.refilled = [self._refillable(j, x) for j, x in enumerate(sets[0])]
        self.unused = list(range(self.first_fresh, len(self.pool)))
        self.rng.shuffle(self.unused)
        self.recent = []  # used fresh draws, least recently used first
        self.repeats = 0  # calls whose content could not be new (fewer draws than calls)
        self.harness_copies = 0
        self.torch_copies = 0

    def _refillable(self, j, x):
        """Argument `j` is refilled when it is a tensor of one shape, dtype and device in every
        set and draw (a varying argument keeps the content it has)."""
        torch = self.torch
        if not _isinstance(x, torch.Tensor) or x.numel() == 0:
            return False
        for args in self.pool + self.sets:
            t = args[j] if j < len(args) else None
            if not (_isinstance(t, torch.Tensor) and t.shape == x.shape and t.dtype == x.dtype and t.device == x.device):
                return False
        return True

    def fresh(self):
        """A token for new content: the index of a draw."""
        if self.unused:
            k = self.unused.pop()
        elif self.recent:
            self.repeats += 1
            k = self.recent.pop(0)
        else:  # no draw at all: the sets' own content
            self.repeats += 1
            return self.rng.randrange(self.first_fresh)
        self.recent.append(k)
        return k

    def _copy(self, dst, src):
        if self._harness_copy is not None and dst.is_contiguous() and src.is_contiguous() and dst.device == src.device:
            n = dst.numel() * dst.element_size()
            # The source leaves the host's caches: a draw read one call ago must not make the
            # next call faster than one never read (`Timer.copy`, the CPU's input reuse).
            self._harness_copy(self._data_ptr(dst), self._data_ptr(src), n, wait=False, evict_source=True)
            self.harness_copies += 1
        else:
            self._copy_(dst, src)
            self.torch_copies += 1

    def fill(self, i, token):
        """Copies the content of `token` into input set `i`'s buffers (same pointers)."""
        src = self.pool[token]
        with self.torch.no_grad():
            for j, buf in enumerate(self.sets[i]):
                if self.refilled[j]:
                    self._copy(buf, src[j])

    def restore(self):
        """Puts every input set's original content back, bit for bit."""
        for i in range(len(self.sets)):
            self.fill(i, i)

    def materialize(self, token):
        """New tensors holding the content of `token` (for the reference on the same content)."""
        out = []
        with self.torch.no_grad():
            for j, x in enumerate(self.sets[0]):
                t = self.pool[token][j] if self.refilled[j] else x
                out.append(self._clone(t) if _isinstance(t, self.torch.Tensor) else t)
        return out


def measure(callables, n_input_sets, timer, cfg, verify=None, inputs=None, repeat=(), capture=None):
    """Times every callable; returns {series: [{"ms", "trailing_sync_ms", "wall_ms", "input_set",
    "verified"}]}.

    With `inputs` (a `FreshInputs`), every call of the first `warmup` rounds and every timed call
    first gets content no earlier call saw (warm-up past those rounds runs on the sets' own
    content); `verify(name, i, out, token)` checks a sampled call against the reference on the
    content `token` stands for. Every name in `repeat` also gets the series
    `name + REPEATED_SUFFIX`: one call per round on the content of that callable's previous
    fresh call, refilled the same way and placed at random in the round, so the only difference
    between the two series is whether the kernel saw the content before. The series
    `REFILL_SERIES` times five refills with the same timer (the cost per call).

    `capture(name, out)`, when given, runs on a checked call's output the moment its timed call
    returns, before anything else: the harness's own copy of the output (no PyTorch operation
    first, so work a candidate defers to the next operation it can observe is not there yet);
    `verify` then gets what `capture` returned."""
    if not callables:
        raise ValueError("measure() needs at least one callable")
    n_input_sets = max(1, int(n_input_sets))
    warmup = int(cfg.get("warmup", 3))
    # Also warm for a minimum time: right after idling, the first ~0.2 s of a memory-bound
    # kernel ran up to 6% slower on the H200 (20 repeated measurements, the first four high).
    warmup_ms = float(cfg.get("warmup_ms", 200.0))
    min_samples = max(1, int(cfg.get("min_samples", 10)))
    max_samples = max(min_samples, int(cfg.get("max_samples", 200)))
    budget_s = float(cfg.get("budget_s", 10.0))
    target = float(cfg.get("ci_target_pct", 1.0))
    verify_share = float(cfg.get("verify_fraction", 0.1))
    seed = cfg.get("order_seed")
    rng = _Random(seed if seed is not None else _urandom(16))
    if timer is None:
        timer = make_timer(cfg)
    _set_stream(timer)
    names = list(callables)
    repeat = [r for r in repeat if r in callables] if inputs is not None else []
    samples = {name: [] for name in names}
    for r in repeat:
        samples[r + REPEATED_SUFFIX] = []
    verified = {name: 0 for name in samples}
    last = {}  # name -> (input set, token) of its latest fresh call

    judge_ms = {}  # series -> the judge's clock per call, for callables in a worker

    def timed(name, i, token):
        if inputs is not None:
            inputs.fill(i, token)  # outside the timed region, before the flush
        fn = callables[name]
        remote = getattr(fn, "timed_call", None)
        if remote is not None:
            # A model in a worker (`kg_judge.RemoteModel`): the judge flushes, brackets the call
            # with its own clock and keeps that beside the worker's events.
            ms, trailing, wall, waited, reply = remote(i, timer)
            judge_ms[name] = waited
            return ms, trailing, wall, reply
        judge_ms.pop(name, None)
        box = []
        ms, trailing, wall = timer.time(lambda: box.append(fn(i)))
        return ms, trailing, wall, (box[0] if box else None)

    def fresh(name, i):
        token = inputs.fresh() if inputs is not None else None
        last[name] = (i, token)
        return token

    gc_was_enabled = _gc_isenabled()
    _gc_collect()
    _gc_disable()  # a collection inside a timed call is noise, not the kernel
    try:
        # Warm-up: every callable on every input set, untimed results discarded.
        warm_start = _monotonic()
        w = 0
        while w < warmup or (_monotonic() - warm_start) * 1000.0 < warmup_ms:
            for name in names:
                i = w % n_input_sets
                # Past the first `warmup` rounds, the set's own content (the correctness trials
                # saw it): a fast kernel's 200 ms of warm-up would use up the draws, and the timed
                # calls would then repeat content a value-keyed cache already holds.
                token = fresh(name, i) if w < warmup or inputs is None else i
                timed(name, i, token)
            w += 1
            if w >= 10_000:
                break
        start = _monotonic()
        rounds = 0
        while True:
            i = rounds % n_input_sets
            order = [(name, False) for name in names] + [(r, True) for r in repeat]
            rng.shuffle(order)
            for name, again in order:
                if again:
                    j, token = last[name]
                    series = name + REPEATED_SUFFIX
                else:
                    j, token, series = i, fresh(name, i), name
                # Decided before the call: the candidate cannot tell a checked call from another.
                check = verify is not None and rng.random() < verify_share
                ms, trailing, wall, out = timed(name, j, token)
                if check and capture is not None:
                    out = capture(name, out)
                sample = {"ms": ms, "trailing_sync_ms": trailing, "wall_ms": wall, "input_set": j, "verified": check}
                if name in judge_ms:
                    sample["judge_ms"] = judge_ms[name]
                take = getattr(callables[name], "take_sample", None)
                if take is not None:
                    take(sample)  # what the judge saw of the GPU after the reply (kg_judge.GapWatch)
                samples[series].append(sample)
                if check:
                    verify(name, j, out, token)
                    verified[series] += 1
                del out
            rounds += 1
            if rounds >= max_samples:
                break
            if rounds >= min_samples:
                if all(ci_half_width_pct([s["ms"] for s in samples[n]]) <= target for n in names):
                    break
                if _monotonic() - start > budget_s:
                    break
        # Every series gets at least one verified timed output.
        if verify is not None:
            for name in names:
                if verified[name] == 0:
                    i = rng.randrange(n_input_sets)
                    token = fresh(name, i)
                    _, _, _, out = timed(name, i, token)
                    if capture is not None:
                        out = capture(name, out)
                    verify(name, i, out, token)
        if inputs is not None:
            refill = []
            for _ in range(5):
                token = inputs.fresh()
                ms, trailing, wall = timer.time(lambda: inputs.fill(0, token))
                refill.append({"ms": ms, "trailing_sync_ms": trailing, "wall_ms": wall, "input_set": 0})
            samples[REFILL_SERIES] = refill
    finally:
        if gc_was_enabled:
            _gc_enable()
    return samples


def work(fn, inputs, outputs):
    """(bytes, flops) the call must at least do: every input read once, every output written
    once; FLOPs counted by torch's FlopCounterMode (matmuls, convolutions; 0 when unknown)."""
    torch = sys.modules.get("torch")

    def nbytes(xs):
        total = 0
        for x in xs if _isinstance(xs, (list, tuple)) else [xs]:
            if torch is not None and _isinstance(x, torch.Tensor):
                total += x.numel() * x.element_size()
            elif _isinstance(x, (list, tuple)):
                total += nbytes(x)
        return total

    flops = 0
    try:
        from torch.utils.flop_counter import FlopCounterMode

        with torch.no_grad(), FlopCounterMode(display=False) as fc:
            fn(*inputs)
        flops = int(fc.get_total_flops())
    except Exception:
        flops = 0
    return nbytes(list(inputs)), nbytes(outputs), flops


# ---- kernelgate baseline ----------------------------------------------------------------------


def _load_problem(path, name):
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load a Python module from {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def machine(torch, device):
    """What this process knows of the machine, for the hardware key: the GPU's name (or the CPU's
    model with torch's thread count) and torch's version and CUDA. kernelgate adds the driver (nvidia-smi, outside the
    sandbox) and the precision: `kernelgate_eval::hardware_key` is the key's one owner. The eval
    runner asks before the candidate is imported."""
    if str(device).startswith("cuda"):
        return {
            "gpu": torch.cuda.get_device_name(torch.device(device)),
            "cuda": str(torch.version.cuda),
            "torch": torch.__version__,
        }
    cpu = "cpu"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip() or "cpu"
                    break
    except OSError:
        pass
    # CPU timings scale with the threads they ran on (a CPU lane of `pr` gets a few cores, a
    # baseline run all of them): one key per thread count, so neither is compared with the other.
    return {"gpu": f"{cpu} ({torch.get_num_threads()} threads)", "cuda": "none", "torch": torch.__version__}


def baseline(job_json, out_path=None):
    """Times each problem's reference; returns a JSON string:
    {"machine": {...}, "results": [{"problem", "variant", "samples": [...], "error"?, "bytes", "flops"}]}.
    With `out_path`, the JSON is also rewritten there after every problem, so a run stopped at
    its time limit keeps what it finished."""
    job = json.loads(job_json)
    import torch

    device = job.get("device", "auto")
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    precision = job.get("precision", "fp32")
    dtype = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[precision]
    cfg = dict(job.get("timing", {}))
    cfg["device"] = device
    seed = int(job.get("seed", 42))
    n_sets = int(job.get("input_sets", 3))
    timer = make_timer(cfg)
    out = {"machine": machine(torch, device), "device": device, "results": [], "l2": cfg.get("l2", "cold")}
    if timer.is_cuda:
        out["bandwidth_gbs"] = timer.bandwidth_gbs()
        out["idle_sync_ms"] = timer.idle_sync_ms()

    def process(x):
        if _isinstance(x, torch.Tensor):
            if x.is_floating_point():
                x = x.to(dtype=dtype)
            return x.to(device=device)
        return x

    for k, p in enumerate(job["problems"]):
        for variant in job.get("variants", ["eager"]):
            rec = {"problem": p["key"], "variant": variant}
            try:
                mod = _load_problem(p["path"], f"kg_baseline_problem_{k}")
                with torch.no_grad():
                    torch.manual_seed(seed)
                    init = [process(x) for x in mod.get_init_inputs()]
                    torch.manual_seed(seed)
                    model = mod.Model(*init).to(device=device, dtype=dtype)
                sets = []
                for s in range(n_sets):
                    torch.manual_seed(seed + s)
                    sets.append([process(x) for x in mod.get_inputs()])
                counter = [seed + n_sets]

                def draw():
                    counter[0] += 1
                    torch.manual_seed(counter[0])
                    return [process(x) for x in mod.get_inputs()]

                input_bytes = sum(x.numel() * x.element_size() for x in sets[0] if _isinstance(x, torch.Tensor))
                free = torch.cuda.mem_get_info()[0] if device.startswith("cuda") else 8 << 30
                draws = draw_pool(draw, MAX_DRAWS, input_bytes, 0.25 * free, 2.0)
                fn = model
                if variant == "compile":
                    fn = torch.compile(model)  # inductor, default mode (KernelBench's second file)

                def call(i, fn=fn):
                    with torch.no_grad():
                        return fn(*sets[i])

                fresh = FreshInputs(torch, sets, draws, timer.copy)
                samples = measure({"reference": call}, n_sets, timer, cfg, None, fresh)["reference"]
                rec["samples"] = samples
                if variant == "eager":
                    with torch.no_grad():
                        outs = model(*sets[0])
                    rec["input_bytes"], rec["output_bytes"], rec["flops"] = work(model, sets[0], outs)
                    del outs
            except Exception as e:  # one broken problem never aborts the others
                import traceback

                rec["error"] = f"{type(e).__name__}: {e}"
                rec["traceback"] = traceback.format_exc()[-3000:]
            out["results"].append(rec)
            fresh = draws = sets = None  # this problem's buffers go before the next one's
            if device.startswith("cuda"):
                torch.cuda.empty_cache()
            if out_path:
                tmp = out_path + ".tmp"
                with open(tmp, "w") as f:
                    f.write(json.dumps(out))
                os.replace(tmp, out_path)
    return json.dumps(out)
