//! KG601 `cpp-torch-op` and KG602 `cpp-vendor-library`: PyTorch's or a vendor library's kernels
//! doing the work inside the extension.

use crate::cpp::*;
use crate::rule::Rule;
use crate::rule::RuleMeta;
use kernelgate_model::Severity::Error;
use std::ops::Range;

impl<'t> Analyzer<'t> {
    /// Every KG601 finding of the analyzer is raised here.
    pub(in crate::cpp) fn torch_op(&mut self, range: Range<usize>, msg: String) {
        self.flag(Rule::KG601, range, msg);
    }

    /// Every KG602 finding of the analyzer is raised here.
    pub(in crate::cpp) fn vendor_library(&mut self, range: Range<usize>, msg: String) {
        self.flag(Rule::KG602, range, msg);
    }

    /// CUTLASS's prebuilt device-level operators are a library call when the kernel declares
    /// a backend other than CUTLASS/CuTe; with no declared backend they are a CUTLASS kernel.
    pub(in crate::cpp) fn library_ops_banned(&self) -> bool {
        self.backend
            .is_some_and(|b| b != kernelgate_model::Backend::Cute)
    }
}

impl<'t> Analyzer<'t> {
    /// `x.matmul(w)`: a tensor compute method inside the extension.
    pub(in crate::cpp) fn tensor_method_call(&mut self, at: &Range<usize>, recv_t: &str, m: &str) {
        if tensor_compute_method(m) && recv_t != "this" && !recv_t.starts_with("std") {
            self.torch_op(
                at.clone(),
                format!("`{recv_t}.{m}(...)` runs a PyTorch kernel inside the extension; compute it in your own kernel"),
            );
        }
    }
}

// ---------------------------------------------------------------- registry entries

pub(crate) const KG601: RuleMeta = RuleMeta {
    code: "KG601",
    name: "cpp-torch-op",
    severity: Error,
    summary: "A PyTorch/ATen compute op runs inside the C++/CUDA extension",
    error_when: "the extension provably does no custom work `forward` uses: no exported function `forward` calls launches a working kernel, and every call on the forward path resolved",
    warn_when: "custom code provably runs next to it (partial replacement), or it is not proven that none does (an unresolved call on the forward path, a kernel handed on as a value); the runtime op audit decides",
    doc: "The extension's host code calls an ATen or `torch::` compute op (`at::matmul`, `torch::relu`, `at::native::*`, `at::_ops::mm::call`, `x.matmul(y)`, `x.sum()`, tensor arithmetic such as `x * 0.5` or `y += x`, `torch::nn::Linear`, a `namespace F = torch::nn::functional` alias, or the dispatcher: `c10::Dispatcher::singleton().findSchemaOrThrow(\"aten::mm\", \"\")`), so PyTorch's kernel does the work and the speedup measured is PyTorch's. Allocation and metadata (`torch::empty`, `empty_like`, `zeros`, `x.size()`, `x.data_ptr<T>()`, `TORCH_CHECK`, `x.options()`, `at::cuda::getCurrentCUDAStream()`) are allowed. Compute the result in your own `__global__` kernel. Small glue on a result the extension's own kernel already reduced (`torch::sqrt` of per-row sums) is a warning when the extension function launches a working kernel: see KG101.",
    bad: "torch::Tensor run(torch::Tensor a, torch::Tensor b) {\n    return at::matmul(a, b);\n}",
    good: "torch::Tensor run(torch::Tensor a, torch::Tensor b) {\n    auto c = torch::empty({a.size(0), b.size(1)}, a.options());\n    matmul_kernel<<<grid, block, 0, at::cuda::getCurrentCUDAStream()>>>(...);\n    return c;\n}",
};

pub(crate) const KG602: RuleMeta = RuleMeta {
    code: "KG602",
    name: "cpp-vendor-library",
    severity: Error,
    summary: "The extension calls cuBLAS, cuDNN or another vendor library",
    error_when: "whenever a vendor library is called (headers alone are not a finding)",
    warn_when: "never from its own analysis (`[lint] severity` can lower it per repository)",
    doc: "The C++/CUDA sources call a vendor library (`cublasSgemm`, `cublasHandle_t`, `cudnnConvolutionForward`, cuFFT, cuSPARSE, cuSOLVER, `cutlass::library`, `at::cuda::blas`, device-wide CUB and Thrust algorithms (`cub::DeviceReduce::Sum`, `thrust::transform`), and, when the declared backend is not CUTLASS/CuTe, CUTLASS's prebuilt device-level operators `cutlass::gemm::device::*`/`cutlass::conv::device::*`). The library's kernel does the work instead of the candidate's. An `#include <cublas_v2.h>` or `<cufft.h>` with nothing from it used is boilerplate, not a finding. Write the kernel yourself (CUTLASS/CuTe templates compiled into your own kernel are fine).",
    bad: "#include <cublas_v2.h>\ncublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, n, b, n, &zero, c, n);",
    good: "gemm_tiled<<<grid, block, 0, at::cuda::getCurrentCUDAStream()>>>(a, b, c, n);",
};
