//! KG406 `memoized-forward`: a live function memoised with `functools.cache`/`lru_cache` whose
//! calls do not show whether it returns outputs or configuration (one that computes outputs is
//! KG401).

use super::*;
use crate::rule::RuleMeta;
use kernelgate_model::Severity::Warning;

impl<'a, 'c> Checker<'a, 'c> {
    /// What a memoised function's calls say about what it returns.
    pub(super) fn memo_kind(&self, f: &StmtFunctionDef) -> Memo {
        self.memo_kind_at(f, 0)
    }

    pub(super) fn memo_kind_at(&self, f: &StmtFunctionDef, depth: u8) -> Memo {
        let calls = calls_in(&f.body);
        let mut kind = Memo::Config;
        for call in calls {
            if self.is_ext_builder(call) {
                continue;
            }
            match call.func.as_ref() {
                // kernel[grid](...)
                Expr::Subscript(_) => return Memo::Output,
                Expr::Attribute(a) => {
                    let m = a.attr.as_str();
                    if let Some(q) = self.model.names.qualify(&call.func) {
                        if torch_compute(&q) {
                            return Memo::Output;
                        }
                    } else if self.is_ext_call_target(&a.value, m) || tensor_compute_method(m) {
                        return Memo::Output;
                    } else if matches!(a.value.as_ref(), Expr::Name(n) if n.id.as_str() == "self") {
                        kind = Memo::Unknown;
                    }
                }
                Expr::Name(n) => {
                    if let Some(q) = self.model.names.qualify(&call.func) {
                        if torch_compute(&q) {
                            return Memo::Output;
                        }
                    } else if find_class(self.module, n.id.as_str()).is_some() {
                        kind = Memo::Unknown;
                    } else if let Some(g) = self.module.body.iter().rev().find_map(|s| match s {
                        Stmt::FunctionDef(d) if d.name.as_str() == n.id.as_str() => Some(d),
                        _ => None,
                    }) {
                        // A helper that launches makes the memoised function an output cache.
                        match (depth < 4).then(|| self.memo_kind_at(g, depth + 1)) {
                            Some(Memo::Output) => return Memo::Output,
                            Some(Memo::Config) => {}
                            _ => kind = Memo::Unknown,
                        }
                    }
                }
                _ => kind = Memo::Unknown,
            }
        }
        kind
    }
}

impl<'a, 'c> Checker<'a, 'c> {
    /// `@functools.lru_cache`/`@functools.cache` on a live function. Memoising what computes
    /// outputs is an output cache (KG401); memoising a kernel build or a launch configuration
    /// is fine; anything else is worth a look (KG406).
    pub(super) fn memoised(&mut self, f: &StmtFunctionDef) {
        for d in &f.decorator_list {
            let q = match &d.expression {
                Expr::Call(c) => self.model.names.qualify(&c.func),
                e => self.model.names.qualify(e),
            };
            if !q
                .as_deref()
                .is_some_and(|q| matches!(q, "functools.lru_cache" | "functools.cache"))
            {
                continue;
            }
            let entry = matches!(f.name.as_str(), "forward" | "__call__");
            match (entry, self.memo_kind(f)) {
                (true, _) | (_, Memo::Output) => self.output_cache(
                    range(d),
                    format!(
                        "`{}` is memoised and computes outputs: repeated inputs return stored results",
                        f.name
                    ),
                ),
                (false, Memo::Unknown) => self.push(
                    Rule::KG406,
                    range(d),
                    format!("`{}` is memoised: repeated inputs return stored outputs", f.name),
                ),
                (false, Memo::Config) => {}
            }
        }
    }
}

/// What a memoised function returns, judged by what it calls.
pub(super) enum Memo {
    /// It launches kernels or PyTorch ops: its results are outputs.
    Output,
    /// It builds extensions or computes configuration only.
    Config,
    /// It calls code of this file whose nature is not obvious.
    Unknown,
}

// ---------------------------------------------------------------- registry entries

pub(crate) const KG406: RuleMeta = RuleMeta {
    code: "KG406",
    name: "memoized-forward",
    severity: Warning,
    summary: "A function on the forward path is memoised",
    error_when: "never by default (a warning rule)",
    warn_when: "always: memoisation is a signal for review; the cache rules (KG401) catch results kept by input",
    doc: "`functools.cache`/`lru_cache` on a function reachable from `ModelNew.forward` that calls other code of the file (so kernelgate cannot tell whether it returns outputs) returns stored results when called with the same (hashable) arguments; tensors hash by identity, so repeated inputs return stale outputs. Memoising `forward` or a function that launches kernels is an output cache (KG401); memoising a kernel build or a pure configuration helper is fine. Memoise only on dtypes, shapes of configuration or kernel parameters, and say so in a suppression.",
    bad: "@functools.lru_cache(None)\ndef plan(self, n):\n    return self._tiles(n)",
    good: "@functools.lru_cache(None)\ndef build(dtype):\n    return load_inline(name=f\"k_{dtype}\", cpp_sources=src, functions=[\"run\"])",
};
