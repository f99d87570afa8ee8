//! What counts as compute, allocation, tampering, ... by dotted path or method name.

use crate::rule::Rule;

use super::names::under;

/// Top-level `torch.*` functions that allocate, reshape or describe tensors: not compute.
const TORCH_ALLOWED: &[&str] = &[
    "empty",
    "empty_like",
    "empty_strided",
    "zeros",
    "zeros_like",
    "ones",
    "ones_like",
    "full",
    "full_like",
    "arange",
    "linspace",
    "eye",
    "rand",
    "rand_like",
    "randn",
    "randn_like",
    "randint",
    "randint_like",
    "randperm",
    "tensor",
    "as_tensor",
    "as_strided",
    "from_numpy",
    "frombuffer",
    "asarray",
    "manual_seed",
    "seed",
    "initial_seed",
    "get_rng_state",
    "set_rng_state",
    "is_tensor",
    "is_floating_point",
    "is_complex",
    "numel",
    "no_grad",
    "enable_grad",
    "inference_mode",
    "set_grad_enabled",
    "is_grad_enabled",
    "device",
    "get_default_dtype",
    "get_default_device",
    "finfo",
    "iinfo",
    "promote_types",
    "result_type",
    "can_cast",
    "broadcast_shapes",
    "reshape",
    "flatten",
    "unflatten",
    "squeeze",
    "unsqueeze",
    "transpose",
    "permute",
    "t",
    "narrow",
    "select",
    "split",
    "chunk",
    "tensor_split",
    "unbind",
    "movedim",
    "swapaxes",
    "swapdims",
    "cat",
    "concat",
    "concatenate",
    "stack",
    "hstack",
    "vstack",
    "broadcast_to",
    "broadcast_tensors",
    "clone",
    "detach",
    "view_as_real",
    "view_as_complex",
    "typename",
    "is_storage",
    "get_num_threads",
    "set_num_threads",
    "use_deterministic_algorithms",
    "set_printoptions",
    "compiled_with_cxx11_abi",
    "is_nonzero",
    "empty_permuted",
    "contiguous_format",
    "_assert",
    "cdiv",
];

/// Sub-namespaces of `torch` that are not compute.
const TORCH_ALLOWED_NS: &[&str] = &[
    "torch.cuda",
    "torch.backends",
    "torch.utils",
    "torch.library",
    "torch.autograd",
    "torch.nn.init",
    "torch.nn.parameter",
    "torch.nn.utils",
    "torch.nn.modules.module",
    "torch.random",
    "torch.version",
    "torch.jit",
    "torch.testing",
    "torch.distributed",
    "torch.types",
    "torch.overrides",
    "torch.serialization",
    "torch.hub",
    "torch.profiler",
    "torch.accelerator",
    "torch.mps",
    "torch.xpu",
    "torch.cpu",
    "torch.amp",
    "torch.multiprocessing",
    "torch.futures",
    "torch.fx",
    "torch.export",
];

/// `torch.nn.*` names that are containers or parameters, not compute layers.
const NN_NOT_LAYERS: &[&str] = &[
    "Module",
    "Parameter",
    "ParameterList",
    "ParameterDict",
    "Buffer",
    "ModuleList",
    "ModuleDict",
    "Sequential",
    "Identity",
    "Flatten",
    "Unflatten",
    "UninitializedParameter",
    "UninitializedBuffer",
];

/// Is calling `path` a PyTorch compute op? (`torch.nn.Linear(...)` constructs a layer: not a call of compute.)
pub fn torch_compute(path: &str) -> bool {
    if !under(path, "torch") {
        return false;
    }
    if under(path, "torch.nn.functional") {
        let f = &path["torch.nn.functional".len()..];
        return !matches!(f, "" | ".pad");
    }
    if under(path, "torch.ops") {
        let ns = path.split('.').nth(2).unwrap_or("");
        return matches!(ns, "aten" | "prims" | "quantized" | "_c10d_functional");
    }
    if under(path, "torch._C") {
        return [
            "torch._C._nn",
            "torch._C._VariableFunctions",
            "torch._C._linalg",
            "torch._C._fft",
            "torch._C._special",
            "torch._C._TensorBase",
            "torch._C.TensorBase",
        ]
        .iter()
        .any(|p| under(path, p));
    }
    if [
        "torch.linalg",
        "torch.fft",
        "torch.special",
        "torch.sparse",
        "torch._refs",
        "torch._prims",
        "torch._dynamo",
        "torch._inductor",
        "torch.func",
        "torch.vmap",
        "torch.compile",
        "torch._VF",
    ]
    .iter()
    .any(|p| under(path, p))
    {
        return true;
    }
    // torch.functional re-exports compute (einsum, norm, stft, cdist) next to a few layout
    // helpers.
    if let Some(f) = path.strip_prefix("torch.functional.") {
        return !matches!(
            f,
            "split"
                | "broadcast_tensors"
                | "broadcast_shapes"
                | "meshgrid"
                | "atleast_1d"
                | "atleast_2d"
                | "atleast_3d"
                | "unravel_index"
                | "block_diag"
        );
    }
    if TORCH_ALLOWED_NS.iter().any(|p| under(path, p)) {
        return false;
    }
    if under(path, "torch.nn") {
        return false; // layers are KG102, handled where they are called
    }
    // `torch.Tensor.add(x, y)` is compute; `torch.Tensor.size` is metadata.
    if let Some(m) = path.strip_prefix("torch.Tensor.") {
        return tensor_compute_method(m);
    }
    let rest = &path["torch.".len().min(path.len())..];
    let first = rest.split('.').next().unwrap_or("");
    if rest.contains('.') {
        return false; // some other sub-namespace we do not know: be quiet
    }
    if first.starts_with(|c: char| c.is_ascii_uppercase())
        || first.is_empty()
        || first.starts_with("__")
    {
        return false; // classes (Tensor, Size, Generator), dunders
    }
    // Predicates and settings (`is_autocast_enabled`, `get_device`, `set_default_device`) are not compute.
    let query = ["is_", "get_", "set_", "from_", "to_dlpack"]
        .iter()
        .any(|p| first.starts_with(p));
    !query && !TORCH_ALLOWED.contains(&first) && !is_dtype(first)
}

fn is_dtype(name: &str) -> bool {
    // Dtypes (`uint32`, `float8_e4m3fnuz`, `complex32`, `qint8`, ...) and constants (`inf`, `pi`).
    let families = [
        "float", "int", "uint", "complex", "bfloat", "qint", "quint", "bits",
    ];
    if families.iter().any(|f| {
        name.strip_prefix(f)
            .is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit()))
    }) {
        return true;
    }
    matches!(
        name,
        "inf"
            | "nan"
            | "pi"
            | "e"
            | "newaxis"
            | "chalf"
            | "cfloat"
            | "cdouble"
            | "sparse_coo"
            | "sparse_csr"
    ) || matches!(
        name,
        "float"
            | "float32"
            | "float16"
            | "half"
            | "bfloat16"
            | "float64"
            | "double"
            | "int8"
            | "int16"
            | "int32"
            | "int64"
            | "uint8"
            | "bool"
            | "long"
            | "int"
            | "short"
            | "complex64"
            | "complex128"
            | "cfloat"
            | "cdouble"
            | "float8_e4m3fn"
            | "float8_e5m2"
            | "dtype"
            | "layout"
            | "strided"
            | "memory_format"
            | "channels_last"
            | "preserve_format"
    )
}

/// `torch.nn.X` that is a compute layer.
pub fn nn_layer(path: &str) -> bool {
    let Some(name) = path
        .strip_prefix("torch.nn.")
        .or_else(|| path.strip_prefix("torch.nn.modules."))
    else {
        return false;
    };
    let last = name.rsplit('.').next().unwrap_or(name);
    last.starts_with(|c: char| c.is_ascii_uppercase())
        && !NN_NOT_LAYERS.contains(&last)
        && !name.starts_with("init.")
        && !name.starts_with("utils.")
        && !name.starts_with("parameter.")
}

/// Containers whose contents may be layers.
pub fn nn_container(path: &str) -> bool {
    matches!(
        path,
        "torch.nn.Sequential" | "torch.nn.ModuleList" | "torch.nn.ModuleDict"
    )
}

/// Is `m` a tensor method that runs a PyTorch kernel: a compute method, its in-place form
/// (`x.add_(b)`, `y.rsqrt_()`), or an arithmetic dunder called by name (`y.__mul__(2)`).
/// `add` alone is left out (sets have it too); `add_` is a tensor's.
pub fn tensor_compute_method(m: &str) -> bool {
    if TENSOR_COMPUTE.contains(&m) {
        return true;
    }
    if let Some(stem) = m.strip_prefix("__").and_then(|d| d.strip_suffix("__")) {
        let stem = stem
            .strip_prefix('i')
            .filter(|s| ARITH_DUNDERS.contains(s))
            .or_else(|| stem.strip_prefix('r').filter(|s| ARITH_DUNDERS.contains(s)))
            .unwrap_or(stem);
        return ARITH_DUNDERS.contains(&stem);
    }
    match m.strip_suffix('_') {
        Some(stem) if !stem.ends_with('_') => {
            TENSOR_COMPUTE.contains(&stem) || INPLACE_ONLY.contains(&stem)
        }
        _ => false,
    }
}

/// Arithmetic dunders (also in their `__i*__`/`__r*__` forms).
const ARITH_DUNDERS: &[&str] = &[
    "add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "neg", "abs", "and", "or",
    "xor", "lshift", "rshift",
];

/// Stems whose in-place form (`x.add_(...)`) is compute although the stem alone is ambiguous.
const INPLACE_ONLY: &[&str] = &[
    "add",
    "apply",
    "map",
    "map2",
    "rsqrt",
    "reciprocal",
    "floor",
    "ceil",
    "round",
    "trunc",
    "frac",
    "sign",
    "erf",
    "erfinv",
    "expm1",
    "log1p",
    "log2",
    "log10",
    "sin",
    "cos",
    "tan",
    "atan",
    "asin",
    "acos",
    "sinh",
    "cosh",
    "square",
    "lerp",
    "fmod",
    "remainder",
    "addcmul",
    "addcdiv",
    "addmm",
    "baddbmm",
    "addbmm",
    "addmv",
    "addr",
    "logit",
    "nan_to_num",
    "tril",
    "triu",
    "cumprod",
    "scatter_reduce",
    "index_reduce",
    "true_divide",
    "divide",
    "multiply",
    "subtract",
    "hardtanh",
    "leaky_relu",
    "elu",
    "selu",
    "celu",
    "silu",
    "mish",
    "gelu",
    "hardswish",
    "hardsigmoid",
];

/// Tensor methods that run a PyTorch kernel. `add` is left out (sets have it too).
pub const TENSOR_COMPUTE: &[&str] = &[
    "abs",
    "abs_",
    "absolute",
    "acos",
    "acosh",
    "addbmm",
    "addcdiv",
    "addcmul",
    "addmm",
    "addmv",
    "addr",
    "amax",
    "amin",
    "argmax",
    "argmin",
    "argsort",
    "asin",
    "atan",
    "atan2",
    "baddbmm",
    "bmm",
    "ceil",
    "clamp",
    "clamp_",
    "clamp_max",
    "clamp_min",
    "clamp_min_",
    "clamp_max_",
    "clip",
    "clip_",
    "cos",
    "cosh",
    "cummax",
    "cumprod",
    "cumsum",
    "div",
    "div_",
    "divide",
    "dot",
    "erf",
    "erfinv",
    "exp",
    "exp_",
    "exp2",
    "expm1",
    "floor",
    "fmod",
    "frac",
    "gelu",
    "hardtanh",
    "hardtanh_",
    "inner",
    "kron",
    "lerp",
    "log",
    "log_",
    "log10",
    "log1p",
    "log2",
    "log_softmax",
    "logsumexp",
    "masked_fill",
    "masked_fill_",
    "matmul",
    "max",
    "maximum",
    "mean",
    "median",
    "min",
    "minimum",
    "mm",
    "mul",
    "mul_",
    "multiply",
    "mv",
    "nan_to_num",
    "neg",
    "neg_",
    "norm",
    "outer",
    "pow",
    "pow_",
    "prod",
    "reciprocal",
    "relu",
    "relu_",
    "remainder",
    "renorm",
    "round",
    "rsqrt",
    "sigmoid",
    "sigmoid_",
    "sign",
    "silu",
    "sin",
    "sinh",
    "softmax",
    "sqrt",
    "sqrt_",
    "square",
    "std",
    "sub",
    "sub_",
    "subtract",
    "sum",
    "tan",
    "tanh",
    "tanh_",
    "topk",
    "tril",
    "triu",
    "true_divide",
    "trunc",
    "var",
    "where",
    "conv2d",
    "cross",
    "logit",
    "softplus",
    "mish",
    "leaky_relu",
    "elu",
    "selu",
    "hardswish",
    "hardsigmoid",
    "logaddexp",
    "cumsum_",
    "einsum",
    "tensordot",
    "cdist",
    "diff",
    "any_",
    "scatter_add",
    "index_add",
    "index_add_",
    "scatter_reduce",
    "__matmul__",
    "__rmatmul__",
    "sort",
    "msort",
    "kthvalue",
    "unique",
    "histc",
    "bincount",
    "gather",
    "index_select",
    "masked_select",
    "lgamma",
    "digamma",
    "sinc",
    "hypot",
    "logcumsumexp",
    "cummin",
    "nansum",
    "nanmean",
    "count_nonzero",
    "addcmul_",
    "logical_not",
    "bitwise_not",
    "heaviside",
    "xlogy",
];

/// Module paths whose mere import (or any use) is banned: (path, rule, message).
// One entry a line: rustfmt would spread each over five.
#[rustfmt::skip]
const BANNED: &[(&str, Rule, &str)] = &[
    // introspection
    ("gc", Rule::KG304, "`gc` can find the harness's reference tensors"),
    ("inspect", Rule::KG304, "`inspect` walks the harness's frames and source"),
    ("builtins", Rule::KG304, "`builtins` lets a candidate patch the interpreter"),
    ("__builtin__", Rule::KG304, "`__builtin__` lets a candidate patch the interpreter"),
    ("__main__", Rule::KG304, "`__main__` is the harness's namespace"),
    ("sys._getframe", Rule::KG304, "`sys._getframe` walks the harness's frames"),
    ("sys._current_frames", Rule::KG304, "`sys._current_frames` walks the harness's frames"),
    ("sys.modules", Rule::KG304, "`sys.modules` reaches the harness's modules"),
    ("sys.settrace", Rule::KG304, "`sys.settrace` watches the harness"),
    ("sys.setprofile", Rule::KG304, "`sys.setprofile` watches the harness"),
    ("sys.meta_path", Rule::KG304, "`sys.meta_path` intercepts the harness's imports"),
    ("builtins.globals", Rule::KG304, "`globals()` exposes module state the harness shares"),
    ("builtins.vars", Rule::KG304, "`vars()` exposes module state"),
    ("builtins.locals", Rule::KG304, "`locals()` exposes frame state"),
    ("builtins.__builtins__", Rule::KG304, "`__builtins__` lets a candidate patch the interpreter"),
    ("builtins.breakpoint", Rule::KG304, "`breakpoint()` stops the harness"),
    ("traceback.extract_stack", Rule::KG304, "walking the call stack reveals the harness's frames"),
    ("traceback.walk_stack", Rule::KG304, "walking the call stack reveals the harness's frames"),
    ("traceback.format_stack", Rule::KG304, "walking the call stack reveals the harness's frames"),
    ("traceback.print_stack", Rule::KG304, "walking the call stack reveals the harness's frames"),
    ("psutil", Rule::KG304, "`psutil` inspects the harness's process and its command line"),
    ("torch.cuda.memory_snapshot", Rule::KG304, "an allocator snapshot finds the harness's tensors"),
    ("torch.cuda.memory._snapshot", Rule::KG304, "an allocator snapshot finds the harness's tensors"),
    ("torch.cuda.caching_allocator_alloc", Rule::KG304, "raw allocator blocks can hold the harness's freed tensors"),
    ("torch.cuda.memory.caching_allocator_alloc", Rule::KG304, "raw allocator blocks can hold the harness's freed tensors"),
    // the CUDA runtime and vendor libraries from Python
    ("cuda.cudart", Rule::KG306, "calls the CUDA runtime directly from Python, behind the kernel's back"),
    ("cuda.cuda", Rule::KG306, "calls the CUDA driver directly from Python, behind the kernel's back"),
    ("cuda.bindings", Rule::KG306, "calls the CUDA runtime/driver directly from Python, behind the kernel's back"),
    ("nvmath", Rule::KG101, "`nvmath` computes with NVIDIA's library kernels instead of your kernel"),
    ("cupy.cuda.cublas", Rule::KG101, "cuBLAS computes instead of your kernel"),
    ("cupy.cuda.cudnn", Rule::KG101, "cuDNN computes instead of your kernel"),
    ("cupy.cublas", Rule::KG101, "cuBLAS computes instead of your kernel"),
    // stored results
    ("torch.load", Rule::KG401, "loads stored tensors from disk: results can be precomputed instead of computed"),
    ("numpy.load", Rule::KG401, "loads stored arrays from disk: results can be precomputed instead of computed"),
    ("pickle.load", Rule::KG401, "loads stored objects from disk: results can be precomputed instead of computed"),
    ("joblib", Rule::KG401, "loads stored objects from disk: results can be precomputed instead of computed"),
    ("shelve", Rule::KG401, "a persistent store keeps results across runs"),
    // obfuscation
    ("builtins.exec", Rule::KG204, "`exec` runs code the linter cannot see"),
    ("builtins.eval", Rule::KG204, "`eval` runs code the linter cannot see"),
    ("builtins.compile", Rule::KG204, "`compile` builds code the linter cannot see"),
    ("marshal", Rule::KG204, "`marshal` loads hidden code objects"),
    ("pickle.loads", Rule::KG204, "`pickle.loads` can run hidden code"),
    ("runpy", Rule::KG204, "`runpy` runs code the linter cannot see"),
    ("importlib.util.spec_from_file_location", Rule::KG204, "loads code from a file the gate does not lint"),
    ("importlib.util.spec_from_loader", Rule::KG204, "loads code the gate does not lint"),
    ("importlib.machinery", Rule::KG204, "loads code from a file the gate does not lint"),
    ("imp", Rule::KG204, "`imp` loads code from a file the gate does not lint"),
    ("zipimport", Rule::KG204, "`zipimport` loads code the gate does not lint"),
    ("types.FunctionType", Rule::KG204, "building functions from code objects hides what runs"),
    ("types.CodeType", Rule::KG204, "building code objects hides what runs"),
    // forging and early exit
    ("os._exit", Rule::KG305, "`os._exit` ends the process before the harness reports"),
    ("os.abort", Rule::KG305, "`os.abort` ends the process"),
    ("os.kill", Rule::KG305, "`os.kill` signals processes"),
    ("os.killpg", Rule::KG305, "`os.killpg` signals processes"),
    ("os.write", Rule::KG305, "`os.write` writes to raw file descriptors (the result channel)"),
    ("os.fdopen", Rule::KG305, "`os.fdopen` opens raw file descriptors (the result channel)"),
    ("os.dup2", Rule::KG305, "`os.dup2` redirects the process's file descriptors"),
    ("sys.exit", Rule::KG305, "`sys.exit` ends the run before the harness reports"),
    ("builtins.exit", Rule::KG305, "`exit()` ends the run before the harness reports"),
    ("builtins.quit", Rule::KG305, "`quit()` ends the run before the harness reports"),
    ("sys.stdout.write", Rule::KG305, "writing to stdout can forge result lines"),
    ("sys.stderr.write", Rule::KG305, "writing to stderr can forge result lines"),
    ("sys.stdout.buffer", Rule::KG305, "writing to stdout's raw buffer can forge result lines"),
    ("sys.stderr.buffer", Rule::KG305, "writing to stderr's raw buffer can forge result lines"),
    ("sys.stdout.writelines", Rule::KG305, "writing to stdout can forge result lines"),
    ("sys.stderr.writelines", Rule::KG305, "writing to stderr can forge result lines"),
    ("sys.__stdout__", Rule::KG305, "the raw stdout can forge result lines"),
    ("sys.__stderr__", Rule::KG305, "the raw stderr can forge result lines"),
    ("atexit", Rule::KG305, "`atexit` runs code after the harness's checks"),
    ("signal", Rule::KG305, "`signal` handlers can change how the run ends"),
    // sandbox
    ("subprocess", Rule::KG306, "`subprocess` starts processes outside the sandbox"),
    ("os.system", Rule::KG306, "`os.system` runs shell commands"),
    ("os.popen", Rule::KG306, "`os.popen` runs shell commands"),
    ("os.execv", Rule::KG306, "`os.exec*` replaces the process"),
    ("os.execve", Rule::KG306, "`os.exec*` replaces the process"),
    ("os.execvp", Rule::KG306, "`os.exec*` replaces the process"),
    ("os.execl", Rule::KG306, "`os.exec*` replaces the process"),
    ("os.execlp", Rule::KG306, "`os.exec*` replaces the process"),
    ("os.spawnv", Rule::KG306, "`os.spawn*` starts processes"),
    ("os.spawnl", Rule::KG306, "`os.spawn*` starts processes"),
    ("os.posix_spawn", Rule::KG306, "`os.posix_spawn` starts processes"),
    ("os.fork", Rule::KG306, "`os.fork` starts processes"),
    ("os.forkpty", Rule::KG306, "`os.forkpty` starts processes"),
    ("os.remove", Rule::KG306, "deleting files reaches outside the sandbox"),
    ("os.unlink", Rule::KG306, "deleting files reaches outside the sandbox"),
    ("os.rmdir", Rule::KG306, "deleting directories reaches outside the sandbox"),
    ("os.removedirs", Rule::KG306, "deleting directories reaches outside the sandbox"),
    ("os.rename", Rule::KG306, "moving files reaches outside the sandbox"),
    ("os.replace", Rule::KG306, "moving files reaches outside the sandbox"),
    ("os.symlink", Rule::KG306, "links can redirect the harness's files"),
    ("os.chmod", Rule::KG306, "changing permissions reaches outside the sandbox"),
    ("os.truncate", Rule::KG306, "truncating files reaches outside the sandbox"),
    ("shutil.rmtree", Rule::KG306, "deleting trees reaches outside the sandbox"),
    ("shutil.move", Rule::KG306, "moving files reaches outside the sandbox"),
    ("shutil.copy", Rule::KG306, "copying files over others reaches outside the sandbox"),
    ("shutil.copyfile", Rule::KG306, "copying files over others reaches outside the sandbox"),
    ("shutil.copytree", Rule::KG306, "copying files over others reaches outside the sandbox"),
    ("ctypes", Rule::KG306, "`ctypes` calls native libraries (cuBLAS, libcudart) behind the kernel's back"),
    ("cffi", Rule::KG306, "`cffi` calls native libraries behind the kernel's back"),
    ("pip", Rule::KG306, "installing packages at run time"),
    ("ensurepip", Rule::KG306, "installing packages at run time"),
    ("socket", Rule::KG306, "network access from a kernel"),
    ("urllib", Rule::KG306, "network access from a kernel"),
    ("requests", Rule::KG306, "network access from a kernel"),
    ("httpx", Rule::KG306, "network access from a kernel"),
    ("http.client", Rule::KG306, "network access from a kernel"),
    ("ftplib", Rule::KG306, "network access from a kernel"),
    ("pty", Rule::KG306, "`pty` starts terminals"),
    ("torch.ops.load_library", Rule::KG306, "loads a prebuilt native library whose code the gate cannot review"),
    ("torch.classes.load_library", Rule::KG306, "loads a prebuilt native library whose code the gate cannot review"),
    ("weakref", Rule::KG401, "weak references keep tensors between calls keyed by identity: an output cache"),
    ("unittest.mock", Rule::KG303, "`mock` patches library functions"),
    ("mock", Rule::KG303, "`mock` patches library functions"),
    // threads
    ("threading", Rule::KG404, "threads let `forward` return before the work is done"),
    ("_thread", Rule::KG404, "threads let `forward` return before the work is done"),
    ("concurrent", Rule::KG404, "executors let `forward` return before the work is done"),
    ("multiprocessing", Rule::KG404, "processes let `forward` return before the work is done"),
    ("torch.multiprocessing", Rule::KG404, "processes let `forward` return before the work is done"),
    ("asyncio", Rule::KG404, "async tasks let `forward` return before the work is done"),
    ("torch.jit.fork", Rule::KG404, "`torch.jit.fork` runs work asynchronously"),
    ("torch.jit._fork", Rule::KG404, "`torch.jit.fork` runs work asynchronously"),
    ("torch.futures", Rule::KG404, "futures let `forward` return before the work is done"),
    // streams
    ("torch.cuda.Stream", Rule::KG403, "a new CUDA stream runs work outside the timed stream"),
    ("torch.cuda.streams", Rule::KG403, "a new CUDA stream runs work outside the timed stream"),
    ("torch.cuda.stream", Rule::KG403, "switching streams runs work outside the timed stream"),
    ("torch.cuda.ExternalStream", Rule::KG403, "an external stream runs work outside the timed stream"),
    ("torch.cuda.set_stream", Rule::KG403, "switching streams runs work outside the timed stream"),
    ("torch.cuda.StreamContext", Rule::KG403, "switching streams runs work outside the timed stream"),
    ("torch.Stream", Rule::KG403, "a new stream runs work outside the timed stream"),
    ("torch.cuda.graphs", Rule::KG403, "a CUDA graph replays work captured earlier"),
    ("torch.cuda.CUDAGraph", Rule::KG403, "a CUDA graph replays work captured earlier"),
    ("torch.cuda.make_graphed_callables", Rule::KG403, "a CUDA graph replays work captured earlier"),
    ("torch.cuda.graph", Rule::KG403, "a CUDA graph replays work captured earlier"),
    // process-wide hooks (KG307)
    ("torch._C._push_on_torch_dispatch_stack", Rule::KG307, "pushes a dispatch mode that intercepts every op the harness runs"),
    ("torch._C._push_on_torch_function_stack", Rule::KG307, "pushes a function mode that intercepts every op the harness runs"),
    ("torch._C._set_dispatch_mode", Rule::KG307, "installs a dispatch mode that intercepts every op the harness runs"),
    ("torch._C._set_torch_dispatch_mode", Rule::KG307, "installs a dispatch mode that intercepts every op the harness runs"),
    ("torch._C._set_torch_function_mode", Rule::KG307, "installs a function mode that intercepts every op the harness runs"),
    ("torch.utils._python_dispatch._push_mode", Rule::KG307, "pushes a dispatch mode that intercepts every op the harness runs"),
    ("torch.overrides._push_mode", Rule::KG307, "pushes a function mode that intercepts every op the harness runs"),
    ("torch.overrides.push_torch_function_mode", Rule::KG307, "pushes a function mode that intercepts every op the harness runs"),
    ("torch.nn.modules.module.register_module_forward_hook", Rule::KG307, "a global module hook runs inside the reference `Model` too"),
    ("torch.nn.modules.module.register_module_forward_pre_hook", Rule::KG307, "a global module hook runs inside the reference `Model` too"),
    ("torch.nn.modules.module.register_module_backward_hook", Rule::KG307, "a global module hook runs inside the reference `Model` too"),
    ("torch.nn.modules.module.register_module_full_backward_hook", Rule::KG307, "a global module hook runs inside the reference `Model` too"),
    ("torch.nn.modules.module.register_module_full_backward_pre_hook", Rule::KG307, "a global module hook runs inside the reference `Model` too"),
    ("torch.nn.modules.module.register_module_buffer_registration_hook", Rule::KG307, "a global module hook runs inside the reference `Model` too"),
    ("torch.nn.modules.module.register_module_module_registration_hook", Rule::KG307, "a global module hook runs inside the reference `Model` too"),
    ("torch.nn.modules.module.register_module_parameter_registration_hook", Rule::KG307, "a global module hook runs inside the reference `Model` too"),
    ("torch.nn.modules.module._global_forward_hooks", Rule::KG307, "a global module hook runs inside the reference `Model` too"),
    ("torch.nn.modules.module._global_forward_pre_hooks", Rule::KG307, "a global module hook runs inside the reference `Model` too"),
    ("torch._C._cuda_attach_out_of_memory_observer", Rule::KG307, "an allocator observer runs inside the harness's allocations"),
    ("torch.cuda.memory._set_allocator_settings", Rule::KG307, "changes the caching allocator for the whole process, the harness's memory checks included"),
    ("torch._C._cuda_cudaCachingAllocator_set_allocator_settings", Rule::KG307, "changes the caching allocator for the whole process, the harness's memory checks included"),
    ("torch._C._accelerator_setAllocatorSettings", Rule::KG307, "changes the caching allocator for the whole process, the harness's memory checks included"),
    ("torch.cuda.memory.change_current_allocator", Rule::KG307, "replaces the CUDA allocator for the whole process, the harness's memory checks included"),
    ("torch.cuda.change_current_allocator", Rule::KG307, "replaces the CUDA allocator for the whole process, the harness's memory checks included"),
    ("torch.cuda.memory.CUDAPluggableAllocator", Rule::KG307, "replaces the CUDA allocator for the whole process, the harness's memory checks included"),
    ("torch.cuda.CUDAPluggableAllocator", Rule::KG307, "replaces the CUDA allocator for the whole process, the harness's memory checks included"),
    ("torch._C._cuda_changeCurrentAllocator", Rule::KG307, "replaces the CUDA allocator for the whole process, the harness's memory checks included"),
    ("torch.cuda.memory._record_memory_history", Rule::KG307, "records every allocation of the process, the harness's included"),
    ("torch.cuda._record_memory_history", Rule::KG307, "records every allocation of the process, the harness's included"),
    ("torch._C._cuda_record_memory_history", Rule::KG307, "records every allocation of the process, the harness's included"),
    ("torch.autograd.profiler._enable_record_function", Rule::KG307, "switches record-function callbacks for the whole process"),
    ("torch._C._autograd._enable_record_function", Rule::KG307, "switches record-function callbacks for the whole process"),
    ("torch._C._add_global_callback", Rule::KG307, "a global record-function callback runs around every op the harness runs"),
    // lazy tensors
    ("torch.Tensor._make_subclass", Rule::KG405, "`_make_subclass` builds a tensor subclass"),
    ("torch.Tensor._make_wrapper_subclass", Rule::KG405, "`_make_wrapper_subclass` builds a lazy tensor"),
    ("torch.overrides.TorchFunctionMode", Rule::KG405, "a torch function mode intercepts every op"),
    ("torch.utils._python_dispatch", Rule::KG405, "a dispatch mode intercepts every op"),
];

/// Module paths whose mere import (or any use) is banned, with rule and message.
pub fn banned(path: &str) -> Option<(Rule, &'static str)> {
    // Every member of the exec/spawn families (`os.execvpe`, `os.spawnlp`, `os.posix_spawnp`).
    if let Some(f) = path.strip_prefix("os.") {
        if f.starts_with("exec") || f.starts_with("spawn") || f.starts_with("posix_spawn") {
            return Some((
                Rule::KG306,
                "`os.exec*`/`os.spawn*` start or replace processes",
            ));
        }
    }
    // The longest listed prefix of the path wins (`builtins.exec` is obfuscation, `builtins`
    // introspection): look up the path, then each shorter dotted prefix, instead of scanning.
    static BY_PATH: std::sync::LazyLock<rustc_hash::FxHashMap<&'static str, (Rule, &'static str)>> =
        std::sync::LazyLock::new(|| {
            let mut m = rustc_hash::FxHashMap::default();
            for (p, r, msg) in BANNED {
                m.entry(*p).or_insert((*r, *msg));
            }
            m
        });
    let mut prefix = path;
    loop {
        if let Some(hit) = BY_PATH.get(prefix) {
            // A builtin function (`builtins.print`) is not the `builtins` module.
            return (!(prefix == "builtins" && path != "builtins")).then_some(*hit);
        }
        match prefix.rfind('.') {
            Some(dot) => prefix = &prefix[..dot],
            None => return None,
        }
    }
}

/// Timing functions (KG301) and validation functions (KG302) that must not be replaced.
pub fn tamper_rule(path: &str) -> Rule {
    const TIMERS: &[&str] = &[
        "torch.cuda",
        "time",
        "timeit",
        "torch.utils.benchmark",
        "triton.testing",
        "torch.profiler",
    ];
    const VALIDATION: &[&str] = &[
        "torch.allclose",
        "torch.isclose",
        "torch.equal",
        "torch.eq",
        "torch.all",
        "torch.testing",
        "torch.Tensor",
        "numpy.allclose",
        "numpy.testing",
        "numpy.isclose",
        "np.allclose",
        "np.testing",
        "math.isclose",
    ];
    if TIMERS.iter().any(|p| under(path, p)) {
        Rule::KG301
    } else if VALIDATION.iter().any(|p| under(path, p)) {
        Rule::KG302
    } else {
        Rule::KG303
    }
}

/// Size constants KernelBench problems define at module level.
pub const SIZE_NAMES: &[&str] = &[
    "batch_size",
    "in_features",
    "out_features",
    "in_channels",
    "out_channels",
    "kernel_size",
    "height",
    "width",
    "depth",
    "dim",
    "dim1",
    "dim2",
    "features",
    "num_features",
    "num_classes",
    "seq_len",
    "sequence_length",
    "hidden_size",
    "input_size",
    "num_layers",
    "embed_dim",
    "num_heads",
    "vocab_size",
    "channels",
    "M",
    "N",
    "K",
    "batch",
    "hidden_dim",
    "input_dim",
    "output_dim",
    "length",
    "size",
    "n",
    "m",
    "k",
    "height_in",
    "width_in",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compute_versus_allocation() {
        for p in [
            "torch.matmul",
            "torch.nn.functional.softmax",
            "torch.ops.aten.mm",
            "torch.linalg.inv",
            "torch.compile",
            "torch.relu",
            "torch.Tensor.sigmoid",
            "torch._C._nn.linear",
        ] {
            assert!(torch_compute(p), "{p}");
        }
        for p in [
            "torch.empty",
            "torch.empty_like",
            "torch.zeros",
            "torch.float16",
            "torch.Size",
            "torch.nn.Parameter",
            "torch.nn.init.kaiming_uniform_",
            "torch.cuda.current_stream",
            "torch.utils.cpp_extension.load_inline",
            "torch.nn.functional.pad",
            "torch.ops.my_ext.run",
            "torch.Tensor.size",
            "numpy.dot",
        ] {
            assert!(!torch_compute(p), "{p}");
        }
        assert!(nn_layer("torch.nn.Linear") && nn_layer("torch.nn.ReLU"));
        assert!(
            !nn_layer("torch.nn.Parameter")
                && !nn_layer("torch.nn.Module")
                && !nn_layer("torch.nn.init.normal_")
        );
    }

    #[test]
    fn in_place_and_dunder_forms_are_compute() {
        for m in [
            "relu_", "add_", "rsqrt_", "__mul__", "__rmul__", "__iadd__", "apply_",
        ] {
            assert!(tensor_compute_method(m), "{m}");
        }
        for m in [
            "add",
            "zero_",
            "copy_",
            "fill_",
            "requires_grad_",
            "__init__",
            "view",
            "contiguous",
        ] {
            assert!(!tensor_compute_method(m), "{m}");
        }
        assert!(torch_compute("torch._VF.tanh") && torch_compute("torch.functional.einsum"));
        assert!(!torch_compute("torch.functional.split"));
        for p in [
            "torch.inf",
            "torch.pi",
            "torch.uint32",
            "torch.float8_e4m3fnuz",
            "torch.qint8",
        ] {
            assert!(!torch_compute(p), "{p}");
        }
    }

    #[test]
    fn banned_and_tampering_tables() {
        assert_eq!(banned("os.posix_spawnp").map(|b| b.0), Some(Rule::KG306));
        assert_eq!(banned("os.execvpe").map(|b| b.0), Some(Rule::KG306));
        assert_eq!(
            banned("weakref.WeakKeyDictionary").map(|b| b.0),
            Some(Rule::KG401)
        );
        assert_eq!(banned("torch.load").map(|b| b.0), Some(Rule::KG401));
        assert_eq!(
            banned("sys.stdout.buffer.write").map(|b| b.0),
            Some(Rule::KG305)
        );
        assert_eq!(banned("os.path.exists"), None);
        assert_eq!(banned("subprocess.run").map(|b| b.0), Some(Rule::KG306));
        assert_eq!(banned("sys.modules").map(|b| b.0), Some(Rule::KG304));
        assert_eq!(banned("sys.path"), None);
        assert_eq!(banned("os.path.join"), None);
        assert_eq!(tamper_rule("torch.cuda.Event.elapsed_time"), Rule::KG301);
        assert_eq!(tamper_rule("torch.allclose"), Rule::KG302);
        assert_eq!(tamper_rule("torch.matmul"), Rule::KG303);
    }
}
