//! Rules about the file rather than its code: KG000 (raised by `lint_file` for a syntax error
//! and by `unreadable_finding`) and KG900/KG901 (raised by `suppress.rs`, which parses the
//! `# kernelgate:` comments). Their registry entries live here, beside no checker of their own.

use crate::rule::RuleMeta;
use kernelgate_model::Severity::{Error, Warning};

pub(crate) const KG000: RuleMeta = RuleMeta {
    code: "KG000",
    name: "parse-error",
    severity: Error,
    summary: "The file is not valid Python, not UTF-8, or unreadable",
    error_when: "always: the file cannot be parsed, so nothing else could be checked",
    warn_when: "never from its own analysis (`[lint] severity` can lower it per repository)",
    doc: "The candidate could not be parsed, so no other rule could check it and the harness could not import it. Fix the syntax error at the reported position. A file that is not UTF-8 (the finding names the first invalid byte and its position) or that cannot be read at all gets this finding too, on its own row: the rest of the run proceeds. Save the file as UTF-8.",
    bad: "class ModelNew(nn.Module)\n    def forward(self, x):\n        return x",
    good: "class ModelNew(nn.Module):\n    def forward(self, x):\n        return kernel.run(x)",
};

pub(crate) const KG900: RuleMeta = RuleMeta {
    code: "KG900",
    name: "suppression-without-reason",
    severity: Error,
    summary: "A suppression has no reason",
    error_when: "whenever a suppression has no reason",
    warn_when: "never from its own analysis (`[lint] severity` can lower it per repository)",
    doc: "`# kernelgate: allow=CODE` must say why: `# kernelgate: allow=KG101 reason=\"...\"`. A suppression without a reason suppresses nothing and is itself an error, so every exception in a kernel is explained in the PR.",
    bad: "y = x @ w  # kernelgate: allow=KG103",
    good: "y = x @ w  # kernelgate: allow=KG103 reason=\"tiny 4x4 epilogue, measured 0.1%\"",
};

pub(crate) const KG901: RuleMeta = RuleMeta {
    code: "KG901",
    name: "unknown-suppression",
    severity: Warning,
    summary: "A suppression names an unknown rule or is malformed",
    error_when: "never by default (a warning rule)",
    warn_when: "always: the suppression names an unknown rule or is malformed",
    doc: "A `# kernelgate:` comment names a rule code that does not exist or cannot be read. Check the code with `kernelgate rule --all`.",
    bad: "# kernelgate: allow=KG999 reason=\"typo\"",
    good: "# kernelgate: allow=KG101 reason=\"...\"",
};
