//! TODO

use crate::rule::RuleMeta;
use kernelgate_model::Severity::Error;

// ---------------------------------------------------------------- registry entries

pub(crate) const KG604: RuleMeta = RuleMeta {
    code: "KG604",
    name: "cpp-token-pasting",
    severity: Error,
    summary: "A macro builds an API name with `##`",
    doc: "A preprocessor macro pastes tokens (`##`) into the name of a CUDA, driver or library API (`CAT(cudaStream, Create)`). Honest kernels have no reason to hide an API name; it is how a banned call gets past a text search. Write the call out.",
    bad: "#define CAT(a, b) a##b\nCAT(cudaStream, Create)(&s);",
    good: "#define CHECK_CUDA(x) TORCH_CHECK(x.is_cuda(), #x \" must be a CUDA tensor\")",
};

pub(crate) const KG613: RuleMeta = RuleMeta {
    code: "KG613",
    name: "cpp-sandbox",
    severity: Error,
    summary: "The extension reaches outside the sandbox",
    doc: "The C++ runs processes or shells (`system`, `popen`, `fork`, `exec*`), loads libraries (`dlopen`, `dlsym`), reads or changes the environment (`getenv`, `setenv`, `putenv`), changes memory protection or files (`mprotect`, `ptrace`, `rename`, `chmod`), opens files for writing (`fopen(..., \"w\")`, `std::ofstream`), exits early (`_exit`, `quick_exit`, `exit(0)`) or prints result-like text (`printf(\"correct=True speedup=...\")`, `std::cout << \"speedup: ...\"`, raw `write(1, ...)`). A kernel needs none of this; it is how results get forged, phases detected and harnesses patched. Remove it.",
    bad: "system(\"pip install fastrelu\");\nFILE* f = fopen(\"/tmp/result.json\", \"w\");",
    good: "TORCH_CHECK(x.is_cuda(), \"x must be a CUDA tensor\");",
};

pub(crate) const KG614: RuleMeta = RuleMeta {
    code: "KG614",
    name: "cpp-timer-tampering",
    severity: Error,
    summary: "The extension defines a CUDA or clock API function, or reads the clock",
    doc: "The C++ defines a function named like a CUDA runtime/driver API or a clock (`cudaEventElapsedTime`, `cuEventRecord`, `clock_gettime`, `dlsym`), which interposes the symbol the timer relies on; or its kernels or host code read the clock (`clock64()`, `%globaltimer` in inline PTX, `std::chrono::steady_clock`, `clock_gettime`), which lets a kernel tell timed calls from checked ones; or it registers kernels for PyTorch's own operators (`TORCH_LIBRARY_IMPL(aten, CUDA, m)`) or changes PyTorch's global settings (`at::globalContext().setAllowTF32CuBLAS(true)`), which the reference runs under too. kernelgate times through the driver from Rust, but interposition and timing-dependent behaviour are tampering by construction. Give your functions your own names and do not read clocks.",
    bad: "extern \"C\" cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t a, cudaEvent_t b) { *ms = 0.001f; return cudaSuccess; }",
    good: "torch::Tensor relu_cuda(torch::Tensor x);",
};
