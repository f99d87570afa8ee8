//! TODO

use crate::rule::RuleMeta;
use kernelgate_model::Severity::{Error, Warning};

// ---------------------------------------------------------------- registry entries

pub(crate) const KG701: RuleMeta = RuleMeta {
    code: "KG701",
    name: "changed-work",
    severity: Warning,
    summary: "The candidate redefines get_inputs, get_init_inputs or size constants",
    doc: "The candidate defines `get_inputs`/`get_init_inputs` or module-level size constants (`batch_size`, `dim`, `M`, ...). kernelgate always uses the reference's inputs, but a candidate that reads its own smaller sizes may do less work than the problem asks. Remove them and take sizes from the input tensors.",
    bad: "batch_size = 16\ndef get_inputs():\n    return [torch.randn(batch_size, 16)]",
    good: "def forward(self, x):\n    n = x.numel()",
};

pub(crate) const KG702: RuleMeta = RuleMeta {
    code: "KG702",
    name: "no-custom-kernel",
    severity: Error,
    summary: "No custom kernel is built or launched",
    doc: "The candidate has no kernel of its own: no `load_inline`/`cpp_extension.load`, no `@triton.jit`, no CUTLASS/CuTe, TileLang or ThunderKittens kernel — or none for the declared backend (a Triton backend without a `@triton.jit` kernel is reported once, as KG622). Without a kernel the speedup can only come from PyTorch.",
    bad: "class ModelNew(nn.Module):\n    def forward(self, x):\n        return x.clamp_min(0)",
    good: "ext = load_inline(name='relu', cpp_sources=src, cuda_sources=cuda_src, functions=['relu'])",
};

pub(crate) const KG703: RuleMeta = RuleMeta {
    code: "KG703",
    name: "missing-modelnew",
    severity: Error,
    summary: "There is no `class ModelNew`",
    doc: "A candidate must define `class ModelNew` at module level with the reference's constructor and `forward` signature; the harness imports it by that name.",
    bad: "class FastModel(nn.Module): ...",
    good: "class ModelNew(nn.Module): ...",
};
