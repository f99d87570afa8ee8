//! KG405 `lazy-tensor`: tensor subclasses and op interception that can defer work until the
//! output is compared.

use super::*;
use crate::rule::RuleMeta;
use kernelgate_model::Severity::Error;

impl<'a, 'c> Checker<'a, 'c> {
    pub(super) fn lazy_tensor(&mut self, r: std::ops::Range<usize>, msg: impl Into<String>) {
        self.push(Rule::KG405, r, msg);
    }

    /// `type("Lazy", (torch.Tensor,), {...})`: a tensor subclass built without `class`.
    pub(super) fn tensor_subclass_by_type(&mut self, call: &ExprCall, q: Option<&str>) {
        let args = &call.arguments.args;
        if matches!(call.func.as_ref(), Expr::Name(n) if n.id.as_str() == "type")
            && q.is_none()
            && args.len() == 3
        {
            let bases: Vec<&Expr> = match &args[1] {
                Expr::Tuple(t) => t.elts.iter().collect(),
                other => vec![other],
            };
            if bases.iter().any(|b| {
                self.model.names.qualify(b).is_some_and(|q| {
                    matches!(
                        q.as_str(),
                        "torch.Tensor" | "torch._C.TensorBase" | "torch._C._TensorBase"
                    )
                })
            }) {
                self.lazy_tensor(
                    range(call),
                    "`type(...)` builds a `torch.Tensor` subclass: a lazy tensor can compute only when compared",
                );
            }
        }
    }

    /// `class Lazy(torch.Tensor)`, or a torch function/dispatch mode.
    pub(super) fn tensor_subclass_bases(&mut self, c: &ruff_python_ast::StmtClassDef) {
        for base in c.bases() {
            if let Some(q) = self.model.names.qualify(base) {
                if [
                    "torch.Tensor",
                    "torch._C.TensorBase",
                    "torch._C._TensorBase",
                ]
                .contains(&q.as_str())
                    || q.ends_with("TorchFunctionMode")
                    || q.ends_with("TorchDispatchMode")
                {
                    self.lazy_tensor(
                        range(base),
                        format!(
                            "`{}` subclasses `{q}`: a lazy tensor can compute only when compared",
                            c.name
                        ),
                    );
                }
            }
        }
    }

    /// `__torch_function__`/`__torch_dispatch__` intercept every PyTorch op.
    pub(super) fn torch_op_interception(&mut self, f: &StmtFunctionDef) {
        if matches!(f.name.as_str(), "__torch_function__" | "__torch_dispatch__") {
            self.lazy_tensor(
                range(&f.name),
                format!(
                    "`{}` intercepts PyTorch ops: a lazy tensor can compute only when compared",
                    f.name
                ),
            );
        }
    }

    /// `._make_subclass(...)` and friends. True when reported.
    pub(super) fn subclass_attribute(&mut self, a: &ruff_python_ast::ExprAttribute) -> bool {
        let attr = a.attr.as_str();
        if matches!(
            attr,
            "_make_subclass" | "_make_wrapper_subclass" | "as_subclass"
        ) {
            self.lazy_tensor(
                range(&a.attr),
                format!("`.{attr}` builds a tensor subclass that can defer work"),
            );
            return true;
        }
        false
    }
}

// ---------------------------------------------------------------- registry entries

pub(crate) const KG405: RuleMeta = RuleMeta {
    code: "KG405",
    name: "lazy-tensor",
    severity: Error,
    summary: "A torch.Tensor subclass or __torch_function__ defers work",
    error_when: "whenever a tensor subclass or `__torch_function__` can defer work",
    warn_when: "never from its own analysis (`[lint] severity` can lower it per repository)",
    doc: "A subclass of `torch.Tensor` (also built with `type(name, (torch.Tensor,), ...)`), `_make_subclass`, `_make_wrapper_subclass`, `as_subclass` or a `__torch_function__`/`__torch_dispatch__` override can return a placeholder that computes only when compared. Return plain tensors.",
    bad: "class Lazy(torch.Tensor):\n    def __torch_function__(cls, func, types, args=(), kwargs=None): ...",
    good: "return out  # a plain torch.Tensor",
};
