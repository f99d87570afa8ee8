//! TODO

use crate::rule::RuleMeta;
use kernelgate_model::Severity::Error;

// ---------------------------------------------------------------- registry entries

pub(crate) const KG405: RuleMeta = RuleMeta {
    code: "KG405",
    name: "lazy-tensor",
    severity: Error,
    summary: "A torch.Tensor subclass or __torch_function__ defers work",
    doc: "A subclass of `torch.Tensor` (also built with `type(name, (torch.Tensor,), ...)`), `_make_subclass`, `_make_wrapper_subclass`, `as_subclass` or a `__torch_function__`/`__torch_dispatch__` override can return a placeholder that computes only when compared. Return plain tensors.",
    bad: "class Lazy(torch.Tensor):\n    def __torch_function__(cls, func, types, args=(), kwargs=None): ...",
    good: "return out  # a plain torch.Tensor",
};
