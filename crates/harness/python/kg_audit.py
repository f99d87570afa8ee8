"""kernelgate op audit, embedded in the `kernelgate_harness` extension (docs/policy.md, "Op audit").

After the correctness trials the runner calls `audit()` once, untimed, on trial 0's inputs. The
call records what really ran and how long it took:

- ATen ops through a `TorchDispatchMode` (also those the candidate's C++ calls through `at::`);
- calls into the candidate's compiled extensions (pybind11 functions of modules built by
  `load_inline`/`load`, found by a `sys.setprofile` hook on C calls, wherever they are bound);
- on CUDA, every GPU kernel with its GPU time (Kineto/CUPTI, `gpu_profiler`), attributed to
  the CPU range that launched it: an ATen op, an extension call or a custom op.

Each piece of work is classified as *custom* (the candidate's extension, Triton, inline CUDA,
custom ops), *pytorch* (ATen native), *vendor* (cuBLAS, cuDNN, cuFFT, CUTLASS, launched by
PyTorch or by the candidate; by kernel name, unless the candidate's own code defines the kernel:
`Auditor.own_kernel`) or *ineffective* (an extension call that returned a copy of its
input, wrote nothing, or whose result never reaches the forward's output: a decoy's work).

Time: on CUDA the GPU time of the kernels; on the CPU the CPU time of the (single) thread: each
top-level ATen op timed around its own execution, each extension call's wall time minus the ATen ops it called
(allocations and views it makes stay its own). Python between them (glue) is reported as
`glue_ms` and is not part of the share: it is neither the candidate's kernel nor PyTorch's.
The custom share is custom time / (custom + pytorch + vendor + ineffective).
"""

import re
import sys
import time
import types

# Captured when the harness loads this module, before any candidate code exists.
_perf = time.perf_counter
_thread_time = time.thread_time
_setprofile = sys.setprofile
_getprofile = sys.getprofile
_BuiltinFn = types.BuiltinFunctionType
_ModuleType = types.ModuleType
_isinstance = isinstance
_type = type
_open = open
_prefixes = tuple(p for p in {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix} if p)

# Operator namespaces that are PyTorch's own; any other namespace is a custom op.
TORCH_NAMESPACES = {
    "aten",
    "prim",
    "prims",
    "profiler",
    "c10d",
    "_c10d_functional",
    "inductor",
    "quantized",
    "cuda",
    "torch",
    "autograd",
    "_quantized",
    "mkldnn",
    "_dtensor",
    "higher_order",
}

# Modules of Python callables that are never the candidate's kernels.
FOREIGN_MODULES = (
    "torch",
    "triton",
    "numpy",
    "builtins",
    "_operator",
    "math",
    "itertools",
    "functools",
    "collections",
    "time",
    "sys",
    "os",
    "threading",
    "random",
    "ctypes",
    "pybind11",
    "_thread",
    "operator",
    "jax",
    "cupy",
)

# ATen ops that allocate or re-view memory without computing: inside an extension call they are
# the extension's own bookkeeping (torch::empty_like for its output), outside it glue.
NO_COMPUTE = {
    "empty",
    "empty_like",
    "empty_strided",
    "new_empty",
    "new_empty_strided",
    "as_strided",
    "view",
    "_unsafe_view",
    "_reshape_alias",
    "reshape",
    "t",
    "transpose",
    "permute",
    "expand",
    "unsqueeze",
    "squeeze",
    "detach",
    "alias",
    "select",
    "slice",
    "lift_fresh",
    "resize_",
    "set_",
    "sym_size",
    "sym_stride",
    "sym_numel",
    "sym_storage_offset",
    "is_same_size",
    "_local_scalar_dense",
    "unbind",
    "split",
    "chunk",
    "narrow",
    "_to_copy_noop",
    "view_as",
    "expand_as",
    "flatten",
    "unflatten",
    "diagonal",
    "movedim",
    "contiguous_noop",
}
# Allocation with an initial value: an output or accumulator being set up, not the op's work.
NO_COMPUTE |= {
    "zeros",
    "zeros_like",
    "zero_",
    "fill_",
    "full",
    "full_like",
    "ones",
    "ones_like",
    "new_zeros",
    "new_ones",
    "new_full",
    "scalar_tensor",
    "arange",
}

# GPU kernel names by vendor library (lower-case substrings), checked in order.
VENDOR_KERNELS = [
    ("cudnn", "cuDNN"),
    ("implicit_convolve", "cuDNN"),
    ("winograd", "cuDNN"),
    ("fprop", "cuDNN"),
    ("dgrad", "cuDNN"),
    ("wgrad", "cuDNN"),
    ("cufft", "cuFFT"),
    ("fft", "cuFFT"),
    ("cublas", "cuBLAS"),
    ("nvjet", "cuBLAS"),
    ("gemv", "cuBLAS"),
    ("gemm", "cuBLAS"),
    ("xmma", "cuBLAS"),
    ("cutlass", "CUTLASS"),
    ("cusparse", "cuSPARSE"),
    ("curand", "cuRAND"),
]
CONV_OPS = ("conv", "cudnn")
# GPU kernel names of ATen's own implementations.
NATIVE_KERNELS = (
    "at::native",
    "at::cuda",
    "at_cuda_detail",
    "c10::",
    "void at::",
    "elementwise_kernel",
    "reduce_kernel",
    "catarraybatchedcopy",
    "distribution_elementwise",
    "indexselect",
    "scatter_gather",
    "memcpy",
    "memset",
)


def _short(name):
    """`aten::convolution` / `aten.convolution.default` -> `convolution`."""
    if name.startswith("aten::"):
        return name[6:]
    if name.startswith("aten."):
        return name[5:].split(".")[0]
    return name


# A vendor library's API, as the candidate's extension binary names it when it calls the library:
# a whole NUL-delimited name (an import in the dynamic string table) made of the API's prefix and
# a capitalised function (`cublasSgemm_v2`, `cublasLtMatmul`, `cudnnConvolutionForward`). Torch's
# CUDA headers put the library's name elsewhere in every extension (`CUBLAS_STATUS_*` strings,
# `cublasContext` inside mangled types), which says nothing about calling it.
VENDOR_API = {
    lib: re.compile(rb"\x00" + prefix + rb"[A-Z][A-Za-z0-9_]*\x00")
    for lib, prefix in {
        "cuBLAS": b"cublas",
        "cuDNN": b"cudnn",
        "cuFFT": b"cufft",
        "cuSPARSE": b"cusparse",
        "cuRAND": b"curand",
    }.items()
}
# The most of an extension binary read to attribute kernels by code (bytes).
BINARY_LIMIT = 512 << 20


def _kernel_ident(kernel):
    """The function's own name in a GPU kernel's name as the profiler shows it: demangled
    (`void ns::sgemm_tiled<128>(float const*, ...)` -> `sgemm_tiled`) or mangled
    (`_Z11sgemm_tiledPKfS0_Pfi` -> `sgemm_tiled`); None when there is none."""
    k = kernel.strip().replace("(anonymous namespace)::", "")
    if k.startswith("_Z"):
        i = 2
        if k[i : i + 1] == "N":
            i += 1
        ident = None
        while i < len(k) and k[i].isdigit():
            j = i
            while j < len(k) and k[j].isdigit():
                j += 1
            n = int(k[i:j])
            ident = k[j : j + n]
            i = j + n
            if k[i : i + 1] == "I":  # template arguments: the name before them is the function's
                break
        return ident or None
    head = k.split("(", 1)[0]
    # Drop template arguments (balanced), then the return type and namespaces.
    out, depth = [], 0
    for c in head:
        if c == "<":
            depth += 1
        elif c == ">":
            depth = max(0, depth - 1)
        elif depth == 0:
            out.append(c)
    name = "".join(out).strip().split()[-1:] or [""]
    ident = name[0].split("::")[-1]
    return ident if ident.replace("_", "a").isalnum() and not ident[:1].isdigit() else None


def _vendor(kernel, ops):
    low = kernel.lower()
    for pat, lib in VENDOR_KERNELS:
        if pat in low:
            if lib in ("cuBLAS", "CUTLASS") and any(any(c in o for c in CONV_OPS) for o in ops):
                return "cuDNN"  # cuDNN's convolutions run xmma/cutlass-named GEMM kernels
            return lib
    return None


class _Call:
    __slots__ = (
        "id",
        "function",
        "start",
        "wall",
        "nested_ms",
        "own_alloc_ms",
        "nested_compute",
        "sources",
        "no_op",
        "checked",
        "range",
    )

    def __init__(self, id_, function):
        self.id = id_
        self.function = function
        self.start = 0.0
        self.wall = 0.0
        self.nested_ms = 0.0  # time of the ATen ops it called (handler included)
        self.own_alloc_ms = 0.0  # of which allocations/views: still the extension's own
        self.nested_compute = 0  # ATen compute ops it called (each paid the mode's entry cost)
        self.sources = False  # produced or wrote a tensor the lineage can follow
        self.no_op = None  # a reason when the call did no work
        self.checked = False  # a wrapper saw its arguments and result
        self.range = None


class Auditor:
    def __init__(self, torch, device_type):
        self.torch = torch
        self.cuda = device_type == "cuda"
        # CPU audits run on one thread and count its CPU time: a runner shared with other jobs
        # preempts the audit at random, and wall time would charge that to whatever was running.
        self.clock = _perf if self.cuda else _thread_time
        self.ext_modules = set()  # names of the candidate's compiled extension modules
        self.ext_binaries = []  # their files (.so): what the candidate's own code is
        self.triton_names = set()  # names of the candidate's Triton kernels
        self._own = {}  # kernel identifier -> defined in the candidate's code (cache)
        self._binary_bytes = None
        self.stack = []  # extension calls in progress
        self.calls = []  # finished extension calls
        self.ops = {}  # (label, class, by_extension) -> [ms, calls]  (CPU time accounting)
        self.aten_ops = set()
        self.taint = {}  # storage key -> set of call ids whose work flows into it
        self.held = []  # tainted tensors stay alive: their memory must not be handed out again
        self.internal = False  # our own bookkeeping: not the candidate's
        self.top_handler_ms = 0.0
        self.last_handler_ms = 0.0
        self.recording = True
        self.entry_ms = 0.0  # C++ -> Python dispatch mode entry cost per op (calibrated)
        self.patched = []
        self.unchecked_functions = set()
        try:
            self.fast_range = torch._C._profiler._RecordFunctionFast
        except AttributeError:
            self.fast_range = None

    # ---- finding the candidate's extensions ---------------------------------------------------
    def is_ext_module(self, m):
        f = getattr(m, "__file__", None)
        if not _isinstance(f, str) or not f.endswith((".so", ".pyd")):
            return False
        name = getattr(m, "__name__", "") or ""
        if name.startswith(FOREIGN_MODULES):
            return False
        return not f.startswith(_prefixes)

    def is_ext_fn(self, fn):
        if _type(fn) is not _BuiltinFn:
            return False
        m = getattr(fn, "__module__", None)
        if not m:
            return False
        if m in self.ext_modules:
            return True
        if m.startswith(FOREIGN_MODULES):
            return False
        owner = _type(getattr(fn, "__self__", None))
        return owner.__module__ == "pybind11_builtins" or owner.__name__ == "PyCapsule"

    def discover(self, cand_mod, model):
        """Finds extension modules and functions the candidate holds and wraps them, so their
        arguments and results can be checked (calls reached another way are still timed)."""
        holders = []
        if cand_mod is not None:
            holders.append(cand_mod.__dict__)
        try:
            for sub in model.modules():
                holders.append(sub.__dict__)
        except Exception:
            holders.append(getattr(model, "__dict__", {}))
        mods = []
        for d in holders:
            for k, v in list(d.items()):
                if _isinstance(v, _ModuleType) and self.is_ext_module(v):
                    mods.append(v)
                    self.ext_modules.add(v.__name__)
        for k, m in list(sys.modules.items()):
            if _isinstance(m, _ModuleType) and self.is_ext_module(m) and m not in mods:
                # Only modules built for this job (torch extensions dir or beside the kernel).
                f = getattr(m, "__file__", "") or ""
                if "torch_extensions" in f or "kernelgate" in f:
                    mods.append(m)
                    self.ext_modules.add(m.__name__)
        for d in holders:
            for v in list(d.values()):
                name = _triton_name(v)
                if name:
                    self.triton_names.add(name)
        seen = set()
        for m in mods:
            if id(m) in seen:
                continue
            seen.add(id(m))
            f = getattr(m, "__file__", None)
            if _isinstance(f, str) and f not in self.ext_binaries:
                self.ext_binaries.append(f)
            for k, v in list(vars(m).items()):
                if self.is_ext_fn(v):
                    self.patch(m.__dict__, k, v, lambda d, k, v: setattr(m, k, v))
        for d in holders:
            for k, v in list(d.items()):
                if self.is_ext_fn(v):
                    self.patch(d, k, v, None)

    def patch(self, d, key, fn, setter):
        wrapper = self.wrap(fn)
        try:
            if setter is not None:
                setter(d, key, wrapper)
            else:
                d[key] = wrapper
            self.patched.append((d, key, fn, setter))
        except Exception:
            pass

    def restore(self):
        for d, key, fn, setter in reversed(self.patched):
            try:
                if setter is not None:
                    setter(d, key, fn)
                else:
                    d[key] = fn
            except Exception:
                pass
        self.patched = []

    # ---- extension calls ----------------------------------------------------------------------
    def profile_hook(self, frame, event, arg):
        if event == "c_call":
            if self.internal or not self.is_ext_fn(arg):
                return
            name = f"{arg.__module__}.{arg.__name__}"
            call = _Call(len(self.calls) + len(self.stack), name)
            if self.cuda and self.fast_range is not None:
                try:
                    call.range = self.fast_range(f"kg_ext::{name}#{call.id}")
                    call.range.__enter__()
                except Exception:
                    call.range = None
            call.start = self.clock()
            self.stack.append(call)
        elif event in ("c_return", "c_exception"):
            if not self.stack or self.internal or not self.is_ext_fn(arg):
                return
            call = self.stack.pop()
            call.wall = self.clock() - call.start
            if call.range is not None:
                try:
                    call.range.__exit__(None, None, None)
                except Exception:
                    pass
            self.calls.append(call)

    def wrap(self, fn):
        auditor = self

        def kg_audited(*args, **kwargs):
            before = auditor.fingerprints(args)
            out = fn(*args, **kwargs)
            if auditor.calls:
                auditor.after_call(auditor.calls[-1], args, before, out, lambda *a: fn(*a, **kwargs))
            return out

        kg_audited.__name__ = getattr(fn, "__name__", "kg_audited")
        kg_audited.__doc__ = getattr(fn, "__doc__", None)
        return kg_audited

    def tensors(self, xs):
        T = self.torch.Tensor
        out = []
        for x in xs:
            if _isinstance(x, T):
                out.append(x)
            elif _isinstance(x, (list, tuple)):
                out.extend(self.tensors(x))
        return out

    def fingerprint(self, t):
        """Sum in float64 and a strided sample: enough to see whether a buffer was written."""
        torch = self.torch
        try:
            flat = t.reshape(-1)
            n = flat.numel()
            step = max(1, n // 4096)
            sample = flat[::step].clone()
            total = float(flat.sum(dtype=torch.float64)) if (t.is_floating_point() or not t.is_complex()) else 0.0
            return (tuple(t.shape), t.dtype, total, sample)
        except Exception:
            return None

    def same(self, a, b):
        if a is None or b is None:
            return False
        if a[0] != b[0] or a[1] != b[1]:
            return False
        if not (a[2] == b[2] or (a[2] != a[2] and b[2] != b[2])):
            return False
        return bool(self.torch.equal(a[3], b[3]))

    def fingerprints(self, args):
        self.internal = True
        try:
            rng = self.fast_range("kg_audit::internal") if (self.cuda and self.fast_range) else None
            if rng is not None:
                rng.__enter__()
            try:
                with self.torch.utils._python_dispatch._disable_current_modes():
                    return [(t, self.fingerprint(t)) for t in self.tensors(args)]
            finally:
                if rng is not None:
                    rng.__exit__(None, None, None)
        finally:
            self.internal = False

    def still_identity(self, again, args, index):
        """Calls the function again with argument `index` replaced by random values: a copy or an
        add-zero returns them again, an op that merely was the identity on these inputs (ReLU on
        non-negative values) does not. A call that fails on other values stays suspect."""
        torch = self.torch
        probe = list(args)
        probe[index] = torch.randn_like(args[index])
        try:
            out = again(*probe)
        except Exception:
            return True
        outs = self.tensors([out]) if out is not None else []
        return any(o.shape == probe[index].shape and bool(torch.equal(o, probe[index])) for o in outs)

    def after_call(self, call, args, before, out, again=None):
        """Did the call do work? A result equal to an argument (a copy, adding zero) or no
        result and no argument written is no work; what it produced or wrote is tainted."""
        torch = self.torch
        self.internal = True
        rng = self.fast_range("kg_audit::internal") if (self.cuda and self.fast_range) else None
        try:
            if rng is not None:
                rng.__enter__()
            with torch.utils._python_dispatch._disable_current_modes():
                call.checked = True
                outs = self.tensors([out]) if out is not None else []
                for o in outs:
                    for a, _ in before:
                        if o.shape == a.shape and o.dtype == a.dtype and o.device == a.device and bool(torch.equal(o, a)):
                            index = next((i for i, x in enumerate(args) if x is a), None)
                            if (
                                again is not None
                                and index is not None
                                and a.is_floating_point()
                                and not self.still_identity(again, args, index)
                            ):
                                continue
                            call.no_op = "returned a copy of its input"
                written = []
                for a, fp in before:
                    now = self.fingerprint(a)
                    if fp is not None and now is not None and not self.same(fp, now):
                        written.append((a, now))
                for a, now in written:
                    if any(self.same(now, fp) for b, fp in before if b is not a):
                        call.no_op = "copied one argument into another"
                    self.mark(a, call.id)
                # A result or a written argument carries the inputs' lineage and this call's.
                inherited = self.labels([a for a, _ in before]) | {call.id}
                for o in outs:
                    self.mark(o, inherited)
                for a, _ in written:
                    self.mark(a, inherited)
                # Nothing returned and nothing seen written proves nothing: the buffer may have
                # held the same values before (memory reused from an earlier call).
                if outs or written:
                    call.sources = True
        except Exception:
            call.checked = False
        finally:
            if rng is not None:
                try:
                    rng.__exit__(None, None, None)
                except Exception:
                    pass
            self.internal = False

    # ---- lineage ------------------------------------------------------------------------------
    def key(self, t):
        try:
            return (t.device.type, t.untyped_storage().data_ptr())
        except Exception:
            return None

    def mark(self, t, labels):
        k = self.key(t)
        if k is None:
            return
        if _isinstance(labels, int):
            labels = {labels}
        if k in self.taint:
            self.taint[k] |= set(labels)
        else:
            self.taint[k] = set(labels)
        self.held.append(t)

    def labels(self, ts):
        out = set()
        for t in ts:
            k = self.key(t)
            if k is not None and k in self.taint:
                out |= self.taint[k]
        return out

    def on_op(self, func, args, kwargs, out, op_ms, handler_ms):
        """Accounts one ATen (or custom) op seen by the dispatch mode."""
        ns = getattr(func, "namespace", "aten")
        name = func._overloadpacket.__name__ if hasattr(func, "_overloadpacket") else str(func)
        self.aten_ops.add(str(func))
        outs = self.tensors([out])
        inside = self.stack[-1] if self.stack else None
        if inside is not None:
            inside.nested_ms += handler_ms
            if name in NO_COMPUTE:
                inside.own_alloc_ms += op_ms
            else:
                inside.nested_compute += 1
                self.add_op(name, "pytorch", inside.function, op_ms)
            for o in outs:
                self.mark(o, inside.id)
            inside.sources = inside.sources or bool(outs)
        else:
            self.top_handler_ms += handler_ms
            if ns not in TORCH_NAMESPACES:
                self.add_op(f"{ns}::{name}", "custom", None, op_ms)
                # A custom op's results are its own work.
                for o in outs:
                    self.mark(o, -1)
            elif name not in NO_COMPUTE:
                self.add_op(name, "pytorch", None, op_ms)
        labels = self.labels(self.tensors([args, list(kwargs.values())]))
        if labels:
            for o in outs:
                self.mark(o, labels)

    def add_op(self, label, cls, by, ms):
        k = (label, cls, by)
        slot = self.ops.setdefault(k, [0.0, 0])
        slot[0] += ms
        slot[1] += 1

    def mode(self):
        from torch.utils._python_dispatch import TorchDispatchMode

        auditor = self

        class _AuditMode(TorchDispatchMode):
            @classmethod
            def _should_skip_dynamo(cls):
                return False

            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                kwargs = kwargs or {}
                if auditor.internal or getattr(func, "namespace", "") == "profiler":
                    return func(*args, **kwargs)
                h0 = auditor.clock()
                out = func(*args, **kwargs)
                h1 = auditor.clock()
                if not auditor.recording:
                    auditor.last_handler_ms = (auditor.clock() - h0) * 1000.0
                    return out
                try:
                    auditor.on_op(func, args, kwargs, out, (h1 - h0) * 1000.0, 0.0)
                except Exception:
                    pass
                handler = (auditor.clock() - h0) * 1000.0
                inside = auditor.stack[-1] if auditor.stack else None
                if inside is not None:
                    inside.nested_ms += handler
                else:
                    auditor.top_handler_ms += handler
                return out

        return _AuditMode()

    # ---- the call -----------------------------------------------------------------------------
    def calibrate(self):
        """The cost of entering the dispatch mode from C++ for one op, outside the handler's own
        timing: an extension's wall time pays it for every ATen op it calls, and it is the
        audit's cost, not the extension's work. A composite op (`matmul` -> `mm`) called from
        Python pays the same entry; the least of a few tries."""
        torch = self.torch
        a = torch.ones(2, 2)
        b = torch.ones(2, 2)
        best = None
        self.recording = False
        mode = self.mode()
        old_hook = _getprofile()
        try:
            with torch.no_grad():
                mode.__enter__()
                _setprofile(self.profile_hook)  # the real call pays the hook's cost too
                try:
                    for _ in range(20):
                        t0 = self.clock()
                        torch.matmul(a, b)
                        wall = (self.clock() - t0) * 1000.0
                        extra = wall - self.last_handler_ms
                        best = extra if best is None else min(best, extra)
                finally:
                    _setprofile(old_hook)
                    mode.__exit__(None, None, None)
        finally:
            self.recording = True
        self.entry_ms = max(0.0, best or 0.0)

    def run(self, model, args):
        torch = self.torch
        prof = gpu_profiler(torch) if self.cuda else None
        old_hook = _getprofile()
        mode = self.mode()
        forward_range = None
        out = None
        if prof is not None:
            torch.cuda.synchronize()
            prof.__enter__()
        try:
            if self.cuda and self.fast_range is not None:
                forward_range = self.fast_range("kg_audit::forward")
                forward_range.__enter__()
            t0 = self.clock()
            with torch.no_grad():
                mode.__enter__()
                _setprofile(self.profile_hook)
                try:
                    out = model(*args)
                finally:
                    _setprofile(old_hook)
                    mode.__exit__(None, None, None)
            self.wall_ms = (self.clock() - t0) * 1000.0
            if self.cuda:
                torch.cuda.synchronize()
            if forward_range is not None:
                forward_range.__exit__(None, None, None)
                forward_range = None
        finally:
            if prof is not None:
                prof.__exit__(None, None, None)
            while self.stack:  # an exception left calls open
                self.calls.append(self.stack.pop())
        self.out = out
        return prof

    def effective(self):
        """Per call id: None when its work counts, else why it does not. A result that never
        reaches the output is only claimed when every call's lineage was followed."""
        reached = self.labels(self.tensors([self.out]))
        complete = all(c.checked for c in self.calls)
        verdict = {}
        for c in self.calls:
            if c.no_op is not None:
                verdict[c.id] = c.no_op
            elif complete and c.sources and c.id not in reached:
                verdict[c.id] = "its result never reaches the output"
            else:
                verdict[c.id] = None
            if not c.checked:
                self.unchecked_functions.add(c.function)
        return verdict

    def cpu_entries(self, verdict):
        entries = {}

        def add(label, cls, lib, by, ms, n):
            k = (label, cls, lib, by)
            e = entries.setdefault(k, [0.0, 0])
            e[0] += ms
            e[1] += n

        for (label, cls, by), (ms, n) in self.ops.items():
            add(label, cls, None, by, ms, n)
        for c in self.calls:
            own = max(0.0, c.wall * 1000.0 - c.nested_ms - c.nested_compute * self.entry_ms + c.own_alloc_ms)
            cls = "custom" if verdict.get(c.id) is None else "ineffective"
            add(c.function, cls, None, None, own, 1)
        glue = max(0.0, self.wall_ms - self.top_handler_ms - sum(c.wall * 1000.0 for c in self.calls))
        return entries, glue

    def gpu_entries(self, prof, verdict):
        from torch.autograd import DeviceType

        entries = {}

        def add(label, cls, lib, by, us):
            k = (label, cls, lib, by)
            e = entries.setdefault(k, [0.0, 0])
            e[0] += us / 1000.0
            e[1] += 1

        events = prof.events() if hasattr(prof, "events") else prof.function_events
        attached = {}
        for e in events:
            if e.device_type != DeviceType.CPU or not getattr(e, "kernels", None):
                continue
            chain = []
            p = e
            while p is not None:
                chain.append(p.name)
                p = p.cpu_parent
            for k in e.kernels:
                key = (k.name, round(float(k.duration), 3))
                attached[key] = attached.get(key, 0) + 1
                if any(n == "kg_audit::internal" for n in chain):
                    continue
                self.classify(k.name, float(k.duration), chain, verdict, add)
        for e in events:
            if e.device_type != DeviceType.CUDA:
                continue
            us = float(e.time_range.end - e.time_range.start)
            key = (e.name, round(us, 3))
            if attached.get(key, 0) > 0:
                attached[key] -= 1
                continue
            self.classify(e.name, us, [], verdict, add)
        return entries

    # ---- attribution by code -------------------------------------------------------------------
    def binary_bytes(self):
        """The candidate's extension binaries, read once."""
        if self._binary_bytes is None:
            blobs = []
            for f in self.ext_binaries:
                try:
                    with _open(f, "rb") as fh:
                        blobs.append(fh.read(BINARY_LIMIT))
                except Exception:
                    continue
            self._binary_bytes = blobs
        return self._binary_bytes

    def own_kernel(self, kernel, lib, launched_by_candidate):
        """True when a kernel a vendor library's name pattern matched is the candidate's own code:
        a Triton kernel of the candidate's, or a kernel its extension binary defines (the
        function's length-prefixed name, as the C++ ABI mangles it, is in the binary), launched
        by the candidate's code, from a binary that does not call that library (then a kernel
        of the library's own could match). CUTLASS's kernels are templates the extension
        instantiates: they stay CUTLASS's."""
        if lib == "CUTLASS" or "cutlass" in kernel.lower():
            return False
        ident = _kernel_ident(kernel)
        if not ident:
            return False
        if ident in self.triton_names:
            return True
        if not launched_by_candidate:
            return False
        key = (ident, lib)
        if key not in self._own:
            blobs = self.binary_bytes()
            api = VENDOR_API.get(lib)
            mangled = b"%d%s" % (len(ident), ident.encode())
            self._own[key] = bool(blobs) and any(mangled in b for b in blobs) and not (api and any(api.search(b) for b in blobs))
        return self._own[key]

    def classify(self, kernel, us, chain, verdict, add):
        ext = next((i for i, n in enumerate(chain) if n.startswith("kg_ext::")), None)
        aten = [i for i, n in enumerate(chain) if n.startswith("aten::")]
        customs = [
            i for i, n in enumerate(chain) if "::" in n and n.split("::")[0] not in TORCH_NAMESPACES and not n.startswith("kg_")
        ]
        by = None
        call_id = None
        if ext is not None:
            tag = chain[ext][len("kg_ext::") :]
            fn, _, cid = tag.rpartition("#")
            by = fn
            try:
                call_id = int(cid)
            except ValueError:
                call_id = None
        # ATen ops inside the extension's range (or outside any) launched this kernel.
        aten_here = [i for i in aten if ext is None or i < ext]
        if customs and (not aten_here or customs[0] < aten_here[0]):
            aten_here = []  # a custom op's own kernel
        ops = [chain[i] for i in aten_here]
        label = _short(chain[aten_here[-1]]) if aten_here else None
        if label in NO_COMPUTE:
            if by is None:
                return  # an output or accumulator being set up in Python: glue
            aten_here, ops, label = [], [], None  # the extension's own set-up
        lib = _vendor(kernel, ops)
        # A name is not a library: the candidate's own kernel named `sgemm_...` is its own code.
        if lib is not None and not aten_here and self.own_kernel(kernel, lib, by is not None or bool(customs)):
            lib = None
        low = kernel.lower()
        if lib is not None:
            add(label or by or kernel[:60], "vendor", lib, by, us)
        elif aten_here or (by is None and any(p in low for p in NATIVE_KERNELS)):
            add(label or kernel[:60], "pytorch", None, by, us)
        else:
            if customs:
                name = chain[customs[0]]
            elif by is not None:
                name = by
            else:
                name = kernel[:80]
            ineffective = call_id is not None and verdict.get(call_id) is not None
            add(name, "ineffective" if ineffective else "custom", None, None, us)


def _triton_name(v):
    """The kernel name of a Triton `@jit` function (through `@autotune`/`@heuristics`), else None."""
    for _ in range(4):
        mod = getattr(_type(v), "__module__", "") or ""
        if not mod.startswith("triton"):
            return None
        fn = getattr(v, "fn", None)
        if fn is None:
            return None
        if _isinstance(fn, types.FunctionType):
            return getattr(fn, "__name__", None)
        v = fn
    return None


def gpu_profiler(torch):
    """The audit's profiler: CPU ranges and the GPU kernels they launched (Kineto/CUPTI), built
    as `torch.profiler.profile` builds it (`use_kineto=True`; without it the autograd profiler
    times ops, not kernels) but without that wrapper, whose first start is 4-6 s on an H200: its
    `prepare_trace()` imports `torch._inductor` and `torch._dynamo` to read one setting
    (scripts/gpu-profiler-start.py). On the H200 both give the audit fixtures the same classes
    and shares; this one starts in about 50 ms (results/gpu-proof/h200-audit-profiler-ab.txt).
    `KERNELGATE_AUDIT_PROFILER=torch` selects `torch.profiler` (an A/B switch)."""
    import os

    if os.environ.get("KERNELGATE_AUDIT_PROFILER") == "torch":
        from torch.profiler import ProfilerActivity, profile

        return profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
    from torch.autograd import profiler

    return profiler.profile(use_cpu=True, use_device="cuda", use_kineto=True)


def warm_profiler(torch):
    """Starts the profiler's CUDA tracing (Kineto/CUPTI: about 4-6 s on an H200) before this
    process creates its CUDA context, so the audit after timing starts in milliseconds.
    Off unless the CLI's environment sets KERNELGATE_WARM_PROFILER=1: on the H200 a short
    reference timed after it (in this process, or in an eval beside a process warming up on the
    same GPU) read up to 1.8x slower between the candidate's calls (docs/timing.md)."""
    import os
    import warnings

    if os.environ.get("KERNELGATE_WARM_PROFILER") != "1":  # passed on by the CLI only when asked
        return False
    from torch.profiler import ProfilerActivity, profile

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
        p.__enter__()
        p.__exit__(None, None, None)
    return True


def audit(torch, model, cand_mod, args, device_type):
    """Runs `model(*args)` once under the audit; returns the audit as plain data."""
    t0 = _perf()
    a = Auditor(torch, device_type)
    # On the CPU one thread: the candidate's loops and PyTorch's ops are compared like for
    # like, whatever the runner's core count or load.
    threads = torch.get_num_threads()
    try:
        a.discover(cand_mod, model)
        if device_type != "cuda":
            torch.set_num_threads(1)
            a.calibrate()
        prof = a.run(model, args)
    finally:
        a.restore()
        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)
    verdict = a.effective()
    if prof is not None:
        entries = a.gpu_entries(prof, verdict)
        glue = None
        clock = "gpu"
    else:
        entries, glue = a.cpu_entries(verdict)
        clock = "cpu"
    total = sum(ms for ms, _ in entries.values())
    custom = sum(ms for (label, cls, lib, by), (ms, n) in entries.items() if cls == "custom")
    rows = []
    for (label, cls, lib, by), (ms, n) in entries.items():
        rows.append(
            {
                "op": label,
                "class": cls,
                "library": lib,
                "by_extension": by,
                "ms": ms,
                "share": (ms / total) if total > 0 else None,
                "calls": n,
            }
        )
    rows.sort(key=lambda r: -r["ms"])
    functions = {}
    for c in a.calls:
        f = functions.setdefault(
            c.function, {"function": c.function, "calls": 0, "ineffective": 0, "reason": None, "checked": True}
        )
        f["calls"] += 1
        if verdict.get(c.id) is not None:
            f["ineffective"] += 1
            f["reason"] = verdict[c.id]
        if not c.checked:
            f["checked"] = False
    a.held = []
    a.taint = {}
    return {
        "clock": clock,
        "total_ms": total,
        "custom_ms": custom,
        "custom_share": (custom / total) if total > 0 else None,
        "glue_ms": glue,
        "forward_ms": a.wall_ms,
        "entries": rows,
        "extension_calls": sorted(functions.values(), key=lambda f: f["function"]),
        "extension_modules": sorted(a.ext_modules),
        "aten_ops": sorted(a.aten_ops),
        "audit_ms": (_perf() - t0) * 1000.0,
    }
