"""The state of PyTorch the reference runs on, witnessed before the candidate's import and
compared after it: what an honest kernel never changes, so a change is evidence a timing
slowdown alone cannot be (`timing/reference-tampered` rests on it).

- `harness-hooked` (error): hooks that let candidate code run inside the harness's own PyTorch
  operations: global or thread-local RecordFunction callbacks (`at::addGlobalCallback`), a
  TorchFunctionMode / TorchDispatchMode left on the stack, a changed dispatcher entry of an
  `aten` op (`TORCH_LIBRARY_IMPL(aten, ...)`, `torch.library.impl("aten::...")`).
- `torch-patched` (error): a PyTorch function, Tensor method or the reference's module code
  replaced (an op wrapped at import).
- `torch-settings-changed` (warning): global settings the reference's speed or precision depends
  on (threads, TF32 and reduced-precision flags, cuDNN) changed; they are put back before the
  reference runs again, so the reference is timed as it was defined.

Loaded by the harness as a private module and given to the runner as `runner.kg_integrity`.
"""

import ctypes
import os

_isinstance = isinstance
_callable = callable
_getattr = getattr
_vars = vars
_type = type

# Dispatch keys whose kernels run when the reference's ops execute in eager mode. Torch's own
# lazy imports register others (Meta, FuncTorch*, Autocast*), which change nothing here.
EAGER_KEYS = (
    "CPU",
    "CUDA",
    "BackendSelect",
    "ADInplaceOrView",
    "Python",
    "PreDispatch",
    "PythonDispatcher",
    "Autograd",
    "AutogradCPU",
    "AutogradCUDA",
    "AutogradOther",
    "CompositeImplicitAutograd",
    "CompositeExplicitAutograd",
    "CompositeExplicitAutogradNonFunctional",
)
# Settings names: (getter, setter) over torch; read before the import, put back after it.
SETTINGS = (
    ("torch.get_num_threads()", lambda t: t.get_num_threads(), lambda t, v: t.set_num_threads(v)),
    (
        "torch.backends.cuda.matmul.allow_tf32",
        lambda t: t.backends.cuda.matmul.allow_tf32,
        lambda t, v: setattr(t.backends.cuda.matmul, "allow_tf32", v),
    ),
    (
        "torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction",
        lambda t: t.backends.cuda.matmul.allow_fp16_reduced_precision_reduction,
        lambda t, v: setattr(t.backends.cuda.matmul, "allow_fp16_reduced_precision_reduction", v),
    ),
    (
        "torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction",
        lambda t: t.backends.cuda.matmul.allow_bf16_reduced_precision_reduction,
        lambda t, v: setattr(t.backends.cuda.matmul, "allow_bf16_reduced_precision_reduction", v),
    ),
    (
        "torch.get_float32_matmul_precision()",
        lambda t: t.get_float32_matmul_precision(),
        lambda t, v: t.set_float32_matmul_precision(v),
    ),
    ("torch.backends.cudnn.enabled", lambda t: t.backends.cudnn.enabled, lambda t, v: setattr(t.backends.cudnn, "enabled", v)),
    (
        "torch.backends.cudnn.allow_tf32",
        lambda t: t.backends.cudnn.allow_tf32,
        lambda t, v: setattr(t.backends.cudnn, "allow_tf32", v),
    ),
    (
        "torch.backends.cudnn.benchmark",
        lambda t: t.backends.cudnn.benchmark,
        lambda t, v: setattr(t.backends.cudnn, "benchmark", v),
    ),
    (
        "torch.backends.cudnn.deterministic",
        lambda t: t.backends.cudnn.deterministic,
        lambda t, v: setattr(t.backends.cudnn, "deterministic", v),
    ),
    ("torch.backends.mkldnn.enabled", lambda t: t.backends.mkldnn.enabled, lambda t, v: setattr(t.backends.mkldnn, "enabled", v)),
    (
        "torch.are_deterministic_algorithms_enabled()",
        lambda t: t.are_deterministic_algorithms_enabled(),
        lambda t, v: t.use_deterministic_algorithms(v),
    ),
    ("torch.get_default_dtype()", lambda t: t.get_default_dtype(), lambda t, v: t.set_default_dtype(v)),
)


def _callback_probe(torch):
    """`at::hasGlobalCallbacks` and `at::hasThreadLocalCallbacks` from the loaded libtorch, or
    None where the symbols cannot be found (another build). Resolved now, before the sandbox's
    audit hook and before any candidate code."""
    try:
        lib = ctypes.CDLL(os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so"))
        fns = []
        for sym in ("_ZN2at18hasGlobalCallbacksEv", "_ZN2at23hasThreadLocalCallbacksEv"):
            f = lib[sym]
            f.restype = ctypes.c_bool
            f.argtypes = []
            fns.append(f)
        return tuple(fns)
    except (OSError, AttributeError):
        return None


def _namespaces(torch, ref_model):
    """(label, mapping) of what the reference's code resolves at call time."""
    out = [
        ("torch", _vars(torch)),
        ("torch.nn.functional", _vars(torch.nn.functional)),
        ("torch._C._nn", _vars(torch._C._nn)),
        ("torch.Tensor", _vars(torch.Tensor)),
        ("torch._C.TensorBase", _vars(torch._C.TensorBase)),
        ("torch.nn.Module", _vars(torch.nn.Module)),
    ]
    vf = torch._C._VariableFunctions
    out.append(("torch._C._VariableFunctions", {k: _getattr(vf, k, None) for k in dir(vf) if not k.startswith("__")}))
    seen = set()
    for m in ref_model.modules() if ref_model is not None else []:
        cls = _type(m)
        for klass in cls.__mro__:
            if klass in seen or klass is object or klass.__module__ == "builtins":
                continue
            seen.add(klass)
            out.append((f"{klass.__module__}.{klass.__qualname__}", _vars(klass)))
    return out


def _functions(torch, ref_model):
    fns = {}
    for label, mapping in _namespaces(torch, ref_model):
        for k, v in list(mapping.items()):
            if _callable(v) or _isinstance(v, (staticmethod, classmethod, property)):
                fns[f"{label}.{k}"] = v
    return fns


def _torch_owned(new, old, torch_dir):
    """A replacement torch itself makes on a lazy import (dynamo wraps `torch.manual_seed` and
    `nn.Module.__init__`): Python code in torch's own files that wraps the old object (through
    `__wrapped__` or a closure over it). A swap for another torch function is no wrapper."""
    code = _getattr(new, "__code__", None)
    if code is None or not code.co_filename.startswith(torch_dir):
        return False
    seen = 0
    f = new
    while f is not None and seen < 8:
        if f is old:
            return True
        cells = _getattr(f, "__closure__", None) or ()
        for c in cells:
            try:
                if c.cell_contents is old:
                    return True
            except ValueError:  # an empty cell
                continue
        f = _getattr(f, "__wrapped__", None)
        seen += 1
    return False


def _dispatch_table(torch):
    """Per `aten` op, the registrations of the eager keys (key and source location)."""
    table = {}
    names = torch._C._dispatch_get_all_op_names()
    dump = torch._C._dispatch_dump
    for n in names:
        if not n.startswith("aten::"):
            continue
        lines = [ln for ln in dump(n).splitlines() if ln.split(":", 1)[0] in EAGER_KEYS]
        table[n] = tuple(lines)
    return table


class Witness:
    """PyTorch's state, taken before the candidate exists; `changes()` compares it with now."""

    def __init__(self, torch, ref_model):
        self.torch = torch
        self.ref_model = ref_model
        self.torch_dir = os.path.dirname(torch.__file__)
        self._probe = _callback_probe(torch)
        self._callbacks = self.callbacks()
        self._modes = self.modes()
        self._functions = _functions(torch, ref_model)
        try:
            self._dispatch = _dispatch_table(torch)
        except Exception:
            self._dispatch = None
        self._settings = {}
        for name, get, _set in SETTINGS:
            try:
                self._settings[name] = get(torch)
            except Exception:
                pass

    def callbacks(self):
        if self._probe is None:
            return None
        return tuple(bool(f()) for f in self._probe)

    def modes(self):
        C = self.torch._C
        try:
            return (C._len_torch_function_stack(), C._len_torch_dispatch_stack())
        except AttributeError:
            return None

    def changes(self):
        """[(rule, severity, message)] of what differs from the state before the import."""
        out = []
        hooks = []
        now = self.callbacks()
        if now is not None and self._callbacks is not None:
            if now[0] and not self._callbacks[0]:
                hooks.append("a global RecordFunction callback (at::addGlobalCallback) is registered")
            if now[1] and not self._callbacks[1]:
                hooks.append("a thread-local RecordFunction callback (at::addThreadLocalCallback) is registered")
        modes = self.modes()
        if modes is not None and self._modes is not None:
            if modes[0] > self._modes[0]:
                hooks.append(f"{modes[0] - self._modes[0]} TorchFunctionMode(s) left on the mode stack")
            if modes[1] > self._modes[1]:
                hooks.append(f"{modes[1] - self._modes[1]} TorchDispatchMode(s) left on the mode stack")
        if self._dispatch is not None:
            try:
                table = _dispatch_table(self.torch)
                changed = sorted(n for n, lines in table.items() if self._dispatch.get(n, lines) != lines)
            except Exception:
                changed = []
            if changed:
                shown = ", ".join(changed[:5]) + (f" and {len(changed) - 5} more" if len(changed) > 5 else "")
                hooks.append(f"the dispatcher's kernels for {shown} were replaced")
        if hooks:
            out.append(
                (
                    "harness-hooked",
                    "error",
                    "after the candidate's import and calls, "
                    + "; ".join(hooks)
                    + ": such hooks run candidate code inside PyTorch operations the harness and the reference "
                    "perform (between timed calls, before comparisons). No kernel needs them: remove them",
                )
            )
        patched = []
        current = _functions(self.torch, self.ref_model)
        for name, old in self._functions.items():
            new = current.get(name, old)
            if new is old or _torch_owned(new, old, self.torch_dir):
                continue
            patched.append(name)
        if patched:
            shown = ", ".join(f"`{p}`" for p in patched[:6]) + (f" and {len(patched) - 6} more" if len(patched) > 6 else "")
            out.append(
                (
                    "torch-patched",
                    "error",
                    f"the candidate replaced {shown}: code that wraps or replaces PyTorch's functions changes what "
                    "the reference computes or how fast it runs. Do not modify torch or the reference",
                )
            )
        return out

    def restore_settings(self):
        """Puts back every setting the import changed; returns the finding for them, or None."""
        changed = []
        for name, get, put in SETTINGS:
            if name not in self._settings:
                continue
            try:
                now = get(self.torch)
                if now != self._settings[name]:
                    put(self.torch, self._settings[name])
                    changed.append(f"{name} ({self._settings[name]!r} -> {now!r})")
            except Exception:
                continue
        if not changed:
            return None
        return (
            "torch-settings-changed",
            "warning",
            "the candidate changed PyTorch's global settings "
            + ", ".join(changed)
            + "; kernelgate put them back, so the reference and any PyTorch ops the candidate keeps run as "
            "the problem defines them",
        )
