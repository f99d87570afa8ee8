"""kernelgate job runner, embedded in the `kernelgate_harness` extension: the judge's
orchestration of one job.

`kernelgate_harness.main()` (Rust) calls `run(job_json, kg_timing, timer)` and writes the JSON
string it returns, authenticated, to the result file. Order matters for trust: torch and the
functions the checks use are captured, the problem is loaded, and every reference output is
computed before the candidate's module is imported.

`Runner` orders the job's phases and writes the result; the evaluation's shared state is a
`kg_context.Context` that each unit receives: the correctness trials (`kg_trials`), the
precision audit (`kg_precision`) and the timing phase (`kg_timed`, beside `kg_timing`). The
candidate and the base run in workers (`kg_judge`, `kg_worker`), never in this process.
"""

import contextlib
import importlib.util
import math
import os
import sys
import threading
import time
import traceback

# Captured before any candidate code exists in the process.
_now = time.time
_active_count = threading.active_count
_listdir = os.listdir
_stat = os.stat
_format_exc = traceback.format_exc
_isinstance = isinstance
_type = type

# Set by the harness when it loads this runner, each a private module: the op audit
# (`kg_audit.py`), the job's protocol (`kg_protocol.py`), the correctness check's pure parts and
# memory plan (`kg_checks.py`), the sandbox's audit hook (`kg_sandbox.py`), the problem's
# work count (`kg_work.py`) and the precompiled torch header (`kg_pch.py`); the evaluation's
# shared state (`kg_context.py`) and its units: the correctness trials (`kg_trials.py`), the
# precision audit (`kg_precision.py`) and the timing phase (`kg_timed.py`), which `_link` gives
# the modules they read.
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
kg_context = None
kg_trials = None
kg_precision = None
kg_timed = None
# Workers the harness started before this process confined itself (forks, `kg_judge.adopt`, or new
# processes, `kg_judge.prestart`): (process, socket) pairs, handed out in the order workers are needed.
PRESTARTED = []


def _link():
    """Gives the evaluation's units the modules they read (the harness installs them here)."""
    shared = {"kg_context": kg_context, "kg_checks": kg_checks, "kg_work": kg_work, "kg_judge": kg_judge}
    for unit in (kg_trials, kg_precision, kg_timed):
        if unit is None:
            continue
        for name, module in shared.items():
            if hasattr(unit, name):
                setattr(unit, name, module)


def _real_nvcc(torch):
    """The nvcc torch's builds run (`$CUDA_HOME/bin/nvcc`), or None without CUDA."""
    if torch.version.cuda is None:
        return None
    try:
        from torch.utils import cpp_extension

        return cpp_extension._join_cuda_home("bin", "nvcc")
    except Exception:
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
def _load_only(fallback=False):
    """While a prebuilt kernel is imported (a base built by its own build job, or a build from
    kernelgate's build store): torch's JIT build (`load_inline`, `load`) loads the library in
    the build directory instead of compiling. The directory is read-only to this process, so
    the build's lock file could not be made, and nothing the candidate could have touched is
    compiled in. `fallback`: a library the directory lacks is built as torch would (the
    candidate's build from the store: only what the store holds is loaded without a build)."""
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
        if not os.path.exists(library) and fallback:
            # Not a build the store holds (a directory of the kernel's own choosing): torch's
            # own JIT build, wherever this process may write.
            return original(*args, **kwargs)
        if not os.path.exists(library):
            raise RuntimeError(
                f"its prebuilt build holds no {library}: it did not build, or the kernel builds another "
                "extension than when it was built"
            )
        return cpp_extension._import_module_from_library(name, build_directory, a["is_python_module"])

    cpp_extension._jit_compile = load_built
    try:
        yield
    finally:
        cpp_extension._jit_compile = original


class Runner:
    """The judge's side of one job: the phases in their order, the workers, the result."""

    def __init__(self, job, kg_timing, timer, job_json=None):
        ctx = kg_context.Context(job, kg_timing, timer)
        self.ctx = ctx
        self.job = job
        self.kg_timing = kg_timing
        self.job_json = job_json
        self.precision = kg_precision.Precision(ctx)
        self.trials = kg_trials.Trials(ctx, self.precision)
        self.timed = kg_timed.Timed(ctx, self.trials, self.precision, self.start_worker)
        self.device_label = None
        self.torch_version = None
        self.machine = None
        self.op_audit = None
        self.extensions = []
        self.extensions_root = None
        self.pch = None
        self.workers = []
        # Whether candidate code may have run: failures before it are the machine's or ours.
        self.candidate_started = False

    # ---- the job -----------------------------------------------------------------------------
    def execute(self):
        ctx, job = self.ctx, self.job
        spawn = job.spawn_unix
        if spawn:
            ctx.phases.append(["process_start", max(0.0, (_now() - spawn) * 1000.0)])
        ctx.restart_phase()
        import torch

        ctx.torch = torch
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
        self.nvcc = kg_nvcc.use(os.environ.get("KERNELGATE_PCH_DIR"), getattr(kg_nvcc, "SOURCE", None), lambda: _real_nvcc(torch))
        ctx.phase("torch_import")
        T = ctx.capture(torch)
        ctx.T = T

        if job.build_only:
            return self.build()
        dev = self.pick_device()
        ctx.phase("device_init")
        dtype = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[job.precision]
        ctx.dtype = dtype
        ctx.tol = job.tolerance
        seed = int(job.seed)

        try:
            problem = _load_module(job.problem, "kg_problem_" + job.job_id)
            Model, get_inputs, get_init_inputs = problem.Model, problem.get_inputs, problem.get_init_inputs
        except BaseException as e:
            raise kg_context.Stop(
                {
                    "kind": "harness_error",
                    "message": f"the problem file {job.problem} failed to load: {e!r}; it must define "
                    "Model, get_inputs and get_init_inputs",
                    "traceback": kg_context.tail(_format_exc()),
                }
            )
        ctx.phase("problem_load")

        def process(x):
            # KernelBench's _process_input_tensor: floating tensors to the precision, all to the device.
            if _isinstance(x, T.Tensor):
                if x.is_floating_point():
                    x = x.to(dtype=dtype)
                return x.to(device=dev)
            return x

        on_device = dev.type == "cuda" and job.inputs_on_device

        def gen_inputs(s):
            ctx.set_seed(s)
            if on_device:
                with torch.device(dev):
                    raw = get_inputs()
            else:
                raw = get_inputs()
            return [process(x) for x in raw]

        ctx.gen_inputs = gen_inputs

        with torch.no_grad():
            ctx.set_seed(seed)
            init_inputs = [process(x) for x in get_init_inputs()]
            ctx.set_seed(seed)
            ref_model = Model(*init_inputs).to(device=dev, dtype=dtype)
        ctx.ref_model = ref_model
        ctx.phase("reference_init")

        # KernelBench: trial seeds drawn from torch's CPU generator seeded with the run seed.
        torch.manual_seed(seed)
        trial_seeds = [int(torch.randint(0, 2**32 - 1, (1,)).item()) for _ in range(job.trials)]
        trials, trial_seeds = self.trials.make_trials(ref_model, trial_seeds)

        extra = self.trials.shifted_sets(ref_model, trials[0][1], trial_seeds[0])
        self.trials.trivial_output_warning(trials[0][1], trials[0][2])
        ctx.phase("shifted_reference")
        self.precision.exact_reference(ref_model, trials[0], extra)
        ctx.phase("exact_reference")

        # The buffers the workers share with the judge: one per timing input set (one without
        # timing), filled by the judge right before each call that uses them.
        n_sets = min(len(trials), job.timing.input_sets) if job.timing else 1
        ctx.shared = kg_judge.SharedSets(torch, dev, [trials[i][1] for i in range(n_sets)], trials[0][2])
        ctx.shared_seeds = [trials[i][0] for i in range(n_sets)]
        self.workers = []
        ctx.phase("shared_buffers")

        # The plausibility floor's inputs, measured before any candidate code exists.
        if job.timing:
            self.timed.count_work(ref_model, trials[0][1], trials[0][2], trial_seeds[0])
            self.timed.measure_bandwidth()
            ctx.phase("work")
            self.timed.time_reference_alone(ref_model, trials)

        # The base version, for head-vs-base timing: before any candidate code runs, so the
        # candidate cannot touch its build first, and before the witness, so what its import
        # changes in PyTorch is not taken for the candidate's doing.
        base = None
        if job.base_kernel and job.timing and self.kg_timing is not None:
            base = self.load_base(init_inputs, seed)

        # Free what the reference left in the allocator, then fill it with NaN.
        ctx.poison()
        ctx.phase("poison")
        threads_py = _active_count()
        threads_native = kg_context.native_threads()

        # ---- candidate: in a worker of its own --------------------------------------------------
        # The judge's PyTorch is never the candidate's: what the candidate's import does to
        # PyTorch stays in its worker (which reports it, `kg_worker`).
        cand, cand_mod = self.load_candidate(init_inputs, seed)

        first_outputs = self.trials.check_trials(cand, trials, extra, threads_py, threads_native)
        self.precision.audit(first_outputs)

        if job.timing:
            self.timed.run_timing(ref_model, cand, base, trials)
        # After timing: the profiler's CUPTI state slows later launches (seen on the H200: the
        # reference 2.1x slower after the audit, a false `timing/reference-tampered`).
        self.audit_ops(cand, cand_mod, trials)

    def start_worker(self, role, where):
        """A worker for `role`'s code, bound to the shared buffers: a `kg_judge.RemoteModel`."""
        ctx = self.ctx
        try:
            started = PRESTARTED.pop(0) if PRESTARTED else None
            sandbox = self.job.sandbox
            nested = sandbox is not None and str(sandbox.level) != "off"
            worker = kg_judge.Worker(self.job_json, role, ctx.dev, ctx.finding, started, nested)
            self.workers.append(worker)
            return kg_judge.RemoteModel(worker, ctx.shared, ctx.shared_seeds, self.flush_l2)
        except kg_judge.WorkerFailed as failed:
            raise kg_context.Stop(failed.outcome)

    def flush_l2(self):
        timer = self.ctx.timer
        if timer is not None and self.ctx.dev.type == "cuda":
            timer.flush_l2()

    def load_candidate(self, init_inputs, seed):
        """Starts the candidate's worker: it imports the kernel (the compile phase) and
        constructs `ModelNew` as the reference was constructed. Returns (model, None): the
        judge never holds the candidate's module."""
        ctx = self.ctx
        ctx.mark("compile")
        self.candidate_started = True
        if ctx.timer is None and ctx.dev.type == "cuda" and self.kg_timing is not None:
            ctx.timer = self.kg_timing.make_timer(
                self.timed.timing_cfg() if self.job.timing else {"device": "cuda", "l2": "cold"}
            )
        try:
            cand = self.start_worker("candidate", "importing the kernel")
        finally:
            ctx.mark("run")
        self.extensions = _extension_list(cand.worker.extensions)
        # The entry the candidate's builds were offered is the one its worker had on CPATH (the
        # runner's own, never another path the worker's reply might name).
        if cand.worker.precompiled_header != self.pch:
            self.pch = None
        ctx.phase("compile")
        return cand, None

    def load_base(self, init_inputs, seed):
        """Starts the base version's worker, or None with a warning. It builds, or loads its
        build job's build, in its own directory (`base_extensions_dir`; a prebuilt base's is
        read-only to it and nothing is compiled)."""
        ctx = self.ctx
        ctx.mark("compile")
        base = None
        try:
            base = self.start_worker("base", "importing the base kernel")
        except kg_context.Stop as stop:
            o = stop.outcome
            ctx.finding(
                "base-kernel-failed",
                "warning",
                f"the base kernel could not be loaded for timing: {o.get('message') or o.get('reason') or o.get('kind')}",
            )
        finally:
            ctx.mark("run")
        ctx.phase("base_compile")
        return base

    def build(self):
        """The compile stage, ahead of the GPU and with no GPU visible: import the kernel so
        `load_inline`/`load` build into the job's extensions directory, and
        construct `ModelNew` on the CPU where that works (some kernels build in `__init__`).
        Never a verdict: the eval that follows imports the same build and reports the truth."""
        ctx, job = self.ctx, self.job
        torch = ctx.torch
        try:
            problem = _load_module(job.problem, "kg_problem_" + job.job_id)
            with torch.no_grad():
                init_inputs = list(problem.get_init_inputs())
        except BaseException:
            init_inputs = None
        ctx.phase("problem_load")
        # A base version builds in a build job of its own (the CLI's), never beside a candidate.
        ctx.mark("compile")
        self.candidate_started = True
        # What the import builds is reported: kernelgate keeps those builds in its build store.
        root, names = self.extensions_root, self.extension_names
        before = _extension_libraries(root, names) if root else {}
        try:
            mod = _load_module(job.kernel, "kg_candidate_" + job.job_id)
        except BaseException as e:
            ctx.mark("run")
            ctx.phase("compile")
            raise kg_context.Stop(ctx.compile_error(e))
        self.extensions = extension_builds(root, before, names) if root else []
        model_new = getattr(mod, "ModelNew", None)
        if model_new is not None and init_inputs is not None:
            try:
                with torch.no_grad():
                    model_new(*init_inputs)
            except BaseException:
                pass  # it may need the GPU; the eval constructs it for real
        ctx.mark("run")
        ctx.phase("compile")

    def pick_device(self):
        ctx = self.ctx
        torch = ctx.torch
        want = self.job.device
        has_cuda = torch.cuda.is_available()
        # A CPU-only C++ extension cannot take CUDA tensors: it runs on the CPU whatever was asked.
        cpu_only = self.job.cpu_backend
        if want == "cuda" and not has_cuda and not cpu_only:
            raise kg_context.Stop(
                {
                    "kind": "harness_error",
                    "message": f"--device cuda was asked for, but torch {torch.__version__} sees no GPU: {cuda_failure(torch)}",
                }
            )
        if not cpu_only and (want == "cuda" or (want == "auto" and has_cuda)):
            torch.cuda.set_device(0)
            self.device_label = "cuda:0 (" + torch.cuda.get_device_name(0) + ")"
            ctx.dev = torch.device("cuda", 0)
        else:
            self.device_label = "cpu"
            ctx.dev = torch.device("cpu")
        # Asked here, before the candidate is imported: what the candidate's code could alter
        # afterwards, it cannot alter in the key its timings are filed under.
        if self.kg_timing is not None:
            self.machine = self.kg_timing.machine(torch, ctx.dev)
        return ctx.dev

    # ---- op audit ----------------------------------------------------------------------------
    def audit_ops(self, cand, cand_mod, trials):
        """One extra, untimed call on trial 0's inputs under `kg_audit`: which ops ran, custom or
        PyTorch's, and their time. Never fails the job: a failure is a warning finding."""
        ctx = self.ctx
        self.op_audit = None
        if not self.job.audit:
            return
        if kg_audit is None:
            ctx.finding("audit-failed", "warning", "this harness build has no op audit module; the audit was skipped")
            return
        T = ctx.T
        s, inputs, refs = trials[0]
        args = [T.clone(x) if _isinstance(x, T.Tensor) else x for x in inputs]
        # Freed outputs of earlier calls (timing's last one computed these very inputs) must not
        # hand an out-parameter buffer the right values already: the audit sees writes by content.
        ctx.poison([(r.shape, r.dtype) for r in refs])
        try:
            if _isinstance(cand, kg_judge.RemoteModel):
                for b, x in zip(ctx.shared.sets[0], args):
                    if _isinstance(x, T.Tensor):
                        b.copy_(x)
                ctx.sync()
                reply = cand.audit(s)
                self.op_audit = reply.get("audit") if _isinstance(reply.get("audit"), dict) else None
                if self.op_audit is None:
                    raise RuntimeError(reply.get("error") or "the worker returned no audit")
            else:
                ctx.set_seed(s)
                self.op_audit = kg_audit.audit(ctx.torch, cand, cand_mod, args, ctx.dev.type)
            ctx.sync()
            if self.op_audit.get("custom_share") is None:
                ctx.finding(
                    "audit-failed",
                    "warning",
                    "the op audit measured no work in ModelNew.forward (no kernel, op or extension time); "
                    "the custom share is unknown",
                )
        except BaseException as e:
            if _isinstance(e, SystemExit):
                e = RuntimeError(f"the candidate called sys.exit({e.code})")
            self.op_audit = None
            ctx.finding(
                "audit-failed",
                "warning",
                f"the op audit could not run ({_type(e).__name__}: {kg_context.tail(str(e), 300)}); the custom share is unknown",
            )
        del args
        ctx.phase("audit")

    # ---- the result --------------------------------------------------------------------------
    def result(self, outcome):
        ctx = self.ctx
        return kg_protocol.Result(
            outcome=outcome,
            findings=ctx.findings,
            phases=ctx.phases,
            seed=self.job.seed,
            device=self.device_label,
            torch=self.torch_version,
            machine=self.machine,
            trials_run=self.trials.trials_run,
            timing=self.timed.samples,
            work=self.timed.work,
            bandwidth_gbs=self.timed.bandwidth_gbs,
            audit=self.op_audit,
            memory=self.memory_use(),
            precision_audit=self.precision.timed_result(),
            extensions=self.extensions,
            extensions_dir=self.extensions_root,
            precompiled_header=self.pch,
        )

    def memory_use(self):
        """Peak memory of this eval: the GPU's (torch's allocator) and the host's (this process)."""
        out = {"budget": self.trials.memory_budget}
        try:
            import resource

            out["host_peak_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        except Exception:
            pass
        try:
            dev = getattr(self.ctx, "dev", None)
            if dev is not None and dev.type == "cuda":
                out["gpu_peak_bytes"] = int(self.ctx.torch.cuda.max_memory_allocated())
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
            out.append(
                {
                    "name": name[:200],
                    "library": library[:1000],
                    "built": e.get("built") is True,
                    "rebuilt": e.get("rebuilt") is True,
                }
            )
    return out[:64]


def cuda_failure(torch):
    """Why torch sees no GPU, in torch's and the driver's words, and what to do about it."""
    advice = "check the driver and CUDA_VISIBLE_DEVICES, or use --device cpu for C++ kernels"
    if not torch.backends.cuda.is_built():
        return "this torch is built without CUDA; install a CUDA build of torch, or use --device cpu for C++ kernels"
    try:
        torch.cuda.init()
    except Exception as e:  # noqa: BLE001 - torch raises RuntimeError, AssertionError or its own types
        lines = [line.strip() for line in str(e).splitlines() if line.strip()]
        reason = lines[-1] if lines else type(e).__name__
        # torch prefixes the driver's own error ("Error 304: OS call failed ...") with a guess.
        cut = reason.find("Error ")
        reason = reason[cut:] if cut > 0 else reason
        if "Error 304" in reason:
            # An OS call the driver's start needs failed: in kernelgate's job, a refused syscall.
            return (
                f"{reason[:300]}: the CUDA driver could not make a system call it needs to start; in "
                "kernelgate's sandbox that is a call the job's seccomp filter or Landlock refuses "
                "(docs/sandbox.md, 'Jobs that may use the GPU'); KERNELGATE_SANDBOX=off on a kernel "
                "you trust tells whether the sandbox is the cause"
            )
        return f"{reason[:300]} ({advice})"
    return f"torch.cuda.init() succeeded but no device is visible ({advice})"


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
        return dumps(kg_protocol.Result(outcome=outcome, findings=[], phases=[]).wire())
    _link()
    runner = Runner(job, kg_timing, timer, job_json)
    outcome = {"kind": "passed"}
    try:
        runner.execute()
    except kg_context.Stop as stop:
        outcome = stop.outcome
    except kg_judge.WorkerFailed as failed:
        outcome = failed.outcome
    except BaseException as e:  # a bug of ours, never the candidate's verdict
        outcome = {
            "kind": "harness_error",
            "message": f"kernelgate's runner failed: {e!r}",
            "traceback": kg_context.tail(_format_exc()),
        }
    kg_judge.stop_all(runner.workers)
    while PRESTARTED:
        proc, sock = PRESTARTED.pop()
        sock.close()  # an idle worker ends when its pair closes
    if outcome.get("kind") == "harness_error" and not runner.candidate_started:
        outcome["kind"] = "infrastructure"
    if outcome.get("kind") == "passed":
        outcome["trials"] = runner.trials.trials_run
    total = sum(ms for _, ms in runner.ctx.phases)
    runner.ctx.phases.append(["total", total])
    return dumps(_clean(runner.result(outcome).wire()))
