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

    /// The KG403 finding for `msg` at `r`. A side stream joined back before the function
    /// returns lets nothing escape the timer if the join is right, so a warning: the runtime
    /// escaped-work check decides. Graphs stay errors. Creating a stream does nothing by
    /// itself; launching on it is judged where it happens.
    pub(super) fn side_stream_finding(&self, r: std::ops::Range<usize>, msg: String) -> RawFinding {
        let creates = msg.starts_with("a new") || msg.starts_with("an external");
        if !msg.contains("graph")
            && (self.joined.iter().any(|j| j.contains(&r.start))
                || (creates && !self.joined.is_empty()))
        {
            let msg = format!(
                "{msg}; it is joined back into the current stream before the function returns \
                 (`wait_stream`/`wait_event`/`synchronize`), so a warning: the runtime escaped-work \
                 check decides"
            );
            return RawFinding::new(Rule::KG403, r, msg).warning();
        }
        RawFinding::new(Rule::KG403, r, msg)
    }
}

// ---------------------------------------------------------------- registry entries

pub(crate) const KG403: RuleMeta = RuleMeta {
    code: "KG403",
    name: "side-stream",
    severity: Error,
    summary: "Work is launched on a non-default CUDA stream",
    doc: "`torch.cuda.Stream`, `torch.cuda.stream(...)`, `ExternalStream`, `set_stream` or a `stream=` argument other than the current stream moves work off the stream the timer records on, so the timed region misses it. A side stream that the same function joins back into the current stream before returning (`torch.cuda.current_stream().wait_stream(s)`, `.wait_event(e)` or `torch.cuda.synchronize()`) is a warning: nothing escapes the timer if the join is right, and the runtime escaped-work check decides. CUDA graphs stay errors. Launch on `torch.cuda.current_stream()`.",
    bad: "s = torch.cuda.Stream()\nwith torch.cuda.stream(s):\n    ext.run(x)",
    good: "ext.run(x)  # on the current stream",
};

pub(crate) const KG404: RuleMeta = RuleMeta {
    code: "KG404",
    name: "threads",
    severity: Error,
    summary: "Threads or processes finish work in the background",
    doc: "`threading`, `_thread`, `concurrent.futures`, `multiprocessing` (also `torch.multiprocessing`) and `asyncio` let `forward` return before the work is done, so the timer stops early. Compute synchronously on the current stream.",
    bad: "from concurrent.futures import ThreadPoolExecutor\npool = ThreadPoolExecutor(1)",
    good: "out = ext.run(x)",
};
