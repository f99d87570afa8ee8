"""The worker: the process that imports a model's code (the candidate's, the base's, or the
problem's reference for timing) and only computes outputs.

The judge (`runner.py`, through `kg_judge.py`) starts it, confined one level further than itself
(`confine`: a Landlock domain of its own, no capabilities, so it can neither read nor signal the
judge), and sends it requests over a socket pair (`kg_wire`). It sees the buffers the judge
shares and fills, never the judge's draws, references, comparisons, clock or result. Every call
is served the same way (time it, copy the outputs to the judge's output buffers, reply): the
worker cannot tell a checked call from another. What it reports (event times, findings, the op
audit) is an observation the judge weighs; its outputs are read by the judge from shared
memory."""

import ctypes
import os
import sys
import time

kg_wire = None  # set by the harness when it loads this module

# Landlock (linux/landlock.h).
_SYS_CREATE_RULESET = 444
_SYS_ADD_RULE = 445
_SYS_RESTRICT_SELF = 446
_RULESET_VERSION = 1
_ACCESS_FS_EXECUTE = 1 << 0
_RULE_PATH_BENEATH = 1
_SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0
_SCOPE_SIGNAL = 1 << 1
_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_DUMPABLE = 4
_PR_CAPBSET_DROP = 24
_PR_SET_SECUREBITS = 28
_SYS_CAPSET = 126
_CAPABILITY_VERSION_3 = 0x20080522
# SECBIT_NOROOT | _LOCKED, SECBIT_NO_SETUID_FIXUP | _LOCKED, SECBIT_KEEP_CAPS_LOCKED,
# SECBIT_NO_CAP_AMBIENT_RAISE | _LOCKED: root in this namespace gains nothing on exec.
_SECUREBITS = 0x01 | 0x02 | 0x04 | 0x08 | 0x20 | 0x40 | 0x80


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def confine():
    """Runs first in the worker, before any model code is loaded (a worker forked from the judge
    has torch already, a new one not yet): a Landlock domain nested in the judge's, so the kernel
    refuses the worker ptrace, `/proc/<judge>/mem`, `fd` and `environ`, signals and abstract
    sockets towards the judge; and no capabilities (root in the job's namespace would otherwise
    pass the judge's ptrace checks). Raises when Landlock is
    missing: the judge then reports the worker unconfined."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    if os.environ.get("KERNELGATE_WORKER_NESTED") == "0":
        # The sandbox switched off (debugging): nothing confines the job, the worker included.
        return None
    if os.environ.get("KERNELGATE_WORKER_RULESET"):
        # The job's own ruleset, enforced by `kernelgate_harness.worker` already: a domain beside
        # the judge's. What is left is the capabilities.
        return _drop_capabilities(libc)
    abi = libc.syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_RULESET_VERSION))
    if abi < 1:
        raise OSError(ctypes.get_errno(), "Landlock is not available")
    # A domain of its own that allows everything the judge's allows (execute beneath `/`): the
    # nesting is the point.
    attr = _RulesetAttr(_ACCESS_FS_EXECUTE, 0, (_SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL) if abi >= 6 else 0)
    size = ctypes.sizeof(_RulesetAttr) if abi >= 6 else 8
    ruleset = libc.syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset")
    root = os.open("/", os.O_PATH | os.O_CLOEXEC)
    rule = _PathBeneath(_ACCESS_FS_EXECUTE, root)
    if (
        libc.syscall(
            _SYS_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(_RULE_PATH_BENEATH), ctypes.byref(rule), ctypes.c_uint32(0)
        )
        < 0
    ):
        raise OSError(ctypes.get_errno(), "landlock_add_rule")
    os.close(root)
    if libc.syscall(_SYS_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)) < 0:
        raise OSError(ctypes.get_errno(), "landlock_restrict_self")
    os.close(ruleset)
    _drop_capabilities(libc)


def _drop_capabilities(libc):
    # Capabilities last: securebits and the bounding set need CAP_SETPCAP. Where the job runs
    # without a user namespace of its own (sandbox off) and not as root, there is nothing to drop.
    libc.prctl(_PR_SET_SECUREBITS, _SECUREBITS, 0, 0, 0)
    for cap in range(64):
        libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)
    # And the sets it holds now: effective, permitted and inheritable emptied (capset, v3).
    header = (ctypes.c_uint32 * 2)(_CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()
    if libc.syscall(_SYS_CAPSET, ctypes.byref(header), ctypes.byref(data)) < 0:
        raise OSError(ctypes.get_errno(), "capset")


class _Worker:
    def __init__(self, sock, runner, kg_timing, hello):
        self.sock = sock
        self.runner_mod = runner
        self.kg_timing = kg_timing
        self.role = hello["role"]
        self.job = runner.kg_protocol.parse_job(hello["job"])
        self.findings = []
        self.sets = []
        self.outputs = []
        self.device_name = hello["device"]

    def finding(self, rule, severity, message):
        self.findings.append({"rule": rule, "severity": severity, "message": message})

    def reply(self, message):
        if self.findings:
            message["findings"] = self.findings
            self.findings = []
        kg_wire.send(self.sock, message)

    def fail(self, outcome):
        self.reply({"ok": False, "outcome": outcome})

    def load(self):
        """Imports the role's code and constructs its model the way the reference was
        constructed (seed, init inputs, device, precision). Replies once."""
        runner_mod, job = self.runner_mod, self.job
        import torch

        self.torch = torch
        # The candidate's (and the base's) C++ builds run here: torch's header precompiled by
        # `kernelgate pch` and nvcc's side-by-side wrapper, as the runner offers them to its own
        # builds. A worker prestarted before the runner set them up did not inherit them.
        pch_root = os.environ.get("KERNELGATE_PCH_DIR")
        pch = runner_mod.kg_pch.use(pch_root, torch) if runner_mod.kg_pch is not None else None
        if runner_mod.kg_nvcc is not None:
            runner_mod.kg_nvcc.use(pch_root, getattr(runner_mod.kg_nvcc, "SOURCE", None), lambda: runner_mod._real_nvcc(torch))
        r = runner_mod.kg_context.Context(job, self.kg_timing, None)
        r.torch = torch
        r.T = r.capture(torch)
        dev = torch.device(self.device_name)
        if dev.type == "cuda":
            try:
                torch.cuda.set_device(dev)
                torch.empty(1, device=dev)
            except Exception as e:
                return self.fail({"kind": "crash", "reason": f"CUDA did not start in the worker: {e}", "where": "cuda-start"})
        # A reply of its own, before any model code runs: the judge weakens the worker's
        # confinement only on this one.
        self.reply({"ok": True, "started": True})
        r.dev = dev
        self.r = r
        dtype = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[job.precision]
        seed = int(job.seed)
        try:
            problem = runner_mod._load_module(job.problem, "kg_problem_" + job.job_id)
            with torch.no_grad():
                r.set_seed(seed)
                init_inputs = [
                    (x.to(dtype=dtype) if x.is_floating_point() else x).to(device=dev) if isinstance(x, torch.Tensor) else x
                    for x in problem.get_init_inputs()
                ]
        except BaseException as e:
            return self.fail({"kind": "harness_error", "message": f"the problem file failed to load in the worker: {e!r}"})
        witness = None
        extensions = []
        module = problem
        if self.role == "reference":
            cls = problem.Model
        else:
            path = job.kernel if self.role == "candidate" else job.base_kernel
            if self.role == "candidate" and job.sandbox:
                runner_mod.kg_sandbox.install(job.sandbox, self.finding)
                r.finding = self.finding
                r.findings = self.findings
                r.deny_from_candidate(job.sandbox)
            if self.role == "base" and job.base_extensions_dir:
                os.environ["TORCH_EXTENSIONS_DIR"] = job.base_extensions_dir
            # What the import does to PyTorch is an observation: the reference is timed in a
            # process of its own and the candidate's outputs are read by the judge.
            if self.role == "candidate" and runner_mod.kg_integrity is not None:
                try:
                    with torch.no_grad():
                        witness = runner_mod.kg_integrity.Witness(torch, problem.Model(*init_inputs))
                except Exception:
                    witness = None
            root = os.environ.get("TORCH_EXTENSIONS_DIR")
            # In torch's own directory the sandbox lets the job see its own builds only.
            builds = os.environ.get("KERNELGATE_TORCH_BUILDS")
            names = None if builds is None else [n for n in builds.split(":") if n]
            before = runner_mod._extension_libraries(root, names) if root else {}
            try:
                prebuilt = job.base_prebuilt if self.role == "base" else job.prebuilt
                loader = (
                    runner_mod._load_only(fallback=self.role == "candidate") if prebuilt else runner_mod.contextlib.nullcontext()
                )
                with loader:
                    module = runner_mod._load_module(path, f"kg_{self.role}_" + job.job_id)
            except BaseException as e:
                return self.fail(r.compile_error(e))
            extensions = runner_mod.extension_builds(root, before, names) if root else []
            cls = getattr(module, "ModelNew", None)
            if cls is None:
                return self.fail(
                    {
                        "kind": "compile_error",
                        "message": f"{path} defines no class ModelNew; define `class ModelNew(nn.Module)` "
                        "with the same constructor and forward signature as the problem's Model",
                        "log_tail": "",
                    }
                )
        try:
            with torch.no_grad():
                r.set_seed(seed)
                self.model = cls(*init_inputs).to(device=dev, dtype=dtype)
            r.sync()
        except BaseException as e:
            return self.fail(r.runtime_error(e, "constructing ModelNew" if self.role != "reference" else "constructing Model"))
        self.module = module
        self.witness = witness
        if witness is not None:
            try:
                for rule, severity, message in witness.changes():
                    self.finding(rule, severity, message)
                changed = witness.restore_settings()
                if changed:
                    self.finding(*changed)
            except Exception:
                pass
        self.timer = self.kg_timing.make_timer({"device": dev.type, "l2": "warm"})
        self.reply({"ok": True, "extensions": extensions, "pid": os.getpid(), "precompiled_header": pch})
        return True

    def bind(self, message, fds):
        torch = self.torch
        self.sets = [
            [kg_wire.map_tensor(torch, a, fds) if "dtype" in a else a.get("value") for a in args] for args in message["sets"]
        ]
        self.outputs = [kg_wire.map_tensor(torch, o, fds) for o in message["outputs"]]
        for fd in fds:
            os.close(fd)
        self.reply({"ok": True})

    def call(self, message):
        torch, r = self.torch, self.r
        i = int(message["set"])
        args = self.sets[i]
        seed = int(message["seed"])
        box = []
        model = self.model

        def forward():
            with no_grad():
                box.append(model(*args))

        no_grad = torch.no_grad
        try:
            # Outside the timed window, as the judge's own calls of the reference were.
            r.set_seed(seed)
            ms, trailing, wall = self.timer.time(forward)
        except BaseException as e:
            if isinstance(e, SystemExit):
                e = RuntimeError(f"the candidate called sys.exit({e.code})")
            return self.fail(r.runtime_error(e, message.get("where", "running forward")))
        outs = r.as_list(box[0]) if box else []
        meta = []
        try:
            for k, o in enumerate(outs):
                if type(o) is not torch.Tensor:
                    meta.append({"type": type(o).__name__})
                    continue
                m = {
                    "type": "Tensor",
                    "shape": list(o.shape),
                    "dtype": str(o.dtype).replace("torch.", ""),
                    "device": o.device.type,
                }
                overlaps = self.runner_mod.kg_checks.overlaps
                for j, a in enumerate(args):
                    if isinstance(a, torch.Tensor) and overlaps(r.T, o, a):
                        m["aliases_input"] = j
                        break
                b = self.outputs[k] if k < len(self.outputs) else None
                if b is not None and o.shape == b.shape and o.dtype == b.dtype and o.device.type == b.device.type:
                    if o.is_contiguous():
                        # The timer's own copy (a driver copy, a memmove): no PyTorch operation a
                        # hook could finish deferred work in before the outputs are taken.
                        data_ptr = r.T.data_ptr
                        self.timer.copy(data_ptr(b), data_ptr(o), b.numel() * b.element_size(), True)
                    else:
                        b.copy_(o)
                    m["copied"] = True
                meta.append(m)
            r.sync()
        except BaseException as e:
            return self.fail(r.runtime_error(e, "copying the outputs"))
        box.clear()
        del outs
        self.reply({"ok": True, "ms": ms, "trailing_sync_ms": trailing, "wall_ms": wall, "outputs": meta})

    def audit(self, message):
        r = self.r
        # What the calls themselves registered in PyTorch (hooks that run inside its operations),
        # looked at again before the audit's profiler adds its own.
        witness = getattr(self, "witness", None)
        if witness is not None:
            try:
                seen = set()
                for rule, severity, text in witness.changes():
                    if rule not in seen:
                        seen.add(rule)
                        self.finding(rule, severity, text)
            except Exception:
                pass
        i = int(message["set"])
        args = [a.clone() if isinstance(a, self.torch.Tensor) else a for a in self.sets[i]]
        try:
            r.set_seed(int(message["seed"]))
            result = self.runner_mod.kg_audit.audit(self.torch, self.model, self.module, args, r.dev.type)
            r.sync()
        except BaseException as e:
            return self.reply({"ok": False, "error": f"{type(e).__name__}: {str(e)[:300]}"})
        self.reply({"ok": True, "audit": self.runner_mod._clean(result)})


def serve(fd, runner, kg_timing):
    """The worker's loop: hello (load), then bind / call / audit until stop or the judge goes."""
    import socket

    sock = socket.socket(fileno=fd)
    try:
        hello = kg_wire.recv(sock)
        w = _Worker(sock, runner, kg_timing, hello)
        if w.load() is not True:
            return 1
        # The collector stays off for every call alike (the judge's clock sees a collection as
        # the model's time otherwise); what cycles leave is freed when the worker ends.
        import gc

        gc.collect()
        gc.disable()
        while True:
            message, fds = kg_wire.recv(sock, want_fds=True)
            op = message.get("op")
            if op == "bind":
                w.bind(message, fds)
            elif op == "call":
                w.call(message)
            elif op == "audit":
                w.audit(message)
            else:
                return 0
    except kg_wire.WireError:
        return 0
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except Exception:
            pass


__all__ = ["confine", "serve", "time"]
