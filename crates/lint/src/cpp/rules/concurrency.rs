//! TODO

use crate::rule::RuleMeta;
use kernelgate_model::Severity::Error;

// ---------------------------------------------------------------- registry entries

pub(crate) const KG603: RuleMeta = RuleMeta {
    code: "KG603",
    name: "cpp-side-stream",
    severity: Error,
    summary: "The extension launches work on a side stream",
    doc: "The C++/CUDA creates or uses a stream other than PyTorch's current stream (`cudaStreamCreate*`, `getStreamFromPool`, `getStreamFromExternal`, `cudaStreamPerThread`, or a `<<<g, b, smem, stream>>>`, `cudaLaunchKernel`/`cuLaunchKernel`/`cudaGraphLaunch`/`cudaMemcpyAsync` stream argument or launch-config `.stream` that is not `0` or `at::cuda::getCurrentCUDAStream()`), also when spelled through a macro or `##`, or builds with `--default-stream per-thread` / `CUDA_API_PER_THREAD_DEFAULT_STREAM`. The harness times the current stream, so work elsewhere escapes the measurement. The caller's stream in any spelling is fine (`at::cuda::getCurrentCUDAStream()`, `c10::cuda::getCurrentCUDAStream().stream()`, a local or helper holding it). Side streams that the same function joins back into the caller's stream with events (`cudaEventRecord` on the side stream, `cudaStreamWaitEvent` on the caller's) are a warning: nothing escapes the timer if the join is right, and the runtime leak check decides. Launch on `at::cuda::getCurrentCUDAStream()`.",
    bad: "cudaStream_t s;\ncudaStreamCreate(&s);\nk<<<g, b, 0, s>>>(x, y, n);",
    good: "k<<<g, b, 0, at::cuda::getCurrentCUDAStream()>>>(x, y, n);",
};

pub(crate) const KG605: RuleMeta = RuleMeta {
    code: "KG605",
    name: "cpp-thread",
    severity: Error,
    summary: "The extension starts a host thread",
    doc: "The C++ starts a thread (`std::thread`, `std::jthread`, `std::async`, `pthread_create`). A call can return a placeholder while a background thread finishes the work after the harness stopped the clock. Do the work in the call, on the current stream (`at::parallel_for` is fine for CPU kernels).",
    bad: "std::thread([=] { k<<<g, b>>>(x, y, n); }).detach();\nreturn y;",
    good: "k<<<g, b, 0, at::cuda::getCurrentCUDAStream()>>>(x, y, n);\nreturn y;",
};
