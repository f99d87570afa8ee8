//! KG201 `try-except-fallback`, KG202 `empty-forward`, KG203 `reference-bypass`, KG204
//! `dynamic-code`: a `ModelNew` that does not really run its own code, or hides what runs.

use super::*;
use crate::rule::RuleMeta;
use kernelgate_model::Severity::Error;

impl<'a, 'c> Checker<'a, 'c> {
    pub(super) fn is_reference(&self, e: &Expr) -> bool {
        match e {
            Expr::Name(n) => self.ref_names.contains(n.id.as_str()),
            Expr::Attribute(a) => a.attr.as_str() == "Model",
            // ModelNew = type("ModelNew", (Model,), {})
            Expr::Call(_) => {
                let mut uses = RefUses {
                    c: self,
                    hits: Vec::new(),
                };
                uses.visit_expr(e);
                !uses.hits.is_empty()
            }
            _ => false,
        }
    }

    pub(super) fn inherits_reference(&self, base: &Expr, seen: &mut HashSet<String>) -> bool {
        if self.is_reference(base) {
            return true;
        }
        if let Expr::Name(n) = base {
            if !seen.insert(n.id.to_string()) {
                return false;
            }
            if let Some(c) = find_class(self.module, n.id.as_str()) {
                return c.bases().iter().any(|b| self.inherits_reference(b, seen));
            }
        }
        false
    }

    /// A body with no call at all (KG202 reports `return x` there).
    pub(super) fn calls_nothing(&self, body: &[Stmt]) -> bool {
        let mut calls = CallCount(0);
        for s in body {
            calls.visit_stmt(s);
        }
        calls.0 == 0
    }

    pub(super) fn check_forward(&mut self, class: &'a ruff_python_ast::StmtClassDef) {
        let own = class.body.iter().rev().find_map(|s| match s {
            Stmt::FunctionDef(f) if f.name.as_str() == "forward" => Some(f),
            _ => None,
        });
        let Some(forward) = own else {
            let inherited = find_method(self.module, class, "forward").is_some();
            let from_reference = class
                .bases()
                .iter()
                .any(|b| self.inherits_reference(b, &mut HashSet::default()));
            let assigned = class.body.iter().any(|s| matches!(s, Stmt::Assign(a) if a.targets.iter().any(|t| matches!(t, Expr::Name(n) if n.id.as_str() == "forward"))));
            if !inherited && !from_reference && !assigned {
                self.empty_forward(
                    range(&class.name),
                    "`ModelNew` defines no `forward`: the base class's runs",
                );
            }
            return;
        };
        let body: Vec<&Stmt> = forward
            .body
            .iter()
            .enumerate()
            .filter(|(i, s)| {
                !(*i == 0 && matches!(s, Stmt::Expr(e) if e.value.is_string_literal_expr()))
            })
            .map(|(_, s)| s)
            .collect();
        let trivial = body.iter().all(|s| {
            matches!(s, Stmt::Pass(_)) || matches!(s, Stmt::Expr(e) if matches!(e.value.as_ref(), Expr::EllipsisLiteral(_)))
        });
        if trivial {
            self.empty_forward(
                range(&forward.name),
                "`forward` does nothing (`pass`/`...`): no output is computed",
            );
            return;
        }
        let params: HashSet<&str> = forward
            .parameters
            .iter()
            .map(|p| p.name().as_str())
            .filter(|n| *n != "self")
            .collect();
        let mut calls = CallCount(0);
        for s in &forward.body {
            calls.visit_stmt(s);
        }
        if calls.0 == 0 {
            let returns_input = body.iter().any(|s| {
                matches!(s, Stmt::Return(r) if r.value.as_deref().is_some_and(|v| matches!(v, Expr::Name(n) if params.contains(n.id.as_str()))))
            });
            let msg = if returns_input {
                "`forward` returns its input unchanged without calling any kernel"
            } else {
                "`forward` calls nothing, so no kernel can run: its output is stored or trivial"
            };
            self.empty_forward(range(&forward.name), msg);
        }
    }
}

impl<'a, 'c> Checker<'a, 'c> {
    pub(super) fn try_except(&mut self, r: std::ops::Range<usize>, msg: &str) {
        self.push(Rule::KG201, r, msg);
    }

    pub(super) fn empty_forward(&mut self, r: std::ops::Range<usize>, msg: &str) {
        self.push(Rule::KG202, r, msg);
    }

    pub(super) fn reference_bypass(&mut self, r: std::ops::Range<usize>, msg: &str) {
        self.push(Rule::KG203, r, msg);
    }

    pub(super) fn dynamic_code(&mut self, r: std::ops::Range<usize>, msg: impl Into<String>) {
        self.push(Rule::KG204, r, msg);
    }

    /// `try:` with handlers: a failing kernel can fall back silently.
    pub(super) fn try_statement(&mut self, t: &ruff_python_ast::StmtTry) {
        let s = usize::from(t.start());
        self.try_except(
            s..s + 3,
            "`try`/`except` can hide a failing kernel behind a fallback; let errors propagate",
        );
    }

    /// `with contextlib.suppress(...)`.
    pub(super) fn suppressing_context(&mut self, w: &ruff_python_ast::StmtWith) {
        for item in &w.items {
            if let Expr::Call(call) = &item.context_expr {
                if self.model.names.qualify(&call.func).as_deref() == Some("contextlib.suppress") {
                    self.try_except(
                        range(&item.context_expr),
                        "`contextlib.suppress` swallows a failing kernel's error",
                    );
                }
            }
        }
    }

    /// `getattr(module, name)` with a name built at run time.
    pub(super) fn dynamic_getattr(&mut self, call: &ExprCall) {
        let args = &call.arguments.args;
        if let Some(base) = self.model.names.qualify(&args[0]) {
            if self.model.names.fold_str(&args[1]).is_none() {
                self.dynamic_code(
                    range(call),
                    format!("`getattr` on module `{base}` with a name built at run time hides which function runs"),
                );
            }
        }
    }

    /// `__import__(name)` / `importlib.import_module(name)` with a name built at run time.
    pub(super) fn dynamic_import(&mut self, call: &ExprCall) {
        if call
            .arguments
            .args
            .first()
            .is_none_or(|a| self.model.names.fold_str(a).is_none())
        {
            self.dynamic_code(
                range(call),
                "importing a module whose name is built at run time hides what runs",
            );
        }
    }

    /// `ModelNew = Model` (or an alias of it): the module-level assignment to `ModelNew`, if
    /// any, reported when it names the reference.
    pub(super) fn model_new_alias(&mut self) -> Option<&'a ruff_python_ast::StmtAssign> {
        let alias = self.module.body.iter().rev().find_map(|s| match s {
            Stmt::Assign(a)
                if a.targets
                    .iter()
                    .any(|t| matches!(t, Expr::Name(n) if n.id.as_str() == "ModelNew")) =>
            {
                Some(a)
            }
            _ => None,
        });
        if let Some(a) = alias {
            if self.is_reference(&a.value) {
                self.reference_bypass(
                    range(a),
                    "`ModelNew` is the reference `Model`: the reference runs, not a kernel",
                );
            }
        }
        alias
    }

    /// `class ModelNew(Model)`, and any use of the reference class from ModelNew's body or
    /// its reachable code.
    pub(super) fn reference_uses(&mut self, class: &'a ruff_python_ast::StmtClassDef) {
        for base in class.bases() {
            if self.inherits_reference(base, &mut HashSet::default()) {
                self.reference_bypass(range(base), "`ModelNew` inherits from the reference `Model`: its PyTorch code runs instead of a kernel");
            }
        }
        let mut uses = RefUses {
            c: self,
            hits: Vec::new(),
        };
        for s in &class.body {
            uses.visit_stmt(s);
        }
        let class_range = range(class);
        let extra: Vec<&'a StmtFunctionDef> = self
            .model
            .reach
            .functions
            .iter()
            .map(|(f, _)| *f)
            .filter(|f| !class_range.contains(&usize::from(f.start())))
            .collect();
        for f in extra {
            for s in &f.body {
                uses.visit_stmt(s);
            }
        }
        let hits = uses.hits;
        for r in hits {
            self.reference_bypass(
                r,
                "`ModelNew` uses the reference `Model`: the reference's PyTorch code runs",
            );
        }
    }
}

impl<'a> LiveVisitor<'_, 'a, '_> {
    /// `return torch.empty_like(x)`: an output nothing wrote (stale memory, or the previous
    /// result the allocator hands back); `return torch.zeros(...)`: a trivial one. Not under
    /// `if x.numel() == 0:`, where an empty output is the answer.
    pub(super) fn unwritten_output(&mut self, stmt: &Stmt, r: &ruff_python_ast::StmtReturn) {
        if let Some(Expr::Call(c)) = r.value.as_deref() {
            let q = self.c.model.names.qualify(&c.func);
            let empty_input = self.under_empty_input_guard(usize::from(stmt.start()));
            match q.as_deref() {
                _ if empty_input => {}
                Some("torch.empty" | "torch.empty_like" | "torch.empty_strided") => {
                    self.c.empty_forward(range(c), "`forward` returns a fresh `torch.empty` that no kernel wrote: its contents are whatever the allocator left there");
                }
                Some(
                    "torch.zeros" | "torch.zeros_like" | "torch.ones" | "torch.ones_like"
                    | "torch.full" | "torch.full_like",
                ) => {
                    self.c.empty_forward(range(c), "`forward` returns a constant tensor that no kernel wrote: a trivial output that passes only a loose tolerance");
                }
                _ => {}
            }
        }
    }
}

/// `Model` and the module-level names that alias it through assignment chains.
pub(super) fn reference_names(module: &ModModule) -> HashSet<String> {
    let mut out: HashSet<String> = HashSet::default();
    out.insert("Model".to_string());
    loop {
        let before = out.len();
        for s in &module.body {
            if let Stmt::Assign(a) = s {
                let is_ref = match a.value.as_ref() {
                    Expr::Name(n) => out.contains(n.id.as_str()),
                    Expr::Attribute(at) => at.attr.as_str() == "Model",
                    _ => false,
                };
                if is_ref {
                    for t in &a.targets {
                        if let Expr::Name(n) = t {
                            if n.id.as_str() != "ModelNew" {
                                out.insert(n.id.to_string());
                            }
                        }
                    }
                }
            }
        }
        if out.len() == before {
            return out;
        }
    }
}

pub(super) struct CallCount(usize);
impl<'a> Visitor<'a> for CallCount {
    fn visit_expr(&mut self, expr: &'a Expr) {
        if matches!(expr, Expr::Call(_)) {
            self.0 += 1;
        }
        visitor::walk_expr(self, expr);
    }
}

pub(super) struct RefUses<'x, 'a, 'c> {
    c: &'x Checker<'a, 'c>,
    hits: Vec<std::ops::Range<usize>>,
}
impl<'a> Visitor<'a> for RefUses<'_, '_, '_> {
    fn visit_expr(&mut self, expr: &'a Expr) {
        if let Expr::Name(n) = expr {
            if self.c.ref_names.contains(n.id.as_str()) && n.ctx.is_load() {
                self.hits.push(range(expr));
            }
        }
        if let Expr::Attribute(a) = expr {
            if a.attr.as_str() == "Model" && self.c.model.names.qualify(&a.value).is_some() {
                self.hits.push(range(expr));
                return;
            }
        }
        visitor::walk_expr(self, expr);
    }
}

// ---------------------------------------------------------------- registry entries

pub(crate) const KG201: RuleMeta = RuleMeta {
    code: "KG201",
    name: "try-except-fallback",
    severity: Error,
    summary: "try/except can silently fall back to PyTorch",
    error_when: "whenever a `try`/`except` is in the candidate outside `if __name__ == \"__main__\":`: the fallback hides which path ran",
    warn_when: "never from its own analysis (`[lint] severity` can lower it per repository)",
    doc: "A `try`/`except` in the candidate lets a failing kernel fall back to another path (usually PyTorch) without anyone noticing, so the gate would time and verify different code than the PR claims. Let errors propagate; the harness reports a crash with its message.",
    bad: "try:\n    out = ext.relu(x)\nexcept Exception:\n    out = torch.relu(x)",
    good: "out = ext.relu(x)",
};

pub(crate) const KG202: RuleMeta = RuleMeta {
    code: "KG202",
    name: "empty-forward",
    severity: Error,
    summary: "ModelNew.forward does nothing or is missing",
    error_when: "whenever `forward` is missing, empty, returns an input unchanged or an unwritten fresh tensor (outside an empty-input guard)",
    warn_when: "never from its own analysis (`[lint] severity` can lower it per repository)",
    doc: "`ModelNew.forward` is `pass`, `...`, only a docstring, returns an input unchanged, returns a fresh `torch.empty`/`zeros`/`ones`/`full` that no kernel wrote (outside an empty-input guard such as `if x.numel() == 0:`), or is not defined at all (then a base class's `forward` runs). A candidate must compute its output in its own `forward`.",
    bad: "class ModelNew(nn.Module):\n    def forward(self, x):\n        pass",
    good: "class ModelNew(nn.Module):\n    def forward(self, x):\n        return ext.relu(x)",
};

pub(crate) const KG203: RuleMeta = RuleMeta {
    code: "KG203",
    name: "reference-bypass",
    severity: Error,
    summary: "ModelNew reuses the reference Model",
    error_when: "whenever `ModelNew` inherits, aliases, instantiates or calls the reference `Model`",
    warn_when: "never from its own analysis (`[lint] severity` can lower it per repository)",
    doc: "`ModelNew` inherits from the reference `Model`, is an alias of it, instantiates it, or calls its `forward` (`Model.forward(self, x)`, `super().forward(x)` with `Model` as base). The reference's PyTorch code then runs instead of a kernel.",
    bad: "class ModelNew(Model):\n    pass",
    good: "class ModelNew(nn.Module):\n    def forward(self, x):\n        return ext.run(x)",
};

pub(crate) const KG204: RuleMeta = RuleMeta {
    code: "KG204",
    name: "dynamic-code",
    severity: Error,
    summary: "exec/eval/compile/__import__/dynamic getattr hides what runs",
    error_when: "whenever code or a module is chosen at run time: a hack by construction, nothing else to prove",
    warn_when: "never from its own analysis (`[lint] severity` can lower it per repository)",
    doc: "`exec`, `eval` and `compile` run code the linter cannot see, and so does loading another file's code (`importlib.util.spec_from_file_location`, `importlib.machinery`, `runpy`, `imp`); `__import__`, `importlib.import_module` and `getattr` on a module with a name built at run time hide which module or function is used. Write the import or the call plainly. (`getattr(torch, \"mat\" + \"mul\")` is folded and checked as the call it names.)",
    bad: "op = getattr(torch, name)\nexec(base64.b64decode(payload))",
    good: "import my_kernels\nout = my_kernels.run(x)",
};
