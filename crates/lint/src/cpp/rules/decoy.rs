//! TODO

use crate::rule::RuleMeta;
use kernelgate_model::Severity::Error;

// ---------------------------------------------------------------- registry entries

pub(crate) const KG611: RuleMeta = RuleMeta {
    code: "KG611",
    name: "cpp-decoy-kernel",
    severity: Error,
    summary: "A `__global__` kernel is never launched",
    doc: "A `__global__` kernel is defined but never launched (`<<<...>>>`, `cudaLaunchKernel`, or a macro that expands to a launch) from host code reachable from the functions exported in `functions=[...]` / `PYBIND11_MODULE`, or is launched only on an empty grid or block (`<<<0, 256>>>`) or in dead code (`if (0)`, `#if 0`), or stores through none of its parameters (no store, atomic or call that could store), so it does no work. A decoy kernel makes the file look custom while something else does the work. Launch the kernel, or delete it.",
    bad: "__global__ void relu_kernel(...) { ... }\ntorch::Tensor run(torch::Tensor x) { return x.clamp_min(0); }",
    good: "torch::Tensor run(torch::Tensor x) {\n    auto y = torch::empty_like(x);\n    relu_kernel<<<g, b, 0, stream>>>(...);\n    return y;\n}",
};

pub(crate) const KG612: RuleMeta = RuleMeta {
    code: "KG612",
    name: "cpp-no-kernel",
    severity: Error,
    summary: "The CUDA sources define no `__global__` kernel",
    doc: "An extension built with `cuda_sources=` (or `.cu` files) contains no `__global__` function at all, so no custom kernel can run: the host code only calls PyTorch or a library. CPU-only C++ via `cpp_sources=` alone is not affected, nor are sources that include CUTLASS/CuTe headers (their kernels are templates instantiated in the extension).",
    bad: "cuda_sources = \"torch::Tensor run(torch::Tensor x) { return torch::relu(x); }\"",
    good: "cuda_sources = \"__global__ void relu_kernel(...) {...}\\ntorch::Tensor run(torch::Tensor x) {...}\"",
};
