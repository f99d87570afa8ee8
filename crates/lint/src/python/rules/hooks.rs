//! KG307 `harness-hook`: the candidate registers something that runs inside PyTorch for the
//! whole process: a kernel for an `aten` operator (the reference `Model` and the harness's
//! checks then run the candidate's code, or its no-op), a dispatch or function mode entered
//! and never exited (it sees every op the harness runs), global module hooks, allocator hooks
//! and memory-history recorders. No honest kernel needs one in `forward`'s process; a custom op
//! in the candidate's own namespace (`torch.library.custom_op("mylib::fused", ...)`) is how an
//! honest kernel registers itself, and stays clean.
//!
//! The paths whose mere use is the finding (`torch._C._push_on_torch_dispatch_stack`, ...) are
//! in the banned table (`tables.rs`); here are the checks that read arguments: which namespace
//! a `torch.library` registration targets, and which `__enter__()` is never exited.

use super::*;
use crate::rule::RuleMeta;
use kernelgate_model::Severity::Error;

/// Operator namespaces that belong to PyTorch (and the libraries a reference may use): a
/// registration there replaces or wraps an op the reference and the harness run.
const PYTORCH_NAMESPACES: &[&str] = &[
    "aten",
    "prim",
    "prims",
    "c10d",
    "c10d_functional",
    "_c10d_functional",
    "_c10d_functional_autograd",
    "_dtensor",
    "quantized",
    "_quantized",
    "quantized_decomposed",
    "profiler",
    "inductor",
    "higher_order",
    "torchvision",
];

/// `torch.library` functions whose first argument names the operator (`"aten::relu"` or
/// `torch.ops.aten.relu.default`).
const OP_REGISTRATIONS: &[&str] = &[
    "impl",
    "impl_abstract",
    "define",
    "register_kernel",
    "register_fake",
    "register_autograd",
    "register_autocast",
    "register_torch_dispatch",
    "register_vmap",
    "custom_op",
    "triton_op",
];

impl<'a, 'c> Checker<'a, 'c> {
    fn harness_hook(&mut self, r: std::ops::Range<usize>, msg: String, proven: bool) {
        self.push(Rule::KG307, r.clone(), msg);
        if !proven {
            if let Some(last) = self.out.last_mut() {
                if last.code == Rule::KG307 && last.range == r {
                    last.severity = Some(kernelgate_model::Severity::Warning);
                }
            }
        }
    }

    /// `torch.library.Library("aten", "IMPL")`, `torch.library.impl("aten::relu", "CUDA")`,
    /// `torch.library.register_kernel(torch.ops.aten.relu.default, ...)`: a registration in a
    /// PyTorch namespace. A namespace the lint cannot read is a warning.
    pub(super) fn library_registration(&mut self, call: &ExprCall, q: &str) {
        let Some(f) = q.strip_prefix("torch.library.") else {
            return;
        };
        let first = call.arguments.args.first().or_else(|| {
            call.arguments
                .keywords
                .iter()
                .find(|k| {
                    k.arg
                        .as_ref()
                        .is_some_and(|a| matches!(a.as_str(), "ns" | "qualname" | "op" | "name"))
                })
                .map(|k| &k.value)
        });
        let Some(first) = first else { return };
        let ns = if matches!(f, "Library" | "_scoped_library") {
            match self.model.names.fold_str(first) {
                Some(ns) => Some(ns),
                None => {
                    self.harness_hook(
                        range(call.func.as_ref()),
                        format!("`{q}` opens an operator library whose namespace is not known statically: a PyTorch namespace (`aten`) would replace the ops the reference and the harness run; name your own namespace as a literal"),
                        false,
                    );
                    return;
                }
            }
        } else if OP_REGISTRATIONS.contains(&f) {
            match self.model.names.fold_str(first) {
                Some(name) => name.split_once("::").map(|(ns, _)| ns.to_string()),
                // `torch.ops.aten.relu.default` as an object.
                None => self
                    .model
                    .names
                    .qualify(first)
                    .and_then(|p| p.strip_prefix("torch.ops.").map(str::to_string))
                    .and_then(|p| p.split('.').next().map(str::to_string)),
            }
        } else {
            None
        };
        if let Some(ns) = ns.filter(|ns| PYTORCH_NAMESPACES.contains(&ns.as_str())) {
            self.harness_hook(
                range(call.func.as_ref()),
                format!("`{q}` registers code in PyTorch's `{ns}` namespace: the reference `Model` and the harness's checks would run it too; register a custom op in your own namespace (`torch.library.custom_op(\"mylib::op\", ...)`) and call it"),
                true,
            );
        }
    }

    /// `mode.__enter__()` on a dispatch or function mode with no `__exit__()` anywhere in the
    /// file: the mode stays on PyTorch's stack and sees every op the harness runs.
    pub(super) fn mode_entered(&mut self, call: &ExprCall) {
        let Expr::Attribute(a) = call.func.as_ref() else {
            return;
        };
        if a.attr.as_str() != "__enter__" || !call.arguments.is_empty() {
            return;
        }
        let recv = a.value.as_ref();
        let is_mode = match recv {
            Expr::Call(c) => self.constructs_mode(c),
            other => key_of(other).is_some_and(|k| self.mode_keys().contains(&k)),
        };
        if !is_mode {
            return;
        }
        let key = key_of(recv);
        let exited = key.as_ref().is_some_and(|k| self.exits().contains(k));
        if !exited {
            self.harness_hook(
                range(call.func.as_ref()),
                format!("`{}` enters a PyTorch dispatch/function mode and never exits it: it intercepts every op the harness and the reference run", self.text(call.func.as_ref())),
                true,
            );
        }
    }

    /// A call that builds a dispatch or function mode: a PyTorch `...Mode` class, or a class of
    /// the file derived from one.
    fn constructs_mode(&self, c: &ExprCall) -> bool {
        if let Some(q) = self.model.names.qualify(&c.func) {
            return under(&q, "torch") && q.ends_with("Mode");
        }
        match c.func.as_ref() {
            Expr::Name(n) => self.mode_class(n.id.as_str(), 0),
            _ => false,
        }
    }

    fn mode_class(&self, name: &str, depth: u8) -> bool {
        let Some(class) = find_class(self.module, name) else {
            return false;
        };
        depth < 8
            && class.bases().iter().any(|b| match self.model.names.qualify(b) {
                Some(q) => under(&q, "torch") && q.ends_with("Mode"),
                None => matches!(b, Expr::Name(n) if n.id.as_str() != name && self.mode_class(n.id.as_str(), depth + 1)),
            })
    }

    /// Names and `self.<attr>`s bound to a mode anywhere in the file.
    fn mode_keys(&self) -> HashSet<String> {
        let mut out = HashSet::default();
        struct M<'x, 'a, 'c> {
            c: &'x Checker<'a, 'c>,
            out: &'x mut HashSet<String>,
        }
        impl<'a> Visitor<'a> for M<'_, '_, '_> {
            fn visit_stmt(&mut self, stmt: &'a Stmt) {
                if let Stmt::Assign(a) = stmt {
                    if matches!(a.value.as_ref(), Expr::Call(c) if self.c.constructs_mode(c)) {
                        self.out.extend(a.targets.iter().filter_map(key_of));
                    }
                }
                visitor::walk_stmt(self, stmt);
            }
        }
        let mut m = M {
            c: self,
            out: &mut out,
        };
        for s in &self.module.body {
            m.visit_stmt(s);
        }
        out
    }

    /// Receivers of `__exit__(...)` calls anywhere in the file.
    fn exits(&self) -> HashSet<String> {
        calls_in(&self.module.body)
            .into_iter()
            .filter_map(|c| match c.func.as_ref() {
                Expr::Attribute(a) if a.attr.as_str() == "__exit__" => key_of(&a.value),
                _ => None,
            })
            .collect()
    }
}

// ---------------------------------------------------------------- registry entries

pub(crate) const KG307: RuleMeta = RuleMeta {
    code: "KG307",
    name: "harness-hook",
    severity: Error,
    summary: "The candidate hooks PyTorch's dispatcher, modules, allocator or profiler for the whole process",
    error_when: "the registration's target is proven to be PyTorch's (a literal `aten`/`prims`/... namespace, a dispatch mode pushed for good, a global hook)",
    warn_when: "a `torch.library.Library` whose namespace is not a literal: not proven to be PyTorch's",
    doc: "A registration in a PyTorch operator namespace (`torch.library.Library(\"aten\", \"IMPL\")`, `torch.library.impl(\"aten::relu\", \"CUDA\")` or `@torch.library.impl` on an aten op, `torch.library.register_kernel(\"aten::mm\", ...)`, also for `torch.ops.aten.mm.default`), a dispatch or function mode pushed for good (`mode.__enter__()` with no `__exit__()`, `torch._C._push_on_torch_dispatch_stack`, `torch._C._set_dispatch_mode`, `torch.overrides._push_mode`), global module hooks (`torch.nn.modules.module.register_module_forward_hook`), allocator hooks and settings (`torch._C._cuda_attach_out_of_memory_observer`, `torch.cuda.memory._set_allocator_settings`, `change_current_allocator`), memory-history recording (`torch.cuda.memory._record_memory_history`) or record-function switches run for the whole process: the reference `Model`, the correctness check and the timer then run the candidate's code (or its no-op) too. No honest kernel needs one. A custom op in the candidate's own namespace (`torch.library.Library(\"mylib\", \"DEF\")`, `torch.library.custom_op(\"mylib::fused\", ...)`) is how a kernel registers itself and is fine. A `torch.library.Library` whose namespace is not a literal is a warning.",
    bad: "lib = torch.library.Library(\"aten\", \"IMPL\")\nlib.impl(\"relu\", lambda x: ext.relu(x), \"CUDA\")",
    good: "@torch.library.custom_op(\"mylib::relu\", mutates_args=())\ndef relu(x: torch.Tensor) -> torch.Tensor:\n    return ext.relu(x)",
};
