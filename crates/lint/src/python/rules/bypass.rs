//! TODO

use crate::rule::RuleMeta;
use kernelgate_model::Severity::Error;

// ---------------------------------------------------------------- registry entries

pub(crate) const KG201: RuleMeta = RuleMeta {
    code: "KG201",
    name: "try-except-fallback",
    severity: Error,
    summary: "try/except can silently fall back to PyTorch",
    doc: "A `try`/`except` in the candidate lets a failing kernel fall back to another path (usually PyTorch) without anyone noticing, so the gate would time and verify different code than the PR claims. Let errors propagate; the harness reports a crash with its message.",
    bad: "try:\n    out = ext.relu(x)\nexcept Exception:\n    out = torch.relu(x)",
    good: "out = ext.relu(x)",
};

pub(crate) const KG202: RuleMeta = RuleMeta {
    code: "KG202",
    name: "empty-forward",
    severity: Error,
    summary: "ModelNew.forward does nothing or is missing",
    doc: "`ModelNew.forward` is `pass`, `...`, only a docstring, returns an input unchanged, returns a fresh `torch.empty`/`zeros`/`ones`/`full` that no kernel wrote (outside an empty-input guard such as `if x.numel() == 0:`), or is not defined at all (then a base class's `forward` runs). A candidate must compute its output in its own `forward`.",
    bad: "class ModelNew(nn.Module):\n    def forward(self, x):\n        pass",
    good: "class ModelNew(nn.Module):\n    def forward(self, x):\n        return ext.relu(x)",
};

pub(crate) const KG203: RuleMeta = RuleMeta {
    code: "KG203",
    name: "reference-bypass",
    severity: Error,
    summary: "ModelNew reuses the reference Model",
    doc: "`ModelNew` inherits from the reference `Model`, is an alias of it, instantiates it, or calls its `forward` (`Model.forward(self, x)`, `super().forward(x)` with `Model` as base). The reference's PyTorch code then runs instead of a kernel.",
    bad: "class ModelNew(Model):\n    pass",
    good: "class ModelNew(nn.Module):\n    def forward(self, x):\n        return ext.run(x)",
};

pub(crate) const KG204: RuleMeta = RuleMeta {
    code: "KG204",
    name: "dynamic-code",
    severity: Error,
    summary: "exec/eval/compile/__import__/dynamic getattr hides what runs",
    doc: "`exec`, `eval` and `compile` run code the linter cannot see, and so does loading another file's code (`importlib.util.spec_from_file_location`, `importlib.machinery`, `runpy`, `imp`); `__import__`, `importlib.import_module` and `getattr` on a module with a name built at run time hide which module or function is used. Write the import or the call plainly. (`getattr(torch, \"mat\" + \"mul\")` is folded and checked as the call it names.)",
    bad: "op = getattr(torch, name)\nexec(base64.b64decode(payload))",
    good: "import my_kernels\nout = my_kernels.run(x)",
};
