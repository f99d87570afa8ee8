"""kernelgate job runner, embedded in the `kernelgate_harness` extension.

`kernelgate_harness.main()` (Rust) calls `run(job_json, kg_timing, timer)` and writes the JSON
string it returns, authenticated, to the result file. Order matters for trust: torch and the
functions the checks use are captured, the problem is loaded, and every reference output is
computed before the candidate's module is imported.
"""

import contextlib
import importlib.util
import math
import os
import sys
import threading
import time
import traceback
from dataclasses import asdict as _asdict

# Captured before any candidate code exists in the process.
_perf = time.perf_counter
_now = time.time
_sleep = time.sleep
_active_count = threading.active_count
_listdir = os.listdir
_stat = os.stat
_format_exc = traceback.format_exc
_isinstance = isinstance
_type = type
_urandom = os.urandom

TAIL = 4000
# The fresh draws' share of GPU memory has this ceiling: 30% of an H200 held 66 GiB of draws
# for a 1M-element ReLU, where a few hundred draws already outlast any run of rounds.
DRAWS_MAX_GPU_BYTES = 16 << 30
# Verified timed calls of the candidate that also go through the precision audit (float64).
TIMED_PRECISION_AUDITS = 2

# Set by the harness when it loads this runner, each a private module: the op audit
# (`kg_audit.py`), the job's protocol (`kg_protocol.py`), the correctness check's pure parts and
# memory plan (`kg_checks.py`), the sandbox's audit hook (`kg_sandbox.py`), the problem's
# work count (`kg_work.py`) and the precompiled torch header (`kg_pch.py`).
kg_audit = None
kg_protocol = None
kg_checks = None
kg_sandbox = None
kg_work = None
kg_integrity = None
kg_pch = None
kg_nvcc = None
kg_wire = None
kg_judge = None
# Workers the harness started before this process confined itself (`kg_judge.prestart`): (process,
# socket) pairs, handed out in the order workers are needed.
PRESTARTED = []


class _Stop(Exception):
    """Ends the job early with `self.outcome`."""

    def __init__(self, outcome):
        super().__init__(outcome.get("kind"))
        self.outcome = outcome


def _tail(text, n=TAIL):
    text = str(text)
    return text if len(text) <= n else "..." + text[-n:]


def _real_nvcc(torch):
    """The nvcc torch's builds run (`$CUDA_HOME/bin/nvcc`), or None without CUDA."""
    if torch.version.cuda is None:
        return None
    try:
        from torch.utils import cpp_extension

        return cpp_extension._join_cuda_home("bin", "nvcc")
    except Exception:
        return None


def _native_threads():
    try:
        return len(_listdir("/proc/self/task"))
    except OSError:
        return None


def _extension_libraries(root, names=None):
    """The compiled extensions torch keeps under its build directory (`<root>/<name>/*.so`),
    each with its modification time; only those of `names` when given (in torch's own
    directory the sandbox lets the job see its own builds only)."""
    found = {}
    if names is None:
        try:
            names = _listdir(root)
        except OSError:
            return found
    for name in names:
        folder = os.path.join(root, name)
        try:
            files = _listdir(folder)
        except OSError:
            continue
        for f in files:
            if f.endswith(".so"):
                path = os.path.join(folder, f)
                try:
                    found[path] = _stat(path).st_mtime_ns
                except OSError:
                    pass
    return found


def _mapped_files():
    """Files mapped into this process (`/proc/self/maps`): the libraries it loaded."""
    try:
        with open("/proc/self/maps") as f:
            return {parts[5].strip() for parts in (line.split(None, 5) for line in f) if len(parts) == 6}
    except OSError:
        return set()


def extension_builds(root, before, names=None):
    """What importing a kernel did with torch's build directory: each extension it built
    (`built`, and `rebuilt` when an earlier build of that name was replaced: other sources,
    flags or torch) or loaded as an earlier run left it (`built: false`)."""
    if not root:
        return []
    after = _extension_libraries(root, names)
    loaded = _mapped_files()
    out = []
    for path in sorted(after):
        built = before.get(path) != after[path]
        if built or path in loaded:
            out.append(
                {
                    "name": os.path.basename(os.path.dirname(path)),
                    "library": path,
                    "built": built,
                    "rebuilt": built and path in before,
                }
            )
    return out


def _load_module(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load a Python module from {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # Triton and dataclasses look themselves up here
    spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def _load_only():
    """While a prebuilt base kernel is imported: torch's JIT build (`load_inline`, `load`) loads
    the library the base's own build job left in the build directory instead of compiling. The
    directory is read-only to this process, so the build's lock file could not be made, and
    nothing the candidate could have touched is compiled in."""
    import inspect

    import torch.utils.cpp_extension as cpp_extension

    original = cpp_extension._jit_compile
    signature = inspect.signature(original)

    def load_built(*args, **kwargs):
        a = signature.bind(*args, **kwargs).arguments
        name, build_directory = a["name"], a["build_directory"]
        if a.get("is_standalone"):
            return cpp_extension._get_exec_path(name, build_directory)
        library = os.path.join(build_directory, name + cpp_extension.LIB_EXT)
        if not os.path.exists(library):
            raise RuntimeError(f"its build job left no {library}: the base did not build")
        return cpp_extension._import_module_from_library(name, build_directory, a["is_python_module"])

    cpp_extension._jit_compile = load_built
    try:
        yield
    finally:
        cpp_extension._jit_compile = original


class Runner:
    def __init__(self, job, kg_timing, timer):
        self.job = job
        self.kg_timing = kg_timing
        self.timer = timer
        self.work = None
        self.bandwidth_gbs = None
        self.phases = []
        self.findings = []
        self.device_label = None
        self.torch_version = None
        self.machine = None
        self.timing = None
        self.trials_run = 0
        self.op_audit = None
        self.memory_budget = None
        # Whether candidate code may have run: failures before it are the machine's or ours.
        self.candidate_started = False
        self._t = _perf()

    # ---- bookkeeping -------------------------------------------------------------------------
    def phase(self, name):
        now = _perf()
        self.phases.append([name, (now - self._t) * 1000.0])
        self._t = now

    def mark(self, phase):
        """Tells the CLI which limit applies now (compile or run); not trusted for results."""
        path = self.job.progress_path
        if not path:
            return
        try:
            with open(path, "w") as f:
                f.write(phase)
        except OSError:
            pass

    def finding(self, rule, severity, message):
        self.findings.append({"rule": rule, "severity": severity, "message": message})

    # ---- the job -----------------------------------------------------------------------------
    def execute(self):
        job = self.job
        spawn = job.spawn_unix
        if spawn:
            self.phases.append(["process_start", max(0.0, (_now() - spawn) * 1000.0)])
        self._t = _perf()
        import torch

        self.torch = torch
        self.torch_version = torch.__version__
        # torch's own folder (`py<ver>_<cuda>` under its root) is named by the CLI, which
        # grants the builds in it (crates/eval/src/extensions.rs, `TorchBuilds`).
        self.extensions_root = os.environ.get("TORCH_EXTENSIONS_DIR")
        builds = os.environ.get("KERNELGATE_TORCH_BUILDS")
        self.extension_names = None if builds is None else [n for n in builds.split(":") if n]
        self.extensions = []
        # Before any candidate code: C++ builds read torch's header precompiled by kernelgate.
        self.pch = kg_pch.use(os.environ.get("KERNELGATE_PCH_DIR"), torch)
        # A kept build's CUDA sources: nvcc's host and device steps side by side (kg_nvcc.py).
        self.nvcc = kg_nvcc.use(
            os.environ.get("KERNELGATE_PCH_DIR"), getattr(kg_nvcc, "SOURCE", None), lambda: _real_nvcc(torch)
        )
        self.phase("torch_import")
        T = self.capture(torch)
        self.T = T

        if job.build_only:
            return self.build()
        dev = self.pick_device()
        self.phase("device_init")
        dtype = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[job.precision]
        self.dtype = dtype
        self.tol = job.tolerance
        seed = int(job.seed)

        try:
            problem = _load_module(job.problem, "kg_problem_" + job.job_id)
            Model, get_inputs, get_init_inputs = problem.Model, problem.get_inputs, problem.get_init_inputs
        except BaseException as e:
            raise _Stop(
                {
                    "kind": "harness_error",
                    "message": f"the problem file {job.problem} failed to load: {e!r}; it must define "
                    "Model, get_inputs and get_init_inputs",
                    "traceback": _tail(_format_exc()),
                }
            )
        self.phase("problem_load")

        def process(x):
            # KernelBench's _process_input_tensor: floating tensors to the precision, all to the device.
            if _isinstance(x, T.Tensor):
                if x.is_floating_point():
                    x = x.to(dtype=dtype)
                return x.to(device=dev)
            return x

        on_device = dev.type == "cuda" and job.inputs_on_device

        def gen_inputs(s):
            self.set_seed(s)
            if on_device:
                with torch.device(dev):
                    raw = get_inputs()
            else:
                raw = get_inputs()
            return [process(x) for x in raw]

        self.gen_inputs = gen_inputs

        with torch.no_grad():
            self.set_seed(seed)
            init_inputs = [process(x) for x in get_init_inputs()]
            self.set_seed(seed)
            ref_model = Model(*init_inputs).to(device=dev, dtype=dtype)
        self.ref_model = ref_model
        self.phase("reference_init")

        # KernelBench: trial seeds drawn from torch's CPU generator seeded with the run seed.
        torch.manual_seed(seed)
        trial_seeds = [int(torch.randint(0, 2**32 - 1, (1,)).item()) for _ in range(job.trials)]
        trials, trial_seeds = self.make_trials(ref_model, trial_seeds)

        extra = self.shifted_sets(ref_model, trials[0][1], trial_seeds[0])
        self.trivial_output_warning(trials[0][1], trials[0][2])
        self.phase("shifted_reference")
        self.exact_reference(ref_model, trials[0], extra)
        self.phase("exact_reference")

        # The buffers the workers share with the judge: one per timing input set (one without
        # timing), filled by the judge right before each call that uses them.
        n_sets = min(len(trials), job.timing.input_sets) if job.timing else 1
        self.shared = kg_judge.SharedSets(torch, dev, [trials[i][1] for i in range(n_sets)], trials[0][2])
        self.shared_seeds = [trials[i][0] for i in range(n_sets)]
        self.workers = []
        self.job_json = self.job_json_text
        self.phase("shared_buffers")

        # The plausibility floor's inputs, measured before any candidate code exists.
        if job.timing:
            self.count_work(ref_model, trials[0][1], trials[0][2], trial_seeds[0])
            self.measure_bandwidth()
            self.phase("work")
            self.time_reference_alone(ref_model, trials)

        # The base version, for head-vs-base timing: before any candidate code runs, so the
        # candidate cannot touch its build first, and before the witness, so what its import
        # changes in PyTorch is not taken for the candidate's doing.
        base = None
        if job.base_kernel and job.timing and self.kg_timing is not None:
            base = self.load_base(init_inputs, seed)

        # Free what the reference left in the allocator, then fill it with NaN.
        self.poison()
        self.phase("poison")
        threads_py = _active_count()
        threads_native = _native_threads()

        # ---- candidate: in a worker of its own --------------------------------------------------
        # The judge's PyTorch is never the candidate's: what the candidate's import does to
        # PyTorch stays in its worker (which reports it, `kg_worker`).
        cand, cand_mod = self.load_candidate(init_inputs, seed)

        first_outputs = self.check_trials(cand, trials, extra, threads_py, threads_native)
        self.precision_audit(first_outputs)

        if job.timing:
            self.run_timing(ref_model, cand, base, trials)
        # After timing: the profiler's CUPTI state slows later launches (seen on the H200: the
        # reference 2.1x slower after the audit, a false `timing/reference-tampered`).
        self.audit_ops(cand, cand_mod, trials)

    def make_trials(self, ref_model, trial_seeds):
        """Each trial's inputs and the reference's outputs on them, before any candidate code
        exists; on a GPU, sized on the first set so copies are dropped before they are made.
        Returns the trials, (seed, pristine inputs, reference outputs), and the seeds kept."""
        t_gen = 0.0
        t_ref = 0.0
        trials = []
        for s in list(trial_seeds):
            if len(trials) >= len(trial_seeds):
                break
            t0 = _perf()
            inputs = self.gen_inputs(s)
            self.sync()
            t1 = _perf()
            refs = self.reference(ref_model, inputs, s)
            t_gen += t1 - t0
            t_ref += _perf() - t1
            trials.append((s, inputs, refs))
            if len(trials) == 1 and self.dev.type == "cuda":
                trial_seeds = trial_seeds[: self.fit_memory(inputs, refs, len(trial_seeds))]
        self.phases.append(["input_generation", t_gen * 1000.0])
        self.phases.append(["reference", t_ref * 1000.0])
        self._t = _perf()
        return trials, trial_seeds

    def start_worker(self, role, where):
        """A worker for `role`'s code, bound to the shared buffers: a `kg_judge.RemoteModel`."""
        try:
            started = PRESTARTED.pop(0) if PRESTARTED else None
            sandbox = self.job.sandbox
            nested = sandbox is not None and str(sandbox.level) != "off"
            worker = kg_judge.Worker(self.job_json, role, self.dev, self.finding, started, nested)
            self.workers.append(worker)
            flush = self.flush_l2
            return kg_judge.RemoteModel(worker, self.shared, self.shared_seeds, flush)
        except kg_judge.WorkerFailed as failed:
            raise _Stop(failed.outcome)

    def flush_l2(self):
        timer = self.timer
        if timer is not None and self.dev.type == "cuda":
            timer.flush_l2()

    def load_candidate(self, init_inputs, seed):
        """Starts the candidate's worker: it imports the kernel (the compile phase) and
        constructs `ModelNew` as the reference was constructed. Returns (model, None): the
        judge never holds the candidate's module."""
        self.mark("compile")
        self.candidate_started = True
        if self.timer is None and self.dev.type == "cuda" and self.kg_timing is not None:
            self.timer = self.kg_timing.make_timer(self.timing_cfg() if self.job.timing else {"device": "cuda", "l2": "cold"})
        try:
            cand = self.start_worker("candidate", "importing the kernel")
        finally:
            self.mark("run")
        self.extensions = _extension_list(cand.worker.extensions)
        self.phase("compile")
        return cand, None

    def load_base(self, init_inputs, seed):
        """Starts the base version's worker, or None with a warning. It builds, or loads its
        build job's build, in its own directory (`base_extensions_dir`; a prebuilt base's is
        read-only to it and nothing is compiled)."""
        self.mark("compile")
        base = None
        try:
            base = self.start_worker("base", "importing the base kernel")
        except _Stop as stop:
            o = stop.outcome
            self.finding(
                "base-kernel-failed", "warning",
                f"the base kernel could not be loaded for timing: {o.get('message') or o.get('reason') or o.get('kind')}",
            )
        finally:
            self.mark("run")
        self.phase("base_compile")
        return base

    def build(self):
        """The compile stage, ahead of the GPU and with no GPU visible: import the kernel so
        `load_inline`/`load` build into the job's extensions directory, and
        construct `ModelNew` on the CPU where that works (some kernels build in `__init__`).
        Never a verdict: the eval that follows imports the same build and reports the truth."""
        torch, job = self.torch, self.job
        try:
            problem = _load_module(job.problem, "kg_problem_" + job.job_id)
            with torch.no_grad():
                init_inputs = list(problem.get_init_inputs())
        except BaseException:
            init_inputs = None
        self.phase("problem_load")
        # A base version builds in a build job of its own (the CLI's), never beside a candidate.
        self.mark("compile")
        self.candidate_started = True
        try:
            mod = _load_module(job.kernel, "kg_candidate_" + job.job_id)
        except BaseException as e:
            self.mark("run")
            self.phase("compile")
            raise _Stop(self.compile_error(e))
        model_new = getattr(mod, "ModelNew", None)
        if model_new is not None and init_inputs is not None:
            try:
                with torch.no_grad():
                    model_new(*init_inputs)
            except BaseException:
                pass  # it may need the GPU; the eval constructs it for real
        self.mark("run")
        self.phase("compile")

    def fit_memory(self, inputs, refs, trials):
        """The harness's GPU memory budget: from the first input set's size, the copies it keeps
        (correctness trials, the shifted set, timing's input sets and their fresh-content pool,
        outputs) must fit in 80% of what is free with room for the candidate's own outputs;
        when they do not, keep fewer (timing sets, then the shifted set, then trials), say so in
        a warning, and return how many trials to keep."""
        T = self.T
        input_bytes = kg_work.nbytes(T, inputs)
        set_bytes = input_bytes + kg_work.nbytes(T, refs)
        free = self.free_gpu_bytes()
        plan = kg_checks.plan_memory(
            set_bytes=set_bytes,
            input_bytes=input_bytes,
            available=free + set_bytes,  # the first set is already held
            trials=trials,
            shifted=self.job.shifted_trials,
            input_sets=self.job.timing.input_sets if self.job.timing else 1,
        )
        self.memory_budget = plan
        if plan["reduced"]:
            self.job.shifted_trials = plan["shifted"]
            if self.job.timing:
                self.job.timing.input_sets = plan["input_sets"]
            self.finding(
                "memory-budget",
                "warning",
                f"the problem's inputs and outputs take {set_bytes / 2**30:.2f} GiB per set and "
                f"{plan['available'] / 2**30:.1f} GiB of GPU memory is available: kept "
                + ", ".join(plan["reduced"])
                + " so the harness's own copies fit",
            )
        return plan["trials"]

    # ---- helpers -----------------------------------------------------------------------------
    def free_gpu_bytes(self):
        """GPU memory this process can still take: the device's free memory and what torch's
        allocator holds unused."""
        torch = self.torch
        free, _total = torch.cuda.mem_get_info()
        return free + torch.cuda.memory_reserved() - torch.cuda.memory_allocated()

    def capture(self, torch):
        class T:
            pass

        T.Tensor = torch.Tensor
        T.allclose = torch.allclose
        T.isclose = torch.isclose
        T.equal = torch.equal
        T.isfinite = torch.isfinite
        T.zeros_like = torch.zeros_like
        T.full = torch.full
        T.clone = torch.Tensor.clone
        T.data_ptr = torch.Tensor.data_ptr
        T.storage = torch.Tensor.untyped_storage
        T.no_grad = torch.no_grad
        T.cuda_sync = torch.cuda.synchronize
        return T

    def pick_device(self):
        torch = self.torch
        want = self.job.device
        has_cuda = torch.cuda.is_available()
        # A CPU-only C++ extension cannot take CUDA tensors: it runs on the CPU whatever was asked.
        cpu_only = self.job.cpu_backend
        if want == "cuda" and not has_cuda and not cpu_only:
            raise _Stop(
                {
                    "kind": "harness_error",
                    "message": f"--device cuda was asked for, but torch {torch.__version__} sees no GPU "
                    "(check the driver, CUDA_VISIBLE_DEVICES and that torch was built with CUDA); "
                    "use --device cpu for C++ kernels",
                }
            )
        if not cpu_only and (want == "cuda" or (want == "auto" and has_cuda)):
            torch.cuda.set_device(0)
            self.device_label = "cuda:0 (" + torch.cuda.get_device_name(0) + ")"
            self.dev = torch.device("cuda", 0)
        else:
            self.device_label = "cpu"
            self.dev = torch.device("cpu")
        # Asked here, before the candidate is imported: what the candidate's code could alter
        # afterwards, it cannot alter in the key its timings are filed under.
        if self.kg_timing is not None:
            self.machine = self.kg_timing.machine(torch, self.dev)
        return self.dev

    def set_seed(self, s):
        self.torch.manual_seed(s)
        if self.dev.type == "cuda":
            self.torch.cuda.manual_seed(s)

    def sync(self):
        if self.dev.type == "cuda":
            self.T.cuda_sync()

    def as_list(self, out):
        if _isinstance(out, (tuple, list)):
            return list(out)
        return [out]

    def reference(self, model, inputs, s):
        with self.torch.no_grad():
            self.set_seed(s)
            out = model(*inputs)
        self.sync()
        refs = self.as_list(out)
        for r in refs:
            if not _isinstance(r, self.T.Tensor):
                raise _Stop(
                    {"kind": "harness_error", "message": f"the reference Model returned {_type(r).__name__}, not tensors"}
                )
        return refs

    def shifted_sets(self, ref_model, inputs, s):
        """Signed, scaled copies of the first trial's inputs where the reference stays finite."""
        T = self.T
        budget = self.job.shifted_trials
        out = []
        if budget <= 0:
            return out
        variants = [
            ("centred and scaled (x - mean) * 2", lambda x: (x - x.float().mean().to(x.dtype)) * 2),
            ("negated", lambda x: -x),
        ][:budget]
        for label, fn in variants:
            shifted = [fn(x) if _isinstance(x, T.Tensor) and x.is_floating_point() else x for x in inputs]
            if all(T.equal(a, b) for a, b in zip(shifted, inputs) if _isinstance(a, T.Tensor)):
                continue
            try:
                refs = self.reference(ref_model, shifted, s)
            except _Stop:
                raise
            except Exception:
                continue
            if all(bool(T.isfinite(r).all()) for r in refs if r.is_floating_point()):
                out.append((label, s, shifted, refs))
        return out

    def trivial_output_warning(self, inputs, refs):
        T = self.T
        ref = refs[0]
        if not ref.is_floating_point() or ref.numel() == 0:
            return
        if bool(T.allclose(T.zeros_like(ref), ref, atol=self.tol, rtol=self.tol)):
            self.finding(
                "trivial-output-passes",
                "warning",
                f"an all-zeros output already passes this problem's tolerance ({self.tol}): "
                "correctness here proves little; consider larger inputs or a tighter check",
            )
        for x in inputs:
            if (
                _isinstance(x, T.Tensor)
                and x.shape == ref.shape
                and x.dtype == ref.dtype
                and bool(T.allclose(x, ref, atol=self.tol, rtol=self.tol))
            ):
                self.finding(
                    "trivial-output-passes",
                    "warning",
                    "returning the input unchanged already passes this problem's tolerance on its benchmark inputs",
                )
                break

    def poison(self, shapes=None):
        """Fill freed allocator memory with NaN so an output that is never written cannot pass."""
        torch = self.torch
        nan = float("nan")
        if self.dev.type == "cuda":
            try:
                snap = torch.cuda.memory_snapshot()
            except Exception:
                return
            sizes = [b["size"] for seg in snap for b in seg.get("blocks", []) if b.get("state") == "inactive"]
            hold = []
            for size in sorted(sizes, reverse=True):
                n = size // 4
                if n <= 0:
                    continue
                try:
                    t = torch.empty(n, dtype=torch.float32, device=self.dev)
                    t.fill_(nan)
                    hold.append(t)
                except RuntimeError:
                    break
            self.sync()
            del hold
        elif shapes:
            # glibc hands the most recently freed chunk of a size back first: leave NaN there.
            hold = [self.T.full(sh, nan, dtype=dt) for sh, dt in shapes for _ in range(2)]
            del hold

    def compile_error(self, e):
        msg = str(e)
        if _isinstance(e, SystemExit):
            msg = f"the module called sys.exit({e.code}) while being imported"
        return {
            "kind": "compile_error",
            "message": f"importing {self.job.kernel} failed ({_type(e).__name__}): {_tail(msg.splitlines()[0] if msg else '', 300)}",
            "log_tail": _tail(msg + "\n" + _format_exc()),
        }

    def runtime_error(self, e, where, trial=None):
        msg = str(e)
        tb = _tail(_format_exc())
        if "illegal memory access" in msg or "illegal address" in msg or "unspecified launch failure" in msg:
            return {"kind": "crash", "reason": f"CUDA error while {where}: {_tail(msg, 500)}", "traceback": tb}
        out = {
            "kind": "runtime_error",
            "message": f"{_type(e).__name__} while {where}: {_tail(msg, 1000)}",
            "traceback": tb,
        }
        if _isinstance(e, MemoryError) or "can't allocate memory" in msg or "out of memory" in msg:
            out["message"] = f"memory limit exceeded while {where}: {_tail(msg, 500)}"
            out["memory_limit"] = True
        if trial is not None:
            out["trial"] = trial
        return out

    # ---- correctness -------------------------------------------------------------------------
    def call(self, cand, args, s, where):
        if _isinstance(cand, kg_judge.RemoteModel):
            try:
                return cand.run(args, s, where)
            except kg_judge.WorkerFailed as failed:
                raise _Stop(failed.outcome)
        try:
            with self.torch.no_grad():
                self.set_seed(s)
                out = cand(*args)
            self.sync()
        except BaseException as e:
            if _isinstance(e, SystemExit):
                e = RuntimeError(f"the candidate called sys.exit({e.code})")
            raise _Stop(self.runtime_error(e, where))
        return out

    def structural(self, outs, refs, args, keep, trial):
        """Type, shape, dtype, device and aliasing checks. Returns an outcome or None."""
        return kg_checks.structural(self.T, outs, refs, args, keep, trial)

    def mismatch(self, outs, refs, inputs=None, s=None):
        """None when all outputs are within tolerance, else the detail of the first bad output.
        With the call's `inputs` (and seed), outputs that miss the reference are measured
        against the float64 result too (`kg_checks.within_truth`): no further from it than the
        reference is, plus the tolerance, passes."""
        detail = kg_checks.first_mismatch(self.T, self.torch, self.tol, outs, refs)
        if detail is None or inputs is None:
            return detail
        exact = self.float64_outputs(inputs, s, refs)
        if exact is not None and kg_checks.within_truth(self.T, self.torch, self.tol, outs, refs, exact):
            if not any(f["rule"] == "reference-less-accurate" for f in self.findings):
                self.finding(
                    "reference-less-accurate",
                    "warning",
                    f"the candidate's outputs miss the reference's by more than atol = rtol = {self.tol} but are no "
                    "further from a float64 evaluation of the reference than the reference itself is (plus the "
                    "tolerance): the reference is the less accurate of the two; passed",
                )
            return None
        return detail

    def float64_outputs(self, inputs, s, refs):
        """The reference's model run in float64 on `inputs`, or None where it does not fit in
        memory or does not run in float64 (then the reference alone decides)."""
        torch, T = self.torch, self.T
        ref_model = getattr(self, "ref_model", None)
        if ref_model is None or not any(r.is_floating_point() for r in refs):
            return None
        import copy

        try:
            if self.dev.type == "cuda":
                params = kg_work.nbytes(T, list(ref_model.parameters()) + list(ref_model.buffers()))
                need = 2 * (params + kg_work.nbytes(T, inputs) + 3 * kg_work.nbytes(T, refs))
                if need > 0.5 * self.free_gpu_bytes():
                    return None
            with torch.no_grad():
                m64 = copy.deepcopy(ref_model).to(dtype=torch.float64)
                x64 = [x.to(torch.float64) if _isinstance(x, T.Tensor) and x.is_floating_point() else x for x in inputs]
                if s is not None:
                    self.set_seed(s)
                outs = self.as_list(m64(*x64))
            self.sync()
            return outs
        except Exception:
            return None

    def snapshot(self, outs):
        return [self.T.clone(o) for o in outs]

    def assert_inputs_unchanged(self, args, inputs, i):
        T = self.T
        for j, (a, x) in enumerate(zip(args, inputs)):
            if _isinstance(a, T.Tensor) and not T.equal(a, x):
                raise _Stop(
                    {
                        "kind": "input_mutated",
                        "trial": i,
                        "input": j,
                        "message": f"ModelNew.forward changed input {j} (trial {i}); kernels must not write "
                        "their inputs: allocate the output instead",
                    }
                )

    def assert_outputs_settled(self, outs, snap, i, failures, n_trials):
        """The outputs, a moment after forward returned, are what they were when it returned."""
        T = self.T
        for k, (o, sn) in enumerate(zip(outs, snap)):
            if not T.equal(o, sn) and not (o.is_floating_point() and bool(o.isnan().any())):
                raise _Stop(
                    {
                        "kind": "incorrect",
                        "message": f"output {k} changed after ModelNew.forward returned (trial {i}): work "
                        "continues in the background (a thread or an unsynchronised stream)",
                        "trials": failures,
                        "passed_trials": max(0, i + 1 - len(failures)),
                        "total_trials": n_trials,
                    }
                )

    def deny_from_candidate(self, policy):
        """Denies the job's `denied_from_candidate` syscalls on every thread, for good, before the
        candidate's import (a seccomp filter stacked on the launcher's): torch's start-up needed
        them, the candidate does not (`sandbox::DENIED_FROM_CANDIDATE`)."""
        numbers = sorted(policy.denied_from_candidate.values())
        if not numbers or str(policy.level) == "off":  # `[sandbox] enabled = false`: debugging
            return
        try:
            import kernelgate_harness

            kernelgate_harness.deny_syscalls(numbers)
        except Exception as e:
            names = ", ".join(sorted(policy.denied_from_candidate))
            self.finding("sandbox-incomplete", "warning", f"the candidate may call {names}: {e}")

    def check_trials(self, cand, trials, extra, threads_py, threads_native):
        T = self.T
        tol = self.tol
        t_calls = 0.0
        t0_all = _perf()
        first_inputs = trials[0][1]
        # One set of argument buffers, refilled per trial: the same pointers with new contents
        # expose caches keyed by data_ptr; fresh pointers are used for the determinism call.
        bufs = [T.clone(x) if _isinstance(x, T.Tensor) else x for x in first_inputs]
        ref_bytes = sum(r.numel() * r.element_size() for _, _, refs in trials for r in refs)
        keep_all = self.dev.type == "cpu" or ref_bytes < (8 << 30)
        keep = [r for _, _, refs in trials for r in refs]  # outputs must never alias the reference's
        previous = []
        failures = []
        first_snapshot = None
        for i, (s, inputs, refs) in enumerate(trials):
            same_shapes = all(
                (not _isinstance(b, T.Tensor)) or (b.shape == x.shape and b.dtype == x.dtype)
                for b, x in zip(bufs, inputs)
            )
            if not same_shapes:
                bufs = [T.clone(x) if _isinstance(x, T.Tensor) else x for x in inputs]
            else:
                for b, x in zip(bufs, inputs):
                    if _isinstance(b, T.Tensor):
                        b.copy_(x)
            args = bufs
            self.sync()
            self.poison([(r.shape, r.dtype) for r in refs])
            n_before = _native_threads()
            t0 = _perf()
            out = self.call(cand, args, s, f"running ModelNew.forward (trial {i})")
            t_calls += _perf() - t0
            self.trials_run = i + 1
            outs = self.as_list(out)
            bad = self.structural(outs, refs, args, keep + previous, i)
            if bad:
                raise _Stop(bad)
            self.assert_inputs_unchanged(args, inputs, i)
            snap = self.snapshot(outs)
            detail = self.mismatch(snap, refs, inputs, s)
            if detail:
                detail["trial"] = i
                detail["seed"] = s
                failures.append(detail)
            elif i == 0:
                first_snapshot = snap
            # Work that finishes after forward returned (a background thread) shows up here.
            n_after = _native_threads()
            if n_before is not None and n_after is not None and n_after > n_before:
                self.finding(
                    "threads-after-call",
                    "warning",
                    f"ModelNew.forward left {n_after - n_before} more native thread(s) running after it returned",
                )
            _sleep(0.02)
            self.sync()
            self.assert_outputs_settled(outs, snap, i, failures, len(trials))
            if keep_all:
                previous.extend(outs)
            else:
                previous = list(outs)
            del args
        self.phases.append(["candidate_trials", t_calls * 1000.0])
        self.phases.append(["checks", (_perf() - t0_all - t_calls) * 1000.0])
        self._t = _perf()
        if failures:
            raise _Stop(
                {
                    "kind": "incorrect",
                    "message": f"{len(failures)} of {len(trials)} trials exceed atol = rtol = {tol}",
                    "trials": failures,
                    "passed_trials": len(trials) - len(failures),
                    "total_trials": len(trials),
                }
            )
        # Determinism: the first trial again, on fresh buffers (new pointers).
        s, inputs, refs = trials[0]
        fresh = [T.clone(x) if _isinstance(x, T.Tensor) else x for x in inputs]
        self.poison([(r.shape, r.dtype) for r in refs])
        outs = self.as_list(self.call(cand, fresh, s, "running ModelNew.forward (repeat of trial 0)"))
        bad = self.structural(outs, refs, fresh, keep + previous, 0)
        if bad:
            raise _Stop(bad)
        detail = self.mismatch(outs, refs, inputs, s)
        if detail:
            detail["trial"] = 0
            detail["repeat"] = True
            raise _Stop(
                {
                    "kind": "incorrect",
                    "message": "a second call on the same inputs (trial 0) gave a wrong result: the kernel is "
                    "nondeterministic, reads uninitialised memory or depends on earlier calls",
                    "trials": [detail],
                    "passed_trials": len(trials),
                    "total_trials": len(trials) + 1,
                }
            )
        if first_snapshot is not None and not all(T.equal(a, b) for a, b in zip(outs, first_snapshot)):
            self.finding(
                "nondeterministic",
                "warning",
                "two calls on the same inputs gave different (within-tolerance) results",
            )
        del fresh, outs
        first_outputs = first_snapshot
        # Shifted inputs: correct only on the benchmark's distribution is worth a warning.
        for label, s, shifted, refs in extra:
            args = [T.clone(x) if _isinstance(x, T.Tensor) else x for x in shifted]
            self.poison([(r.shape, r.dtype) for r in refs])
            try:
                outs = self.as_list(self.call(cand, args, s, "shifted inputs"))
                if label.startswith("centred"):
                    self.centred_outputs = outs  # judged by the precision audit, passed or not
            except _Stop as stop:
                self.finding("shifted-inputs", "warning", f"on {label} inputs ModelNew failed: {stop.outcome.get('message', stop.outcome.get('kind'))}")
                continue
            bad = self.structural(outs, refs, args, keep, 0)
            d = None if bad else self.mismatch(outs, refs, shifted, s)
            if d:
                bad = {"message": "outputs exceed the tolerance"}
            if bad:
                extra_txt = f" (max abs error {d['max_abs_error']}, {d['mismatches']} of {d['elements']} elements)" if d else ""
                self.finding(
                    "shifted-inputs",
                    "warning",
                    f"ModelNew passes on the benchmark's inputs but not on {label} inputs{extra_txt}: it may rely "
                    "on the input distribution (e.g. non-negative values)",
                )
        self.phase("shifted_trials")
        n_py = _active_count()
        if n_py > threads_py:
            self.finding(
                "python-threads",
                "warning",
                f"the candidate started {n_py - threads_py} Python thread(s) that are still running",
            )
        return first_outputs

    # ---- integrity and precision -------------------------------------------------------------
    def exact_reference(self, ref_model, trial, extra):
        """The reference in float64, before any candidate code exists, on trial 0's inputs and
        on the centred shifted set: what the precision audit measures the reference's and the
        candidate's errors against (a sample of at most `kg_checks.PRECISION_SAMPLE` elements per
        output). The centred set matters most: on the benchmark's non-negative inputs a matmul's
        sums have no cancellation, so rounding of its operands averages out against the large
        output; on signed inputs TF32 or fp16 operands are 100 to 1000 times the fp32
        reference's error. Skipped when it does not fit in memory or the model does not run in
        float64."""
        self.exact = []
        self.precision = None
        self.centred_outputs = None
        if self.job.precision not in kg_checks.PRECISION_FLOOR:
            return
        s, inputs, refs = trial
        sets = [("benchmark", s, inputs, refs)]
        for label, es, shifted, erefs in extra:
            if label.startswith("centred"):
                sets.append(("centred", es, shifted, erefs))
        for label, es, xs, rs in sets:
            got = self.exact_set(ref_model, es, xs, rs)
            if got is not None:
                self.exact.append((label, got))

    def exact_set(self, ref_model, s, inputs, refs):
        torch, T = self.torch, self.T
        if not any(r.is_floating_point() for r in refs):
            return None
        if self.dev.type == "cuda":
            params = kg_work.nbytes(T, list(ref_model.parameters()) + list(ref_model.buffers()))
            need = 2 * (params + kg_work.nbytes(T, inputs) + 3 * kg_work.nbytes(T, refs))
            free = self.free_gpu_bytes()
            if need > 0.5 * free:
                self.precision = {"skipped": f"float64 reference needs {need / 2**30:.1f} GiB, {free / 2**30:.1f} GiB free"}
                return None
        import copy

        try:
            with torch.no_grad():
                m64 = copy.deepcopy(ref_model).to(dtype=torch.float64)
                x64 = [x.to(torch.float64) if _isinstance(x, T.Tensor) and x.is_floating_point() else x for x in inputs]
                self.set_seed(s)
                outs = self.as_list(m64(*x64))
            self.sync()
        except Exception as e:
            self.precision = {"skipped": f"the reference does not run in float64 ({_type(e).__name__})"}
            return None
        exact = []
        g = torch.Generator()
        g.manual_seed(int.from_bytes(_urandom(8), "little") >> 1)
        for r, o in zip(refs, outs):
            if not r.is_floating_point() or not _isinstance(o, T.Tensor) or o.shape != r.shape:
                exact.append(None)
                continue
            idx = kg_checks.sample_index(torch, r.numel(), g, r.device)
            e = kg_checks.flat_sample(o, idx).to(torch.float64)
            ref_err = kg_checks.relative_error(torch, kg_checks.flat_sample(r, idx), e)
            exact.append((idx, e, ref_err, tuple(r.shape)))
        del m64, x64, outs
        ref_errors = [x[2] for x in exact if x is not None and x[2] is not None]
        if not ref_errors:
            return None
        if max(ref_errors) > kg_checks.PRECISION_UNRELATED * kg_checks.PRECISION_FLOOR[self.job.precision]:
            # Not the same function in float64 (random ops draw differently, integer paths).
            self.precision = {"skipped": f"the float64 reference differs from the reference by {max(ref_errors):.2e}"}
            return None
        return exact

    def precision_audit(self, first_outputs):
        """The candidate's error against the float64 reference, relative to the reference's own,
        on each audited set: an fp32 kernel that sums in another order stays within a small
        factor of it, one that computes in TF32/fp16/bf16 is orders of magnitude further
        (`precision-downgrade`). On the centred set the candidate may be a different function
        altogether (a kernel that relies on the benchmark's distribution: the `shifted-inputs`
        warning says so); an error past `kg_checks.PRECISION_SAME_FUNCTION` is not judged."""
        torch = self.torch
        outputs = {"benchmark": first_outputs, "centred": getattr(self, "centred_outputs", None)}
        worst = None
        for label, exact in getattr(self, "exact", None) or []:
            outs = outputs.get(label)
            if outs is None:
                continue
            for k, (o, ex) in enumerate(zip(outs, exact)):
                if ex is None:
                    continue
                idx, e, ref_err, shape = ex
                if _type(o) is not self.T.Tensor or tuple(o.shape) != shape or not o.is_floating_point():
                    continue
                cand_err = kg_checks.relative_error(torch, kg_checks.flat_sample(o, idx), e)
                if cand_err is None or ref_err is None:
                    continue
                limit = kg_checks.precision_limit(self.job.precision, ref_err)
                if label != "benchmark" and cand_err >= kg_checks.PRECISION_SAME_FUNCTION:
                    continue
                row = {"inputs": label, "output": k, "reference_error": ref_err, "candidate_error": cand_err,
                       "limit": limit, "elements": int(e.numel()), "sampled": idx is not None}
                if worst is None or cand_err / limit > worst["candidate_error"] / worst["limit"]:
                    worst = row
        self.exact = None
        self.centred_outputs = None
        if worst is None:
            return
        self.precision = worst
        if worst["candidate_error"] > worst["limit"]:
            inputs = "the benchmark's inputs" if worst["inputs"] == "benchmark" else "centred (signed) inputs"
            self.finding(
                "precision-downgrade",
                "error",
                f"against a float64 evaluation of the reference on {inputs}, the candidate's relative error is "
                f"{worst['candidate_error']:.2e} and the {self.job.precision} reference's own is {worst['reference_error']:.2e} "
                f"(output {worst['output']}, {worst['elements']} elements{', sampled' if worst['sampled'] else ''}; "
                f"limit {worst['limit']:.2e}: {kg_checks.PRECISION_RATIO:g}x the reference's, at least "
                f"{kg_checks.PRECISION_FLOOR[self.job.precision]:.0e}): it computes in lower precision than the problem's "
                f"{self.job.precision} (TF32, fp16 or bf16 arithmetic). Compute and accumulate in the problem's precision",
            )
        self.phase("precision_audit")

    def audit_timed_precision(self, ref_model, s, inputs, refs, outs):
        """The precision audit on a verified timed call's own content: a kernel that computes in
        full precision only where it expects the audit (the first trials) shows here."""
        kept = self.precision
        exact = self.exact_set(ref_model, s, inputs, refs)
        self.precision = kept
        if not exact:
            return
        torch = self.torch
        for k, (o, ex) in enumerate(zip(outs, exact)):
            if ex is None or _type(o) is not self.T.Tensor or not o.is_floating_point():
                continue
            idx, e, ref_err, shape = ex
            if tuple(o.shape) != shape:
                continue
            cand_err = kg_checks.relative_error(torch, kg_checks.flat_sample(o, idx), e)
            if cand_err is None or ref_err is None:
                continue
            limit = kg_checks.precision_limit(self.job.precision, ref_err)
            if cand_err > limit and not any(f["rule"] == "precision-downgrade" for f in self.findings):
                self.finding(
                    "precision-downgrade",
                    "error",
                    f"on a timed call's inputs, against a float64 evaluation of the reference, the candidate's relative "
                    f"error is {cand_err:.2e} and the {self.job.precision} reference's own is {ref_err:.2e} (output {k}; "
                    f"limit {limit:.2e}): it computes in lower precision than the problem's {self.job.precision} on the "
                    "calls it is timed on. Compute and accumulate in the problem's precision on every call",
                )

    # ---- op audit ----------------------------------------------------------------------------
    def audit_ops(self, cand, cand_mod, trials):
        """One extra, untimed call on trial 0's inputs under `kg_audit`: which ops ran, custom or
        PyTorch's, and their time. Never fails the job: a failure is a warning finding."""
        self.op_audit = None
        if not self.job.audit:
            return
        if kg_audit is None:
            self.finding("audit-failed", "warning", "this harness build has no op audit module; the audit was skipped")
            return
        T = self.T
        s, inputs, refs = trials[0]
        args = [T.clone(x) if _isinstance(x, T.Tensor) else x for x in inputs]
        # Freed outputs of earlier calls (timing's last one computed these very inputs) must not
        # hand an out-parameter buffer the right values already: the audit sees writes by content.
        self.poison([(r.shape, r.dtype) for r in refs])
        try:
            if _isinstance(cand, kg_judge.RemoteModel):
                for b, x in zip(self.shared.sets[0], args):
                    if _isinstance(x, T.Tensor):
                        b.copy_(x)
                self.sync()
                reply = cand.audit(s)
                self.op_audit = reply.get("audit") if _isinstance(reply.get("audit"), dict) else None
                if self.op_audit is None:
                    raise RuntimeError(reply.get("error") or "the worker returned no audit")
            else:
                self.set_seed(s)
                self.op_audit = kg_audit.audit(self.torch, cand, cand_mod, args, self.dev.type)
            self.sync()
            if self.op_audit.get("custom_share") is None:
                self.finding(
                    "audit-failed",
                    "warning",
                    "the op audit measured no work in ModelNew.forward (no kernel, op or extension time); "
                    "the custom share is unknown",
                )
        except BaseException as e:
            if _isinstance(e, SystemExit):
                e = RuntimeError(f"the candidate called sys.exit({e.code})")
            self.op_audit = None
            self.finding(
                "audit-failed",
                "warning",
                f"the op audit could not run ({_type(e).__name__}: {_tail(str(e), 300)}); the custom share is unknown",
            )
        del args
        self.phase("audit")

    # ---- plausibility ------------------------------------------------------------------------
    def count_work(self, ref_model, inputs, refs, s):
        """Bytes every input read once and every output written once (free: from the shapes)
        and, when the job asks (`count_flops`: GPU jobs, where a floor is computed), the
        reference's FLOPs (one extra reference call on one input set). Any failure leaves the
        field unset: counting must never fail a kernel."""
        try:
            self.work = {
                "input_bytes": kg_work.nbytes(self.T, inputs),
                "output_bytes": kg_work.nbytes(self.T, refs),
                "flops": None,
            }
        except Exception:
            self.work = None
            return
        if not self.job.count_flops:
            return
        try:
            self.set_seed(s)
            self.work["flops"] = kg_work.count_flops(self.torch, ref_model, inputs)
            self.sync()
            return
        except Exception:
            pass
        if self.kg_timing is None:
            return
        try:
            # torch's own counter also handles higher-order ops, at the price of the import.
            self.set_seed(s)
            _, _, flops = self.kg_timing.work(ref_model, inputs, refs)
            self.sync()
            self.work["flops"] = int(flops)
        except Exception:
            pass

    def measure_bandwidth(self):
        """On CUDA, the device's copy bandwidth (GB/s) through the Rust timer, which the timing
        then reuses. None on CPU, on a warm-L2 timer or on any failure (timing makes its own)."""
        if self.kg_timing is None or self.dev.type != "cuda":
            return
        try:
            timer = self.timer if self.timer is not None else self.kg_timing.make_timer(self.timing_cfg())
            bw = timer.bandwidth_gbs()
            self.timer = timer
            self.bandwidth_gbs = kg_checks.finite_or_none(bw) if bw is not None else None
        except Exception:
            self.bandwidth_gbs = None

    # ---- timing ------------------------------------------------------------------------------
    def timing_cfg(self):
        cfg = _asdict(self.job.timing)
        cfg["device"] = "cuda" if self.dev.type == "cuda" else "cpu"
        return cfg

    def time_reference_alone(self, ref_model, trials):
        """Before any candidate code exists: gives the timed calls' buffers (the first trials'
        inputs) their fresh content (`kg_timing.FreshInputs`) and times the reference alone on
        them. The interleaved
        reference series is compared with this one (`timing/reference-tampered`): a candidate
        that slows the reference's op at import shows there."""
        self.timing_inputs = None
        self.reference_alone = None
        if self.kg_timing is None:
            return
        # The shared buffers the workers read: the first trials' inputs, copied.
        sets = self.shared.sets
        seeds = self.shared_seeds
        if self.timer is None:
            self.timer = self.kg_timing.make_timer(self.timing_cfg())
        fresh = self.kg_timing.FreshInputs(self.torch, sets, self.fresh_draws(sets), self.timer.copy)
        self.timing_inputs = (sets, seeds, fresh)
        self.phase("fresh_draws")
        # The reference is timed in a worker of its own, on the candidate's path: the judge's
        # clock, the round trip and the output copy are the same for both.
        self.ref_remote = self.start_worker("reference", "starting the reference's worker")
        self.phase("reference_worker")
        try:
            self.reference_alone = self.time_alone(ref_model, sets, fresh)
        except BaseException as e:
            raise _Stop(
                {"kind": "harness_error", "message": f"timing the reference before the candidate failed: {e!r}", "traceback": _tail(_format_exc())}
            )
        self.phase("reference_alone_timing")

    def fresh_draws(self, sets):
        """New draws of the problem's `get_inputs()` for the timed calls (on the device, like the
        trials' own), made now, before any candidate code exists: as many as a full run of
        rounds can use, within 30% of the free GPU memory and at most 16 GiB (2 GiB of host
        memory on the CPU), and two seconds."""
        input_bytes = kg_work.nbytes(self.T, sets[0])
        if self.dev.type == "cuda":
            max_bytes = min(0.3 * self.free_gpu_bytes(), float(DRAWS_MAX_GPU_BYTES))
        else:
            max_bytes = float(2 << 30)
        t = self.job.timing
        calls = 3 * (int(t.warmup) + 2 * int(t.max_samples) + 4)
        draws = self.kg_timing.draw_pool(
            lambda: self.gen_inputs(int.from_bytes(_urandom(4), "little")),
            min(self.kg_timing.MAX_DRAWS, calls), input_bytes, max_bytes, 2.0,
        )
        self.sync()
        return draws

    def time_alone(self, ref_model, sets, fresh):
        """The reference timed alone on the timing buffers; then the buffers' original content is
        put back. A witness needs enough calls for a rank test, not a 1%
        interval: a quarter of the budget."""
        cfg = self.timing_cfg()
        budget = float(cfg["budget_s"])
        cfg["budget_s"] = min(budget, max(1.0, budget / 4.0))
        if self.timer is None:
            self.timer = self.kg_timing.make_timer(cfg)

        # No control series (a copy timed beside it): it would run in the judge while the
        # reference runs in its worker, so it would not carry the reference's machine state.
        callables = {"reference": self.ref_remote}
        try:
            alone = self.kg_timing.measure(callables, len(sets), self.timer, cfg, None, fresh)
        except kg_judge.WorkerFailed as failed:
            raise RuntimeError(f"the reference's worker failed: {failed.outcome}")
        fresh.restore()
        self.sync()
        return alone["reference"]

    def run_timing(self, ref_model, cand, base, trials):
        if self.kg_timing is None or getattr(self, "timing_inputs", None) is None:
            self.finding("timing-unavailable", "warning", "this harness build has no timing module; timing skipped")
            return
        T = self.T
        sets, seeds, fresh = self.timing_inputs
        n_sets = len(sets)

        def caller(model):
            def f(i):
                with self.torch.no_grad():
                    return model(*sets[i])

            return f

        callables = {"reference": self.ref_remote, "candidate": cand if _isinstance(cand, kg_judge.RemoteModel) else caller(cand)}
        if base is not None:
            callables["base"] = base

        # Outputs of checked calls stay referenced, so the allocator cannot hand their memory out
        # again: a later output in the same memory was kept and returned by the candidate.
        kept = {name: {} for name in callables}
        # A checked call's outputs are copied here by the harness the moment the call returns
        # (`capture`), before any PyTorch operation that candidate code could hook into.
        snap_bufs = {
            name: [T.zeros_like(r) for r in trials[0][2]] for name in ("candidate", "base") if name in callables
        }
        self.sync()
        harness_copy = self.timer.copy

        def capture(name, out):
            fn = callables.get(name)
            if _isinstance(fn, kg_judge.RemoteModel):
                # The judge's copies, read from the shared output buffers right after the reply.
                return fn.read_outputs(out), None
            outs = self.as_list(out)
            bufs = snap_bufs.get(name)
            if bufs is None:
                return outs, None
            snaps = []
            for k, o in enumerate(outs):
                b = bufs[k] if k < len(bufs) else None
                # The exact type first: a subclass's properties would run candidate code.
                if (
                    b is not None
                    and _type(o) is T.Tensor
                    and o.dtype == b.dtype
                    and o.shape == b.shape
                    and o.device == b.device
                    and o.is_contiguous()
                ):
                    harness_copy(T.data_ptr(b), T.data_ptr(o), b.numel() * b.element_size(), True)
                    snaps.append(b)
                else:
                    snaps.append(None)
            return outs, snaps

        def inputs_needed(outs, refs):
            return kg_checks.first_mismatch(T, self.torch, self.tol, outs, refs) is not None

        def verify(name, i, captured, token):
            if name == "reference":
                return
            outs, snaps = captured
            # The reference on the call's own content, computed after the call: the candidate
            # cannot tell from a reference run that this call is checked.
            refs = self.reference(ref_model, fresh.materialize(token), seeds[i])
            earlier = [t for j, ts in kept[name].items() for t in ts]
            compared = [sn if sn is not None else o for o, sn in zip(outs, snaps)] if snaps else outs
            bad = self.structural(outs, refs, sets[i], earlier, i)
            if not bad and self.mismatch(compared, refs, fresh.materialize(token) if inputs_needed(compared, refs) else None, seeds[i]):
                bad = {"kind": "incorrect"}
            if bad:
                aliased = bad.get("kind") == "output_aliased"
                raise _Stop(
                    {
                        "kind": "output_aliased" if aliased else "incorrect",
                        "message": f"a timed call of {name} on input set {i} returned "
                        + ("memory it returned from an earlier timed call (a cached result)" if aliased else "a wrong result")
                        + ": the kernel behaves differently while being timed",
                        "trials": [],
                        "phase": "timing",
                    }
                )
            kept[name][i] = [o for o in outs if _isinstance(o, T.Tensor)]
            if name == "candidate" and audits_left[0] > 0:
                audits_left[0] -= 1
                self.audit_timed_precision(ref_model, seeds[i], fresh.materialize(token), refs, outs)

        # Timed calls the judge puts through the precision audit, picked among the verified ones
        # after each call: the worker cannot tell which.
        audits_left = [TIMED_PRECISION_AUDITS]
        try:
            samples = self.kg_timing.measure(
                callables, n_sets, self.timer, self.timing_cfg(), verify, fresh, ["candidate"], capture
            )
        except _Stop:
            raise
        except kg_judge.WorkerFailed as failed:
            raise _Stop(failed.outcome)
        except BaseException as e:
            raise _Stop(self.runtime_error(e, "timing"))
        # The judge's clock beside every worker's (docs/timing.md, "Whose clock").
        clock = kg_judge.clock_findings(samples, self.dev.type)
        for rule, severity, message in clock:
            self.finding(rule, severity, message)
        kg_judge.judge_the_times(samples, self.dev.type, any(severity == "error" for _, severity, _ in clock))
        if not fresh.intact():
            raise _Stop(
                {
                    "kind": "incorrect",
                    "message": "the values kernelgate refills the timed inputs from were changed during the run: "
                    "kernels must not write memory they were not given",
                    "trials": [],
                    "phase": "timing",
                }
            )
        if self.reference_alone:
            samples["reference_before_import"] = self.reference_alone
        self.timing = samples
        self.phase("timing")
        # Alone again after the candidate's calls (GPU): a reference slower only between those
        # calls (a short, launch-bound one) is told apart from one the candidate's code slows.
        if self.reference_alone and self.dev.type == "cuda":
            try:
                after = self.time_alone(ref_model, sets, fresh)
            except BaseException as e:
                raise _Stop(self.runtime_error(e, "timing"))
            samples["reference_after_calls"] = after
            self.phase("reference_after_calls")

    def result(self, outcome):
        return {
            "outcome": outcome,
            "findings": self.findings,
            "phases": self.phases,
            "seed": self.job.seed,
            "device": self.device_label,
            "torch": self.torch_version,
            "machine": self.machine,
            "trials_run": self.trials_run,
            "timing": self.timing,
            "work": self.work,
            "bandwidth_gbs": self.bandwidth_gbs,
            "audit": self.op_audit,
            "memory": self.memory_use(),
            "precision_audit": getattr(self, "precision", None),
            "extensions": getattr(self, "extensions", []),
            "extensions_dir": getattr(self, "extensions_root", None),
            "precompiled_header": getattr(self, "pch", None),
        }

    def memory_use(self):
        """Peak memory of this eval: the GPU's (torch's allocator) and the host's (this process)."""
        out = {"budget": getattr(self, "memory_budget", None)}
        try:
            import resource

            out["host_peak_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        except Exception:
            pass
        try:
            dev = getattr(self, "dev", None)
            if dev is not None and dev.type == "cuda":
                out["gpu_peak_bytes"] = int(self.torch.cuda.max_memory_allocated())
        except Exception:
            pass
        return out


def _extension_list(reported):
    """A worker's report of the extensions its import built or loaded, kept to the fields the
    result carries (the worker is not trusted to shape the result)."""
    out = []
    for e in reported if _isinstance(reported, list) else []:
        if not _isinstance(e, dict):
            continue
        name, library = e.get("name"), e.get("library")
        if _isinstance(name, str) and _isinstance(library, str):
            out.append({"name": name[:200], "library": library[:1000], "built": e.get("built") is True, "rebuilt": e.get("rebuilt") is True})
    return out[:64]


def _clean(x):
    if _isinstance(x, float):
        return x if math.isfinite(x) else None
    if _isinstance(x, dict):
        return {str(k): _clean(v) for k, v in x.items()}
    if _isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    if x is None or _isinstance(x, (bool, int, str)):
        return x
    return str(x)


def run(job_json, kg_timing=None, timer=None):
    import json

    dumps = json.dumps
    try:
        job = kg_protocol.parse_job(job_json)
    except kg_protocol.ProtocolError as e:
        # Neither the machine's fault nor the candidate's: a CLI and a harness that do not match.
        outcome = {"kind": "harness_error", "message": f"kernelgate's harness cannot read its job: {e}"}
        return dumps({"outcome": outcome, "findings": [], "phases": [], "timing": None})
    runner = Runner(job, kg_timing, timer)
    runner.job_json_text = job_json
    outcome = {"kind": "passed"}
    try:
        runner.execute()
    except _Stop as stop:
        outcome = stop.outcome
    except kg_judge.WorkerFailed as failed:
        outcome = failed.outcome
    except BaseException as e:  # a bug of ours, never the candidate's verdict
        outcome = {
            "kind": "harness_error",
            "message": f"kernelgate's runner failed: {e!r}",
            "traceback": _tail(_format_exc()),
        }
    for worker in getattr(runner, "workers", None) or []:
        worker.stop()
    while PRESTARTED:
        proc, sock = PRESTARTED.pop()
        sock.close()  # an idle worker ends when its pair closes
    if outcome.get("kind") == "harness_error" and not runner.candidate_started:
        outcome["kind"] = "infrastructure"
    if outcome.get("kind") == "passed":
        outcome["trials"] = runner.trials_run
    total = sum(ms for _, ms in runner.phases)
    runner.phases.append(["total", total])
    return dumps(_clean(runner.result(outcome)))
