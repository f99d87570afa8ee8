//! KG403 `side-stream` and KG404 `threads`: work launched where the timer does not see it.
//! Most spellings are module paths in the banned table (`tables.rs`); here are the `stream=`
//! keyword and the joins that turn a side stream into a warning.

use super::*;
use crate::rule::RuleMeta;
use kernelgate_model::Severity::Error;

impl<'a, 'c> Checker<'a, 'c> {
    /// Whether `f` makes the current stream wait for other streams (or the whole device)
    /// before it returns: side-stream work then ends inside the timed region.
    pub(super) fn joins_current_stream(&self, f: &StmtFunctionDef) -> bool {
        struct J<'x, 'a, 'c> {
            c: &'x Checker<'a, 'c>,
            /// Locals bound to the current stream (`main = torch.cuda.current_stream()`).
            current: HashSet<String>,
            found: bool,
        }
        impl<'a> Visitor<'a> for J<'_, '_, '_> {
            fn visit_stmt(&mut self, stmt: &'a Stmt) {
                if let Stmt::Assign(a) = stmt {
                    if self.c.is_current_stream_call(&a.value) {
                        for t in &a.targets {
                            if let Expr::Name(n) = t {
                                self.current.insert(n.id.to_string());
                            }
                        }
                    }
                }
                visitor::walk_stmt(self, stmt);
            }
            fn visit_expr(&mut self, expr: &'a Expr) {
                if let Expr::Call(call) = expr {
                    match &*call.func {
                        Expr::Attribute(a)
                            if matches!(a.attr.as_str(), "wait_stream" | "wait_event") =>
                        {
                            let on_current = self.c.is_current_stream_call(&a.value)
                                || matches!(&*a.value, Expr::Name(n) if self.current.contains(n.id.as_str()));
                            self.found |= on_current;
                        }
                        func => {
                            self.found |= self
                                .c
                                .model
                                .names
                                .qualify(func)
                                .is_some_and(|q| q == "torch.cuda.synchronize");
                        }
                    }
                }
                visitor::walk_expr(self, expr);
            }
        }
        let mut j = J {
            c: self,
            current: HashSet::default(),
            found: false,
        };
        for s in &f.body {
            j.visit_stmt(s);
        }
        j.found
    }

    /// A call of `torch.cuda.current_stream()` in any spelling.
    pub(super) fn is_current_stream_call(&self, e: &Expr) -> bool {
        matches!(e, Expr::Call(c) if self.model.names.qualify(&c.func).is_some_and(|q| {
            q.ends_with("current_stream") || q.ends_with("getCurrentStream")
        }))
    }

    /// `None`, `0`, `torch.cuda.current_stream()` and its `.cuda_stream`.
    pub(super) fn current_stream(&self, e: &Expr) -> bool {
        match e {
            Expr::NoneLiteral(_) => true,
            Expr::NumberLiteral(n) => n.value.as_int().and_then(|i| i.as_u64()) == Some(0),
            Expr::Attribute(a) if matches!(a.attr.as_str(), "cuda_stream" | "stream_id") => {
                self.current_stream(&a.value)
            }
            Expr::Call(c) => self.model.names.qualify(&c.func).is_some_and(|q| {
                q.ends_with("current_stream")
                    || q.ends_with("getCurrentStream")
                    || q.ends_with("current_raw_stream")
            }),
            Expr::Name(_) => {
                // A local holding the current stream is common (`stream = torch.cuda.current_stream()`).
                true
            }
            _ => false,
        }
    }
}

impl<'a, 'c> Checker<'a, 'c> {
    /// Reachable functions that join side streams back into the current stream before they
    /// return (`current_stream().wait_stream(s)`, `.wait_event(e)`, `torch.cuda.synchronize()`).
    pub(super) fn joining_functions(&self) -> Vec<std::ops::Range<usize>> {
        self.model
            .reach
            .functions
            .iter()
            .filter(|(f, _)| self.joins_current_stream(f))
            .map(|(f, _)| range(*f))
            .collect()
    }

    /// `stream=` keywords naming a stream other than the current one.
    pub(super) fn stream_keywords(&mut self, call: &ExprCall) {
        for kw in call.arguments.keywords.iter() {
            if kw.arg.as_ref().is_some_and(|a| a.as_str() == "stream")
                && !self.current_stream(&kw.value)
            {
                self.push(Rule::KG403, range(kw), "`stream=` launches on a stream other than the current one, outside the timed region");
            }
        }
    }

    /// The KG403 finding for `msg` at `r`, or none. A switch to the stream that is already
    /// current (`torch.cuda.stream(torch.cuda.current_stream())`, `torch.cuda.stream(None)`) is
    /// no switch: no finding; to `torch.cuda.default_stream()` it is a warning (the harness times
    /// on the current stream, which is the default one unless its caller switched). CUDA graphs
    /// replay on the current stream: a warning, the runtime leak check decides (a replay that
    /// never refreshes the captured inputs is KG401, see [`Self::stale_graph_replays`]). A side
    /// stream joined back before the function returns lets nothing escape the timer if the join
    /// is right, so a warning: the runtime escaped-work check decides. Creating a stream does
    /// nothing by itself; launching on it is judged where it happens. An explicitly created side
    /// stream that is never joined stays an error.
    pub(super) fn side_stream_finding(
        &self,
        r: std::ops::Range<usize>,
        msg: String,
    ) -> Option<RawFinding> {
        match self.no_switch.get(&r.start) {
            Some(StreamArg::Current) => return None,
            Some(StreamArg::Default) => {
                let msg = format!(
                    "{msg}: it switches to `torch.cuda.default_stream()`, which is the stream the \
                     harness times on unless its caller switched, so a warning: launch on \
                     `torch.cuda.current_stream()` to say so"
                );
                return Some(RawFinding::new(Rule::KG403, r, msg).warning());
            }
            None => {}
        }
        if msg.contains("graph") {
            let msg = format!(
                "{msg}; it replays on the current stream, so a warning: the runtime leak check \
                 decides (a capture or replay inside a side stream's `with` is judged there)"
            );
            return Some(RawFinding::new(Rule::KG403, r, msg).warning());
        }
        let creates = msg.starts_with("a new") || msg.starts_with("an external");
        if self.joined.iter().any(|j| j.contains(&r.start)) || (creates && !self.joined.is_empty())
        {
            let msg = format!(
                "{msg}; it is joined back into the current stream before the function returns \
                 (`wait_stream`/`wait_event`/`synchronize`), so a warning: the runtime escaped-work \
                 check decides"
            );
            return Some(RawFinding::new(Rule::KG403, r, msg).warning());
        }
        Some(RawFinding::new(Rule::KG403, r, msg))
    }

    /// Start offsets of the callee of every stream switch whose stream is proven to be the
    /// current one (`torch.cuda.stream(torch.cuda.current_stream())`, `s =
    /// torch.cuda.current_stream(); with torch.cuda.stream(s):`, `torch.cuda.stream(None)`) or
    /// the default one. A local counts when every assignment to it in its function is such a
    /// call; `self.<attr>` does not (a stream taken in `__init__` need not be current later).
    pub(super) fn current_stream_switches(&self) -> HashMap<usize, StreamArg> {
        struct V<'x, 'a, 'c> {
            c: &'x Checker<'a, 'c>,
            /// Per enclosing function: locals bound only to the current (or default) stream.
            locals: Vec<HashMap<String, StreamArg>>,
            out: HashMap<usize, StreamArg>,
        }
        impl<'a> Visitor<'a> for V<'_, '_, '_> {
            fn visit_stmt(&mut self, stmt: &'a Stmt) {
                if let Stmt::FunctionDef(f) = stmt {
                    let mut bound: HashMap<String, Option<StreamArg>> = HashMap::default();
                    let mut stores = StoreCollector::default();
                    for s in &f.body {
                        stores.visit_stmt(s);
                    }
                    for (name, value) in stores.assigned {
                        let kind = value.and_then(|v| self.c.stream_call_kind(v));
                        let e = bound.entry(name).or_insert(kind);
                        if *e != kind {
                            *e = None;
                        }
                    }
                    self.locals.push(
                        bound
                            .into_iter()
                            .filter_map(|(k, v)| v.map(|v| (k, v)))
                            .collect(),
                    );
                    visitor::walk_stmt(self, stmt);
                    self.locals.pop();
                    return;
                }
                visitor::walk_stmt(self, stmt);
            }
            fn visit_expr(&mut self, expr: &'a Expr) {
                if let Expr::Call(call) = expr {
                    let q = self.c.model.names.qualify(&call.func);
                    let switch = matches!(
                        q.as_deref(),
                        Some(
                            "torch.cuda.stream"
                                | "torch.cuda.set_stream"
                                | "torch.cuda.StreamContext"
                                | "torch.cuda.streams.StreamContext"
                        )
                    );
                    let arg = match (
                        call.arguments.args.as_ref(),
                        call.arguments.keywords.as_ref(),
                    ) {
                        ([a], []) => Some(a),
                        ([], [k]) if k.arg.as_ref().is_some_and(|n| n.as_str() == "stream") => {
                            Some(&k.value)
                        }
                        _ => None,
                    };
                    if let (true, Some(arg)) = (switch, arg) {
                        let kind = match arg {
                            Expr::NoneLiteral(_)
                                if q.as_deref() != Some("torch.cuda.set_stream") =>
                            {
                                Some(StreamArg::Current)
                            }
                            Expr::Name(n) => self
                                .locals
                                .last()
                                .and_then(|l| l.get(n.id.as_str()).copied()),
                            other => self.c.stream_call_kind(other),
                        };
                        if let Some(kind) = kind {
                            self.out.insert(usize::from(call.func.start()), kind);
                        }
                    }
                }
                visitor::walk_expr(self, expr);
            }
        }
        /// Every name a body assigns, with the value when it is a plain `name = value`.
        #[derive(Default)]
        struct StoreCollector<'a> {
            assigned: Vec<(String, Option<&'a Expr>)>,
        }
        impl<'a> Visitor<'a> for StoreCollector<'a> {
            fn visit_stmt(&mut self, stmt: &'a Stmt) {
                match stmt {
                    Stmt::FunctionDef(_) | Stmt::ClassDef(_) => return,
                    Stmt::Assign(a) if a.targets.len() == 1 => {
                        if let Expr::Name(n) = &a.targets[0] {
                            self.assigned.push((n.id.to_string(), Some(&a.value)));
                            self.visit_expr(&a.value);
                            return;
                        }
                    }
                    _ => {}
                }
                visitor::walk_stmt(self, stmt);
            }
            fn visit_expr(&mut self, expr: &'a Expr) {
                if let Expr::Name(n) = expr {
                    if n.ctx.is_store() || n.ctx.is_del() {
                        self.assigned.push((n.id.to_string(), None));
                    }
                }
                visitor::walk_expr(self, expr);
            }
        }
        let mut v = V {
            c: self,
            locals: Vec::new(),
            out: HashMap::default(),
        };
        for s in &self.module.body {
            v.visit_stmt(s);
        }
        v.out
    }

    /// `torch.cuda.current_stream(...)` or `torch.cuda.default_stream(...)`, in any spelling.
    fn stream_call_kind(&self, e: &Expr) -> Option<StreamArg> {
        let Expr::Call(c) = e else { return None };
        match self.model.names.qualify(&c.func)?.as_str() {
            "torch.cuda.current_stream" | "torch.cuda.streams.current_stream" => {
                Some(StreamArg::Current)
            }
            "torch.cuda.default_stream" => Some(StreamArg::Default),
            _ => None,
        }
    }

    /// KG401: a CUDA graph replayed on the forward path where nothing refreshes the buffers it
    /// captured. A graph bakes in the addresses of the tensors it read while capturing; unless
    /// this call's inputs are copied into them (`self.static_x.copy_(x)`) or the graph is
    /// captured again in the same call, `g.replay()` recomputes the captured call's result.
    pub(super) fn stale_graph_replays(&mut self) {
        let graphs = self.graph_objects();
        let mut hits = Vec::new();
        for (f, _) in &self.model.reach.functions {
            let mut replays: Vec<std::ops::Range<usize>> = Vec::new();
            let mut refreshed = false;
            for call in calls_in(&f.body) {
                if let Expr::Attribute(a) = call.func.as_ref() {
                    let on_graph = key_of(&a.value).is_some_and(|k| graphs.contains(&k));
                    if a.attr.as_str() == "replay" && on_graph && call.arguments.is_empty() {
                        replays.push(range(call.func.as_ref()));
                    }
                    refreshed |= a.attr.as_str() == "copy_";
                }
            }
            // A capture at the top of the function body runs on every call.
            let captures_each_call = f.body.iter().any(|s| {
                matches!(s, Stmt::With(w) if w.items.iter().any(|i| {
                    matches!(&i.context_expr, Expr::Call(c) if self.model.names.qualify(&c.func).as_deref() == Some("torch.cuda.graph"))
                }))
            });
            if !refreshed && !captures_each_call {
                hits.extend(replays);
            }
        }
        for r in hits {
            self.push(
                Rule::KG401,
                r,
                "replays a CUDA graph captured on an earlier call without copying this call's \
                 inputs into the captured buffers (`static_x.copy_(x)` before `replay()`): it \
                 returns the captured call's result",
            );
        }
    }

    /// Names and `self.<attr>`s bound to a `torch.cuda.CUDAGraph()` anywhere in the file.
    fn graph_objects(&self) -> HashSet<String> {
        struct G<'x, 'a, 'c> {
            c: &'x Checker<'a, 'c>,
            out: HashSet<String>,
        }
        impl<'a> Visitor<'a> for G<'_, '_, '_> {
            fn visit_stmt(&mut self, stmt: &'a Stmt) {
                if let Stmt::Assign(a) = stmt {
                    if let Expr::Call(c) = a.value.as_ref() {
                        if self.c.model.names.qualify(&c.func).as_deref()
                            == Some("torch.cuda.CUDAGraph")
                        {
                            self.out.extend(a.targets.iter().filter_map(key_of));
                        }
                    }
                }
                visitor::walk_stmt(self, stmt);
            }
        }
        let mut g = G {
            c: self,
            out: HashSet::default(),
        };
        for s in &self.module.body {
            g.visit_stmt(s);
        }
        g.out
    }
}

/// What a stream switch switches to, when it is proven.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum StreamArg {
    /// The stream that is already current, or `None` (a no-op).
    Current,
    /// `torch.cuda.default_stream()`.
    Default,
}

// ---------------------------------------------------------------- registry entries

pub(crate) const KG403: RuleMeta = RuleMeta {
    code: "KG403",
    name: "side-stream",
    severity: Error,
    summary: "Work is launched on a non-default CUDA stream",
    error_when: "a side stream created explicitly and never joined back into the current stream",
    warn_when: "the side stream is joined back before the function returns, the switch is to `torch.cuda.default_stream()`, or a CUDA graph replays (on the current stream); the runtime escaped-work check decides",
    doc: "`torch.cuda.Stream`, `torch.cuda.stream(...)`, `ExternalStream`, `set_stream` or a `stream=` argument other than the current stream moves work off the stream the timer records on, so the timed region misses it. A side stream that the same function joins back into the current stream before returning (`torch.cuda.current_stream().wait_stream(s)`, `.wait_event(e)` or `torch.cuda.synchronize()`) is a warning: nothing escapes the timer if the join is right, and the runtime escaped-work check decides. A switch to the stream that is already current (`torch.cuda.stream(torch.cuda.current_stream())`, also through a local `s = torch.cuda.current_stream()`, or `torch.cuda.stream(None)`) is no switch and no finding; one to `torch.cuda.default_stream()` is a warning. CUDA graphs (`torch.cuda.CUDAGraph()`, `torch.cuda.graph(g)`, `g.replay()`, `torch.cuda.make_graphed_callables`) replay on the current stream: a warning, and the runtime leak check decides (a replay that never copies the new inputs into the captured buffers is KG401). A side stream created explicitly and never joined back stays an error. Launch on `torch.cuda.current_stream()`.",
    bad: "s = torch.cuda.Stream()\nwith torch.cuda.stream(s):\n    ext.run(x)",
    good: "ext.run(x)  # on the current stream",
};

pub(crate) const KG404: RuleMeta = RuleMeta {
    code: "KG404",
    name: "threads",
    severity: Error,
    summary: "Threads or processes finish work in the background",
    error_when: "whenever threads or processes can finish work in the background",
    warn_when: "never from its own analysis (`[lint] severity` can lower it per repository)",
    doc: "`threading`, `_thread`, `concurrent.futures`, `multiprocessing` (also `torch.multiprocessing`) and `asyncio` let `forward` return before the work is done, so the timer stops early. Compute synchronously on the current stream.",
    bad: "from concurrent.futures import ThreadPoolExecutor\npool = ThreadPoolExecutor(1)",
    good: "out = ext.run(x)",
};
