//! Every rule, in code order. Groups (like ruff): KG0xx parsing, KG1xx PyTorch fallbacks,
//! KG2xx bypass and obfuscation, KG3xx tampering/forging/introspection/sandbox, KG4xx caching,
//! phase detection, threads and streams, KG5xx precision, KG6xx embedded C++/CUDA and Triton
//! (lint-cpp), KG7xx structure, KG9xx suppressions.
//!
//! lint-cpp: add your `RuleMeta`s in the KG6xx section below (keep code order).

use crate::rule::RuleMeta;
use kernelgate_model::Severity::{Error, Warning};

pub static RULES: &[RuleMeta] = &[
    RuleMeta {
        code: "KG000",
        name: "parse-error",
        severity: Error,
        summary: "The file is not valid Python",
        doc: "The candidate could not be parsed, so no other rule could check it and the harness could not import it. Fix the syntax error at the reported position.",
        bad: "class ModelNew(nn.Module)\n    def forward(self, x):\n        return x",
        good: "class ModelNew(nn.Module):\n    def forward(self, x):\n        return kernel.run(x)",
    },
    // ---- KG1xx: PyTorch fallbacks in code reachable from ModelNew.forward ----
    RuleMeta {
        code: "KG101",
        name: "torch-op-fallback",
        severity: Error,
        summary: "A PyTorch compute op runs in ModelNew's code path",
        doc: "Code reachable from `ModelNew.forward` calls a PyTorch compute function (`torch.matmul`, `torch.nn.functional.softmax`, `torch.compile`, `torch.ops.aten.*`, ...), under any alias or through a constant-foldable `getattr`. The work is then done by PyTorch's kernels, not the candidate's, and the measured speedup is PyTorch's. Allocation and metadata (`torch.empty`, `empty_like`, `zeros`, `view`, `reshape`, `cat`, `F.pad`, ...) are allowed. Move the computation into your kernel.",
        bad: "import torch.nn.functional as Fn\n\ndef forward(self, x):\n    return Fn.softmax(x, dim=1)",
        good: "def forward(self, x):\n    out = torch.empty_like(x)\n    softmax_ext.softmax(x, out)\n    return out",
    },
    RuleMeta {
        code: "KG102",
        name: "nn-layer-fallback",
        severity: Error,
        summary: "A torch.nn compute layer is called in ModelNew's code path",
        doc: "A `torch.nn` compute layer (`nn.Linear`, `nn.Conv2d`, `nn.ReLU`, ...) is invoked from code reachable from `ModelNew.forward`, so PyTorch does the work. Creating the layer only to hold parameters with the reference's initialisation is fine: pass `self.linear.weight` to your kernel instead of calling `self.linear(x)`.",
        bad: "def __init__(self):\n    self.fc = nn.Linear(128, 64)\n\ndef forward(self, x):\n    return self.fc(x)",
        good: "def forward(self, x):\n    return gemm_ext.linear(x, self.fc.weight, self.fc.bias)",
    },
    RuleMeta {
        code: "KG103",
        name: "matmul-operator",
        severity: Error,
        summary: "The `@` operator multiplies tensors with PyTorch",
        doc: "`a @ b` (and `a @= b`) on tensors dispatches to PyTorch's matmul. In code reachable from `ModelNew.forward` this replaces the custom kernel with cuBLAS. Call your kernel instead.",
        bad: "def forward(self, a, b):\n    return a @ b",
        good: "def forward(self, a, b):\n    return matmul_ext.matmul(a, b)",
    },
    RuleMeta {
        code: "KG104",
        name: "tensor-method-fallback",
        severity: Error,
        summary: "A tensor compute method runs in ModelNew's code path",
        doc: "A tensor method that computes (`x.sigmoid()`, `x.matmul(w)`, `x.sum(dim=1)`, `x.relu_()`, ...) is called from code reachable from `ModelNew.forward`. It runs a PyTorch kernel. Metadata and layout methods (`size`, `view`, `reshape`, `contiguous`, `data_ptr`, `to(device)`, `clone`, `t`, ...) are allowed; calls on the extension module returned by `load_inline` are not tensor methods.",
        bad: "def forward(self, x):\n    return x.sigmoid()",
        good: "def forward(self, x):\n    return sigmoid_ext.sigmoid(x.contiguous())",
    },
    // ---- KG2xx: bypass and obfuscation ----
    RuleMeta {
        code: "KG201",
        name: "try-except-fallback",
        severity: Error,
        summary: "try/except can silently fall back to PyTorch",
        doc: "A `try`/`except` in the candidate lets a failing kernel fall back to another path (usually PyTorch) without anyone noticing, so the gate would time and verify different code than the PR claims. Let errors propagate; the harness reports a crash with its message.",
        bad: "try:\n    out = ext.relu(x)\nexcept Exception:\n    out = torch.relu(x)",
        good: "out = ext.relu(x)",
    },
    RuleMeta {
        code: "KG202",
        name: "empty-forward",
        severity: Error,
        summary: "ModelNew.forward does nothing or is missing",
        doc: "`ModelNew.forward` is `pass`, `...`, only a docstring, returns an input unchanged, or is not defined at all (then a base class's `forward` runs). A candidate must compute its output in its own `forward`.",
        bad: "class ModelNew(nn.Module):\n    def forward(self, x):\n        pass",
        good: "class ModelNew(nn.Module):\n    def forward(self, x):\n        return ext.relu(x)",
    },
    RuleMeta {
        code: "KG203",
        name: "reference-bypass",
        severity: Error,
        summary: "ModelNew reuses the reference Model",
        doc: "`ModelNew` inherits from the reference `Model`, is an alias of it, instantiates it, or calls its `forward` (`Model.forward(self, x)`, `super().forward(x)` with `Model` as base). The reference's PyTorch code then runs instead of a kernel.",
        bad: "class ModelNew(Model):\n    pass",
        good: "class ModelNew(nn.Module):\n    def forward(self, x):\n        return ext.run(x)",
    },
    RuleMeta {
        code: "KG204",
        name: "dynamic-code",
        severity: Error,
        summary: "exec/eval/compile/__import__/dynamic getattr hides what runs",
        doc: "`exec`, `eval` and `compile` run code the linter cannot see; `__import__`, `importlib.import_module` and `getattr` on a module with a name built at run time hide which module or function is used. Write the import or the call plainly. (`getattr(torch, \"mat\" + \"mul\")` is folded and checked as the call it names.)",
        bad: "op = getattr(torch, name)\nexec(base64.b64decode(payload))",
        good: "import my_kernels\nout = my_kernels.run(x)",
    },
    // ---- KG3xx: tampering, forging, introspection, sandbox ----
    RuleMeta {
        code: "KG301",
        name: "timer-tampering",
        severity: Error,
        summary: "Timing functions are replaced",
        doc: "The candidate assigns to, `setattr`s or deletes a timing function (`torch.cuda.Event.*`, `torch.cuda.synchronize`, `torch.cuda.Stream.*`, `time.*`, `timeit.*`), so a harness that times with them measures nothing. kernelgate times through the driver, but the attempt itself is a hack.",
        bad: "torch.cuda.Event.elapsed_time = lambda self, end: 0.01",
        good: "# measure with `kernelgate eval`; never patch timers",
    },
    RuleMeta {
        code: "KG302",
        name: "validation-tampering",
        severity: Error,
        summary: "Correctness checks are replaced",
        doc: "The candidate replaces a function the correctness check relies on (`torch.allclose`, `torch.equal`, `torch.isclose`, anything under `torch.testing`, `torch.Tensor` comparison methods) by assignment or `setattr`, so wrong outputs compare equal.",
        bad: "torch.allclose = lambda *a, **k: True",
        good: "# let the harness compare outputs",
    },
    RuleMeta {
        code: "KG303",
        name: "monkey-patch",
        severity: Error,
        summary: "A library function is monkey-patched",
        doc: "The candidate assigns to, `setattr`s or deletes an attribute of an imported module (`torch.matmul = ...`, `F.relu = ...`, `sys.stdout = ...`) or uses `unittest.mock.patch`. Patching shared modules changes what the reference and the harness run. Define your own function instead.",
        bad: "torch.nn.functional.gelu = my_fast_gelu",
        good: "def my_fast_gelu(x):\n    return ext.gelu(x)",
    },
    RuleMeta {
        code: "KG304",
        name: "harness-introspection",
        severity: Error,
        summary: "The candidate inspects the harness or the interpreter",
        doc: "Use of `gc`, `inspect`, `sys._getframe`, `sys.modules`, `sys.settrace`, `__main__`, `builtins`, `globals()` or frame attributes (`f_back`, `f_locals`, `__globals__`) lets a candidate find the reference outputs or the harness's state. Kernels never need them.",
        bad: "import gc\nref = [o for o in gc.get_objects() if isinstance(o, torch.Tensor)]",
        good: "# compute from the inputs you are given",
    },
    RuleMeta {
        code: "KG305",
        name: "forged-output",
        severity: Error,
        summary: "The candidate prints results or exits early",
        doc: "Writing result-like text to stdout/stderr (`print(\"correct: True\")`, `sys.stdout.write`), writing to raw file descriptors (`os.write`), or ending the process (`os._exit`, `sys.exit`, `exit()`, `os.kill`, `atexit`) can forge the harness's verdict. kernelgate reads results over its own channel, but the attempt is a hack.",
        bad: "print('{\"correct\": true, \"runtime_ms\": 0.01}')\nos._exit(0)",
        good: "return out",
    },
    RuleMeta {
        code: "KG306",
        name: "sandbox-abuse",
        severity: Error,
        summary: "Processes, ctypes, network or file writes outside temp",
        doc: "`subprocess`, `os.system`, `os.popen`, `os.exec*`, `os.fork`, `ctypes`, `cffi`, `pip`, sockets and HTTP clients, deleting or moving files, and writing files outside a temporary directory reach outside the kernel's sandbox (install packages, call vendor libraries, overwrite the harness). Build kernels with `load_inline` and write scratch files under `tempfile`.",
        bad: "import subprocess\nsubprocess.run(['pip', 'install', 'fastlib'])",
        good: "ext = load_inline(name='k', cpp_sources=src, functions=['run'])",
    },
    // ---- KG4xx: caching, phase detection, threads, streams ----
    RuleMeta {
        code: "KG401",
        name: "output-cache",
        severity: Error,
        summary: "Results are cached by tensor identity or shape",
        doc: "A container is indexed or probed with a key derived from `data_ptr()`, `id()`, `.shape`/`.size()`, `hash()` or a content fingerprint, or a function on the forward path is memoised with `functools.cache`/`lru_cache`. Returning a stored result for repeated inputs makes timing meaningless. Compute every call; cache only compiled kernels keyed by dtype or configuration.",
        bad: "_cache = {}\ndef forward(self, x):\n    key = x.data_ptr()\n    if key in _cache:\n        return _cache[key]",
        good: "def forward(self, x):\n    return ext.run(x)",
    },
    RuleMeta {
        code: "KG402",
        name: "phase-detection",
        severity: Error,
        summary: "Behaviour depends on call counts, environment or argv",
        doc: "A counter kept in `self` or a global is incremented on the forward path and tested in a condition, or the forward path reads `os.environ`, `os.getenv` or `sys.argv`. That lets a candidate behave during the correctness check and cheat while being timed. The same inputs must always take the same path.",
        bad: "def forward(self, x):\n    self.calls += 1\n    if self.calls > 5:\n        return self.out",
        good: "def forward(self, x):\n    return ext.run(x)",
    },
    RuleMeta {
        code: "KG403",
        name: "side-stream",
        severity: Error,
        summary: "Work is launched on a non-default CUDA stream",
        doc: "`torch.cuda.Stream`, `torch.cuda.stream(...)`, `ExternalStream`, `set_stream` or a `stream=` argument other than the current stream moves work off the stream the timer records on, so the timed region misses it. Launch on `torch.cuda.current_stream()`.",
        bad: "s = torch.cuda.Stream()\nwith torch.cuda.stream(s):\n    ext.run(x)",
        good: "ext.run(x)  # on the current stream",
    },
    RuleMeta {
        code: "KG404",
        name: "threads",
        severity: Error,
        summary: "Threads or processes finish work in the background",
        doc: "`threading`, `_thread`, `concurrent.futures`, `multiprocessing` (also `torch.multiprocessing`) and `asyncio` let `forward` return before the work is done, so the timer stops early. Compute synchronously on the current stream.",
        bad: "from concurrent.futures import ThreadPoolExecutor\npool = ThreadPoolExecutor(1)",
        good: "out = ext.run(x)",
    },
    RuleMeta {
        code: "KG405",
        name: "lazy-tensor",
        severity: Error,
        summary: "A torch.Tensor subclass or __torch_function__ defers work",
        doc: "A subclass of `torch.Tensor`, `_make_subclass`, `_make_wrapper_subclass`, `as_subclass` or a `__torch_function__`/`__torch_dispatch__` override can return a placeholder that computes only when compared. Return plain tensors.",
        bad: "class Lazy(torch.Tensor):\n    def __torch_function__(cls, func, types, args=(), kwargs=None): ...",
        good: "return out  # a plain torch.Tensor",
    },
    RuleMeta {
        code: "KG406",
        name: "memoized-forward",
        severity: Warning,
        summary: "A function on the forward path is memoised",
        doc: "`functools.cache`/`lru_cache` on a function reachable from `ModelNew.forward` returns stored results when called with the same (hashable) arguments; tensors hash by identity, so repeated inputs return stale outputs. Memoise only on dtypes, shapes of configuration or kernel parameters, and say so in a suppression.",
        bad: "@functools.lru_cache(None)\ndef run(x):\n    return ext.run(x)",
        good: "@functools.lru_cache(None)\ndef build(dtype):  # kernelgate: allow=KG406 reason=\"caches compiled kernels by dtype\"\n    ...",
    },
    // ---- KG5xx: precision ----
    RuleMeta {
        code: "KG501",
        name: "precision-downgrade",
        severity: Error,
        summary: "An fp32 problem is computed in fp16/bf16",
        doc: "On an fp32 problem the candidate converts tensors to half precision (`.half()`, `.bfloat16()`, `.to(torch.float16)`, `dtype=torch.bfloat16`, `torch.autocast`). Lower precision is faster but answers a different problem; the tolerance is set for fp32. Silent on fp16 and bf16 problems.",
        bad: "def forward(self, x):\n    return ext.run(x.half()).float()",
        good: "def forward(self, x):\n    return ext.run(x)  # fp32 kernel",
    },
    RuleMeta {
        code: "KG502",
        name: "tf32-enabled",
        severity: Error,
        summary: "TF32 or reduced-precision matmul is switched on for an fp32 problem",
        doc: "`torch.backends.cuda.matmul.allow_tf32 = True`, `torch.backends.cudnn.allow_tf32 = True`, `allow_fp16_reduced_precision_reduction` or `torch.set_float32_matmul_precision(\"high\"|\"medium\")` make fp32 matmuls run in TF32 — for the reference too, which changes the baseline. Silent on fp16 and bf16 problems.",
        bad: "torch.backends.cuda.matmul.allow_tf32 = True",
        good: "# keep full fp32 precision",
    },
    // ---- KG6xx: embedded C++/CUDA and Triton (lint-cpp) ----
    // ---- KG7xx: structure ----
    RuleMeta {
        code: "KG701",
        name: "changed-work",
        severity: Warning,
        summary: "The candidate redefines get_inputs, get_init_inputs or size constants",
        doc: "The candidate defines `get_inputs`/`get_init_inputs` or module-level size constants (`batch_size`, `dim`, `M`, ...). kernelgate always uses the reference's inputs, but a candidate that reads its own smaller sizes may do less work than the problem asks. Remove them and take sizes from the input tensors.",
        bad: "batch_size = 16\ndef get_inputs():\n    return [torch.randn(batch_size, 16)]",
        good: "def forward(self, x):\n    n = x.numel()",
    },
    RuleMeta {
        code: "KG702",
        name: "no-custom-kernel",
        severity: Error,
        summary: "No custom kernel is built or launched",
        doc: "The candidate has no kernel of its own: no `load_inline`/`cpp_extension.load`, no `@triton.jit`, no CUTLASS/CuTe, TileLang or ThunderKittens kernel — or none for the declared backend. Without a kernel the speedup can only come from PyTorch.",
        bad: "class ModelNew(nn.Module):\n    def forward(self, x):\n        return x.clamp_min(0)",
        good: "ext = load_inline(name='relu', cpp_sources=src, cuda_sources=cuda_src, functions=['relu'])",
    },
    RuleMeta {
        code: "KG703",
        name: "missing-modelnew",
        severity: Error,
        summary: "There is no `class ModelNew`",
        doc: "A candidate must define `class ModelNew` at module level with the reference's constructor and `forward` signature; the harness imports it by that name.",
        bad: "class FastModel(nn.Module): ...",
        good: "class ModelNew(nn.Module): ...",
    },
    // ---- KG9xx: suppressions ----
    RuleMeta {
        code: "KG900",
        name: "suppression-without-reason",
        severity: Error,
        summary: "A suppression has no reason",
        doc: "`# kernelgate: allow=CODE` must say why: `# kernelgate: allow=KG101 reason=\"...\"`. A suppression without a reason suppresses nothing and is itself an error, so every exception in a kernel is explained in the PR.",
        bad: "y = x @ w  # kernelgate: allow=KG103",
        good: "y = x @ w  # kernelgate: allow=KG103 reason=\"tiny 4x4 epilogue, measured 0.1%\"",
    },
    RuleMeta {
        code: "KG901",
        name: "unknown-suppression",
        severity: Warning,
        summary: "A suppression names an unknown rule or is malformed",
        doc: "A `# kernelgate:` comment names a rule code that does not exist or cannot be read. Check the code with `kernelgate rule --all`.",
        bad: "# kernelgate: allow=KG999 reason=\"typo\"",
        good: "# kernelgate: allow=KG101 reason=\"...\"",
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_sorted_and_documented() {
        let codes: Vec<&str> = RULES.iter().map(|r| r.code).collect();
        let mut sorted = codes.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(codes, sorted, "rule codes must be unique and in order");
        for r in RULES {
            assert!(r.code.len() == 5 && r.code.starts_with("KG"), "{}", r.code);
            assert!(
                !r.summary.is_empty()
                    && !r.doc.is_empty()
                    && !r.bad.is_empty()
                    && !r.good.is_empty(),
                "{}",
                r.code
            );
            assert!(
                r.name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c == '-' || c.is_ascii_digit()),
                "{}",
                r.name
            );
        }
    }
}
