//! TODO

use crate::rule::RuleMeta;
use kernelgate_model::Severity::Error;

// ---------------------------------------------------------------- registry entries

pub(crate) const KG401: RuleMeta = RuleMeta {
    code: "KG401",
    name: "output-cache",
    severity: Error,
    summary: "Results are cached by tensor identity or shape",
    doc: "A container (also a default argument, a class attribute or a `weakref` dictionary) is indexed or probed with a key derived from `data_ptr()`, `id()`, `.shape`/`.size()`, `hash()` or a content fingerprint (`.tolist()`, `.item()`), an input's identity is compared with one stored from an earlier call (`x.data_ptr() == self.last_ptr`, `x is self.last_x`), a result computed from the inputs only when a stored attribute is unset is returned (`if self.out is None: self.out = ext.run(x)` ... `return self.out`), `forward` or a function that launches kernels is memoised with `functools.cache`/`lru_cache`, an input is kept in `self` across calls, or stored tensors are loaded from disk (`torch.load`, `numpy.load`, `pickle.load`). Returning a stored result for repeated inputs makes timing meaningless. Compute every call; cache only compiled kernels keyed by dtype or configuration.",
    bad: "_cache = {}\ndef forward(self, x):\n    key = x.data_ptr()\n    if key in _cache:\n        return _cache[key]",
    good: "def forward(self, x):\n    return ext.run(x)",
};
