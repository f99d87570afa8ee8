//! KG701 `changed-work`, KG702 `no-custom-kernel`, KG703 `missing-modelnew`: what the file
//! must and must not define.

use super::*;
use crate::rule::RuleMeta;
use kernelgate_model::Severity::{Error, Warning};

impl<'a, 'c> Checker<'a, 'c> {
    pub(super) fn changed_work(&mut self, r: std::ops::Range<usize>, msg: String) {
        self.push(Rule::KG701, r, msg);
    }

    /// No `class ModelNew` and no `ModelNew = ...`.
    pub(super) fn missing_model_new(&mut self) {
        self.push(
            Rule::KG703,
            0..0,
            "no `class ModelNew` in this file: the harness imports `ModelNew`",
        );
    }

    pub(super) fn check_inputs(&mut self) {
        let module = self.module;
        for s in &module.body {
            match s {
                Stmt::FunctionDef(f)
                    if matches!(f.name.as_str(), "get_inputs" | "get_init_inputs") =>
                {
                    self.changed_work(
                        range(&f.name),
                        format!("the candidate redefines `{}`: kernelgate uses the reference's, remove it", f.name),
                    );
                }
                Stmt::Assign(a) => {
                    for t in &a.targets {
                        if let Expr::Name(n) = t {
                            if SIZE_NAMES.contains(&n.id.as_str())
                                && matches!(
                                    a.value.as_ref(),
                                    Expr::NumberLiteral(_) | Expr::BinOp(_)
                                )
                            {
                                self.changed_work(
                                    range(t),
                                    format!("the candidate redefines the size constant `{}`: take sizes from the inputs", n.id),
                                );
                            }
                        }
                    }
                }
                _ => {}
            }
        }
    }

    /// The extension is called on the forward path only in branches the problem never takes
    /// (`if self.use_custom:` with `use_custom=False`, `if False:`): `forward` provably never
    /// launches the candidate's kernel, so the kernel is a decoy and PyTorch does the work.
    pub(super) fn custom_code_only_in_dead_branches(&mut self) {
        if !self.ext_calls.is_empty() || self.model.reach.forward_replaced {
            return;
        }
        let model = self.model;
        if model.reach.functions.iter().any(|(f, _)| self.gpu_dsl(f))
            || self
                .module
                .body
                .iter()
                .any(|s| matches!(s, Stmt::FunctionDef(f) if self.gpu_dsl(f)))
        {
            return;
        }
        let dead = model.reach.functions.iter().find_map(|(f, _)| {
            calls_in(&f.body)
                .into_iter()
                .find(|call| match call.func.as_ref() {
                    Expr::Attribute(a) => {
                        key_of(&a.value).is_some_and(|k| self.ext_objects.contains(&k))
                            || (model.names.qualify(&call.func).is_none()
                                && self.ext_functions.contains(a.attr.as_str()))
                    }
                    _ => false,
                })
        });
        if let Some(call) = dead {
            let shown = self.text(call.func.as_ref());
            let finding = RawFinding::new(
                Rule::KG702,
                range(call.func.as_ref()),
                format!("`forward` never launches the custom kernel: its only call (`{shown}`) is in a branch the problem never takes, so the kernel is a decoy and the speedup can only come from PyTorch"),
            );
            // "Never" is proven only when every call on the forward path resolved.
            self.out.push(match model.reach.unresolved.why() {
                Some(why) => {
                    finding.unproven(&format!("{why}, so the kernel may be launched through it"))
                }
                None => finding,
            });
        }
    }

    pub(super) fn check_custom_kernel(&mut self) {
        struct K<'x, 'a, 'c> {
            c: &'x Checker<'a, 'c>,
            cpp: bool,
            triton: bool,
            strings: String,
        }
        impl<'a> Visitor<'a> for K<'_, '_, '_> {
            fn visit_expr(&mut self, expr: &'a Expr) {
                match expr {
                    Expr::Call(call) if self.c.is_ext_builder(call) => self.cpp = true,
                    Expr::StringLiteral(s) if self.strings.len() < 1 << 20 => {
                        let v = s.value.to_str();
                        if v.contains("#include") || v.contains("__global__") {
                            self.strings.push_str(v);
                        }
                    }
                    _ => {}
                }
                visitor::walk_expr(self, expr);
            }
            fn visit_stmt(&mut self, stmt: &'a Stmt) {
                if let Stmt::FunctionDef(f) = stmt {
                    if f.decorator_list.iter().any(|d| {
                        let e = match &d.expression {
                            Expr::Call(c) => c.func.as_ref(),
                            e => e,
                        };
                        self.c
                            .model
                            .names
                            .qualify(e)
                            .is_some_and(|q| under(&q, "triton"))
                    }) {
                        self.triton = true;
                    }
                }
                visitor::walk_stmt(self, stmt);
            }
        }
        let mut k = K {
            c: self,
            cpp: false,
            triton: false,
            strings: String::new(),
        };
        for s in &self.module.body {
            k.visit_stmt(s);
        }
        let (cpp, triton, strings) = (k.cpp, k.triton, k.strings);
        let imported = |p: &str| {
            self.model
                .names
                .sites
                .iter()
                .any(|(path, _)| under(path, p))
        };
        let cute = imported("cutlass")
            || imported("cute")
            || strings.contains("cute/")
            || strings.contains("cutlass/");
        let tilelang = imported("tilelang");
        let tk = strings.contains("kittens");
        let other = imported("numba")
            || imported("cupy")
            || imported("warp")
            || imported("torch.cuda.jiterator");
        let any = cpp || triton || cute || tilelang || other;
        let missing = match self.ctx.backend {
            None => (!any).then_some("no custom kernel"),
            Some(Backend::Cuda | Backend::Cpp | Backend::Hip) => {
                (!cpp).then_some("no `load_inline`/`cpp_extension.load` extension")
            }
            // KG622 (triton.rs) reports a Triton backend without a kernel: one finding, the
            // more precise code.
            Some(Backend::Triton) => None,
            Some(Backend::Cute) => (!cute).then_some("no CUTLASS/CuTe kernel"),
            Some(Backend::Tilelang) => (!tilelang).then_some("no TileLang kernel"),
            Some(Backend::Thunderkittens) => (!tk).then_some("no ThunderKittens kernel"),
        };
        if let Some(what) = missing {
            let at = find_class(self.module, "ModelNew")
                .map(|c| range(&c.name))
                .unwrap_or(0..0);
            let backend = self
                .ctx
                .backend
                .map(|b| format!(" for backend `{b}`"))
                .unwrap_or_default();
            self.push(
                Rule::KG702,
                at,
                format!("{what}{backend}: the speedup can only come from PyTorch"),
            );
        }
    }
}

// ---------------------------------------------------------------- registry entries

pub(crate) const KG701: RuleMeta = RuleMeta {
    code: "KG701",
    name: "changed-work",
    severity: Warning,
    summary: "The candidate redefines get_inputs, get_init_inputs or size constants",
    error_when: "never by default (a warning rule)",
    warn_when: "always: the reference's inputs are used anyway",
    doc: "The candidate defines `get_inputs`/`get_init_inputs` or module-level size constants (`batch_size`, `dim`, `M`, ...). kernelgate always uses the reference's inputs, but a candidate that reads its own smaller sizes may do less work than the problem asks. Remove them and take sizes from the input tensors.",
    bad: "batch_size = 16\ndef get_inputs():\n    return [torch.randn(batch_size, 16)]",
    good: "def forward(self, x):\n    n = x.numel()",
};

pub(crate) const KG702: RuleMeta = RuleMeta {
    code: "KG702",
    name: "no-custom-kernel",
    severity: Error,
    summary: "No custom kernel is built or launched",
    error_when: "the file has no custom kernel (for its backend), or `forward`'s only extension calls are on branches the problem never takes and every call on the forward path resolved",
    warn_when: "the extension calls are on dead branches but a call on the forward path did not resolve: the kernel may be launched through it; the runtime op audit decides",
    doc: "The candidate has no kernel of its own: no `load_inline`/`cpp_extension.load`, no `@triton.jit`, no CUTLASS/CuTe, TileLang or ThunderKittens kernel — or none for the declared backend (a Triton backend without a `@triton.jit` kernel is reported once, as KG622) — or `forward` provably never launches it: its only extension calls are in branches the problem never takes (`if self.use_custom:` when `__init__` or `get_init_inputs()` makes it `False`). Without a kernel the speedup can only come from PyTorch, and the torch ops `forward` runs instead are errors too.",
    bad: "class ModelNew(nn.Module):\n    def forward(self, x):\n        return x.clamp_min(0)",
    good: "ext = load_inline(name='relu', cpp_sources=src, cuda_sources=cuda_src, functions=['relu'])",
};

pub(crate) const KG703: RuleMeta = RuleMeta {
    code: "KG703",
    name: "missing-modelnew",
    severity: Error,
    summary: "There is no `class ModelNew`",
    error_when: "whenever there is no `class ModelNew`",
    warn_when: "never from its own analysis (`[lint] severity` can lower it per repository)",
    doc: "A candidate must define `class ModelNew` at module level with the reference's constructor and `forward` signature; the harness imports it by that name.",
    bad: "class FastModel(nn.Module): ...",
    good: "class ModelNew(nn.Module): ...",
};
