//! KG603 `cpp-side-stream` and KG605 `cpp-thread`: work launched where the timer does not see
//! it: a stream other than the caller's, host threads. Threads and stream-creating APIs are
//! names (`names::classify`); launches and their streams are judged here.

use crate::cpp::*;
use crate::rule::Rule;
use crate::rule::RuleMeta;
use kernelgate_model::Severity::Error;
use std::ops::Range;

impl<'t> Analyzer<'t> {
    /// Every KG603 finding of the analyzer is raised here.
    pub(in crate::cpp) fn side_stream(&mut self, range: Range<usize>, msg: String) {
        self.flag(Rule::KG603, range, msg);
    }

    /// Is this `<<<..., stream>>>` argument the current (or default) stream?
    pub(in crate::cpp) fn stream_ok(&self, n: Node<'t>, depth: u32) -> bool {
        if depth > 8 {
            return true;
        }
        let t = self.t(n).trim();
        match n.kind_fast() {
            "number_literal" => t == "0",
            "null" | "nullptr" => true,
            "identifier" => {
                if matches!(t, "NULL" | "nullptr" | "cudaStreamLegacy") || t == PLACEHOLDER {
                    return true;
                }
                if let Some(v) = self.state.inits.get(t) {
                    return self.stream_ok(*v, depth + 1);
                }
                if let Some(i) = self.cur {
                    if self.funcs[i].params.iter().any(|p| p.name == t) {
                        // A parameter: the caller's argument decides; stream creation is
                        // flagged where it happens.
                        return true;
                    }
                }
                if let Some(m) = self.macros.get(t) {
                    let b = m.body.trim();
                    return b == "0"
                        || b == "nullptr"
                        || b == "NULL"
                        || b.contains("getCurrentCUDAStream");
                }
                false
            }
            "call_expression" => {
                let Some(f) = n.field("function") else {
                    return false;
                };
                if f.kind_fast() == "field_expression" {
                    return f
                        .field("argument")
                        .is_some_and(|a| self.stream_ok(a, depth + 1));
                }
                let q = self.qualname(f).unwrap_or_default();
                match last_segment(&q) {
                    "getCurrentCUDAStream"
                    | "getDefaultCUDAStream"
                    | "current_stream"
                    | "getCurrentStream" => true,
                    // `reinterpret_cast<cudaStream_t>(handle)`: the handle decides (a parameter
                    // is the caller's, e.g. Python's `torch.cuda.current_stream().cuda_stream`).
                    "reinterpret_cast" | "static_cast" | "const_cast" | "bit_cast" => n
                        .field("arguments")
                        .and_then(|a| a.named_child(0))
                        .is_some_and(|a| self.stream_ok(a, depth + 1)),
                    // A helper of this extension that returns the caller's stream.
                    name => self
                        .funcs
                        .iter()
                        .any(|f| f.name == name && f.returns_current_stream),
                }
            }
            "field_expression" | "parenthesized_expression" | "cast_expression" => {
                let inner = n
                    .field("argument")
                    .or_else(|| n.field("value"))
                    .or_else(|| n.named_child(n.named_child_count().saturating_sub(1)));
                inner.is_some_and(|i| self.stream_ok(i, depth + 1))
            }
            _ => false,
        }
    }
}

/// `--default-stream per-thread` in the build flags.
pub(in crate::cpp) fn per_thread_stream_findings(
    src: &EmbeddedSource,
) -> Vec<(Rule, Range<usize>, String)> {
    src.per_thread_stream_flags
        .iter()
        .map(|r| (
            Rule::KG603,
            r.clone(),
            "`--default-stream per-thread` moves every launch off the stream the harness times (each host thread gets its own stream); remove the flag and launch on `at::cuda::getCurrentCUDAStream()`".into(),
        ))
        .collect()
}

impl<'t> Analyzer<'t> {
    /// `kernel<<<g, b, smem, stream>>>`: the fourth launch argument is the stream.
    pub(in crate::cpp) fn launch_stream(&mut self, kernel: &str, args: &[Node<'t>]) {
        if let Some(stream) = args.get(3) {
            if !self.stream_ok(*stream, 0) {
                self.side_stream(
                    stream.byte_range(),
                    format!("kernel `{kernel}` is launched on stream `{}`, not on `at::cuda::getCurrentCUDAStream()`: work on another stream escapes the harness's timing", self.t(*stream)),
                );
            }
        }
    }
}

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
