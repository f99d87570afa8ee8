//! KG603 `cpp-side-stream` and KG605 `cpp-thread`: work launched where the timer does not see
//! it: a stream other than the caller's, host threads. Threads and stream-creating APIs are
//! names (`names::classify`); launches and their streams are judged here.

use crate::cpp::*;
use crate::rule::Rule;
use crate::rule::RuleMeta;
use kernelgate_model::Severity::Error;
use std::ops::Range;

/// What a stream expression is, as far as the source shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::cpp) enum StreamKind {
    /// The caller's stream (or the legacy default stream) in some spelling.
    Current,
    /// Proven another stream: created (`cudaStreamCreate*`, `getStreamFromPool`), the
    /// per-thread stream, a constant handle, or a variable holding one of those.
    Side,
    /// Not traced either way. With a name: the value of a call of that function, which may
    /// be defined later in the source (resolved in `finish`).
    Unknown(Option<String>),
}

impl StreamKind {
    /// Two returns of one function: both must agree for the function to be known.
    pub(in crate::cpp) fn merge(self, other: StreamKind) -> StreamKind {
        match (self, other) {
            (StreamKind::Side, _) | (_, StreamKind::Side) => StreamKind::Side,
            (StreamKind::Current, StreamKind::Current) => StreamKind::Current,
            (StreamKind::Unknown(a), StreamKind::Unknown(b)) if a == b => StreamKind::Unknown(a),
            (StreamKind::Current, StreamKind::Unknown(h))
            | (StreamKind::Unknown(h), StreamKind::Current) => StreamKind::Unknown(h),
            _ => StreamKind::Unknown(None),
        }
    }
}

/// Calls that give the caller's stream.
fn current_stream_call(last: &str) -> bool {
    matches!(
        last,
        "getCurrentCUDAStream" | "getDefaultCUDAStream" | "current_stream" | "getCurrentStream"
    )
}

/// Calls that give a stream other than the caller's.
fn side_stream_call(last: &str) -> bool {
    matches!(last, "getStreamFromPool") || last.starts_with("cudaStreamCreate")
}

/// Names of stream variables created by address somewhere in the source
/// (`cudaStreamCreate(&s)`, `cuStreamCreate(&s, 0)`, also through a macro such as
/// `CAT(cudaStream, Create)(&s)`): `s` is a side stream wherever it is used.
pub(in crate::cpp) fn created_streams(root: Node, text: &str) -> HashSet<String> {
    let mut out = HashSet::default();
    if !text.contains("Create") {
        return out;
    }
    let mut stack = vec![root];
    while let Some(n) = stack.pop() {
        if n.kind_fast() == "call_expression" {
            let callee = n.field("function").map_or("", |f| &text[f.byte_range()]);
            if callee.contains("tream") && callee.contains("Create") {
                let arg0 = n.field("arguments").and_then(|a| a.named_child(0));
                if let Some(a) = arg0.filter(|a| a.kind_fast() == "pointer_expression") {
                    let mut x = a.field("argument");
                    // `&streams[i]`: the array. A field (`&cfg.stream`) is judged where it is
                    // used (`cfg.stream` is not traced: a warning).
                    while let Some(y) = x.filter(|y| y.kind_fast() != "identifier") {
                        x = match y.kind_fast() {
                            "subscript_expression" => y.field("argument"),
                            "parenthesized_expression" => y.named_child(0),
                            _ => None,
                        };
                    }
                    if let Some(id) = x {
                        out.insert(text[id.byte_range()].to_string());
                    }
                }
            }
        }
        let mut c = n.walk();
        stack.extend(n.children(&mut c));
    }
    out
}

impl<'t> Analyzer<'t> {
    /// Every KG603 finding of the analyzer is raised here.
    pub(in crate::cpp) fn side_stream(&mut self, range: Range<usize>, msg: String) {
        self.flag(Rule::KG603, range, msg);
    }

    /// Is this `<<<..., stream>>>` argument the current (or default) stream?
    pub(in crate::cpp) fn stream_ok(&self, n: Node<'t>, depth: u32) -> bool {
        self.stream_kind(n, depth) == StreamKind::Current
    }

    /// What the stream expression `n` is: the caller's, proven another, or not known.
    pub(in crate::cpp) fn stream_kind(&self, n: Node<'t>, depth: u32) -> StreamKind {
        if depth > 8 {
            return StreamKind::Unknown(None);
        }
        let t = self.t(n).trim();
        match n.kind_fast() {
            // `0` is the default stream; any other constant is a handle made up by the code
            // (`(cudaStream_t)0x2` is `cudaStreamPerThread`).
            "number_literal" if t == "0" => StreamKind::Current,
            "number_literal" => StreamKind::Side,
            "null" | "nullptr" => StreamKind::Current,
            "identifier" => {
                if matches!(t, "NULL" | "nullptr" | "cudaStreamLegacy") || t == PLACEHOLDER {
                    return StreamKind::Current;
                }
                if matches!(t, "cudaStreamPerThread" | "CU_STREAM_PER_THREAD") {
                    return StreamKind::Side;
                }
                let created = self.created_streams.contains(t);
                if let Some(v) = self.state.inits.get(t) {
                    // `cudaStream_t s = 0; cudaStreamCreate(&s);`: the creation wins.
                    let literal = matches!(v.kind_fast(), "number_literal" | "null" | "nullptr");
                    return if created && literal {
                        StreamKind::Side
                    } else {
                        self.stream_kind(*v, depth + 1)
                    };
                }
                if created {
                    return StreamKind::Side;
                }
                if let Some(i) = self.cur {
                    if self.funcs[i].params.iter().any(|p| p.name == t) {
                        // A parameter: the caller's argument decides; stream creation is
                        // flagged where it happens.
                        return StreamKind::Current;
                    }
                }
                if let Some(m) = self.macros.get(t) {
                    let b = m.body.trim();
                    if b == "0"
                        || b == "nullptr"
                        || b == "NULL"
                        || b.contains("getCurrentCUDAStream")
                    {
                        return StreamKind::Current;
                    }
                    if b.contains("getStreamFromPool")
                        || b.contains("cudaStreamPerThread")
                        || b.contains("StreamCreate")
                    {
                        return StreamKind::Side;
                    }
                }
                StreamKind::Unknown(None)
            }
            "call_expression" => {
                let Some(f) = n.field("function") else {
                    return StreamKind::Unknown(None);
                };
                if f.kind_fast() == "field_expression" {
                    // `s.stream()`, `cur.stream()`: the receiver decides.
                    return f.field("argument").map_or(StreamKind::Unknown(None), |a| {
                        self.stream_kind(a, depth + 1)
                    });
                }
                let q = self.qualname(f).unwrap_or_default();
                match last_segment(&q) {
                    name if current_stream_call(name) => StreamKind::Current,
                    name if side_stream_call(name) => StreamKind::Side,
                    // `reinterpret_cast<cudaStream_t>(handle)`: the handle decides (a parameter
                    // is the caller's, e.g. Python's `torch.cuda.current_stream().cuda_stream`).
                    "reinterpret_cast" | "static_cast" | "const_cast" | "bit_cast" => n
                        .field("arguments")
                        .and_then(|a| a.named_child(0))
                        .map_or(StreamKind::Unknown(None), |a| {
                            self.stream_kind(a, depth + 1)
                        }),
                    "" => StreamKind::Unknown(None),
                    // A helper: what it returns, if it is defined before here; else `finish`
                    // looks again once every function is seen.
                    name => self
                        .funcs
                        .iter()
                        .filter(|f| f.name == name)
                        .find_map(|f| f.ret_stream.clone())
                        .unwrap_or_else(|| StreamKind::Unknown(Some(name.to_string()))),
                }
            }
            "field_expression" | "parenthesized_expression" | "cast_expression" => {
                let inner = n
                    .field("argument")
                    .or_else(|| n.field("value"))
                    .or_else(|| n.named_child(n.named_child_count().saturating_sub(1)));
                inner.map_or(StreamKind::Unknown(None), |i| {
                    self.stream_kind(i, depth + 1)
                })
            }
            _ => StreamKind::Unknown(None),
        }
    }

    /// A launch, copy or graph launch on stream `s`: an error when `s` is proven another
    /// stream, a warning when it is not traced (`finish` looks again at helpers defined later).
    /// `what` is the start of the message (``kernel `k` is launched on``).
    pub(in crate::cpp) fn launch_on(&mut self, s: Node<'t>, what: &str) {
        let shown = self.t(s).to_string();
        match self.stream_kind(s, 0) {
            StreamKind::Current => {}
            StreamKind::Side => self.side_stream(s.byte_range(), side_msg(what, &shown)),
            StreamKind::Unknown(helper) => {
                self.pending_streams
                    .push((s.byte_range(), what.to_string(), shown, helper));
            }
        }
    }

    /// The launches on streams not traced while walking: helpers defined after their use are
    /// known now. Proven side streams are errors, the rest warnings.
    pub(in crate::cpp) fn judge_pending_streams(&mut self) {
        for (range, what, shown, helper) in std::mem::take(&mut self.pending_streams) {
            match helper.map_or(StreamKind::Unknown(None), |h| self.helper_stream(&h, 0)) {
                StreamKind::Current => {}
                StreamKind::Side => self.side_stream(range, side_msg(&what, &shown)),
                StreamKind::Unknown(_) => self.soft_findings.push((
                    Rule::KG603,
                    range,
                    format!("{what} stream `{shown}`, which the analysis could not trace to the caller's stream (`at::cuda::getCurrentCUDAStream()`) or to a side stream; a warning: make sure it is the caller's stream, work on another stream escapes the harness's timing"),
                )),
            }
        }
    }

    /// The stream a helper of this source returns, following helpers that return helpers.
    fn helper_stream(&self, name: &str, depth: u32) -> StreamKind {
        if depth > 4 {
            return StreamKind::Unknown(None);
        }
        let ret = self
            .funcs
            .iter()
            .filter(|f| f.name == name)
            .find_map(|f| f.ret_stream.clone());
        match ret {
            Some(StreamKind::Unknown(Some(h))) if h != name => self.helper_stream(&h, depth + 1),
            Some(k) => k,
            None => StreamKind::Unknown(None),
        }
    }
}

fn side_msg(what: &str, shown: &str) -> String {
    format!("{what} stream `{shown}`, not on `at::cuda::getCurrentCUDAStream()`: work on another stream escapes the harness's timing")
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
            self.launch_on(*stream, &format!("kernel `{kernel}` is launched on"));
        }
    }
}

// ---------------------------------------------------------------- registry entries

pub(crate) const KG603: RuleMeta = RuleMeta {
    code: "KG603",
    name: "cpp-side-stream",
    severity: Error,
    summary: "The extension launches work on a side stream",
    error_when: "a launch on a stream proven to be a side stream that is not joined back",
    warn_when: "the side stream is joined back with events before returning, or the stream comes from code the analysis cannot trace; the runtime leak check decides",
    doc: "The C++/CUDA creates or uses a stream other than PyTorch's current stream (`cudaStreamCreate*`, `getStreamFromPool`, `getStreamFromExternal`, `cudaStreamPerThread`, or a `<<<g, b, smem, stream>>>`, `cudaLaunchKernel`/`cuLaunchKernel`/`cudaGraphLaunch`/`cudaMemcpyAsync` stream argument or launch-config `.stream` that is not `0` or `at::cuda::getCurrentCUDAStream()`), also when spelled through a macro or `##`, or builds with `--default-stream per-thread` / `CUDA_API_PER_THREAD_DEFAULT_STREAM`. The harness times the current stream, so work elsewhere escapes the measurement. The caller's stream in any spelling is fine (`at::cuda::getCurrentCUDAStream()`, `c10::cuda::getCurrentCUDAStream().stream()`, a local holding it, or a helper of the same source that returns it, also one defined after its use). A launch is an error only on a stream proven to be another one (created with `cudaStreamCreate*`, taken from `getStreamFromPool`, `cudaStreamPerThread`, a constant handle, or a variable or helper holding one of those); a stream the analysis cannot trace (a helper whose body is not in the sources, a global set elsewhere) is a warning. Side streams that the same function joins back into the caller's stream with events (`cudaEventRecord` on the side stream, `cudaStreamWaitEvent` on the caller's) are a warning: nothing escapes the timer if the join is right, and the runtime leak check decides. Launch on `at::cuda::getCurrentCUDAStream()`.",
    bad: "cudaStream_t s;\ncudaStreamCreate(&s);\nk<<<g, b, 0, s>>>(x, y, n);",
    good: "k<<<g, b, 0, at::cuda::getCurrentCUDAStream()>>>(x, y, n);",
};

pub(crate) const KG605: RuleMeta = RuleMeta {
    code: "KG605",
    name: "cpp-thread",
    severity: Error,
    summary: "The extension starts a host thread",
    error_when: "whenever the extension starts a host thread",
    warn_when: "never from its own analysis (`[lint] severity` can lower it per repository)",
    doc: "The C++ starts a thread (`std::thread`, `std::jthread`, `std::async`, `pthread_create`). A call can return a placeholder while a background thread finishes the work after the harness stopped the clock. Do the work in the call, on the current stream (`at::parallel_for` is fine for CPU kernels).",
    bad: "std::thread([=] { k<<<g, b>>>(x, y, n); }).detach();\nreturn y;",
    good: "k<<<g, b, 0, at::cuda::getCurrentCUDAStream()>>>(x, y, n);\nreturn y;",
};
