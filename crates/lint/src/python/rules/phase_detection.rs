//! TODO

use crate::rule::RuleMeta;
use kernelgate_model::Severity::Error;

// ---------------------------------------------------------------- registry entries

pub(crate) const KG402: RuleMeta = RuleMeta {
    code: "KG402",
    name: "phase-detection",
    severity: Error,
    summary: "Behaviour depends on call counts, environment or argv",
    doc: "A counter kept in `self` or a global is incremented on the forward path and tested in a condition, or the forward path reads `os.environ`, `os.getenv`, `sys.argv` (directly, through an alias, or through a module-level name assigned from them) or a clock (`time.perf_counter()`). Counters include `next(self.calls)` on an `itertools.count()`, `self.n = getattr(self, \"n\", 0) + 1` class attributes (`ModelNew.calls += 1`), `nonlocal` closure variables, and helpers that bump a counter (`if _tick() > 3:`). Reseeding the random generator on the forward path (`torch.manual_seed`) counts too: it lets a candidate regenerate the harness's inputs. That lets a candidate behave during the correctness check and cheat while being timed. The same inputs must always take the same path.",
    bad: "def forward(self, x):\n    self.calls += 1\n    if self.calls > 5:\n        return self.out",
    good: "def forward(self, x):\n    return ext.run(x)",
};
