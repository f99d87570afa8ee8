//! Triton rules (KG62x): `@triton.jit` / `@triton.autotune` kernels (under any alias) that are
//! never launched from code reachable from `ModelNew.forward`, reduced-precision dtypes inside
//! kernels on fp32 problems, and a Triton candidate without any kernel.

use crate::python::reach::find_class;
use crate::python::semantic::{qualname, ImportAliases, SemanticModel};
use crate::rule::{Context, RawFinding, Rule, RuleMeta};
use kernelgate_model::Severity::Error;
use kernelgate_model::{Backend, Precision};
use ruff_python_ast::visitor::{self, Visitor};
use ruff_python_ast::{Expr, ModModule, Stmt, StmtFunctionDef};
use ruff_text_size::Ranged;
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::ops::Range;

// ---------------------------------------------------------------- registry entries

pub(crate) const KG620: RuleMeta = RuleMeta {
    code: "KG620",
    name: "triton-decoy-kernel",
    severity: Error,
    summary: "A Triton kernel is never launched from ModelNew's code path",
    error_when: "the kernel is never launched and every call on the forward path resolved (`torch.ops` calls are followed to the file's own `torch.library` registrations), or it is launched on an empty grid, or it never stores",
    warn_when: "a call on the forward path did not resolve (a `torch.ops` op registered outside Python, a container, a wrapper's result, a callback...): the kernel may be launched through it; the runtime op audit decides",
    doc: "A `@triton.jit`/`@triton.autotune` kernel (under any alias) is defined but not launched (`kernel[grid](...)`) from code reachable from `ModelNew.forward`, or only on a dead branch such as `if False:`, or is launched on an empty grid (`kernel[(0,)]`), or never stores (no `tl.store`, atomic or jit helper that could). The kernel makes the file look custom while PyTorch does the work. Launch it from `forward` (directly or through helpers).",
    bad: "@triton.jit\ndef relu_kernel(...): ...\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return torch.relu(x)",
    good: "class ModelNew(nn.Module):\n    def forward(self, x):\n        y = torch.empty_like(x)\n        relu_kernel[grid](x, y, x.numel(), BLOCK=1024)\n        return y",
};

pub(crate) const KG621: RuleMeta = RuleMeta {
    code: "KG621",
    name: "triton-precision-downgrade",
    severity: Error,
    summary: "A Triton kernel computes in fp16/bf16/TF32 on an fp32 problem",
    error_when: "the cast is in a kernel `forward` launches, outside the kernel's own branches, or the reduced dtype is passed on a launch the forward path reaches off undecided branches",
    warn_when: "the cast is on a branch inside the kernel (a constexpr the analysis does not evaluate), in a kernel not proven to be launched, or on a launch not proven to run; the runtime checks decide",
    doc: "Inside a Triton kernel, values are cast to `tl.float16`/`tl.bfloat16`/fp8, or `tl.dot` is asked for TF32 (`allow_tf32=True`, `input_precision=\"tf32\"`), or a reduced dtype is passed to the kernel as a launch argument (`DT=tl.bfloat16`, or a module-level name bound to one), on an fp32 problem. It is faster but answers a different problem. Silent on fp16 and bf16 problems.",
    bad: "x = tl.load(x_ptr + offs, mask=mask).to(tl.float16)",
    good: "x = tl.load(x_ptr + offs, mask=mask)",
};

pub(crate) const KG622: RuleMeta = RuleMeta {
    code: "KG622",
    name: "triton-no-kernel",
    severity: Error,
    summary: "The backend is Triton but no `@triton.jit` kernel exists",
    error_when: "whenever the backend is Triton and no `@triton.jit` kernel exists",
    warn_when: "never from its own analysis (`[lint] severity` can lower it per repository)",
    doc: "The kernel's backend is Triton (from its mapping or `--backend triton`) but the file defines no `@triton.jit` function, so no Triton kernel can run. Write the kernel, or declare the right backend.",
    bad: "# kernelgate: backend=triton\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return torch.relu(x)",
    good: "@triton.jit\ndef relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr): ...",
};

/// A Triton kernel: its name, where the name is written, and its body (absent for
/// `k = triton.jit(fn)`).
struct Kernel<'a> {
    name: String,
    at: Range<usize>,
    def: Option<&'a StmtFunctionDef>,
}

fn is_triton_decorator(e: &Expr, aliases: &ImportAliases) -> bool {
    let target = match e {
        Expr::Call(c) => c.func.as_ref(),
        other => other,
    };
    let q = qualname(target, aliases).unwrap_or_default();
    matches!(
        q.as_str(),
        "triton.jit"
            | "triton.autotune"
            | "triton.heuristics"
            | "triton.runtime.jit.jit"
            | "triton.runtime.autotune"
    ) || q.ends_with("triton.jit")
}

fn kernels<'a>(module: &'a ModModule, aliases: &ImportAliases) -> Vec<Kernel<'a>> {
    struct V<'a, 'b> {
        aliases: &'b ImportAliases,
        out: Vec<Kernel<'a>>,
    }
    impl<'a> Visitor<'a> for V<'a, '_> {
        fn visit_stmt(&mut self, stmt: &'a Stmt) {
            match stmt {
                Stmt::FunctionDef(f)
                    if f.decorator_list
                        .iter()
                        .any(|d| is_triton_decorator(&d.expression, self.aliases)) =>
                {
                    self.out.push(Kernel {
                        name: f.name.to_string(),
                        at: f.name.range().start().to_usize()..f.name.range().end().to_usize(),
                        def: Some(f),
                    });
                    return;
                }
                // k = triton.jit(fn)
                Stmt::Assign(a) => {
                    if let (Expr::Call(c), [Expr::Name(n)]) =
                        (a.value.as_ref(), a.targets.as_slice())
                    {
                        if is_triton_decorator(&c.func, self.aliases) {
                            self.out.push(Kernel {
                                name: n.id.to_string(),
                                at: n.range().start().to_usize()..n.range().end().to_usize(),
                                def: None,
                            });
                        }
                    }
                }
                _ => {}
            }
            visitor::walk_stmt(self, stmt);
        }
    }
    let mut v = V {
        aliases,
        out: Vec::new(),
    };
    v.visit_body(&module.body);
    v.out
}

/// Runs the Triton rules on a candidate.
pub fn check_triton(module: &ModModule, ctx: &Context) -> Vec<RawFinding> {
    let model = SemanticModel::build(module, None, ctx.precision, ctx.source);
    check_triton_full(&model, ctx).findings
}

/// The Triton rules' findings, and whether `ModelNew.forward` reaches a Triton kernel that
/// does work (launched from live code on a non-empty grid, storing its results).
pub struct TritonOutput {
    pub findings: Vec<RawFinding>,
    pub working_kernel_launched: bool,
    /// The file defines a Triton kernel that can do work (it may store), launched or not:
    /// custom code a call the analysis could not resolve may reach.
    pub has_working_kernel: bool,
}

/// [`check_triton`] with what the torch-op rules need to know.
pub fn check_triton_full(model: &SemanticModel, ctx: &Context) -> TritonOutput {
    let (module, aliases) = (model.module, &model.imports);
    let ks = kernels(module, aliases);
    let mut out = Vec::new();
    let mut live: HashSet<String> = HashSet::default();
    if ks.is_empty() {
        if ctx.backend == Some(Backend::Triton) {
            out.push(RawFinding::new(
                Rule::KG622,
                0..0,
                "the backend is triton but the file defines no `@triton.jit` kernel: no custom kernel runs",
            ));
        }
        return TritonOutput {
            findings: out,
            working_kernel_launched: false,
            has_working_kernel: false,
        };
    }
    if find_class(module, "ModelNew").is_some() {
        // Live names in code reachable from ModelNew.forward; kernels launched there reach the
        // jit helpers they call (the reachability walk follows module-level functions).
        let r = &model.reach;
        let mut launched: HashSet<&str> = r.names.iter().map(|s| s.as_str()).collect();
        // `self.kernel = kernel` in __init__ then `self.kernel[grid](...)`.
        for a in &r.self_attrs {
            launched.insert(a.as_str());
        }
        // Kernels handed to a wrapper as values: `launch(kernel, ...)` are names too.
        let mut reported = HashSet::default();
        for k in &ks {
            let reached =
                launched.contains(k.name.as_str()) || self_bound(module, &k.name, &r.self_attrs);
            if reached {
                live.insert(k.name.clone());
            }
            if !reached && reported.insert(&k.name) {
                let finding = RawFinding::new(
                    Rule::KG620,
                    k.at.clone(),
                    format!(
                        "Triton kernel `{}` is never launched from code reachable from `ModelNew.forward` (or only on a dead branch): a kernel that does not run does no work",
                        k.name
                    ),
                );
                // "Never launched" is proven only when every call on the forward path resolved.
                out.push(match r.unresolved.why() {
                    Some(why) => finding
                        .unproven(&format!("{why}, so the kernel may be launched through it")),
                    None => finding,
                });
            }
        }
    }
    let names: HashSet<&str> = ks.iter().map(|k| k.name.as_str()).collect();
    let mut l = LaunchDtypes {
        aliases,
        kernels: &names,
        low_names: low_dtype_names(&module.body, aliases),
        hits: Vec::new(),
        launched: HashSet::default(),
        empty_grids: Vec::new(),
    };
    l.visit_body(&module.body);
    let empty: HashSet<String> = l.empty_grids.iter().map(|(_, k)| k.clone()).collect();
    let working_kernel_launched = ks.iter().any(|k| {
        live.contains(&k.name)
            && l.launched.contains(k.name.as_str())
            && !empty.contains(&k.name)
            && k.def.is_some_and(|d| may_store(&d.body, &names))
    });
    for (range, kernel) in std::mem::take(&mut l.empty_grids) {
        out.push(RawFinding::new(
            Rule::KG620,
            range,
            format!("Triton kernel `{kernel}` is launched on an empty grid: it runs no programs and does no work"),
        ));
    }
    // A launched kernel that never stores (no `tl.store`, no atomics, no other jit function
    // that could) does no work.
    for k in &ks {
        let Some(def) = k.def else { continue };
        if l.launched.contains(k.name.as_str()) && !may_store(&def.body, &names) {
            out.push(RawFinding::new(
                Rule::KG620,
                k.at.clone(),
                format!("Triton kernel `{}` is launched but never stores (`tl.store`, atomics): it does no work", k.name),
            ));
        }
    }
    if ctx.precision == Precision::Fp32 {
        let mut lines = HashSet::default();
        // A reduced dtype handed to a kernel as a launch argument (`DT=tl.bfloat16`, or a
        // module-level name bound to one) is a cast inside the kernel.
        // Proven to run: a launch in code `forward` reaches, outside branches the problem
        // never takes (and off branches of tests the analysis cannot decide), or a cast in a
        // kernel such a launch runs, outside the kernel's own branches (`if OUT_F16:` on a
        // constexpr the launch sets from the input's dtype).
        let reach = &model.reach;
        let has_model = find_class(module, "ModelNew").is_some();
        let launch_why = |at: usize| -> Option<String> {
            if !has_model {
                return None;
            }
            if !reach.functions.iter().any(|(f, _)| {
                (f.range().start().to_usize()..f.range().end().to_usize()).contains(&at)
            }) {
                return Some("the launch is in code `forward` is not proven to reach".to_string());
            }
            model.branches.undecided_tests(at).last().map(|t| {
                let test: String = ctx.source[t.clone()].split_whitespace().collect::<Vec<_>>().join(" ");
                format!("the launch is on a branch of `{test}`, which the analysis cannot decide for this problem")
            })
        };
        for (range, what, kernel) in std::mem::take(&mut l.hits) {
            if lines.insert(ctx.lines.line_of(range.start)) {
                let why = launch_why(range.start);
                let finding = RawFinding::new(
                    Rule::KG621,
                    range,
                    format!("`{what}` is passed to Triton kernel `{kernel}`: it computes in reduced precision on an fp32 problem"),
                );
                out.push(match why {
                    Some(why) => finding.unproven(&format!("{why}, so it is not proven to run")),
                    None => finding,
                });
            }
        }
        for k in ks.iter() {
            let Some(def) = k.def else { continue };
            let mut p = PrecisionFinder {
                aliases,
                hits: Vec::new(),
            };
            p.visit_body(&def.body);
            let branches = kernel_branches(&def.body);
            for (range, what) in p.hits {
                if lines.insert(ctx.lines.line_of(range.start)) {
                    let why = if has_model && !live.contains(&k.name) {
                        Some(format!(
                            "`{}` is not proven to be launched from `forward`",
                            k.name
                        ))
                    } else {
                        branches
                            .iter()
                            .rfind(|(body, _)| body.contains(&range.start))
                            .map(|(_, test)| {
                                let test: String = ctx.source[test.clone()].split_whitespace().collect::<Vec<_>>().join(" ");
                                format!("it is on the kernel's branch of `{test}` (a constexpr the analysis does not evaluate)")
                            })
                    };
                    let finding = RawFinding::new(
                        Rule::KG621,
                        range,
                        format!("`{what}` in Triton kernel `{}` computes in reduced precision on an fp32 problem", k.name),
                    );
                    out.push(match why {
                        Some(why) => finding.unproven(&format!(
                            "{why}, so it is not proven to run on this fp32 problem"
                        )),
                        None => finding,
                    });
                }
            }
        }
    }
    let has_working_kernel = ks
        .iter()
        .any(|k| k.def.is_some_and(|d| may_store(&d.body, &names)) && !empty.contains(&k.name));
    TritonOutput {
        findings: out,
        working_kernel_launched,
        has_working_kernel,
    }
}

/// The bodies of the branches inside a kernel (`if`/`elif`/`else`, `a if c else b`), each
/// with the test that chooses it: the kernel runs them only for some launches.
fn kernel_branches(body: &[Stmt]) -> Vec<(Range<usize>, Range<usize>)> {
    struct B(Vec<(Range<usize>, Range<usize>)>);
    fn r(n: &impl Ranged) -> Range<usize> {
        n.range().start().to_usize()..n.range().end().to_usize()
    }
    impl<'a> Visitor<'a> for B {
        fn visit_stmt(&mut self, stmt: &'a Stmt) {
            if let Stmt::If(i) = stmt {
                let test = r(i.test.as_ref());
                if let (Some(a), Some(b)) = (i.body.first(), i.body.last()) {
                    self.0.push((r(a).start..r(b).end, test.clone()));
                }
                for c in &i.elif_else_clauses {
                    let t = c.test.as_ref().map_or(test.clone(), r);
                    if let (Some(a), Some(b)) = (c.body.first(), c.body.last()) {
                        self.0.push((r(a).start..r(b).end, t));
                    }
                }
            }
            visitor::walk_stmt(self, stmt);
        }
        fn visit_expr(&mut self, expr: &'a Expr) {
            if let Expr::If(t) = expr {
                self.0.push((r(t.body.as_ref()), r(t.test.as_ref())));
                self.0.push((r(t.orelse.as_ref()), r(t.test.as_ref())));
            }
            visitor::walk_expr(self, expr);
        }
    }
    let mut b = B(Vec::new());
    b.visit_body(body);
    b.0
}

/// `self.<attr> = kernel` somewhere in ModelNew: a launch through `self.<attr>[grid]` counts.
fn self_bound(
    module: &ModModule,
    kernel: &str,
    self_attrs: &std::collections::BTreeSet<String>,
) -> bool {
    struct F<'k> {
        kernel: &'k str,
        attrs: Vec<String>,
    }
    impl<'a> Visitor<'a> for F<'_> {
        fn visit_stmt(&mut self, stmt: &'a Stmt) {
            if let Stmt::Assign(a) = stmt {
                if matches!(a.value.as_ref(), Expr::Name(n) if n.id.as_str() == self.kernel) {
                    for t in &a.targets {
                        if let Expr::Attribute(at) = t {
                            self.attrs.push(at.attr.to_string());
                        }
                    }
                }
            }
            visitor::walk_stmt(self, stmt);
        }
    }
    let Some(c) = find_class(module, "ModelNew") else {
        return false;
    };
    let mut f = F {
        kernel,
        attrs: Vec::new(),
    };
    f.visit_body(&c.body);
    f.attrs.iter().any(|a| self_attrs.contains(a))
}

/// The reduced-precision Triton dtype an expression names (`tl.float16`), if any.
fn low_dtype(e: &Expr, aliases: &ImportAliases) -> Option<String> {
    let Expr::Attribute(a) = e else { return None };
    let low = matches!(
        a.attr.as_str(),
        "float16" | "bfloat16" | "float8e4nv" | "float8e5" | "float8e4b15"
    );
    let q = qualname(e, aliases)?;
    (low && q.starts_with("triton.language")).then(|| q.replacen("triton.language", "tl", 1))
}

/// Module-level names bound to a reduced-precision Triton dtype (`LOW = tl.bfloat16`).
fn low_dtype_names(body: &[Stmt], aliases: &ImportAliases) -> HashMap<String, String> {
    let mut out = HashMap::default();
    for s in body {
        if let Stmt::Assign(a) = s {
            if let ([Expr::Name(n)], Some(d)) = (a.targets.as_slice(), low_dtype(&a.value, aliases))
            {
                out.insert(n.id.to_string(), d);
            }
        }
    }
    out
}

struct LaunchDtypes<'b> {
    aliases: &'b ImportAliases,
    kernels: &'b HashSet<&'b str>,
    low_names: HashMap<String, String>,
    hits: Vec<(Range<usize>, String, String)>,
    /// Kernels launched with `kernel[grid](...)` anywhere in the module.
    launched: HashSet<String>,
    /// `kernel[(0,)](...)`: grid range and kernel.
    empty_grids: Vec<(Range<usize>, String)>,
}

/// Whether a kernel body may store: `tl.store`, `tl.atomic_*`, any `*store*` call, or a call
/// of another jit function (which may store for it).
fn may_store(body: &[Stmt], kernels: &HashSet<&str>) -> bool {
    struct S<'k> {
        kernels: &'k HashSet<&'k str>,
        found: bool,
    }
    impl<'a> Visitor<'a> for S<'_> {
        fn visit_expr(&mut self, expr: &'a Expr) {
            if let Expr::Call(c) = expr {
                self.found |= match c.func.as_ref() {
                    Expr::Attribute(a) => {
                        let m = a.attr.as_str();
                        m.contains("store") || m.starts_with("atomic")
                    }
                    Expr::Name(n) => {
                        self.kernels.contains(n.id.as_str()) || n.id.as_str().contains("store")
                    }
                    _ => true,
                };
            }
            if !self.found {
                visitor::walk_expr(self, expr);
            }
        }
    }
    let mut s = S {
        kernels,
        found: false,
    };
    s.visit_body(body);
    s.found
}

impl<'a> Visitor<'a> for LaunchDtypes<'_> {
    fn visit_expr(&mut self, expr: &'a Expr) {
        if let Expr::Call(c) = expr {
            // `kernel[grid](...)`
            let kernel = match c.func.as_ref() {
                Expr::Subscript(s) => match s.value.as_ref() {
                    Expr::Name(n) if self.kernels.contains(n.id.as_str()) => Some(n.id.to_string()),
                    // `wrap_triton(kernel)[grid](...)` (`torch.library.triton_op`'s launch).
                    Expr::Call(w)
                        if qualname(&w.func, self.aliases).is_some_and(|q| {
                            q.ends_with("wrap_triton") || q.ends_with("capture_triton")
                        }) =>
                    {
                        match w.arguments.args.first() {
                            Some(Expr::Name(n)) if self.kernels.contains(n.id.as_str()) => {
                                Some(n.id.to_string())
                            }
                            _ => None,
                        }
                    }
                    _ => None,
                },
                _ => None,
            };
            if let (Some(kernel), Expr::Subscript(sub)) = (&kernel, c.func.as_ref()) {
                self.launched.insert(kernel.clone());
                let zero = |e: &Expr| matches!(e, Expr::NumberLiteral(n) if matches!(&n.value, ruff_python_ast::Number::Int(i) if i.as_u8() == Some(0)));
                let empty = match sub.slice.as_ref() {
                    Expr::Tuple(t) => t.elts.iter().any(zero),
                    other => zero(other),
                };
                if empty {
                    let r = sub.slice.range();
                    self.empty_grids
                        .push((r.start().to_usize()..r.end().to_usize(), kernel.clone()));
                }
            }
            if let Some(kernel) = kernel {
                let values = c
                    .arguments
                    .args
                    .iter()
                    .chain(c.arguments.keywords.iter().map(|k| &k.value));
                for v in values {
                    let low = match v {
                        Expr::Name(n) => self.low_names.get(n.id.as_str()).cloned(),
                        other => low_dtype(other, self.aliases),
                    };
                    if let Some(what) = low {
                        let r = v.range();
                        self.hits.push((
                            r.start().to_usize()..r.end().to_usize(),
                            what,
                            kernel.clone(),
                        ));
                    }
                }
            }
        }
        visitor::walk_expr(self, expr);
    }
}

struct PrecisionFinder<'b> {
    aliases: &'b ImportAliases,
    hits: Vec<(Range<usize>, String)>,
}

impl<'a> Visitor<'a> for PrecisionFinder<'_> {
    fn visit_expr(&mut self, expr: &'a Expr) {
        match expr {
            Expr::Attribute(a) => {
                let q = qualname(expr, self.aliases).unwrap_or_default();
                let attr = a.attr.as_str();
                let low = matches!(
                    attr,
                    "float16" | "bfloat16" | "float8e4nv" | "float8e5" | "float8e4b15"
                );
                if low && q.starts_with("triton.language") {
                    let r = expr.range();
                    self.hits.push((
                        r.start().to_usize()..r.end().to_usize(),
                        q.replacen("triton.language", "tl", 1),
                    ));
                    return;
                }
            }
            Expr::Call(c) => {
                for kw in c.arguments.keywords.iter() {
                    let Some(arg) = &kw.arg else { continue };
                    let tf32 = match (arg.as_str(), &kw.value) {
                        ("allow_tf32", Expr::BooleanLiteral(b)) => b.value,
                        ("input_precision", Expr::StringLiteral(s)) => s.value.to_str() == "tf32",
                        _ => false,
                    };
                    if tf32 {
                        let r = kw.range();
                        self.hits.push((
                            r.start().to_usize()..r.end().to_usize(),
                            "TF32 dot".to_string(),
                        ));
                    }
                }
            }
            _ => {}
        }
        visitor::walk_expr(self, expr);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(py: &str, precision: Precision, backend: Option<Backend>) -> Vec<(Rule, u32, u32)> {
        let parsed = ruff_python_parser::parse_module(py).expect("valid python");
        let ctx = Context::new("t.py", py, precision, backend);
        let mut v: Vec<_> = check_triton(parsed.syntax(), &ctx)
            .into_iter()
            .map(|f| {
                let (l, c) = ctx.line_col(f.range.start);
                (f.code, l, c)
            })
            .collect();
        v.sort();
        v
    }

    const HONEST: &str = "import torch\nimport triton as tr\nimport triton.language as tl\n\n@tr.jit\ndef add_kernel(x, y, o, n, BLOCK: tl.constexpr):\n    pid = tl.program_id(0)\n    offs = pid * BLOCK + tl.arange(0, BLOCK)\n    m = offs < n\n    tl.store(o + offs, tl.load(x + offs, mask=m) + tl.load(y + offs, mask=m), mask=m)\n\ndef add(x, y):\n    o = torch.empty_like(x)\n    add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, o, x.numel(), BLOCK=1024)\n    return o\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x, y):\n        return add(x, y)\n";

    #[test]
    fn honest_kernel_launched_through_a_helper_is_clean() {
        assert!(run(HONEST, Precision::Fp32, Some(Backend::Triton)).is_empty());
    }

    #[test]
    fn kernel_only_on_a_dead_branch_is_a_decoy() {
        let py = HONEST.replace(
            "        return add(x, y)\n",
            "        if False:\n            return add(x, y)\n        return x + y\n",
        );
        assert_eq!(run(&py, Precision::Fp32, None), vec![(Rule::KG620, 6, 5)]);
    }

    #[test]
    fn half_casts_are_flagged_on_fp32_only() {
        let py = HONEST.replace(
            "    m = offs < n\n",
            "    m = offs < n\n    h = tl.load(x + offs, mask=m).to(tl.float16)\n",
        );
        assert_eq!(run(&py, Precision::Fp32, None), vec![(Rule::KG621, 10, 38)]);
        assert!(run(&py, Precision::Fp16, None).is_empty());
    }

    #[test]
    fn triton_backend_without_kernels() {
        let py = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x\n";
        assert_eq!(
            run(py, Precision::Fp32, Some(Backend::Triton)),
            vec![(Rule::KG622, 1, 1)]
        );
        assert!(run(py, Precision::Fp32, Some(Backend::Cuda)).is_empty());
    }
}

#[cfg(test)]
mod fixture_tests {
    use super::*;

    fn run_fixture(name: &str) -> Vec<(Rule, u32, u32)> {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/lint/triton")
            .join(name);
        let py = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        let backend = py
            .starts_with("# kernelgate: backend=triton")
            .then_some(Backend::Triton);
        let parsed = ruff_python_parser::parse_module(&py).expect("valid python");
        let ctx = Context::new(name, &py, Precision::Fp32, backend);
        let mut v: Vec<_> = check_triton(parsed.syntax(), &ctx)
            .into_iter()
            .map(|f| {
                let (l, c) = ctx.line_col(f.range.start);
                (f.code, l, c)
            })
            .collect();
        v.sort();
        v
    }

    /// A fixture and its expected (rule, line, column) findings.
    type Case = (&'static str, &'static [(Rule, u32, u32)]);

    #[test]
    fn triton_fixtures() {
        let table: &[Case] = &[
            ("honest_triton_autotune_alias.py", &[]),
            ("hack_triton_decoy.py", &[(Rule::KG620, 8, 5)]),
            ("hack_triton_dead_branch.py", &[(Rule::KG620, 8, 5)]),
            ("hack_triton_fp16.py", &[(Rule::KG621, 12, 45)]),
            ("hack_triton_no_kernel.py", &[(Rule::KG622, 1, 1)]),
            ("hack_triton_dtype_arg.py", &[(Rule::KG621, 22, 70)]),
            ("honest_triton_ieee_dot.py", &[]),
            ("honest_triton_block_ptr.py", &[]),
            ("hack_triton_no_store.py", &[(Rule::KG620, 8, 5)]),
            ("hack_triton_empty_grid.py", &[(Rule::KG620, 17, 21)]),
        ];
        for (name, want) in table {
            assert_eq!(run_fixture(name), want.to_vec(), "{name}");
        }
    }
}
