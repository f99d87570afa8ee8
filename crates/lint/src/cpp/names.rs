//! Name tables for the C++/CUDA rules. A name is judged by its last `::` segment (and its
//! qualification where that matters), so `at::cuda::getStreamFromPool`, `c10::cuda::getStreamFromPool`
//! and a bare `getStreamFromPool` after `using namespace` are the same thing.

use crate::rule::Rule;

pub fn last_segment(q: &str) -> &str {
    q.rsplit("::").next().unwrap_or(q)
}

/// Whether the node kind is a type name (where `half` is the half type, not a variable).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameKind {
    Type,
    Value,
    Field,
}

/// Classifies a (possibly qualified) name that is banned wherever it appears in code.
/// Precision names are returned too; the caller drops them on fp16/bf16 problems.
pub fn classify(q: &str, kind: NameKind) -> Option<(Rule, String)> {
    // Most names are short locals (`i`, `n`, `idx`); every name below has 4+ characters.
    if q.len() < 4 {
        return None;
    }
    let q = q.trim_start_matches("::");
    let last = last_segment(q);
    // Most names are plain identifiers; the checks on qualified names are skipped for them.
    let qualified = q.len() != last.len();
    if let Some(msg) = crate::cpp::rules::hooks::hook_name(q, last, kind == NameKind::Field) {
        return Some((Rule::KG617, msg));
    }
    if let Some(hit) = torch_name(q, last, qualified, kind) {
        return Some(hit);
    }
    if kind == NameKind::Field {
        return field_name(last);
    }
    library_name(q, last, qualified)
        .or_else(|| concurrency_name(q, last))
        .or_else(|| other_name(q, last, kind))
}

/// PyTorch's dispatcher and modules (KG601).
fn torch_name(q: &str, last: &str, qualified: bool, kind: NameKind) -> Option<(Rule, String)> {
    // The PyTorch dispatcher calls any ATen op by its schema name (`aten::mm`).
    if matches!(last, "findSchemaOrThrow" | "findSchema" | "callBoxed")
        || qualified && kind != NameKind::Field && q.split("::").any(|s| s == "Dispatcher")
    {
        return Some((
            Rule::KG601,
            format!("`{q}` calls an ATen op through the PyTorch dispatcher; compute it in your own kernel"),
        ));
    }
    // `torch::nn::Linear`, `torch::nn::init::*`: PyTorch modules run PyTorch kernels
    // (`torch::nn::functional::*` calls are judged as calls).
    if qualified && q.starts_with("torch::nn::") && !q.starts_with("torch::nn::functional") {
        return Some((
            Rule::KG601,
            format!("`{q}` is a PyTorch module or op inside the extension; compute it in your own kernel"),
        ));
    }
    None
}

/// Struct fields: L2 access-policy windows (KG607) and PyTorch's global settings (KG614).
fn field_name(last: &str) -> Option<(Rule, String)> {
    match last {
        "accessPolicyWindow" | "hitProp" | "hitRatio" | "missProp" => Some((
            Rule::KG607,
            format!("`{last}` sets an L2 access-policy window (persisting cache lines)"),
        )),
        // PyTorch's global math settings: the reference runs under them too.
        "setAllowTF32CuBLAS"
        | "setAllowTF32CuDNN"
        | "setFloat32MatmulPrecision"
        | "setAllowFP16ReductionCuBLAS"
        | "setAllowBF16ReductionCuBLAS"
        | "setBenchmarkCuDNN"
        | "setDeterministicCuDNN"
        | "setUserEnabledCuDNN" => Some((
            Rule::KG614,
            format!("`{last}` changes PyTorch's global settings, which the reference runs under as well"),
        )),
        _ => None,
    }
}

/// Vendor libraries and device-wide library algorithms (KG602).
fn library_name(q: &str, last: &str, qualified: bool) -> Option<(Rule, String)> {
    const VENDOR_PREFIXES: [&str; 6] = [
        "cublas", "cudnn", "cufft", "cusparse", "cusolver", "cutensor",
    ];
    if VENDOR_PREFIXES.iter().any(|p| last.starts_with(p))
        || q.contains("cutlass::library")
        || q.contains("cuda::blas")
        || matches!(
            last,
            "getCurrentCUDABlasHandle"
                | "getCurrentCUDABlasLtHandle"
                | "getCudnnHandle"
                | "CUBLAS_OP_N"
                | "CUBLAS_OP_T"
        )
    {
        return Some((Rule::KG602, format!("`{q}` calls a vendor library (cuBLAS/cuDNN/...) instead of the candidate's own kernel")));
    }
    // Device-wide CUB and Thrust algorithms launch the library's kernels (block- and
    // warp-level CUB primitives inside the candidate's kernel are fine).
    let cub_device = q.starts_with("cub::Device") || q.contains("::cub::Device");
    let thrust_algo = q.starts_with("thrust::")
        && matches!(
            last,
            "reduce"
                | "reduce_by_key"
                | "transform"
                | "transform_reduce"
                | "sort"
                | "sort_by_key"
                | "stable_sort"
                | "inclusive_scan"
                | "exclusive_scan"
                | "inner_product"
                | "for_each"
                | "max_element"
                | "min_element"
                | "count"
        );
    if qualified && (cub_device || thrust_algo) {
        return Some((Rule::KG602, format!("`{q}` runs a library algorithm (CUB/Thrust device-wide) instead of the candidate's own kernel")));
    }
    None
}

/// Side streams (KG603) and host threads (KG605).
fn concurrency_name(q: &str, last: &str) -> Option<(Rule, String)> {
    if last.starts_with("cudaStreamCreate")
        || last.starts_with("cuStreamCreate")
        || matches!(
            last,
            "getStreamFromPool"
                | "getStreamFromExternal"
                | "cudaStreamPerThread"
                | "setCurrentCUDAStream"
                | "CUDAStreamGuard"
                | "CUDAMultiStreamGuard"
                | "OptionalCUDAStreamGuard"
                | "cudaStreamNonBlocking"
                | "CU_STREAM_PER_THREAD"
                | "CUDA_API_PER_THREAD_DEFAULT_STREAM"
        )
    {
        return Some((
            Rule::KG603,
            format!("`{q}` runs work on a side stream, outside the stream the harness times; launch on `at::cuda::getCurrentCUDAStream()`"),
        ));
    }
    if matches!(
        q,
        "std::thread" | "std::jthread" | "std::async" | "std::launch::async"
    ) || matches!(last, "pthread_create" | "thrd_create")
    {
        return Some((
            Rule::KG605,
            format!(
                "`{q}` starts a host thread; work may finish after the harness stops the clock"
            ),
        ));
    }
    None
}

/// L2 persistence (KG607), clocks (KG614), file writes (KG613), reduced precision (KG610).
fn other_name(q: &str, last: &str, kind: NameKind) -> Option<(Rule, String)> {
    if matches!(
        last,
        "cudaStreamSetAttribute"
            | "cuStreamSetAttribute"
            | "cudaAccessPolicyWindow"
            | "CUaccessPolicyWindow"
            | "cudaAccessPropertyPersisting"
            | "cudaLimitPersistingL2CacheSize"
            | "CU_LIMIT_PERSISTING_L2_CACHE_SIZE"
            | "cudaStreamAttributeAccessPolicyWindow"
            | "cudaLaunchAttributeAccessPolicyWindow"
            | "cudaGraphKernelNodeSetAttribute"
            | "cudaKernelNodeAttributeAccessPolicyWindow"
    ) {
        return Some((
            Rule::KG607,
            format!("`{q}` keeps data persisting in L2 across the harness's cache flush"),
        ));
    }
    // `std::chrono::steady_clock` and friends: host code reading the clock to tell timed
    // calls from checked ones.
    if last.ends_with("_clock") && q.contains("chrono") {
        return Some((
            Rule::KG614,
            format!("`{q}` reads the clock: code that times itself can behave differently when the harness times it"),
        ));
    }
    if matches!(last, "ofstream" | "fstream") && q.starts_with("std::") {
        return Some((
            Rule::KG613,
            format!("`{q}` writes files from inside the extension"),
        ));
    }
    if is_precision_name(q, last, kind) {
        return Some((
            Rule::KG610,
            format!("`{q}` computes in reduced precision (fp16/bf16/TF32) on an fp32 problem"),
        ));
    }
    None
}

fn is_precision_name(q: &str, last: &str, kind: NameKind) -> bool {
    if matches!(last, "half" | "half2" | "bfloat16") {
        return kind == NameKind::Type;
    }
    // fp8/fp6/fp4 types and conversions (`__nv_fp8_e4m3`, `__nv_cvt_float_to_fp8`).
    if last.starts_with("__nv_fp8")
        || last.starts_with("__nv_fp6")
        || last.starts_with("__nv_fp4")
        || last.starts_with("__nv_cvt_")
    {
        return true;
    }
    if last.starts_with("Float8_") {
        return q.starts_with("at::") || q.starts_with("c10::") || q.starts_with("torch::");
    }
    if matches!(last, "Half" | "BFloat16") {
        // `ScalarType::Half` names a dtype (dispatch, checks); `at::Half` is the type.
        return (q.starts_with("at::") || q.starts_with("c10::") || q.starts_with("torch::"))
            && !q.contains("ScalarType::");
    }
    q.split("::").any(|s| s == "wmma")
        || matches!(
            last,
            "__half"
                | "__half2"
                | "__nv_bfloat16"
                | "__nv_bfloat162"
                | "nv_bfloat16"
                | "nv_bfloat162"
                | "__float2half"
                | "__float2half_rn"
                | "__float2half_rz"
                | "__float2half_rd"
                | "__float2half_ru"
                | "__float2half2_rn"
                | "__floats2half2_rn"
                | "__float22half2_rn"
                | "__half2float"
                | "__half22float2"
                | "__float2bfloat16"
                | "__float2bfloat16_rn"
                | "__float2bfloat16_rz"
                | "__floats2bfloat162_rn"
                | "__float22bfloat162_rn"
                | "__bfloat162float"
                | "__float_to_tf32"
                | "tf32"
                | "__ushort_as_half"
                | "__short_as_half"
                | "__half_as_ushort"
                | "__half_as_short"
                | "__ushort_as_bfloat16"
                | "__short_as_bfloat16"
                | "__double2half"
                | "__double2bfloat16"
                | "__int2half_rn"
                | "__uint2half_rn"
        )
        || library_precision(last)
}

/// Library settings and data types that make cuBLAS/cuDNN compute an fp32 problem in TF32,
/// fp16, bf16 or fp8 (the library call itself is KG602's).
pub fn library_precision(last: &str) -> bool {
    matches!(
        last,
        "CUBLAS_TF32_TENSOR_OP_MATH"
            | "CUBLAS_TENSOR_OP_MATH"
            | "CUBLAS_COMPUTE_32F_FAST_TF32"
            | "CUBLAS_COMPUTE_32F_FAST_16F"
            | "CUBLAS_COMPUTE_32F_FAST_16BF"
            | "CUBLAS_COMPUTE_16F"
            | "CUBLAS_COMPUTE_16F_PEDANTIC"
            | "CUDA_R_16F"
            | "CUDA_R_16BF"
            | "CUDA_R_8F_E4M3"
            | "CUDA_R_8F_E5M2"
            | "CUDNN_DATA_HALF"
            | "CUDNN_DATA_BFLOAT16"
            | "CUDNN_DATA_FP8_E4M3"
            | "CUDNN_DATA_FP8_E5M2"
            | "CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION"
    )
}

/// `at::`/`torch::` functions that allocate or describe tensors, or are plumbing: allowed.
pub fn torch_allowed(last: &str) -> bool {
    matches!(
        last,
        "empty"
            | "empty_like"
            | "empty_strided"
            | "zeros"
            | "zeros_like"
            | "ones"
            | "ones_like"
            | "full"
            | "full_like"
            | "arange"
            | "tensor"
            | "from_blob"
            | "scalar_tensor"
            | "TensorOptions"
            | "Tensor"
            | "Scalar"
            | "Device"
            | "device"
            | "dtype"
            | "layout"
            | "IntArrayRef"
            | "ArrayRef"
            | "MemoryFormat"
            | "elementSize"
            | "toString"
            | "isFloatingType"
            | "isComplexType"
            | "typeMetaToScalarType"
            | "getCurrentCUDAStream"
            | "getDefaultCUDAStream"
            // Side streams are KG603's, not an ATen op.
            | "getStreamFromPool"
            | "getStreamFromExternal"
            | "setCurrentCUDAStream"
            | "CUDAGuard"
            | "OptionalCUDAGuard"
            | "DeviceGuard"
            | "getCurrentDeviceProperties"
            | "getDeviceProperties"
            | "current_device"
            | "device_count"
            | "set_device"
            | "ceil_div"
            | "irange"
            | "parallel_for"
            | "get_num_threads"
            | "NoGradGuard"
            | "InferenceMode"
            | "make_optional"
            | "optional"
            | "nullopt"
            | "str"
            | "ScalarType"
            | "numeric_limits"
            | "get_device"
            | "is_available"
            | "getCachingAllocator"
            | "c10_cuda_check_implementation"
            | "CUDAStream"
            | "cat"
            | "stack"
            | "narrow"
            | "select"
            | "slice"
            | "view"
            | "reshape"
            | "contiguous"
            | "transpose"
            | "permute"
            | "expand"
            | "flatten"
            | "squeeze"
            | "unsqueeze"
            | "chunk"
            | "split"
    ) || last.starts_with("check")
        || last.starts_with('k') && last.chars().nth(1).is_some_and(|c| c.is_ascii_uppercase())
}

/// Tensor methods that compute (a PyTorch kernel does the work). Metadata, layout and
/// allocation methods are not listed.
pub fn tensor_compute_method(m: &str) -> bool {
    matches!(
        m.trim_end_matches('_'),
        "matmul"
            | "mm"
            | "bmm"
            | "addmm"
            | "addmv"
            | "baddbmm"
            | "mv"
            | "dot"
            | "relu"
            | "sigmoid"
            | "tanh"
            | "exp"
            | "log"
            | "softmax"
            | "log_softmax"
            | "sum"
            | "mean"
            | "prod"
            | "cumsum"
            | "cumprod"
            | "add"
            | "sub"
            | "mul"
            | "div"
            | "pow"
            | "sqrt"
            | "rsqrt"
            | "abs"
            | "neg"
            | "clamp"
            | "clamp_min"
            | "clamp_max"
            | "gelu"
            | "silu"
            | "softplus"
            | "hardtanh"
            | "leaky_relu"
            | "elu"
            | "selu"
            | "mish"
            | "erf"
            | "norm"
            | "logsumexp"
            | "var"
            | "std"
            | "amax"
            | "amin"
            | "argmax"
            | "argmin"
            | "topk"
            | "sort"
            | "maximum"
            | "minimum"
            | "lerp"
            | "addcmul"
            | "addcdiv"
            | "conv2d"
            | "conv1d"
            | "conv3d"
            | "linear"
            | "layer_norm"
            | "group_norm"
            | "batch_norm"
            | "masked_fill"
            | "where"
            | "gather"
            | "scatter"
            | "index_select"
            | "outer"
            | "cross"
            | "einsum"
            | "triu"
            | "tril"
            | "cos"
            | "sin"
            | "reciprocal"
            | "sign"
            | "square"
            | "max_pool2d"
            | "avg_pool2d"
    )
}

/// Calls reaching outside the sandbox.
pub fn sandbox_call(last: &str) -> bool {
    matches!(
        last,
        "system"
            | "popen"
            | "_popen"
            | "dlopen"
            | "dlsym"
            | "dlmopen"
            | "fork"
            | "vfork"
            | "execv"
            | "execve"
            | "execvp"
            | "execvpe"
            | "execl"
            | "execle"
            | "execlp"
            | "posix_spawn"
            | "posix_spawnp"
            | "setenv"
            | "putenv"
            | "unsetenv"
            | "freopen"
            | "unlink"
            | "ofstream"
            | "fstream"
            | "socket"
            // Exits that skip the interpreter's shutdown (a forged clean exit) and reads of
            // the environment (phase detection).
            | "mprotect"
            | "ptrace"
            | "rename"
            | "symlink"
            | "chmod"
            | "_exit"
            | "_Exit"
            | "quick_exit"
            | "getenv"
            | "secure_getenv"
    )
}

/// Clock reads in device or host code (`clock64()`, `clock_gettime`): a kernel that reads the
/// time can tell timed calls from checked ones.
pub fn clock_call(last: &str) -> bool {
    matches!(
        last,
        "clock"
            | "clock64"
            | "__clock64"
            | "__globaltimer"
            | "globaltimer"
            | "clock_gettime"
            | "gettimeofday"
            | "timespec_get"
            | "cudaEventElapsedTime"
            | "cuEventElapsedTime"
    )
}

/// A function that a candidate must not define: it would interpose the CUDA API or the clock.
pub fn interposed_api(name: &str) -> bool {
    // Real API families only: honest helpers are often called `cudaCheck` or `cudaAssert`.
    const FAMILIES: [&str; 24] = [
        "cudaEvent",
        "cudaDevice",
        "cudaStream",
        "cudaLaunch",
        "cudaMalloc",
        "cudaFree",
        "cudaMemcpy",
        "cudaMemset",
        "cudaGetLastError",
        "cudaPeekAtLastError",
        "cudaGraph",
        "cudaFunc",
        "cuEvent",
        "cuCtx",
        "cuStream",
        "cuLaunch",
        "cuMem",
        "cuModule",
        "cuInit",
        "cuGraph",
        "clock_gettime",
        "gettimeofday",
        "dlsym",
        "cudaThreadSynchronize",
    ];
    FAMILIES.iter().any(|f| name.starts_with(f)) || name == "clock"
}

/// Whether a pasted identifier names an API (something an honest macro never needs to build).
pub fn api_like(name: &str) -> bool {
    let upper_after = |p: &str| {
        name.strip_prefix(p)
            .and_then(|r| r.chars().next())
            .is_some_and(|c| c.is_ascii_uppercase())
    };
    interposed_api(name)
        || upper_after("cuda")
        || upper_after("cu")
        || [
            "cublas",
            "cudnn",
            "cufft",
            "cusparse",
            "cusolver",
            "getStreamFrom",
            "pthread_",
        ]
        .iter()
        .any(|p| name.starts_with(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classification_uses_the_last_segment_and_kind() {
        assert_eq!(
            classify("at::cuda::getStreamFromPool", NameKind::Value)
                .unwrap()
                .0,
            Rule::KG603
        );
        assert_eq!(
            classify("cublasSgemm", NameKind::Value).unwrap().0,
            Rule::KG602
        );
        assert_eq!(
            classify("std::thread", NameKind::Type).unwrap().0,
            Rule::KG605
        );
        assert_eq!(classify("half", NameKind::Type).unwrap().0, Rule::KG610);
        assert!(
            classify("half", NameKind::Value).is_none(),
            "a variable named half is fine"
        );
        assert_eq!(
            classify("nvcuda::wmma::fragment", NameKind::Type)
                .unwrap()
                .0,
            Rule::KG610
        );
        assert_eq!(
            classify("accessPolicyWindow", NameKind::Field).unwrap().0,
            Rule::KG607
        );
        assert!(classify("cudaMemcpyAsync", NameKind::Value).is_none());
        assert!(classify("thread", NameKind::Type).is_none());
    }

    #[test]
    fn red_team_names() {
        let code = |q: &str, k: NameKind| classify(q, k).map(|c| c.0);
        assert_eq!(code("__nv_fp8_e4m3", NameKind::Type), Some(Rule::KG610));
        assert_eq!(
            code("c10::Float8_e4m3fn", NameKind::Type),
            Some(Rule::KG610)
        );
        assert_eq!(
            code("c10::Dispatcher::singleton", NameKind::Type),
            Some(Rule::KG601)
        );
        assert_eq!(
            code("findSchemaOrThrow", NameKind::Field),
            Some(Rule::KG601)
        );
        assert_eq!(code("torch::nn::Linear", NameKind::Type), Some(Rule::KG601));
        assert_eq!(code("torch::nn::functional::relu", NameKind::Type), None);
        assert_eq!(
            code("cub::DeviceReduce::Sum", NameKind::Type),
            Some(Rule::KG602)
        );
        assert_eq!(
            code("cub::BlockReduce", NameKind::Type),
            None,
            "block primitives are the candidate's"
        );
        assert_eq!(code("thrust::transform", NameKind::Type), Some(Rule::KG602));
        assert_eq!(code("thrust::device_ptr", NameKind::Type), None);
        assert_eq!(
            code("std::chrono::steady_clock", NameKind::Type),
            Some(Rule::KG614)
        );
        assert_eq!(
            code("setAllowTF32CuBLAS", NameKind::Field),
            Some(Rule::KG614)
        );
        assert_eq!(
            code("CUDA_API_PER_THREAD_DEFAULT_STREAM", NameKind::Value),
            Some(Rule::KG603)
        );
        assert!(sandbox_call("quick_exit") && sandbox_call("getenv") && sandbox_call("mprotect"));
        assert!(
            !sandbox_call("exit"),
            "exit(1) on an error is honest; exit(0) is judged by its argument"
        );
        assert!(clock_call("clock64") && !clock_call("clock_rate"));
        assert!(
            torch_allowed("getStreamFromPool"),
            "side streams are KG603's, not KG601's"
        );
    }

    #[test]
    fn library_precision_settings() {
        let code = |q: &str| classify(q, NameKind::Value).map(|c| c.0);
        assert_eq!(code("CUBLAS_TF32_TENSOR_OP_MATH"), Some(Rule::KG610));
        assert_eq!(code("CUBLAS_COMPUTE_32F_FAST_TF32"), Some(Rule::KG610));
        assert_eq!(code("CUDA_R_16BF"), Some(Rule::KG610));
        assert_eq!(code("CUBLAS_DEFAULT_MATH"), None);
        assert_eq!(code("CUBLAS_COMPUTE_32F"), None);
        assert_eq!(code("CUDA_R_32F"), None);
        assert_eq!(code("nvcuda::wmma::precision::tf32"), Some(Rule::KG610));
    }

    #[test]
    fn allowlists() {
        assert!(torch_allowed("empty_like"));
        assert!(torch_allowed("kFloat"));
        assert!(torch_allowed("checkAllSameGPU"));
        assert!(!torch_allowed("matmul"));
        assert!(tensor_compute_method("relu_"));
        assert!(!tensor_compute_method("data_ptr"));
        assert!(interposed_api("cudaEventElapsedTime"));
        assert!(!interposed_api("cuda_relu"));
        assert!(
            !interposed_api("cudaCheck"),
            "honest helper names are not interposition"
        );
        assert!(interposed_api("cuEventRecord"));
        assert!(classify("at::ScalarType::Half", NameKind::Value).is_none());
        assert_eq!(
            classify("c10::Half", NameKind::Type).unwrap().0,
            Rule::KG610
        );
        assert_eq!(
            classify("std::ofstream", NameKind::Type).unwrap().0,
            Rule::KG613
        );
        assert!(api_like("cudaStreamCreate"));
        assert!(!api_like("relu_kernel"));
    }
}
