//! TODO

use crate::rule::RuleMeta;
use kernelgate_model::Severity::Error;

// ---------------------------------------------------------------- registry entries

pub(crate) const KG407: RuleMeta = RuleMeta {
    code: "KG407",
    name: "input-mutation",
    severity: Error,
    summary: "ModelNew.forward writes into one of its inputs",
    doc: "Code on the forward path modifies an input tensor or a view of one: an in-place method (`x.zero_()`, `x.copy_(out)`, `x.fill_(0)`, `x.add_(1)`), an item assignment (`x[...] = v`), `x.data = ...` or an augmented assignment (`x += y`), or `forward` returns an input or a view of it after calling a kernel (`ext.relu_(x); return x`). A mutated input can make a later reference run agree with a wrong answer, or hand the harness its own buffer back. Allocate an output (`torch.empty_like(x)`) and write there.",
    bad: "def forward(self, x):\n    out = ext.relu(x)\n    x.copy_(out)\n    return x",
    good: "def forward(self, x):\n    return ext.relu(x)",
};
