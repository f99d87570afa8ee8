//! KG301 `timer-tampering`, KG302 `validation-tampering`, KG303 `monkey-patch`: replacing what
//! the harness or the reference relies on. Which rule a path falls under is `tables::tamper_rule`.

use super::*;
use crate::rule::RuleMeta;
use kernelgate_model::Severity::Error;

impl<'a, 'c> Checker<'a, 'c> {
    /// Assignment, `setattr` or `del` of a module attribute: the table (`tamper_rule`) says
    /// whether it replaces a timer (KG301), a correctness check (KG302) or anything else
    /// (KG303). `torch.backends` switches are precision, not tampering.
    pub(super) fn tamper(&mut self, path: &str, r: std::ops::Range<usize>, value: Option<&Expr>) {
        if under(path, "torch.backends") {
            self.tf32_backend_switch(path, r, value);
            return;
        }
        let code = tamper_rule(path);
        let what = match code {
            Rule::KG301 => "replaces a timing function",
            Rule::KG302 => "replaces a correctness check",
            _ => "monkey-patches a library attribute",
        };
        self.push(code, r, format!("{what}: `{path}`"));
    }

    /// `torch.backends.cuda.matmul.__setattr__("allow_tf32", True)`,
    /// `object.__setattr__(torch.cuda, "synchronize", f)`: setattr by another name.
    pub(super) fn setattr_by_another_name(&mut self, call: &ExprCall, q: Option<&str>) {
        let args = &call.arguments.args;
        if let Some(q) = q {
            let target = if let Some(base) = q
                .strip_suffix(".__setattr__")
                .or_else(|| q.strip_suffix(".__delattr__"))
            {
                args.first()
                    .and_then(|a| self.model.names.fold_str(a))
                    .map(|attr| (format!("{base}.{attr}"), args.get(1)))
            } else {
                None
            };
            if let Some((path, value)) = target {
                self.tamper(&path, range(call), value);
            }
        } else if let Expr::Attribute(a) = call.func.as_ref() {
            if matches!(a.attr.as_str(), "__setattr__" | "__delattr__")
                && matches!(a.value.as_ref(), Expr::Name(n) if n.id.as_str() == "object")
            {
                if let Some((base, attr)) = args
                    .first()
                    .and_then(|m| self.model.names.qualify(m))
                    .zip(args.get(1).and_then(|a| self.model.names.fold_str(a)))
                {
                    self.tamper(&format!("{base}.{attr}"), range(call), args.get(2));
                }
            }
        }
    }

    /// `setattr(module, name, value)` / `delattr(module, name)`.
    pub(super) fn setattr_call(&mut self, call: &ExprCall) {
        let args = &call.arguments.args;
        if let Some(base) = self.model.names.qualify(&args[0]) {
            match args.get(1).and_then(|a| self.model.names.fold_str(a)) {
                Some(attr) => {
                    let path = format!("{base}.{attr}");
                    self.tamper(&path, range(call), None);
                }
                None => self.push(
                    Rule::KG303,
                    range(call),
                    format!("`setattr` on module `{base}` with a computed name: monkey-patches a library function"),
                ),
            }
        }
    }
}

// ---------------------------------------------------------------- registry entries

pub(crate) const KG301: RuleMeta = RuleMeta {
    code: "KG301",
    name: "timer-tampering",
    severity: Error,
    summary: "Timing functions are replaced",
    error_when: "whenever a timing function is replaced: tampering by construction",
    warn_when: "never from its own analysis (`[lint] severity` can lower it per repository)",
    doc: "The candidate assigns to, `setattr`s or deletes a timing function (`torch.cuda.Event.*`, `torch.cuda.synchronize`, `torch.cuda.Stream.*`, `time.*`, `timeit.*`), so a harness that times with them measures nothing. kernelgate times through the driver, but the attempt itself is a hack.",
    bad: "torch.cuda.Event.elapsed_time = lambda self, end: 0.01",
    good: "# measure with `kernelgate eval`; never patch timers",
};

pub(crate) const KG302: RuleMeta = RuleMeta {
    code: "KG302",
    name: "validation-tampering",
    severity: Error,
    summary: "Correctness checks are replaced",
    error_when: "whenever a correctness function is replaced: tampering by construction",
    warn_when: "never from its own analysis (`[lint] severity` can lower it per repository)",
    doc: "The candidate replaces a function the correctness check relies on (`torch.allclose`, `torch.equal`, `torch.isclose`, anything under `torch.testing`, `torch.Tensor` comparison methods) by assignment or `setattr`, so wrong outputs compare equal.",
    bad: "torch.allclose = lambda *a, **k: True",
    good: "# let the harness compare outputs",
};

pub(crate) const KG303: RuleMeta = RuleMeta {
    code: "KG303",
    name: "monkey-patch",
    severity: Error,
    summary: "A library function is monkey-patched",
    error_when: "whenever an imported module's attribute is replaced or `mock.patch` is used",
    warn_when: "never from its own analysis (`[lint] severity` can lower it per repository)",
    doc: "The candidate assigns to, `setattr`s or deletes an attribute of an imported module (`torch.matmul = ...`, `F.relu = ...`, `sys.stdout = ...`) or uses `unittest.mock.patch`. Patching shared modules changes what the reference and the harness run. Define your own function instead.",
    bad: "torch.nn.functional.gelu = my_fast_gelu",
    good: "def my_fast_gelu(x):\n    return ext.gelu(x)",
};
