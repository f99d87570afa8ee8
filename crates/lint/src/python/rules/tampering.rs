//! TODO

use crate::rule::RuleMeta;
use kernelgate_model::Severity::Error;

// ---------------------------------------------------------------- registry entries

pub(crate) const KG301: RuleMeta = RuleMeta {
    code: "KG301",
    name: "timer-tampering",
    severity: Error,
    summary: "Timing functions are replaced",
    doc: "The candidate assigns to, `setattr`s or deletes a timing function (`torch.cuda.Event.*`, `torch.cuda.synchronize`, `torch.cuda.Stream.*`, `time.*`, `timeit.*`), so a harness that times with them measures nothing. kernelgate times through the driver, but the attempt itself is a hack.",
    bad: "torch.cuda.Event.elapsed_time = lambda self, end: 0.01",
    good: "# measure with `kernelgate eval`; never patch timers",
};

pub(crate) const KG302: RuleMeta = RuleMeta {
    code: "KG302",
    name: "validation-tampering",
    severity: Error,
    summary: "Correctness checks are replaced",
    doc: "The candidate replaces a function the correctness check relies on (`torch.allclose`, `torch.equal`, `torch.isclose`, anything under `torch.testing`, `torch.Tensor` comparison methods) by assignment or `setattr`, so wrong outputs compare equal.",
    bad: "torch.allclose = lambda *a, **k: True",
    good: "# let the harness compare outputs",
};

pub(crate) const KG303: RuleMeta = RuleMeta {
    code: "KG303",
    name: "monkey-patch",
    severity: Error,
    summary: "A library function is monkey-patched",
    doc: "The candidate assigns to, `setattr`s or deletes an attribute of an imported module (`torch.matmul = ...`, `F.relu = ...`, `sys.stdout = ...`) or uses `unittest.mock.patch`. Patching shared modules changes what the reference and the harness run. Define your own function instead.",
    bad: "torch.nn.functional.gelu = my_fast_gelu",
    good: "def my_fast_gelu(x):\n    return ext.gelu(x)",
};
