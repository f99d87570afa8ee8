//! TODO

use crate::rule::RuleMeta;
use kernelgate_model::Severity::Warning;

// ---------------------------------------------------------------- registry entries

pub(crate) const KG406: RuleMeta = RuleMeta {
    code: "KG406",
    name: "memoized-forward",
    severity: Warning,
    summary: "A function on the forward path is memoised",
    doc: "`functools.cache`/`lru_cache` on a function reachable from `ModelNew.forward` that calls other code of the file (so kernelgate cannot tell whether it returns outputs) returns stored results when called with the same (hashable) arguments; tensors hash by identity, so repeated inputs return stale outputs. Memoising `forward` or a function that launches kernels is an output cache (KG401); memoising a kernel build or a pure configuration helper is fine. Memoise only on dtypes, shapes of configuration or kernel parameters, and say so in a suppression.",
    bad: "@functools.lru_cache(None)\ndef plan(self, n):\n    return self._tiles(n)",
    good: "@functools.lru_cache(None)\ndef build(dtype):\n    return load_inline(name=f\"k_{dtype}\", cpp_sources=src, functions=[\"run\"])",
};
