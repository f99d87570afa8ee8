//! The Python rules. Three passes over one parse: the whole file (bypass, obfuscation,
//! tampering, forging, sandbox, streams, threads, lazy tensors, precision, caches), the code
//! reachable from `ModelNew.forward` (PyTorch fallbacks, phase detection, memoisation), and the
//! file's structure (ModelNew, forward, inputs, custom kernel).

// Match arms keep their conditions in the body: moving them into guards would send a
// non-matching node to the catch-all arm, which is the bug this style avoids.
#![allow(clippy::collapsible_match)]

pub(crate) mod bypass;
pub(crate) mod concurrency;
pub(crate) mod input_mutation;
pub(crate) mod lazy_tensor;
pub(crate) mod memoized_forward;
pub(crate) mod output_cache;
pub(crate) mod phase_detection;
pub(crate) mod precision;
pub(crate) mod sandbox;
pub(crate) mod structure;
pub(crate) mod tampering;
pub(crate) mod torch_fallback;

use super::names::{range, under, Names};
use super::reach::{find_class, find_method, walk_live, walk_stmt_live, Reachability};
use super::tables::{
    banned, nn_container, nn_layer, tamper_rule, tensor_compute_method, torch_compute, SIZE_NAMES,
};
use crate::rule::{Context, RawFinding, Rule};
use kernelgate_model::{Backend, Precision};
use ruff_python_ast::visitor::{self, Visitor};
use ruff_python_ast::{Expr, ExprCall, ModModule, Operator, Stmt, StmtFunctionDef};
use ruff_text_size::Ranged;
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::collections::BTreeSet;

pub struct Checker<'a, 'c> {
    pub module: &'a ModModule,
    pub ctx: &'c Context<'c>,
    pub names: Names,
    pub reach: Reachability<'a>,
    /// Names and `self.<attr>`s bound to an extension module (`load_inline(...)`).
    ext_objects: HashSet<String>,
    /// Functions exported by extensions (`functions=[...]`).
    ext_functions: HashSet<String>,
    /// `self.<attr>`s and names holding nn compute layers.
    layers: HashMap<String, String>,
    /// Names assigned at module level (module state a counter can live in).
    module_names: HashSet<String>,
    /// Module-level names assigned from `os.environ`/`os.getenv`/`sys.argv`.
    env_names: HashSet<String>,
    /// `Model` and module-level names bound to it (`_Base = Model`).
    ref_names: HashSet<String>,
    pub out: Vec<RawFinding>,
    /// Extension calls in live code.
    ext_calls: Vec<super::ExtCall>,
    /// Branches of reachable functions that the problem's facts prove dead.
    dead: Vec<std::ops::Range<usize>>,
    /// Reachable functions that join side streams back into the current stream before they
    /// return (`current_stream().wait_stream(s)`, `.wait_event(e)`, `torch.cuda.synchronize()`).
    joined: Vec<std::ops::Range<usize>>,
}

impl<'a, 'c> Checker<'a, 'c> {
    pub fn new(module: &'a ModModule, ctx: &'c Context<'c>) -> Self {
        let names = Names::build(module);
        let reach = super::reach::reachable_with(module, &ctx.facts);
        let mut c = Checker {
            module,
            ctx,
            names,
            reach,
            ext_objects: HashSet::default(),
            ext_functions: HashSet::default(),
            layers: HashMap::default(),
            // Module-level variables and classes: `ModelNew.calls += 1` is module state too.
            module_names: module
                .body
                .iter()
                .flat_map(|s| match s {
                    Stmt::Assign(a) => a
                        .targets
                        .iter()
                        .filter_map(|t| match t {
                            Expr::Name(n) => Some(n.id.to_string()),
                            _ => None,
                        })
                        .collect::<Vec<_>>(),
                    Stmt::ClassDef(c) => vec![c.name.to_string()],
                    _ => Vec::new(),
                })
                .collect(),
            env_names: HashSet::default(),
            ref_names: reference_names(module),
            out: Vec::new(),
            ext_calls: Vec::new(),
            dead: Vec::new(),
            joined: Vec::new(),
        };
        c.dead = c
            .reach
            .functions
            .iter()
            .flat_map(|(f, owner)| {
                let scope = super::consts::Scope {
                    facts: &ctx.facts,
                    self_is_model: super::consts::is_model_method(*owner, module),
                };
                super::consts::dead_ranges(&f.body, scope)
            })
            .collect();
        c.joined = c
            .reach
            .functions
            .iter()
            .filter(|(f, _)| c.joins_current_stream(f))
            .map(|(f, _)| range(*f))
            .collect();
        c.env_names = c.module_env_names();
        c.collect_bindings();
        c
    }

    /// Whether `f` makes the current stream wait for other streams (or the whole device)
    /// before it returns: side-stream work then ends inside the timed region.
    fn joins_current_stream(&self, f: &StmtFunctionDef) -> bool {
        struct J<'x, 'a, 'c> {
            c: &'x Checker<'a, 'c>,
            /// Locals bound to the current stream (`main = torch.cuda.current_stream()`).
            current: HashSet<String>,
            found: bool,
        }
        impl<'a> Visitor<'a> for J<'_, '_, '_> {
            fn visit_stmt(&mut self, stmt: &'a Stmt) {
                if let Stmt::Assign(a) = stmt {
                    if self.c.is_current_stream_call(&a.value) {
                        for t in &a.targets {
                            if let Expr::Name(n) = t {
                                self.current.insert(n.id.to_string());
                            }
                        }
                    }
                }
                visitor::walk_stmt(self, stmt);
            }
            fn visit_expr(&mut self, expr: &'a Expr) {
                if let Expr::Call(call) = expr {
                    match &*call.func {
                        Expr::Attribute(a)
                            if matches!(a.attr.as_str(), "wait_stream" | "wait_event") =>
                        {
                            let on_current = self.c.is_current_stream_call(&a.value)
                                || matches!(&*a.value, Expr::Name(n) if self.current.contains(n.id.as_str()));
                            self.found |= on_current;
                        }
                        func => {
                            self.found |= self
                                .c
                                .names
                                .qualify(func)
                                .is_some_and(|q| q == "torch.cuda.synchronize");
                        }
                    }
                }
                visitor::walk_expr(self, expr);
            }
        }
        let mut j = J {
            c: self,
            current: HashSet::default(),
            found: false,
        };
        for s in &f.body {
            j.visit_stmt(s);
        }
        j.found
    }

    /// A call of `torch.cuda.current_stream()` in any spelling.
    fn is_current_stream_call(&self, e: &Expr) -> bool {
        matches!(e, Expr::Call(c) if self.names.qualify(&c.func).is_some_and(|q| {
            q.ends_with("current_stream") || q.ends_with("getCurrentStream")
        }))
    }

    pub fn run(mut self) -> super::PythonOutput {
        self.file_pass();
        self.live_pass();
        self.structure_pass();
        super::PythonOutput {
            findings: self.out,
            ext_calls: self.ext_calls,
        }
    }

    /// `_TIMING = os.environ.get("PHASE") == "timing"` at module level: a later branch on
    /// `_TIMING` in `forward` reads the environment as surely as `os.environ` there would.
    fn module_env_names(&self) -> HashSet<String> {
        struct E<'n> {
            names: &'n Names,
            hit: bool,
        }
        impl<'v> Visitor<'v> for E<'_> {
            fn visit_expr(&mut self, expr: &'v Expr) {
                if matches!(expr, Expr::Attribute(_) | Expr::Name(_)) {
                    if let Some(q) = self.names.qualify(expr) {
                        if is_env_path(&q) {
                            self.hit = true;
                            return;
                        }
                    }
                }
                visitor::walk_expr(self, expr);
            }
        }
        let mut out = HashSet::default();
        for s in &self.module.body {
            if let Stmt::Assign(a) = s {
                let mut e = E {
                    names: &self.names,
                    hit: false,
                };
                e.visit_expr(&a.value);
                if e.hit {
                    for t in &a.targets {
                        if let Expr::Name(n) = t {
                            out.insert(n.id.to_string());
                        }
                    }
                }
            }
        }
        out
    }

    fn push(&mut self, code: &'static str, r: std::ops::Range<usize>, msg: impl Into<String>) {
        // A precision conversion on a branch the problem never takes (`if x.dtype ==
        // torch.float16:` on an fp32 problem) never runs.
        if code == Rule::KG501 && self.dead.iter().any(|d| d.contains(&r.start)) {
            return;
        }
        let msg = msg.into();
        // A side stream joined back before the function returns: nothing escapes the timer if
        // the join is right, and the runtime escaped-work check decides. Graphs stay errors.
        // Creating a stream does nothing by itself; launching on it is judged where it happens.
        let creates = msg.starts_with("a new") || msg.starts_with("an external");
        if code == Rule::KG403
            && !msg.contains("graph")
            && (self.joined.iter().any(|j| j.contains(&r.start))
                || (creates && !self.joined.is_empty()))
        {
            let msg = format!(
                "{msg}; it is joined back into the current stream before the function returns \
                 (`wait_stream`/`wait_event`/`synchronize`), so a warning: the runtime escaped-work \
                 check decides"
            );
            self.out.push(RawFinding::new(code, r, msg).warning());
            return;
        }
        self.out.push(RawFinding::new(code, r, msg));
    }

    fn text(&self, node: &impl Ranged) -> &'c str {
        let r = range(node);
        &self.ctx.source[r]
    }

    // ---------------------------------------------------------------- bindings

    /// Extension objects, their exported functions, and nn layer attributes.
    fn collect_bindings(&mut self) {
        struct B<'x, 'a, 'c> {
            c: &'x mut Checker<'a, 'c>,
            builders: HashSet<String>,
        }
        impl<'a> Visitor<'a> for B<'_, '_, '_> {
            fn visit_stmt(&mut self, stmt: &'a Stmt) {
                if let Stmt::Assign(a) = stmt {
                    let value_key = key_of(&a.value);
                    let is_ext = match a.value.as_ref() {
                        Expr::Call(call) => {
                            self.c.is_ext_builder(call)
                                || matches!(call.func.as_ref(), Expr::Name(n) if self.builders.contains(n.id.as_str()))
                        }
                        _ => value_key
                            .as_ref()
                            .is_some_and(|k| self.c.ext_objects.contains(k)),
                    };
                    let layer = match a.value.as_ref() {
                        Expr::Call(call) => self.c.layer_kind(call),
                        _ => value_key
                            .as_ref()
                            .and_then(|k| self.c.layers.get(k).cloned()),
                    };
                    for t in &a.targets {
                        if let Some(k) = key_of(t) {
                            if is_ext {
                                self.c.ext_objects.insert(k.clone());
                            }
                            if let Some(l) = &layer {
                                self.c.layers.insert(k, l.clone());
                            }
                        }
                    }
                }
                if let Stmt::FunctionDef(f) = stmt {
                    // `def build(): return load_inline(...)`: calling `build()` yields an extension.
                    let mut finder = ReturnsExt {
                        c: self.c,
                        found: false,
                    };
                    for s in &f.body {
                        finder.visit_stmt(s);
                    }
                    if finder.found {
                        self.builders.insert(f.name.to_string());
                    }
                }
                visitor::walk_stmt(self, stmt);
            }
            fn visit_expr(&mut self, expr: &'a Expr) {
                if let Expr::Call(call) = expr {
                    if self.c.is_ext_builder(call) {
                        for kw in call.arguments.keywords.iter() {
                            if kw.arg.as_ref().is_some_and(|a| a.as_str() == "functions") {
                                let items: Vec<&Expr> = match &kw.value {
                                    Expr::List(l) => l.elts.iter().collect(),
                                    Expr::Tuple(t) => t.elts.iter().collect(),
                                    other => vec![other],
                                };
                                for it in items {
                                    if let Some(s) = self.c.names.fold_str(it) {
                                        self.c.ext_functions.insert(s);
                                    }
                                }
                            }
                        }
                    }
                }
                visitor::walk_expr(self, expr);
            }
        }
        struct ReturnsExt<'x, 'a, 'c> {
            c: &'x Checker<'a, 'c>,
            found: bool,
        }
        impl<'a> Visitor<'a> for ReturnsExt<'_, '_, '_> {
            fn visit_stmt(&mut self, stmt: &'a Stmt) {
                if let Stmt::Return(r) = stmt {
                    if let Some(Expr::Call(c)) = r.value.as_deref() {
                        if self.c.is_ext_builder(c) {
                            self.found = true;
                        }
                    }
                }
                visitor::walk_stmt(self, stmt);
            }
        }
        let module = self.module;
        // Twice, so `self.ext = ext` after `ext = load_inline(...)` is seen whatever the order.
        let mut builders = HashSet::default();
        for _ in 0..2 {
            let mut b = B { c: self, builders };
            for s in &module.body {
                b.visit_stmt(s);
            }
            builders = b.builders;
        }
    }

    fn is_ext_builder(&self, call: &ExprCall) -> bool {
        let q = self.names.qualify(&call.func);
        let name = match (&q, call.func.as_ref()) {
            (Some(q), _) => q.rsplit('.').next().unwrap_or("").to_string(),
            (None, Expr::Name(n)) => n.id.to_string(),
            _ => return false,
        };
        matches!(name.as_str(), "load_inline" | "load")
            && q.as_deref()
                .is_none_or(|q| q.contains("cpp_extension") || q == "load_inline")
    }

    /// `Some(layer)` when the call constructs an nn compute layer (or a container holding one).
    fn layer_kind(&self, call: &ExprCall) -> Option<String> {
        let Some(q) = self.names.qualify(&call.func) else {
            // `class Head(nn.Linear): pass` ... `Head(d, d)`
            return match call.func.as_ref() {
                Expr::Name(n) => {
                    find_class(self.module, n.id.as_str()).and_then(|c| self.layer_base(c, 0))
                }
                _ => None,
            };
        };
        if nn_layer(&q) {
            return Some(q);
        }
        if nn_container(&q) {
            let mut found = None;
            let mut check = |e: &Expr| {
                if let Expr::Call(c) = e {
                    if let Some(l) = self.layer_kind(c) {
                        found.get_or_insert(l);
                    }
                }
            };
            for a in call.arguments.args.iter() {
                match a {
                    Expr::List(l) => l.elts.iter().for_each(&mut check),
                    Expr::Tuple(l) => l.elts.iter().for_each(&mut check),
                    Expr::Dict(d) => d.iter_values().for_each(&mut check),
                    other => check(other),
                }
            }
            return found;
        }
        None
    }

    /// The nn compute layer a class derives from, through module-level classes.
    fn layer_base(&self, class: &ruff_python_ast::StmtClassDef, depth: u8) -> Option<String> {
        if depth > 8 {
            return None;
        }
        class
            .bases()
            .iter()
            .find_map(|b| match self.names.qualify(b) {
                Some(q) if nn_layer(&q) => Some(q),
                Some(_) => None,
                None => match b {
                    Expr::Name(n) => find_class(self.module, n.id.as_str())
                        .filter(|c| c.name.as_str() != class.name.as_str())
                        .and_then(|c| self.layer_base(c, depth + 1)),
                    _ => None,
                },
            })
    }

    // ---------------------------------------------------------------- whole file

    fn file_pass(&mut self) {
        let sites = std::mem::take(&mut self.names.sites);
        for (path, r) in &sites {
            if self.names.in_main_block(r.start) {
                continue;
            }
            if let Some((code, msg)) = banned(path) {
                self.push(code, r.clone(), format!("{msg} (`{path}`)"));
            }
        }
        self.names.sites = sites;
        let module = self.module;
        let mut v = FileVisitor {
            c: self,
            in_inputs_fn: 0,
        };
        for s in &module.body {
            v.visit_stmt(s);
        }
        for s in &module.body {
            self.check_caches_in(s);
        }
    }

    fn fp32(&self) -> bool {
        self.ctx.precision == Precision::Fp32
    }

    /// A half-precision dtype expression.
    fn is_half_dtype(&self, e: &Expr) -> bool {
        let low = |q: &str| {
            let q = q.strip_prefix("torch.").unwrap_or(q);
            let q = q.strip_prefix("cuda.").unwrap_or(q);
            matches!(
                q,
                "float16" | "half" | "bfloat16" | "HalfTensor" | "BFloat16Tensor"
            ) || q.starts_with("float8")
                || q.starts_with("float4")
        };
        if let Some(q) = self.names.qualify(e) {
            return under(&q, "torch") && low(&q);
        }
        self.names.fold_str(e).as_deref().is_some_and(low)
    }

    fn root_banned(&self, e: &Expr) -> bool {
        let mut cur = e;
        loop {
            match cur {
                Expr::Attribute(a) => cur = &a.value,
                Expr::Name(n) => {
                    return self
                        .names
                        .binding(n.id.as_str())
                        .is_some_and(|p| banned(p).is_some())
                }
                _ => return false,
            }
        }
    }

    fn check_call(&mut self, call: &'a ExprCall, in_inputs_fn: bool) {
        let q = self.names.qualify(&call.func);
        let args = &call.arguments.args;
        let fr = range(call.func.as_ref());
        // `getattr(os, "_ex" + "it")(0)`, `__import__("subprocess").run`: the attribute walk
        // never sees a banned function reached through a call.
        if matches!(call.func.as_ref(), Expr::Call(_)) {
            if let Some((code, msg)) = q.as_deref().and_then(banned) {
                let shown = q.as_deref().unwrap_or_default();
                self.push(code, fr.clone(), format!("{msg} (`{shown}`)"));
            }
        }
        // `torch.backends.cuda.matmul.__setattr__("allow_tf32", True)`,
        // `object.__setattr__(torch.cuda, "synchronize", f)`: setattr by another name.
        if let Some(q) = q.as_deref() {
            let target = if let Some(base) = q
                .strip_suffix(".__setattr__")
                .or_else(|| q.strip_suffix(".__delattr__"))
            {
                args.first()
                    .and_then(|a| self.names.fold_str(a))
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
                    .and_then(|m| self.names.qualify(m))
                    .zip(args.get(1).and_then(|a| self.names.fold_str(a)))
                {
                    self.tamper(&format!("{base}.{attr}"), range(call), args.get(2));
                }
            }
        }
        // type("Lazy", (torch.Tensor,), {...}): a tensor subclass built without `class`.
        if matches!(call.func.as_ref(), Expr::Name(n) if n.id.as_str() == "type")
            && q.is_none()
            && args.len() == 3
        {
            let bases: Vec<&Expr> = match &args[1] {
                Expr::Tuple(t) => t.elts.iter().collect(),
                other => vec![other],
            };
            if bases.iter().any(|b| {
                self.names.qualify(b).is_some_and(|q| {
                    matches!(
                        q.as_str(),
                        "torch.Tensor" | "torch._C.TensorBase" | "torch._C._TensorBase"
                    )
                })
            }) {
                self.push(
                    Rule::KG405,
                    range(call),
                    "`type(...)` builds a `torch.Tensor` subclass: a lazy tensor can compute only when compared",
                );
            }
        }
        match q.as_deref() {
            Some("operator.methodcaller") => {
                // methodcaller("sigmoid"): a tensor compute method packaged to be called later.
                if let Some(m) = args.first().and_then(|a| self.names.fold_str(a)) {
                    if tensor_compute_method(&m) && !self.ext_functions.contains(&m) {
                        self.push(
                            Rule::KG104,
                            fr.clone(),
                            format!("`operator.methodcaller(\"{m}\")` packages a tensor compute method to call instead of your kernel"),
                        );
                    }
                }
            }
            Some("torch.set_default_dtype") if self.fp32() && !in_inputs_fn => {
                if args.first().is_some_and(|a| self.is_half_dtype(a)) {
                    self.push(
                        Rule::KG501,
                        fr.clone(),
                        "makes half precision the default dtype on an fp32 problem",
                    );
                }
            }
            Some(p)
                if self.fp32()
                    && (p == "os.putenv"
                        || p == "os.environ.setdefault"
                        || p == "os.environ.update") =>
            {
                let keys: Vec<&Expr> = match args.first() {
                    Some(Expr::Dict(d)) => d.iter_keys().flatten().collect(),
                    Some(k) => vec![k],
                    None => call
                        .arguments
                        .keywords
                        .iter()
                        .filter(|k| k.arg.as_ref().is_some_and(|a| a.contains("TF32")))
                        .map(|k| &k.value)
                        .collect(),
                };
                let tf32 = keys.iter().any(|k| self.tf32_env_key(k))
                    || call
                        .arguments
                        .keywords
                        .iter()
                        .any(|k| k.arg.as_ref().is_some_and(|a| a.contains("TF32")));
                if tf32 {
                    self.push(
                        Rule::KG502,
                        range(call),
                        "sets a TF32 override in the environment on an fp32 problem",
                    );
                }
            }
            Some(p) if self.fp32() && under(p, "torch.backends") => {
                // torch.backends.cudnn.flags(allow_tf32=True)
                for kw in call.arguments.keywords.iter() {
                    let Some(arg) = kw.arg.as_ref() else { continue };
                    if (arg.contains("tf32") || arg.contains("reduced_precision"))
                        && super::reach::const_truth(&kw.value) != Some(false)
                    {
                        self.push(
                            Rule::KG502,
                            range(kw),
                            format!(
                                "`{arg}=` enables reduced-precision (TF32) math on an fp32 problem"
                            ),
                        );
                    }
                }
            }
            Some("builtins.setattr" | "builtins.delattr") if !args.is_empty() => {
                if let Some(base) = self.names.qualify(&args[0]) {
                    match args.get(1).and_then(|a| self.names.fold_str(a)) {
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
                } else if let Expr::Name(n) = &args[0] {
                    // setattr(torch.Tensor-like class aliases) are covered above; plain objects are fine.
                    let _ = n;
                }
            }
            Some("builtins.getattr") if args.len() >= 2 => {
                if let Some(base) = self.names.qualify(&args[0]) {
                    if self.names.fold_str(&args[1]).is_none() {
                        self.push(
                            Rule::KG204,
                            range(call),
                            format!("`getattr` on module `{base}` with a name built at run time hides which function runs"),
                        );
                    }
                }
            }
            Some("builtins.__import__" | "importlib.import_module" | "importlib.__import__") => {
                if args
                    .first()
                    .is_none_or(|a| self.names.fold_str(a).is_none())
                {
                    self.push(
                        Rule::KG204,
                        range(call),
                        "importing a module whose name is built at run time hides what runs",
                    );
                }
            }
            Some("builtins.open" | "io.open" | "codecs.open") => self.check_open(call),
            Some("builtins.print") => {
                if args
                    .iter()
                    .chain(call.arguments.keywords.iter().map(|k| &k.value))
                    .any(|a| self.result_like(a))
                {
                    self.push(
                        Rule::KG305,
                        fr.clone(),
                        "prints result-like text that could forge the harness's verdict",
                    );
                }
            }
            Some("torch.save") => {
                if !args.get(1).is_some_and(|p| self.tmp_like(p)) {
                    self.push(
                        Rule::KG306,
                        fr.clone(),
                        "`torch.save` writes a file outside a temporary directory",
                    );
                }
            }
            Some("torch.set_float32_matmul_precision") if self.fp32() => {
                let v = args.first().and_then(|a| self.names.fold_str(a));
                if v.as_deref() != Some("highest") {
                    self.push(
                        Rule::KG502,
                        fr.clone(),
                        "lowers fp32 matmul precision (TF32/bf16) on an fp32 problem",
                    );
                }
            }
            Some(p)
                if self.fp32()
                    && !in_inputs_fn
                    && (p.ends_with(".autocast") && under(p, "torch")) =>
            {
                self.push(
                    Rule::KG501,
                    fr.clone(),
                    format!("`{p}` computes in half precision on an fp32 problem"),
                );
            }
            _ => {}
        }
        // Method-style calls, also through `getattr(x, "ha" + "lf")()`.
        let method: Option<(&Expr, String, std::ops::Range<usize>)> = match call.func.as_ref() {
            Expr::Attribute(a) => Some((a.value.as_ref(), a.attr.to_string(), range(&a.attr))),
            Expr::Call(g)
                if g.arguments.args.len() >= 2
                    && self.names.qualify(&g.func).as_deref() == Some("builtins.getattr") =>
            {
                self.names
                    .fold_str(&g.arguments.args[1])
                    .map(|m| (&g.arguments.args[0], m, range(g)))
            }
            _ => None,
        };
        if let Some((recv, m, at)) = &method {
            let m = m.as_str();
            let recv_is_module = self.names.qualify(recv).is_some();
            if !recv_is_module && self.fp32() && !in_inputs_fn {
                let half = matches!(m, "half" | "bfloat16") && args.is_empty();
                let to_half =
                    matches!(m, "to" | "type") && args.iter().any(|x| self.is_half_dtype(x));
                if half || to_half {
                    self.push(
                        Rule::KG501,
                        at.clone(),
                        format!("`.{m}(...)` converts to half precision on an fp32 problem"),
                    );
                }
            }
        }
        if let Expr::Attribute(a) = call.func.as_ref() {
            let m = a.attr.as_str();
            let recv_is_module = self.names.qualify(&a.value).is_some();
            if !recv_is_module
                && matches!(
                    m,
                    "write_text" | "write_bytes" | "symlink_to" | "unlink" | "rmdir"
                )
                && !self.tmp_like(&a.value)
            {
                self.push(
                    Rule::KG306,
                    range(&a.attr),
                    format!("`.{m}()` writes or deletes files outside a temporary directory"),
                );
            }
        }
        for kw in call.arguments.keywords.iter() {
            let Some(arg) = kw.arg.as_ref() else { continue };
            match arg.as_str() {
                "dtype" | "cast_inputs"
                    if self.fp32() && !in_inputs_fn && self.is_half_dtype(&kw.value) =>
                {
                    self.push(
                        Rule::KG501,
                        range(kw),
                        format!("`{arg}=` half precision on an fp32 problem"),
                    );
                }
                "stream" if !self.current_stream(&kw.value) => {
                    self.push(Rule::KG403, range(kw), "`stream=` launches on a stream other than the current one, outside the timed region");
                }
                _ => {}
            }
        }
    }

    /// `None`, `0`, `torch.cuda.current_stream()` and its `.cuda_stream`.
    fn current_stream(&self, e: &Expr) -> bool {
        match e {
            Expr::NoneLiteral(_) => true,
            Expr::NumberLiteral(n) => n.value.as_int().and_then(|i| i.as_u64()) == Some(0),
            Expr::Attribute(a) if matches!(a.attr.as_str(), "cuda_stream" | "stream_id") => {
                self.current_stream(&a.value)
            }
            Expr::Call(c) => self.names.qualify(&c.func).is_some_and(|q| {
                q.ends_with("current_stream")
                    || q.ends_with("getCurrentStream")
                    || q.ends_with("current_raw_stream")
            }),
            Expr::Name(_) => {
                // A local holding the current stream is common (`stream = torch.cuda.current_stream()`).
                true
            }
            _ => false,
        }
    }

    /// An environment variable that switches cuBLAS/PyTorch to TF32 for everyone.
    fn tf32_env_key(&self, e: &Expr) -> bool {
        self.names.fold_str(e).is_some_and(|k| k.contains("TF32"))
    }

    fn tmp_like(&self, e: &Expr) -> bool {
        let t = self.text(e).to_ascii_lowercase();
        t.contains("tmp")
            || t.contains("temp")
            || t.contains("cache_dir")
            || t.contains("build_dir")
    }

    fn check_open(&mut self, call: &ExprCall) {
        let args = &call.arguments.args;
        let Some(path) = args.first() else { return };
        let mode = args
            .get(1)
            .or_else(|| {
                call.arguments
                    .keywords
                    .iter()
                    .find(|k| k.arg.as_ref().is_some_and(|a| a == "mode"))
                    .map(|k| &k.value)
            })
            .and_then(|m| self.names.fold_str(m))
            .unwrap_or_else(|| "r".into());
        let fd = matches!(path, Expr::NumberLiteral(_));
        let dev = self
            .names
            .fold_str(path)
            .is_some_and(|p| p.starts_with("/dev/") || p.starts_with("/proc/"));
        if fd || dev {
            self.push(
                Rule::KG305,
                range(call),
                "opens a raw file descriptor or device: can forge the result channel",
            );
        } else if mode.contains(['w', 'a', 'x', '+']) && !self.tmp_like(path) {
            self.push(
                Rule::KG306,
                range(call),
                format!(
                    "writes a file outside a temporary directory (mode `{mode}`); use `tempfile`"
                ),
            );
        }
    }

    fn result_like(&self, e: &Expr) -> bool {
        let text = match self.names.fold_str(e) {
            Some(s) => s,
            None => match e {
                Expr::FString(_) => self.text(e).to_string(),
                // "%s: %s" % ("speedup", 42) and "{}: {}".format("speedup", 42)
                Expr::BinOp(b) if b.op == Operator::Mod => {
                    let items: Vec<&Expr> = match b.right.as_ref() {
                        Expr::Tuple(t) => t.elts.iter().collect(),
                        other => vec![other],
                    };
                    self.format_like(&b.left, &items, '%')
                }
                Expr::Call(c) if matches!(c.func.as_ref(), Expr::Attribute(a) if a.attr.as_str() == "format") =>
                {
                    let Expr::Attribute(a) = c.func.as_ref() else {
                        return false;
                    };
                    let items: Vec<&Expr> = c.arguments.args.iter().collect();
                    self.format_like(&a.value, &items, '{')
                }
                Expr::Call(c) => {
                    return self
                        .names
                        .qualify(&c.func)
                        .is_some_and(|q| q == "json.dumps")
                }
                _ => return false,
            },
        };
        // A key and a value, as a harness or a leaderboard prints them: `correct: True`,
        // `"speedup": 12`, `runtime_ms=0.01`. Prose ("compiled correctly") is not result-like.
        static RESULT: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
            regex::Regex::new(
                r#"(?i)\b(correct(ness)?|speedup|runtime(_ms)?|elapsed(_ms)?|passed|allclose|max_diff|avg_diff|time_ms|mean_ms|verdict|fast_[0-9p]+|compiled)\b["']?\s*[:=]"#,
            )
            .expect("static regex")
        });
        RESULT.is_match(&text) || text.trim_start().starts_with('{')
    }

    /// A format template with its placeholders filled from `items` (folded strings, or the
    /// argument's source text): enough to see the key/value shape of a result line.
    fn format_like(&self, template: &Expr, items: &[&Expr], open: char) -> String {
        let Some(t) = self.names.fold_str(template) else {
            return String::new();
        };
        let mut vals = items.iter().map(|i| {
            self.names
                .fold_str(i)
                .unwrap_or_else(|| self.text(*i).to_string())
        });
        let mut out = String::with_capacity(t.len());
        let mut chars = t.chars().peekable();
        while let Some(ch) = chars.next() {
            if ch != open {
                out.push(ch);
                continue;
            }
            // Skip the conversion spec: `%-8.3f` / `{0:>8}`.
            let close = if open == '%' { None } else { Some('}') };
            while let Some(&n) = chars.peek() {
                chars.next();
                match close {
                    Some(c) if n == c => break,
                    None if n.is_ascii_alphabetic() => break,
                    _ => {}
                }
            }
            out.push_str(&vals.next().unwrap_or_default());
        }
        out
    }

    /// Assignment/setattr/del of a module attribute.
    fn tamper(&mut self, path: &str, r: std::ops::Range<usize>, value: Option<&Expr>) {
        if under(path, "torch.backends") {
            let reduced = [
                "allow_tf32",
                "allow_fp16_reduced_precision_reduction",
                "allow_bf16_reduced_precision_reduction",
                "fp32_precision",
            ];
            if reduced.iter().any(|k| path.ends_with(k)) && self.fp32() {
                let lowers = match value {
                    Some(v) => match self.names.fold_str(v) {
                        Some(s) => s != "ieee" && s != "highest",
                        None => super::reach::const_truth(v) != Some(false),
                    },
                    None => true,
                };
                if lowers {
                    self.push(
                        Rule::KG502,
                        r,
                        format!(
                            "`{path}` enables reduced-precision (TF32) math on an fp32 problem"
                        ),
                    );
                }
            }
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

    /// Output caches keyed by identity (KG401), per function.
    fn check_caches_in(&mut self, stmt: &'a Stmt) {
        match stmt {
            Stmt::FunctionDef(f) => {
                let is_forward = matches!(f.name.as_str(), "forward" | "__call__");
                let tensor_params: HashSet<String> = if is_forward {
                    f.parameters
                        .iter()
                        .map(|p| p.name().to_string())
                        .filter(|n| n != "self")
                        .collect()
                } else {
                    HashSet::default()
                };
                let mut v = CacheVisitor {
                    c: self,
                    tensor_params,
                    locals: HashMap::default(),
                    shape_probes: Vec::new(),
                    returned: HashSet::default(),
                };
                for s in &f.body {
                    v.visit_stmt(s);
                }
                let CacheVisitor {
                    shape_probes,
                    returned,
                    ..
                } = v;
                // Shape-keyed containers are also how honest code caches launch configurations;
                // only a forward that returns the stored value is an output cache.
                let is_forward = matches!(f.name.as_str(), "forward" | "__call__");
                for (container, r) in shape_probes {
                    if is_forward && returned.contains(&container) {
                        self.push(
                            Rule::KG401,
                            r,
                            format!("`{container}` returns stored results keyed by tensor shape"),
                        );
                    }
                }
                for s in &f.body {
                    if matches!(s, Stmt::FunctionDef(_) | Stmt::ClassDef(_)) {
                        self.check_caches_in(s);
                    }
                }
            }
            Stmt::ClassDef(c) => {
                for s in &c.body {
                    self.check_caches_in(s);
                }
            }
            _ => {}
        }
    }

    // ---------------------------------------------------------------- live code

    fn live_pass(&mut self) {
        let module = self.module;
        let functions: Vec<(&'a StmtFunctionDef, bool, bool, bool)> = self
            .reach
            .functions
            .iter()
            .map(|(f, owner)| {
                let entry = matches!(f.name.as_str(), "forward" | "__call__")
                    && owner.is_some_and(|o| o.name.as_str() == "ModelNew");
                let model_method = super::consts::is_model_method(*owner, module);
                (*f, entry, owner.is_some(), model_method)
            })
            .collect();
        // Which arguments of a helper got a tensor at a live call site (`self._post(y)`): the
        // helper's parameters at those places hold tensors too. Callers come before callees.
        let mut tensor_args: HashMap<String, (HashSet<usize>, HashSet<String>)> =
            HashMap::default();
        let mut counters: Vec<(String, std::ops::Range<usize>)> = Vec::new();
        let mut tests: Vec<(String, std::ops::Range<usize>)> = Vec::new();
        for (f, entry, is_method, model_method) in functions {
            if self.gpu_dsl(f) {
                continue;
            }
            for d in &f.decorator_list {
                let q = match &d.expression {
                    Expr::Call(c) => self.names.qualify(&c.func),
                    e => self.names.qualify(e),
                };
                if q.as_deref()
                    .is_some_and(|q| matches!(q, "functools.lru_cache" | "functools.cache"))
                {
                    // Memoising what computes outputs is an output cache; memoising a kernel
                    // build or a launch configuration is fine; anything else is worth a look.
                    let entry = matches!(f.name.as_str(), "forward" | "__call__");
                    match (entry, self.memo_kind(f)) {
                        (true, _) | (_, Memo::Output) => self.push(
                            Rule::KG401,
                            range(d),
                            format!(
                                "`{}` is memoised and computes outputs: repeated inputs return stored results",
                                f.name
                            ),
                        ),
                        (false, Memo::Unknown) => self.push(
                            Rule::KG406,
                            range(d),
                            format!(
                                "`{}` is memoised: repeated inputs return stored outputs",
                                f.name
                            ),
                        ),
                        (false, Memo::Config) => {}
                    }
                }
            }
            let globals = global_names(f);
            let mut v = LiveVisitor {
                c: self,
                local_layers: HashSet::default(),
                globals,
                counters: Vec::new(),
                tests: Vec::new(),
                tensors: if entry {
                    tensor_params(f)
                } else {
                    helper_tensor_params(f, is_method, tensor_args.get(f.name.as_str()))
                },
                tensor_lists: HashSet::default(),
                tensor_args: std::mem::take(&mut tensor_args),
                inputs: if entry {
                    tensor_params(f)
                        .into_iter()
                        .map(|p| (p.clone(), p))
                        .collect()
                } else {
                    HashMap::default()
                },
                entry,
                body: &f.body,
                handled: HashSet::default(),
                model_method,
                discarded: HashSet::default(),
                allocs: HashSet::default(),
            };
            for d in &f.decorator_list {
                // `@torch.compile` on a live function runs Inductor's kernels.
                v.visit_expr(&d.expression);
            }
            walk_live(&mut v, &f.body);
            tensor_args = std::mem::take(&mut v.tensor_args);
            // A helper that bumps a counter is a counter itself: `if _tick() > 3:`.
            if let Some((_, r)) = v.counters.first() {
                let r = r.clone();
                counters.push((f.name.to_string(), r.clone()));
                counters.push((format!("self.{}", f.name), r));
            }
            counters.extend(v.counters);
            tests.extend(v.tests);
        }
        counters.extend(closure_counters(self.module));
        let counter_names: HashMap<String, std::ops::Range<usize>> = counters.into_iter().collect();
        let mut seen = HashSet::default();
        for (name, r) in &tests {
            if self.env_names.contains(name) && seen.insert(name.clone()) {
                self.push(Rule::KG402, r.clone(), format!("branches on `{name}`, read from the environment or argv at import: behaviour can depend on the harness's phase"));
            }
        }
        for (name, r) in tests {
            if let Some(inc) = counter_names.get(&name) {
                if seen.insert(name.clone()) {
                    let (line, _) = self.ctx.line_col(inc.start);
                    self.push(Rule::KG402, r, format!("branches on call counter `{name}` (incremented on line {line}): phase detection"));
                }
            }
        }
    }

    /// What a memoised function's calls say about what it returns.
    fn memo_kind(&self, f: &StmtFunctionDef) -> Memo {
        self.memo_kind_at(f, 0)
    }

    fn memo_kind_at(&self, f: &StmtFunctionDef, depth: u8) -> Memo {
        let mut calls = Vec::new();
        struct C<'o, 'a> {
            out: &'o mut Vec<&'a ExprCall>,
        }
        impl<'a> Visitor<'a> for C<'_, 'a> {
            fn visit_expr(&mut self, expr: &'a Expr) {
                if let Expr::Call(c) = expr {
                    self.out.push(c);
                }
                visitor::walk_expr(self, expr);
            }
        }
        let mut v = C { out: &mut calls };
        for s in &f.body {
            v.visit_stmt(s);
        }
        let mut kind = Memo::Config;
        for call in calls {
            if self.is_ext_builder(call) {
                continue;
            }
            match call.func.as_ref() {
                // kernel[grid](...)
                Expr::Subscript(_) => return Memo::Output,
                Expr::Attribute(a) => {
                    let m = a.attr.as_str();
                    if let Some(q) = self.names.qualify(&call.func) {
                        if torch_compute(&q) {
                            return Memo::Output;
                        }
                    } else if self.is_ext_call_target(&a.value, m) || tensor_compute_method(m) {
                        return Memo::Output;
                    } else if matches!(a.value.as_ref(), Expr::Name(n) if n.id.as_str() == "self") {
                        kind = Memo::Unknown;
                    }
                }
                Expr::Name(n) => {
                    if let Some(q) = self.names.qualify(&call.func) {
                        if torch_compute(&q) {
                            return Memo::Output;
                        }
                    } else if find_class(self.module, n.id.as_str()).is_some() {
                        kind = Memo::Unknown;
                    } else if let Some(g) = self.module.body.iter().rev().find_map(|s| match s {
                        Stmt::FunctionDef(d) if d.name.as_str() == n.id.as_str() => Some(d),
                        _ => None,
                    }) {
                        // A helper that launches makes the memoised function an output cache.
                        match (depth < 4).then(|| self.memo_kind_at(g, depth + 1)) {
                            Some(Memo::Output) => return Memo::Output,
                            Some(Memo::Config) => {}
                            _ => kind = Memo::Unknown,
                        }
                    }
                }
                _ => kind = Memo::Unknown,
            }
        }
        kind
    }

    /// Functions compiled for the GPU by a DSL (Triton, CuTe, TileLang, Numba): their bodies are kernels.
    fn gpu_dsl(&self, f: &StmtFunctionDef) -> bool {
        f.decorator_list.iter().any(|d| {
            let e = match &d.expression {
                Expr::Call(c) => c.func.as_ref(),
                e => e,
            };
            self.names.qualify(e).is_some_and(|q| {
                [
                    "triton",
                    "cutlass",
                    "cute",
                    "tilelang",
                    "numba",
                    "cupy",
                    "thunderkittens",
                    "warp",
                ]
                .iter()
                .any(|p| under(&q, p))
            })
        })
    }

    fn is_ext_call_target(&self, recv: &Expr, method: &str) -> bool {
        self.ext_functions.contains(method)
            || key_of(recv).is_some_and(|k| self.ext_objects.contains(&k))
    }

    // ---------------------------------------------------------------- structure

    fn structure_pass(&mut self) {
        let module = self.module;
        let model_new = find_class(module, "ModelNew");
        let alias = module.body.iter().rev().find_map(|s| match s {
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
                self.push(
                    Rule::KG203,
                    range(a),
                    "`ModelNew` is the reference `Model`: the reference runs, not a kernel",
                );
            }
        }
        match model_new {
            None if alias.is_none() => self.push(
                Rule::KG703,
                0..0,
                "no `class ModelNew` in this file: the harness imports `ModelNew`",
            ),
            None => {}
            Some(class) => {
                for base in class.bases() {
                    if self.inherits_reference(base, &mut HashSet::default()) {
                        self.push(Rule::KG203, range(base), "`ModelNew` inherits from the reference `Model`: its PyTorch code runs instead of a kernel");
                    }
                }
                // Any use of the reference class from ModelNew's body or its reachable code.
                let mut uses = RefUses {
                    c: self,
                    hits: Vec::new(),
                };
                for s in &class.body {
                    uses.visit_stmt(s);
                }
                let class_range = range(class);
                let extra: Vec<&'a StmtFunctionDef> = self
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
                    self.push(
                        Rule::KG203,
                        r,
                        "`ModelNew` uses the reference `Model`: the reference's PyTorch code runs",
                    );
                }
                self.check_layer_base(class);
                self.check_forward(class);
                self.check_compute_once(class);
            }
        }
        self.check_inputs();
        self.check_custom_kernel();
    }

    fn is_reference(&self, e: &Expr) -> bool {
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

    /// True when a byte offset lies inside a function reachable from `ModelNew.forward`.
    fn in_reachable(&self, offset: usize) -> bool {
        self.reach
            .functions
            .iter()
            .any(|(f, _)| range(*f).contains(&offset))
    }

    fn inherits_reference(&self, base: &Expr, seen: &mut HashSet<String>) -> bool {
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

    /// `class ModelNew(nn.Linear)`: the layer's forward runs when ModelNew has none or calls
    /// `super().forward(...)`.
    fn check_layer_base(&mut self, class: &'a ruff_python_ast::StmtClassDef) {
        let Some(layer) = self.layer_base(class, 0) else {
            return;
        };
        struct S {
            hits: Vec<std::ops::Range<usize>>,
        }
        impl<'v> Visitor<'v> for S {
            fn visit_expr(&mut self, expr: &'v Expr) {
                if let Expr::Call(c) = expr {
                    if let Expr::Attribute(a) = c.func.as_ref() {
                        let sup = matches!(a.value.as_ref(), Expr::Call(s) if matches!(s.func.as_ref(), Expr::Name(n) if n.id.as_str() == "super"));
                        if sup && matches!(a.attr.as_str(), "forward" | "__call__" | "_call_impl") {
                            self.hits.push(range(c.func.as_ref()));
                        }
                    }
                }
                visitor::walk_expr(self, expr);
            }
        }
        let mut v = S { hits: Vec::new() };
        for s in &class.body {
            v.visit_stmt(s);
        }
        let own_forward = class
            .body
            .iter()
            .any(|s| matches!(s, Stmt::FunctionDef(f) if f.name.as_str() == "forward"));
        if !own_forward {
            let at = class
                .bases()
                .first()
                .map(range)
                .unwrap_or(range(&class.name));
            self.push(Rule::KG102, at, format!("`ModelNew` inherits `forward` from the PyTorch layer `{layer}`: PyTorch computes it"));
        }
        for r in v.hits {
            self.push(Rule::KG102, r, format!("`super()` runs the forward of the PyTorch layer `{layer}`: pass its weights to your kernel instead"));
        }
    }

    /// `if self.out is None: self.out = ext.run(x)` ... `return self.out`: the first call's
    /// result is returned for every later input. (A buffer allocated once and written by a
    /// kernel every call is fine: its value is an allocation, not a computation.)
    fn check_compute_once(&mut self, class: &'a ruff_python_ast::StmtClassDef) {
        let Some(forward) = class.body.iter().rev().find_map(|s| match s {
            Stmt::FunctionDef(f) if f.name.as_str() == "forward" => Some(f),
            _ => None,
        }) else {
            return;
        };
        let params = tensor_params(forward);
        struct V<'x, 'a, 'c> {
            c: &'x Checker<'a, 'c>,
            params: &'x HashSet<String>,
            /// (stored key, range of the assignment) made under a test on that key.
            guarded: Vec<(String, std::ops::Range<usize>)>,
            returned: HashSet<String>,
        }
        impl<'a> Visitor<'a> for V<'_, 'a, '_> {
            fn visit_stmt(&mut self, stmt: &'a Stmt) {
                match stmt {
                    Stmt::If(i) => {
                        let mut tested = Vec::new();
                        struct K<'o> {
                            out: &'o mut Vec<String>,
                        }
                        impl<'v> Visitor<'v> for K<'_> {
                            fn visit_expr(&mut self, e: &'v Expr) {
                                if let Some(k) = key_of(e) {
                                    self.out.push(k);
                                }
                                visitor::walk_expr(self, e);
                            }
                        }
                        K { out: &mut tested }.visit_expr(&i.test);
                        for s in &i.body {
                            if let Stmt::Assign(a) = s {
                                for t in &a.targets {
                                    let Some(k) = key_of(t).filter(|k| k.starts_with("self."))
                                    else {
                                        continue;
                                    };
                                    if tested.contains(&k) && self.computes_from_inputs(&a.value) {
                                        self.guarded.push((k, range(s)));
                                    }
                                }
                            }
                        }
                    }
                    Stmt::Return(r) => {
                        if let Some(k) = r.value.as_deref().and_then(key_of) {
                            self.returned.insert(k);
                        }
                    }
                    _ => {}
                }
                visitor::walk_stmt(self, stmt);
            }
        }
        impl V<'_, '_, '_> {
            /// A call that is not an allocation and takes one of the inputs.
            fn computes_from_inputs(&self, e: &Expr) -> bool {
                let Expr::Call(c) = e else { return false };
                if self
                    .c
                    .names
                    .qualify(&c.func)
                    .is_some_and(|q| !torch_compute(&q))
                {
                    return false;
                }
                let mut uses = false;
                struct U<'p> {
                    params: &'p HashSet<String>,
                    hit: &'p mut bool,
                }
                impl<'v> Visitor<'v> for U<'_> {
                    fn visit_expr(&mut self, e: &'v Expr) {
                        if let Expr::Name(n) = e {
                            if self.params.contains(n.id.as_str()) {
                                *self.hit = true;
                            }
                        }
                        visitor::walk_expr(self, e);
                    }
                }
                let mut u = U {
                    params: self.params,
                    hit: &mut uses,
                };
                for a in c.arguments.args.iter() {
                    u.visit_expr(a);
                }
                uses
            }
        }
        let mut v = V {
            c: self,
            params: &params,
            guarded: Vec::new(),
            returned: HashSet::default(),
        };
        for s in &forward.body {
            v.visit_stmt(s);
        }
        let (guarded, returned) = (v.guarded, v.returned);
        for (k, r) in guarded {
            if returned.contains(&k) {
                self.push(
                    Rule::KG401,
                    r,
                    format!("`{k}` is computed once and returned for every later input: an output cache"),
                );
            }
        }
    }

    /// A body with no call at all (KG202 reports `return x` there).
    fn calls_nothing(&self, body: &[Stmt]) -> bool {
        let mut calls = CallCount(0);
        for s in body {
            calls.visit_stmt(s);
        }
        calls.0 == 0
    }

    fn check_forward(&mut self, class: &'a ruff_python_ast::StmtClassDef) {
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
                self.push(
                    Rule::KG202,
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
            self.push(
                Rule::KG202,
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
            self.push(Rule::KG202, range(&forward.name), msg);
        }
    }

    fn check_inputs(&mut self) {
        let module = self.module;
        for s in &module.body {
            match s {
                Stmt::FunctionDef(f)
                    if matches!(f.name.as_str(), "get_inputs" | "get_init_inputs") =>
                {
                    self.push(
                        Rule::KG701,
                        range(&f.name),
                        format!("the candidate redefines `{}`: kernelgate uses the reference's, remove it", f.name),
                    );
                }
                Stmt::Assign(a) => {
                    for t in &a.targets {
                        if let Expr::Name(n) = t {
                            if SIZE_NAMES.contains(&n.id.as_str())
                                && matches!(
                                    a.value.as_ref(),
                                    Expr::NumberLiteral(_) | Expr::BinOp(_)
                                )
                            {
                                self.push(
                                    Rule::KG701,
                                    range(t),
                                    format!("the candidate redefines the size constant `{}`: take sizes from the inputs", n.id),
                                );
                            }
                        }
                    }
                }
                _ => {}
            }
        }
    }

    fn check_custom_kernel(&mut self) {
        struct K<'x, 'a, 'c> {
            c: &'x Checker<'a, 'c>,
            cpp: bool,
            triton: bool,
            strings: String,
        }
        impl<'a> Visitor<'a> for K<'_, '_, '_> {
            fn visit_expr(&mut self, expr: &'a Expr) {
                match expr {
                    Expr::Call(call) if self.c.is_ext_builder(call) => self.cpp = true,
                    Expr::StringLiteral(s) if self.strings.len() < 1 << 20 => {
                        let v = s.value.to_str();
                        if v.contains("#include") || v.contains("__global__") {
                            self.strings.push_str(v);
                        }
                    }
                    _ => {}
                }
                visitor::walk_expr(self, expr);
            }
            fn visit_stmt(&mut self, stmt: &'a Stmt) {
                if let Stmt::FunctionDef(f) = stmt {
                    if f.decorator_list.iter().any(|d| {
                        let e = match &d.expression {
                            Expr::Call(c) => c.func.as_ref(),
                            e => e,
                        };
                        self.c.names.qualify(e).is_some_and(|q| under(&q, "triton"))
                    }) {
                        self.triton = true;
                    }
                }
                visitor::walk_stmt(self, stmt);
            }
        }
        let mut k = K {
            c: self,
            cpp: false,
            triton: false,
            strings: String::new(),
        };
        for s in &self.module.body {
            k.visit_stmt(s);
        }
        let (cpp, triton, strings) = (k.cpp, k.triton, k.strings);
        let imported = |p: &str| self.names.sites.iter().any(|(path, _)| under(path, p));
        let cute = imported("cutlass")
            || imported("cute")
            || strings.contains("cute/")
            || strings.contains("cutlass/");
        let tilelang = imported("tilelang");
        let tk = strings.contains("kittens");
        let other = imported("numba")
            || imported("cupy")
            || imported("warp")
            || imported("torch.cuda.jiterator");
        let any = cpp || triton || cute || tilelang || other;
        let missing = match self.ctx.backend {
            None => (!any).then_some("no custom kernel"),
            Some(Backend::Cuda | Backend::Cpp | Backend::Hip) => {
                (!cpp).then_some("no `load_inline`/`cpp_extension.load` extension")
            }
            // KG622 (triton.rs) reports a Triton backend without a kernel: one finding, the
            // more precise code.
            Some(Backend::Triton) => None,
            Some(Backend::Cute) => (!cute).then_some("no CUTLASS/CuTe kernel"),
            Some(Backend::Tilelang) => (!tilelang).then_some("no TileLang kernel"),
            Some(Backend::Thunderkittens) => (!tk).then_some("no ThunderKittens kernel"),
        };
        if let Some(what) = missing {
            let at = find_class(self.module, "ModelNew")
                .map(|c| range(&c.name))
                .unwrap_or(0..0);
            let backend = self
                .ctx
                .backend
                .map(|b| format!(" for backend `{b}`"))
                .unwrap_or_default();
            self.push(
                Rule::KG702,
                at,
                format!("{what}{backend}: the speedup can only come from PyTorch"),
            );
        }
    }
}

/// `Model` and the module-level names that alias it through assignment chains.
fn reference_names(module: &ModModule) -> HashSet<String> {
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

fn is_env_path(q: &str) -> bool {
    under(q, "os.environ")
        || under(q, "os.environb")
        || under(q, "sys.argv")
        || under(q, "sys.orig_argv")
        || q == "os.getenv"
        || q == "os.getenvb"
}

fn is_seed(q: &str) -> bool {
    matches!(
        q,
        "torch.manual_seed"
            | "torch.seed"
            | "torch.random.manual_seed"
            | "torch.cuda.manual_seed"
            | "torch.cuda.manual_seed_all"
            | "torch.set_rng_state"
            | "torch.cuda.set_rng_state"
            | "random.seed"
            | "numpy.random.seed"
    )
}

/// CuPy's array functions call its own (cuBLAS, cuDNN, CUB) kernels; `RawKernel`,
/// `RawModule`, `ElementwiseKernel`, `ReductionKernel` and conversions are how a candidate
/// writes its own.
fn cupy_compute(q: &str) -> bool {
    let Some(f) = q.strip_prefix("cupy.") else {
        return false;
    };
    let head = f.split('.').next().unwrap_or(f);
    !matches!(
        head,
        "RawKernel"
            | "RawModule"
            | "ElementwiseKernel"
            | "ReductionKernel"
            | "asarray"
            | "array"
            | "from_dlpack"
            | "fromDlpack"
            | "empty"
            | "empty_like"
            | "zeros"
            | "zeros_like"
            | "ones"
            | "full"
            | "cuda"
            | "dtype"
            | "float32"
            | "float16"
            | "int32"
            | "int64"
            | "ndarray"
            | "get_array_module"
    )
}

/// Clocks: reading one on the forward path lets behaviour depend on elapsed time.
fn is_clock(q: &str) -> bool {
    let Some(f) = q.strip_prefix("time.") else {
        return matches!(q, "datetime.datetime.now" | "datetime.datetime.utcnow");
    };
    matches!(
        f,
        "time"
            | "time_ns"
            | "perf_counter"
            | "perf_counter_ns"
            | "monotonic"
            | "monotonic_ns"
            | "process_time"
            | "process_time_ns"
            | "thread_time"
            | "thread_time_ns"
    )
}

/// What a memoised function returns, judged by what it calls.
enum Memo {
    /// It launches kernels or PyTorch ops: its results are outputs.
    Output,
    /// It builds extensions or computes configuration only.
    Config,
    /// It calls code of this file whose nature is not obvious.
    Unknown,
}

fn collect_calls<'a>(e: &'a Expr, out: &mut Vec<&'a ExprCall>) {
    struct C<'o, 'a> {
        out: &'o mut Vec<&'a ExprCall>,
    }
    impl<'a> Visitor<'a> for C<'_, 'a> {
        fn visit_expr(&mut self, expr: &'a Expr) {
            if let Expr::Call(c) = expr {
                self.out.push(c);
            }
            visitor::walk_expr(self, expr);
        }
    }
    C { out }.visit_expr(e);
}

/// `name` or `self.attr` as a lookup key.
fn key_of(e: &Expr) -> Option<String> {
    match e {
        Expr::Name(n) => Some(n.id.to_string()),
        Expr::Attribute(a) => match a.value.as_ref() {
            Expr::Name(n) if n.id.as_str() == "self" => Some(format!("self.{}", a.attr.as_str())),
            _ => None,
        },
        _ => None,
    }
}

/// `_step = _counter()` at module level, where `_counter` returns a nested function that bumps
/// a `nonlocal`: `_step` is a call counter. The range is the bump's.
fn closure_counters(module: &ModModule) -> Vec<(String, std::ops::Range<usize>)> {
    let factories: HashMap<&str, std::ops::Range<usize>> = module
        .body
        .iter()
        .filter_map(|s| match s {
            Stmt::FunctionDef(f) => closure_bump(f).map(|r| (f.name.as_str(), r)),
            _ => None,
        })
        .collect();
    let mut out = Vec::new();
    for s in &module.body {
        let Stmt::Assign(a) = s else { continue };
        let Expr::Call(c) = a.value.as_ref() else {
            continue;
        };
        let Expr::Name(factory) = c.func.as_ref() else {
            continue;
        };
        if let Some(bump) = factories.get(factory.id.as_str()) {
            for t in &a.targets {
                if let Expr::Name(n) = t {
                    out.push((n.id.to_string(), bump.clone()));
                }
            }
        }
    }
    out
}

/// Where `f` returns a nested function that increments or decrements a `nonlocal` name: the
/// increment's range.
fn closure_bump(f: &StmtFunctionDef) -> Option<std::ops::Range<usize>> {
    let returned: HashSet<&str> = f
        .body
        .iter()
        .filter_map(|s| match s {
            Stmt::Return(r) => match r.value.as_deref() {
                Some(Expr::Name(n)) => Some(n.id.as_str()),
                _ => None,
            },
            _ => None,
        })
        .collect();
    for s in &f.body {
        let Stmt::FunctionDef(inner) = s else {
            continue;
        };
        if !returned.contains(inner.name.as_str()) {
            continue;
        }
        let nonlocals = global_names(inner);
        for st in &inner.body {
            if let Stmt::AugAssign(a) = st {
                if matches!(a.op, Operator::Add | Operator::Sub)
                    && matches!(a.target.as_ref(), Expr::Name(n) if nonlocals.contains(n.id.as_str()))
                {
                    return Some(range(st));
                }
            }
        }
    }
    None
}

fn global_names(f: &StmtFunctionDef) -> HashSet<String> {
    let mut out = HashSet::default();
    for s in &f.body {
        match s {
            Stmt::Global(g) => out.extend(g.names.iter().map(|n| n.to_string())),
            // A closure's `nonlocal n` outlives the call just like a global.
            Stmt::Nonlocal(g) => out.extend(g.names.iter().map(|n| n.to_string())),
            _ => {}
        }
    }
    out
}

struct CallCount(usize);
impl<'a> Visitor<'a> for CallCount {
    fn visit_expr(&mut self, expr: &'a Expr) {
        if matches!(expr, Expr::Call(_)) {
            self.0 += 1;
        }
        visitor::walk_expr(self, expr);
    }
}

struct RefUses<'x, 'a, 'c> {
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
            if a.attr.as_str() == "Model" && self.c.names.qualify(&a.value).is_some() {
                self.hits.push(range(expr));
                return;
            }
        }
        visitor::walk_expr(self, expr);
    }
}

// -------------------------------------------------------------------- whole-file visitor

struct FileVisitor<'x, 'a, 'c> {
    c: &'x mut Checker<'a, 'c>,
    in_inputs_fn: u32,
}

impl<'a> Visitor<'a> for FileVisitor<'_, 'a, '_> {
    fn visit_stmt(&mut self, stmt: &'a Stmt) {
        if matches!(stmt, Stmt::If(_)) && self.c.names.in_main_block(usize::from(stmt.start())) {
            // A self-test under `if __name__ == "__main__":` never runs under the harness.
            return;
        }
        match stmt {
            Stmt::Try(t) if !t.handlers.is_empty() => {
                let s = usize::from(t.start());
                self.c.push(Rule::KG201, s..s + 3, "`try`/`except` can hide a failing kernel behind a fallback; let errors propagate");
            }
            Stmt::With(w) => {
                for item in &w.items {
                    if let Expr::Call(call) = &item.context_expr {
                        if self.c.names.qualify(&call.func).as_deref()
                            == Some("contextlib.suppress")
                        {
                            self.c.push(
                                Rule::KG201,
                                range(&item.context_expr),
                                "`contextlib.suppress` swallows a failing kernel's error",
                            );
                        }
                    }
                }
            }
            Stmt::Assign(a) => {
                for t in &a.targets {
                    self.target(t, Some(&a.value));
                }
            }
            Stmt::AugAssign(a) => self.target(&a.target, Some(&a.value)),
            Stmt::AnnAssign(a) => self.target(&a.target, a.value.as_deref()),
            Stmt::Delete(d) => {
                for t in &d.targets {
                    self.target(t, None);
                }
            }
            Stmt::ClassDef(c) => {
                for s in &c.body {
                    if let Stmt::Assign(a) = s {
                        // `class ModelNew: act = torch.relu` is called as `self.act(x)`.
                        self.stored_torch_ops(&a.value);
                    }
                }
                for base in c.bases() {
                    if let Some(q) = self.c.names.qualify(base) {
                        if [
                            "torch.Tensor",
                            "torch._C.TensorBase",
                            "torch._C._TensorBase",
                        ]
                        .contains(&q.as_str())
                            || q.ends_with("TorchFunctionMode")
                            || q.ends_with("TorchDispatchMode")
                        {
                            self.c.push(Rule::KG405, range(base), format!("`{}` subclasses `{q}`: a lazy tensor can compute only when compared", c.name));
                        }
                    }
                }
            }
            Stmt::FunctionDef(f) => {
                if matches!(f.name.as_str(), "__torch_function__" | "__torch_dispatch__") {
                    self.c.push(Rule::KG405, range(&f.name), format!("`{}` intercepts PyTorch ops: a lazy tensor can compute only when compared", f.name));
                }
                let inputs = matches!(f.name.as_str(), "get_inputs" | "get_init_inputs");
                self.in_inputs_fn += inputs as u32;
                visitor::walk_stmt(self, stmt);
                self.in_inputs_fn -= inputs as u32;
                return;
            }
            _ => {}
        }
        visitor::walk_stmt(self, stmt);
    }

    fn visit_expr(&mut self, expr: &'a Expr) {
        match expr {
            Expr::Call(call) => self.c.check_call(call, self.in_inputs_fn > 0),
            Expr::Lambda(l) if !self.c.in_reachable(usize::from(l.start())) => {
                // `self.act = lambda t: torch.relu(t)` runs on the forward path through `self.act(x)`.
                let mut calls = Vec::new();
                collect_calls(&l.body, &mut calls);
                let params: HashSet<&str> = l
                    .parameters
                    .as_deref()
                    .map(|p| p.iter().map(|p| p.name().as_str()).collect())
                    .unwrap_or_default();
                for call in calls {
                    if let Some(q) = self.c.names.qualify(&call.func) {
                        if torch_compute(&q) {
                            self.c.push(Rule::KG101, range(call.func.as_ref()), format!("a lambda calls the PyTorch compute op `{q}` instead of your kernel"));
                        }
                    } else if let Expr::Attribute(a) = call.func.as_ref() {
                        // `lambda t: t.sigmoid()`: a tensor method on the lambda's argument.
                        let m = a.attr.as_str();
                        let on_param = matches!(a.value.as_ref(), Expr::Name(n) if params.contains(n.id.as_str()));
                        if on_param && tensor_compute_method(m) && !self.c.ext_functions.contains(m)
                        {
                            self.c.push(Rule::KG104, range(&a.attr), format!("a lambda calls the tensor compute method `.{m}()` instead of your kernel"));
                        }
                    }
                }
            }
            Expr::Attribute(a) => {
                let attr = a.attr.as_str();
                if matches!(
                    attr,
                    "f_back"
                        | "f_locals"
                        | "f_globals"
                        | "__globals__"
                        | "gi_frame"
                        | "tb_frame"
                        | "__subclasses__"
                        | "__closure__"
                ) {
                    self.c.push(
                        Rule::KG304,
                        range(&a.attr),
                        format!("`.{attr}` reaches into frames or other modules' state"),
                    );
                }
                if matches!(
                    attr,
                    "_make_subclass" | "_make_wrapper_subclass" | "as_subclass"
                ) {
                    self.c.push(
                        Rule::KG405,
                        range(&a.attr),
                        format!("`.{attr}` builds a tensor subclass that can defer work"),
                    );
                    return;
                }
                if let Some(q) = self.c.names.qualify(expr) {
                    if let Some((code, msg)) = banned(&q) {
                        if !self.c.root_banned(expr) {
                            self.c.push(code, range(expr), format!("{msg} (`{q}`)"));
                        }
                        return; // report the outermost banned path once
                    }
                }
            }
            Expr::Name(n) if n.ctx.is_load() => {
                if self.c.names.binding(n.id.as_str()).is_none() {
                    if let Some(q) = self.c.names.qualify(expr) {
                        if let Some((code, msg)) = banned(&q) {
                            self.c.push(code, range(expr), msg.to_string());
                        }
                    }
                }
            }
            _ => {}
        }
        visitor::walk_expr(self, expr);
    }
}

impl<'a> FileVisitor<'_, 'a, '_> {
    fn target(&mut self, t: &'a Expr, value: Option<&'a Expr>) {
        match t {
            Expr::Attribute(a) => {
                if let Some(path) = self.c.names.qualify(t) {
                    let _ = a;
                    self.c.tamper(&path, range(t), value);
                }
            }
            Expr::Tuple(tu) => tu.elts.iter().for_each(|e| self.target(e, None)),
            // torch.nn.functional.__dict__["relu"] = ...
            Expr::Subscript(sub) => {
                if self.c.fp32()
                    && value.is_some()
                    && self.c.names.qualify(&sub.value).as_deref() == Some("os.environ")
                    && self.c.tf32_env_key(&sub.slice)
                {
                    self.c.push(
                        Rule::KG502,
                        range(t),
                        "sets a TF32 override in the environment on an fp32 problem",
                    );
                }
                if let Expr::Attribute(d) = sub.value.as_ref() {
                    if d.attr.as_str() == "__dict__" {
                        if let Some(base) = self.c.names.qualify(&d.value) {
                            let name = self
                                .c
                                .names
                                .fold_str(&sub.slice)
                                .unwrap_or_else(|| "?".into());
                            self.c.tamper(&format!("{base}.{name}"), range(t), value);
                        }
                    }
                }
            }
            _ => {}
        }
        // `self.act = torch.relu` / `OPS = {"act": F.gelu}`: a PyTorch op stored to be called
        // later under a name the call site cannot resolve. Plain-name aliases resolve at calls.
        if let Some(v) = value {
            if !matches!(t, Expr::Name(_))
                || matches!(v, Expr::List(_) | Expr::Tuple(_) | Expr::Dict(_))
            {
                self.stored_torch_ops(v);
            }
        }
    }

    fn stored_torch_ops(&mut self, v: &'a Expr) {
        match v {
            Expr::List(l) => l.elts.iter().for_each(|e| self.stored_torch_ops(e)),
            Expr::Tuple(l) => l.elts.iter().for_each(|e| self.stored_torch_ops(e)),
            Expr::Dict(d) => d.iter_values().for_each(|e| self.stored_torch_ops(e)),
            Expr::Attribute(_) | Expr::Name(_) => {
                if let Some(q) = self.c.names.qualify(v) {
                    if torch_compute(&q) {
                        self.c.push(Rule::KG101, range(v), format!("stores the PyTorch compute op `{q}` to call it later instead of your kernel"));
                    }
                }
            }
            // `partial(F.leaky_relu, ...)`, `staticmethod(F.relu)`: the op is still what runs.
            Expr::Call(c) => {
                let wrapper = match self.c.names.qualify(&c.func) {
                    Some(q) => q == "functools.partial",
                    None => {
                        matches!(c.func.as_ref(), Expr::Name(n) if matches!(n.id.as_str(), "staticmethod" | "classmethod"))
                    }
                };
                if wrapper {
                    if let Some(a) = c.arguments.args.first() {
                        self.stored_torch_ops(a);
                    }
                }
            }
            _ => {}
        }
    }
}

// -------------------------------------------------------------------- caches

struct CacheVisitor<'x, 'a, 'c> {
    c: &'x mut Checker<'a, 'c>,
    /// `forward`'s inputs: a tensor used as a key is hashed by identity.
    tensor_params: HashSet<String>,
    /// Local name -> the expression assigned to it (for `key = x.data_ptr()`).
    locals: HashMap<String, &'a Expr>,
    /// Containers probed with a shape key, with the probe's range.
    shape_probes: Vec<(String, std::ops::Range<usize>)>,
    /// Containers whose elements are returned.
    returned: HashSet<String>,
}

#[derive(PartialEq)]
enum KeyKind {
    Identity,
    Shape,
    Plain,
}

impl<'a> CacheVisitor<'_, 'a, '_> {
    fn key_kind(&self, e: &Expr, depth: u8) -> KeyKind {
        struct S<'k, 'a> {
            locals: &'k HashMap<String, &'a Expr>,
            names: &'k Names,
            identity: bool,
            shape: bool,
            depth: u8,
        }
        impl<'v> Visitor<'v> for S<'_, '_> {
            fn visit_expr(&mut self, expr: &'v Expr) {
                match expr {
                    Expr::Call(c) => {
                        if let Expr::Attribute(a) = c.func.as_ref() {
                            match a.attr.as_str() {
                                // Identity, or a content fingerprint (`x.flatten()[:16].tolist()`).
                                "data_ptr" | "untyped_storage" | "storage" | "storage_offset"
                                | "tolist" | "item" | "tobytes" | "numpy" => self.identity = true,
                                "size" | "stride" => self.shape = true,
                                _ => {}
                            }
                        }
                        if matches!(
                            self.names.qualify(&c.func).as_deref(),
                            Some("builtins.id" | "builtins.hash")
                        ) {
                            self.identity = true;
                        }
                    }
                    Expr::Attribute(a) => match a.attr.as_str() {
                        "_cdata" | "__array_interface__" | "__cuda_array_interface__" => {
                            self.identity = true
                        }
                        "shape" => self.shape = true,
                        _ => {}
                    },
                    Expr::Name(n) if self.depth < 3 => {
                        if let Some(v) = self.locals.get(n.id.as_str()) {
                            self.depth += 1;
                            self.visit_expr(v);
                            self.depth -= 1;
                        }
                    }
                    _ => {}
                }
                visitor::walk_expr(self, expr);
            }
        }
        let mut s = S {
            locals: &self.locals,
            names: &self.c.names,
            identity: false,
            shape: false,
            depth,
        };
        s.visit_expr(e);
        if s.identity {
            KeyKind::Identity
        } else if s.shape {
            KeyKind::Shape
        } else {
            KeyKind::Plain
        }
    }

    fn probe(&mut self, container: &Expr, key: &Expr, r: std::ops::Range<usize>) {
        let Some(name) = key_of(container).or_else(|| self.c.names.qualify(container)) else {
            return;
        };
        let direct = matches!(key, Expr::Name(n) if self.tensor_params.contains(n.id.as_str()));
        let kind = if direct {
            KeyKind::Identity
        } else {
            self.key_kind(key, 0)
        };
        match kind {
            KeyKind::Identity => {
                self.c.push(Rule::KG401, r, format!("`{name}` is keyed by tensor identity (`data_ptr()`/`id()`): an output cache"));
            }
            KeyKind::Shape => self.shape_probes.push((name, r)),
            KeyKind::Plain => {}
        }
    }
}

impl<'a> Visitor<'a> for CacheVisitor<'_, 'a, '_> {
    fn visit_stmt(&mut self, stmt: &'a Stmt) {
        match stmt {
            Stmt::FunctionDef(_) | Stmt::ClassDef(_) => return,
            Stmt::Assign(a) => {
                if let [Expr::Name(n)] = a.targets.as_slice() {
                    self.locals.insert(n.id.to_string(), &a.value);
                }
            }
            Stmt::Return(r) => {
                if let Some(v) = r.value.as_deref() {
                    let c = match v {
                        Expr::Subscript(s) => Some(s.value.as_ref()),
                        Expr::Call(c) => match c.func.as_ref() {
                            Expr::Attribute(a)
                                if matches!(a.attr.as_str(), "get" | "setdefault" | "pop") =>
                            {
                                Some(a.value.as_ref())
                            }
                            _ => None,
                        },
                        _ => None,
                    };
                    if let Some(k) = c.and_then(|c| key_of(c).or_else(|| self.c.names.qualify(c))) {
                        self.returned.insert(k);
                    }
                    if let Expr::Name(n) = v {
                        // `out = cache[key]; return out`, `out = cache.get(key); return out`
                        let stored = match self.locals.get(n.id.as_str()).copied() {
                            Some(Expr::Subscript(s)) => Some(s.value.as_ref()),
                            Some(Expr::Call(c)) => match c.func.as_ref() {
                                Expr::Attribute(a)
                                    if matches!(a.attr.as_str(), "get" | "setdefault" | "pop") =>
                                {
                                    Some(a.value.as_ref())
                                }
                                _ => None,
                            },
                            _ => None,
                        };
                        if let Some(k) =
                            stored.and_then(|c| key_of(c).or_else(|| self.c.names.qualify(c)))
                        {
                            self.returned.insert(k);
                        }
                    }
                }
            }
            _ => {}
        }
        visitor::walk_stmt(self, stmt);
    }

    fn visit_expr(&mut self, expr: &'a Expr) {
        match expr {
            Expr::Subscript(s) => {
                if !matches!(s.value.as_ref(), Expr::Name(n) if self.c.names.binding(n.id.as_str()).is_some())
                {
                    self.probe(&s.value, &s.slice, range(expr));
                }
            }
            Expr::Compare(c) => {
                for (op, right) in c.ops.iter().zip(c.comparators.iter()) {
                    if matches!(
                        op,
                        ruff_python_ast::CmpOp::In | ruff_python_ast::CmpOp::NotIn
                    ) {
                        self.probe(right, &c.left, range(expr));
                    }
                }
            }
            Expr::Call(call) => {
                if let Expr::Attribute(a) = call.func.as_ref() {
                    if matches!(
                        a.attr.as_str(),
                        "get" | "setdefault" | "pop" | "__contains__" | "__getitem__"
                    ) {
                        if let Some(k) = call.arguments.args.first() {
                            self.probe(&a.value, k, range(expr));
                        }
                    }
                }
            }
            _ => {}
        }
        visitor::walk_expr(self, expr);
    }
}

// -------------------------------------------------------------------- live visitor

struct LiveVisitor<'x, 'a, 'c> {
    c: &'x mut Checker<'a, 'c>,
    local_layers: HashSet<String>,
    globals: HashSet<String>,
    counters: Vec<(String, std::ops::Range<usize>)>,
    tests: Vec<(String, std::ops::Range<usize>)>,
    /// Local names known to hold tensors: `forward`'s inputs, extension results, allocations
    /// and views of those.
    tensors: HashSet<String>,
    /// Local names holding lists of such tensors (`parts = [ext.run(c) for c in ...]`).
    tensor_lists: HashSet<String>,
    /// Function name -> positions and keywords that received a tensor at a live call.
    tensor_args: HashMap<String, (HashSet<usize>, HashSet<String>)>,
    /// `forward`'s input tensors and local views of them (same storage).
    inputs: HashMap<String, String>,
    /// Start offsets of call targets and arguments already judged by `check_live_call`.
    handled: HashSet<usize>,
    /// Visiting `ModelNew.forward` itself.
    entry: bool,
    /// The body of the function being visited.
    body: &'a [Stmt],
    /// A method of `ModelNew`: `self` is the instance the problem's facts describe.
    model_method: bool,
    /// Start offsets of calls whose result is thrown away (`ext.run(x)` as a statement).
    discarded: HashSet<usize>,
    /// Locals bound to a fresh allocation (`ws = torch.empty(...)`).
    allocs: HashSet<String>,
}

/// Methods that return a tensor sharing storage with the receiver.
const SAME_STORAGE: &[&str] = &[
    "view",
    "view_as",
    "reshape",
    "reshape_as",
    "contiguous",
    "flatten",
    "permute",
    "transpose",
    "t",
    "detach",
    "squeeze",
    "unsqueeze",
    "expand",
    "expand_as",
    "narrow",
    "select",
    "as_strided",
    "unflatten",
    "movedim",
];

/// In-place tensor methods that do not change values.
const INPLACE_HARMLESS: &[&str] = &["requires_grad_", "share_memory_", "record_stream"];

/// The parameters of a helper that received tensors at live call sites (minus `self`).
fn helper_tensor_params(
    f: &StmtFunctionDef,
    is_method: bool,
    seen: Option<&(HashSet<usize>, HashSet<String>)>,
) -> HashSet<String> {
    let Some((pos, kw)) = seen else {
        return HashSet::default();
    };
    let scalar = |p: &ruff_python_ast::Parameter| {
        p.annotation.as_deref().is_some_and(|a| {
            matches!(a, Expr::Name(n) if matches!(n.id.as_str(), "int" | "float" | "bool" | "str"))
        })
    };
    f.parameters
        .posonlyargs
        .iter()
        .chain(f.parameters.args.iter())
        .skip(is_method as usize)
        .enumerate()
        .filter(|(i, p)| {
            (pos.contains(i) || kw.contains(p.parameter.name.as_str())) && !scalar(&p.parameter)
        })
        .map(|(_, p)| p.parameter.name.to_string())
        .collect()
}

/// `forward`'s parameters that carry tensors: not `self`, not annotated as a Python scalar,
/// without a non-`None` default (`_memo={}`, `dim=1`).
fn tensor_params(f: &StmtFunctionDef) -> HashSet<String> {
    f.parameters
        .iter_non_variadic_params()
        .filter(|p| p.parameter.name.as_str() != "self")
        .filter(|p| p.default.as_deref().is_none_or(|d| d.is_none_literal_expr()))
        .filter(|p| {
            !p.parameter.annotation.as_deref().is_some_and(|a| {
                matches!(a, Expr::Name(n) if matches!(n.id.as_str(), "int" | "float" | "bool" | "str"))
            })
        })
        .map(|p| p.parameter.name.to_string())
        .collect()
}

/// Tensor methods that return a view or a copy of the same values (the result is a tensor).
const TENSOR_LAYOUT: &[&str] = &[
    "view",
    "view_as",
    "reshape",
    "reshape_as",
    "contiguous",
    "flatten",
    "permute",
    "transpose",
    "t",
    "clone",
    "detach",
    "to",
    "float",
    "squeeze",
    "unsqueeze",
    "expand",
    "expand_as",
    "narrow",
    "select",
    "cuda",
];

impl<'a> LiveVisitor<'_, 'a, '_> {
    /// Does this expression evaluate to a tensor we know of?
    fn is_tensor(&self, e: &Expr) -> bool {
        match e {
            Expr::Name(n) => self.tensors.contains(n.id.as_str()),
            Expr::Subscript(s) => self.is_tensor(&s.value),
            Expr::BinOp(b) => self.tensor_operand(&b.left) || self.tensor_operand(&b.right),
            Expr::UnaryOp(u) => self.is_tensor(&u.operand),
            Expr::Call(c) => match c.func.as_ref() {
                Expr::Attribute(a) => {
                    if let Some(q) = self.c.names.qualify(&c.func) {
                        let f = q.strip_prefix("torch.").unwrap_or("");
                        under(&q, "torch")
                            && (f.starts_with("empty")
                                || f.starts_with("zeros")
                                || f.starts_with("ones")
                                || f.starts_with("full"))
                    } else if self.c.is_ext_call_target(&a.value, a.attr.as_str()) {
                        true
                    } else {
                        TENSOR_LAYOUT.contains(&a.attr.as_str()) && self.is_tensor(&a.value)
                    }
                }
                _ => false,
            },
            _ => false,
        }
    }

    /// Is `offset` inside an `if` that tests for an empty input (`if x.numel() == 0:`)? An
    /// empty output is then the right answer, not an unwritten one.
    fn under_empty_input_guard(&self, offset: usize) -> bool {
        struct G<'s> {
            src: &'s str,
            offset: usize,
            found: bool,
        }
        impl<'v> Visitor<'v> for G<'_> {
            fn visit_stmt(&mut self, stmt: &'v Stmt) {
                if let Stmt::If(i) = stmt {
                    let in_body = i.body.first().zip(i.body.last()).is_some_and(|(a, b)| {
                        (usize::from(a.start())..usize::from(b.end())).contains(&self.offset)
                    });
                    if in_body {
                        let t = &self.src[range(i.test.as_ref())];
                        let t: String = t.chars().filter(|c| !c.is_whitespace()).collect();
                        if t.contains("==0") || t.contains("<=0") || t.contains("<1") {
                            self.found = true;
                        }
                    }
                }
                visitor::walk_stmt(self, stmt);
            }
        }
        let mut g = G {
            src: self.c.ctx.source,
            offset,
            found: false,
        };
        for s in self.body {
            g.visit_stmt(s);
        }
        g.found
    }

    /// The input an expression's storage belongs to (`x`, `x[0]`, `x.view(-1)`, `x.data`).
    fn input_root(&self, e: &Expr) -> Option<String> {
        match e {
            Expr::Name(n) => self.inputs.get(n.id.as_str()).cloned(),
            Expr::Subscript(s) => self.input_root(&s.value),
            Expr::Attribute(a) if matches!(a.attr.as_str(), "data" | "T" | "mT") => {
                self.input_root(&a.value)
            }
            Expr::Call(c) => match c.func.as_ref() {
                Expr::Attribute(a) if SAME_STORAGE.contains(&a.attr.as_str()) => {
                    self.input_root(&a.value)
                }
                _ => None,
            },
            _ => None,
        }
    }

    fn mutation(&mut self, r: std::ops::Range<usize>, input: &str, how: &str) {
        self.c.push(
            Rule::KG407,
            r,
            if how == "returning it as the output" {
                format!("`forward` returns its input `{input}` (or a view of it): the output aliases an input, so the work was done in place or not at all")
            } else {
                format!("{how} writes into the input `{input}`: inputs must stay unchanged; write to a fresh output")
            },
        );
    }

    /// A write through an assignment target: `x[...] = v`, `x.data = v`, `x += v`.
    fn target_mutation(&mut self, t: &Expr, how: &str) {
        let root = match t {
            Expr::Subscript(s) => self.input_root(&s.value),
            Expr::Attribute(a) if a.attr.as_str() == "data" => self.input_root(&a.value),
            Expr::Name(_) if how.ends_with('=') && how != "=" => self.input_root(t),
            _ => None,
        };
        if let Some(input) = root {
            self.mutation(range(t), &input, how);
        }
    }

    /// An operand that makes an operator a PyTorch kernel: a known tensor, a comparison or
    /// negation of one.
    fn tensor_operand(&self, e: &Expr) -> bool {
        match e {
            Expr::Compare(c) => {
                self.is_tensor(&c.left) || c.comparators.iter().any(|x| self.is_tensor(x))
            }
            Expr::UnaryOp(u) => self.is_tensor(&u.operand),
            other => self.is_tensor(other),
        }
    }

    fn operator_finding(&mut self, r: std::ops::Range<usize>, op: &str) {
        self.c.push(
            Rule::KG104,
            r,
            format!("`{op}` on a tensor runs a PyTorch kernel on the forward path instead of your kernel"),
        );
    }

    /// The source position of the operator between two operands.
    fn op_range(&self, left: &Expr, right: &Expr, whole: &Expr) -> std::ops::Range<usize> {
        let (l, r) = (usize::from(left.end()), usize::from(right.start()));
        let between = &self.c.ctx.source[l..r];
        match between.find(|c: char| !c.is_whitespace() && c != ')' && c != '(') {
            Some(i) => {
                let len = between[i..]
                    .find(|c: char| c.is_whitespace() || c == '(' || c.is_alphanumeric())
                    .unwrap_or(1)
                    .max(1);
                l + i..l + i + len
            }
            None => range(whole),
        }
    }

    /// Identity of an input compared with stored state: `x.data_ptr() == self.last_ptr`,
    /// `x is self._x`. The stored result is returned when the same tensor comes back.
    fn identity_compare(&mut self, c: &'a ruff_python_ast::ExprCompare) {
        let all: Vec<&Expr> = std::iter::once(c.left.as_ref())
            .chain(c.comparators.iter())
            .collect();
        let identity = |e: &Expr| -> bool {
            let mut found = false;
            let mut calls = Vec::new();
            collect_calls(e, &mut calls);
            for call in calls {
                if let Expr::Attribute(a) = call.func.as_ref() {
                    if matches!(a.attr.as_str(), "data_ptr" | "untyped_storage" | "storage") {
                        found = true;
                    }
                }
                if matches!(
                    self.c.names.qualify(&call.func).as_deref(),
                    Some("builtins.id")
                ) {
                    found = true;
                }
            }
            found
        };
        let is_ops = c.ops.iter().all(|o| {
            matches!(
                o,
                ruff_python_ast::CmpOp::Is | ruff_python_ast::CmpOp::IsNot
            )
        });
        let input = all.iter().any(|e| {
            identity(e)
                || (is_ops && matches!(e, Expr::Name(n) if self.tensors.contains(n.id.as_str())))
        });
        let stored = all.iter().any(|e| {
            key_of(e).is_some_and(|k| k.starts_with("self."))
                || matches!(e, Expr::Name(n) if self.globals.contains(n.id.as_str()) || self.c.module_names.contains(n.id.as_str()))
        });
        if input && stored {
            self.c.push(
                Rule::KG401,
                range(c),
                "compares an input's identity with one seen before: the stored result can be returned for a repeated tensor",
            );
        }
    }
    fn layer_target(&self, e: &Expr) -> Option<String> {
        match e {
            Expr::Subscript(s) => self.layer_target(&s.value),
            Expr::Attribute(a)
                if matches!(
                    a.attr.as_str(),
                    "forward" | "__call__" | "_call_impl" | "_wrapped_call_impl"
                ) =>
            {
                self.layer_target(&a.value)
            }
            Expr::Call(c) => self.c.layer_kind(c),
            Expr::Name(n) if self.local_layers.contains(n.id.as_str()) => Some(n.id.to_string()),
            other => key_of(other).and_then(|k| self.c.layers.get(&k).cloned()),
        }
    }

    fn counter_key(&self, e: &Expr) -> Option<String> {
        match e {
            Expr::Name(n) if self.globals.contains(n.id.as_str()) => Some(n.id.to_string()),
            Expr::Attribute(a) => key_of(e)
                .filter(|k| k.starts_with("self."))
                .or_else(|| self.module_level(&a.value)),
            // `_state["n"] += 1` needs no `global`: the container is module state.
            Expr::Subscript(s) => self
                .counter_key(&s.value)
                .or_else(|| self.module_level(&s.value)),
            _ => None,
        }
    }

    /// `getattr(self, "calls", 0)` as the key `self.calls`.
    fn getattr_self_key(&self, e: &Expr) -> Option<String> {
        let Expr::Call(c) = e else { return None };
        if self.c.names.qualify(&c.func).as_deref() != Some("builtins.getattr") {
            return None;
        }
        let args = &c.arguments.args;
        match args.first() {
            Some(Expr::Name(n)) if n.id.as_str() == "self" => {
                Some(format!("self.{}", self.c.names.fold_str(args.get(1)?)?))
            }
            _ => None,
        }
    }

    fn module_level(&self, e: &Expr) -> Option<String> {
        match e {
            Expr::Name(n) if self.c.module_names.contains(n.id.as_str()) => Some(n.id.to_string()),
            _ => None,
        }
    }

    fn record_test(&mut self, test: &Expr) {
        struct T<'k> {
            out: &'k mut Vec<(String, std::ops::Range<usize>)>,
            at: std::ops::Range<usize>,
        }
        impl<'v> Visitor<'v> for T<'_> {
            fn visit_expr(&mut self, expr: &'v Expr) {
                if let Some(k) = key_of(expr) {
                    self.out.push((k, self.at.clone()));
                }
                visitor::walk_expr(self, expr);
            }
        }
        let at = range(test);
        T {
            out: &mut self.tests,
            at,
        }
        .visit_expr(test);
    }
}

impl<'a> Visitor<'a> for LiveVisitor<'_, 'a, '_> {
    fn visit_stmt(&mut self, stmt: &'a Stmt) {
        match stmt {
            Stmt::AugAssign(a) => {
                if a.op == Operator::MatMult {
                    self.c.push(
                        Rule::KG103,
                        range(stmt),
                        "`@=` multiplies tensors with PyTorch's matmul",
                    );
                } else if self.is_tensor(&a.target) {
                    let r = self.op_range(&a.target, &a.value, &a.target);
                    let op = format!("{}=", a.op.as_str());
                    self.operator_finding(r, &op);
                }
                if a.op != Operator::MatMult {
                    let how = format!("`{}=`", a.op.as_str());
                    match a.target.as_ref() {
                        Expr::Name(_) => {
                            if let Some(input) = self.input_root(&a.target) {
                                self.mutation(range(a.target.as_ref()), &input, &how);
                            }
                        }
                        t => self.target_mutation(t, &how),
                    }
                }
                if matches!(a.op, Operator::Add | Operator::Sub) {
                    if let Some(k) = self.counter_key(&a.target) {
                        self.counters.push((k, range(stmt)));
                    }
                }
            }
            Stmt::Assign(a) => {
                for t in &a.targets {
                    self.target_mutation(t, "an assignment");
                    // `self._pending = x` / `self.saved.append(x)` keep an input beyond the call.
                    if key_of(t).is_some_and(|k| k.starts_with("self.")) {
                        if let Some(input) = self.input_root(&a.value) {
                            self.c.push(Rule::KG401, range(stmt), format!("keeps the input `{input}` in `{}` across calls: later calls can return or batch stored work", self.c.text(t)));
                        }
                    }
                }
                if let [Expr::Name(n)] = a.targets.as_slice() {
                    if let Some(origin) = self.input_root(&a.value) {
                        self.inputs.insert(n.id.to_string(), origin);
                    } else {
                        self.inputs.remove(n.id.as_str());
                    }
                }
                if let [Expr::Name(n)] = a.targets.as_slice() {
                    let id = n.id.to_string();
                    let list = match a.value.as_ref() {
                        Expr::ListComp(l) => self.is_tensor(&l.elt),
                        Expr::List(l) => {
                            !l.elts.is_empty() && l.elts.iter().all(|e| self.is_tensor(e))
                        }
                        _ => false,
                    };
                    if self.is_tensor(&a.value) {
                        self.tensors.insert(id.clone());
                    } else {
                        self.tensors.remove(&id);
                    }
                    if list {
                        self.tensor_lists.insert(id);
                    }
                }
                // self.calls = self.calls + 1
                if let (Some(t), Expr::BinOp(b)) = (a.targets.first(), a.value.as_ref()) {
                    let left = key_of(&b.left).or_else(|| self.getattr_self_key(&b.left));
                    if let (Some(k), Some(k2)) = (self.counter_key(t), left) {
                        if k == k2 {
                            self.counters.push((k, range(stmt)));
                        }
                    }
                }
                if let (Some(Expr::Name(n)), Expr::Call(c)) = (a.targets.first(), a.value.as_ref())
                {
                    if self.c.layer_kind(c).is_some() {
                        self.local_layers.insert(n.id.to_string());
                    }
                }
            }
            Stmt::For(f) => {
                if self.layer_target(&f.iter).is_some() {
                    if let Expr::Name(n) = f.target.as_ref() {
                        self.local_layers.insert(n.id.to_string());
                    }
                }
            }
            Stmt::If(s) => self.record_test(&s.test),
            Stmt::While(s) => self.record_test(&s.test),
            Stmt::Return(r) if self.entry && !self.c.calls_nothing(self.body) => {
                // `ext.relu_(x); return x`: the output is the input, computed in place. (Under
                // `if x.numel() == 0:` the input is the right, empty, answer.)
                let guarded = self.under_empty_input_guard(usize::from(stmt.start()));
                let values: Vec<&Expr> = match r.value.as_deref() {
                    _ if guarded => vec![],
                    Some(Expr::Tuple(t)) => t.elts.iter().collect(),
                    Some(v) => vec![v],
                    None => vec![],
                };
                for v in values {
                    if let Some(input) = self.input_root(v) {
                        self.mutation(range(v), &input, "returning it as the output");
                    }
                }
                // `return torch.empty_like(x)`: an output nothing wrote (stale memory, or the
                // previous result the allocator hands back).
                if let Some(Expr::Call(c)) = r.value.as_deref() {
                    let q = self.c.names.qualify(&c.func);
                    let empty_input = self.under_empty_input_guard(usize::from(stmt.start()));
                    match q.as_deref() {
                        _ if empty_input => {}
                        Some("torch.empty" | "torch.empty_like" | "torch.empty_strided") => {
                            self.c.push(Rule::KG202, range(c), "`forward` returns a fresh `torch.empty` that no kernel wrote: its contents are whatever the allocator left there");
                        }
                        Some(
                            "torch.zeros" | "torch.zeros_like" | "torch.ones" | "torch.ones_like"
                            | "torch.full" | "torch.full_like",
                        ) => {
                            self.c.push(Rule::KG202, range(c), "`forward` returns a constant tensor that no kernel wrote: a trivial output that passes only a loose tolerance");
                        }
                        _ => {}
                    }
                }
            }
            Stmt::FunctionDef(f) if self.c.gpu_dsl(f) => return,
            _ => {}
        }
        if let Stmt::Expr(e) = stmt {
            if let Expr::Call(c) = e.value.as_ref() {
                self.discarded.insert(usize::from(c.start()));
            }
        }
        if let Stmt::Assign(a) = stmt {
            if let [Expr::Name(n)] = a.targets.as_slice() {
                if self.is_alloc(&a.value) {
                    self.allocs.insert(n.id.to_string());
                } else {
                    self.allocs.remove(n.id.as_str());
                }
            }
        }
        let ctx: &Context = self.c.ctx;
        let scope = super::consts::Scope {
            facts: &ctx.facts,
            self_is_model: self.model_method,
        };
        walk_stmt_live(self, stmt, scope);
    }

    fn visit_expr(&mut self, expr: &'a Expr) {
        match expr {
            Expr::BinOp(b) if b.op == Operator::MatMult => {
                let (l, r) = (usize::from(b.left.end()), usize::from(b.right.start()));
                let at = self.c.ctx.source[l..r]
                    .find('@')
                    .map(|i| l + i..l + i + 1)
                    .unwrap_or_else(|| range(expr));
                self.c.push(
                    Rule::KG103,
                    at,
                    "`@` multiplies tensors with PyTorch's matmul instead of your kernel",
                );
            }
            Expr::If(i) => self.record_test(&i.test),
            Expr::BinOp(b) if self.tensor_operand(&b.left) || self.tensor_operand(&b.right) => {
                let r = self.op_range(&b.left, &b.right, expr);
                self.operator_finding(r, b.op.as_str());
            }
            Expr::UnaryOp(u)
                if matches!(
                    u.op,
                    ruff_python_ast::UnaryOp::USub | ruff_python_ast::UnaryOp::Invert
                ) && self.is_tensor(&u.operand) =>
            {
                let s = usize::from(expr.start());
                self.operator_finding(s..s + 1, u.op.as_str());
            }
            Expr::Compare(c) => {
                self.identity_compare(c);
                let ordering = c.ops.iter().any(|o| {
                    !matches!(
                        o,
                        ruff_python_ast::CmpOp::Is
                            | ruff_python_ast::CmpOp::IsNot
                            | ruff_python_ast::CmpOp::In
                            | ruff_python_ast::CmpOp::NotIn
                    )
                });
                if ordering
                    && (self.is_tensor(&c.left) || c.comparators.iter().any(|x| self.is_tensor(x)))
                {
                    let first = c
                        .comparators
                        .first()
                        .map(|r| self.op_range(&c.left, r, expr));
                    let op = c.ops.first().map(|o| o.as_str()).unwrap_or("==");
                    self.operator_finding(first.unwrap_or_else(|| range(expr)), op);
                }
            }
            Expr::Call(call) => self.check_live_call(call),
            Expr::Attribute(_) | Expr::Name(_)
                if !matches!(expr, Expr::Name(n) if !n.ctx.is_load())
                    && !matches!(expr, Expr::Attribute(a) if !a.ctx.is_load())
                    && self.value_ref(expr) =>
            {
                return;
            }
            Expr::Name(n) if n.ctx.is_load() && self.c.names.binding(n.id.as_str()).is_some() => {
                // `from os import environ as E` ... `"X" in E`
                if let Some(q) = self.c.names.binding(n.id.as_str()) {
                    if is_env_path(q) && q != "os.getenv" && q != "os.getenvb" {
                        let q = q.to_string();
                        self.c.push(Rule::KG402, range(expr), format!("reads `{q}` on the forward path: behaviour can depend on the harness's phase"));
                    }
                }
            }
            Expr::Attribute(_) | Expr::Subscript(_) => {
                if let Some(q) = self.c.names.qualify(expr) {
                    if under(&q, "os.environ") || under(&q, "os.environb") || under(&q, "sys.argv")
                    {
                        self.c.push(Rule::KG402, range(expr), format!("reads `{q}` on the forward path: behaviour can depend on the harness's phase"));
                        return;
                    }
                }
            }
            _ => {}
        }
        visitor::walk_expr(self, expr);
    }
}

impl<'a> LiveVisitor<'_, 'a, '_> {
    /// A PyTorch op or tensor compute method referred to as a value on the forward path
    /// (`(getattr(ext, "relu", None) or torch.relu)(x)`, `f = x.sigmoid; f()`): it is there
    /// to be called. Returns true when reported.
    fn value_ref(&mut self, expr: &'a Expr) -> bool {
        if self.handled.contains(&usize::from(expr.start())) {
            return false;
        }
        if let Some(q) = self.c.names.qualify(expr) {
            if torch_compute(&q) {
                self.c.push(Rule::KG101, range(expr), format!("refers to the PyTorch compute op `{q}` on the forward path, to call it instead of your kernel"));
                return true;
            }
            return false;
        }
        if let Expr::Attribute(a) = expr {
            let m = a.attr.as_str();
            if tensor_compute_method(m) && self.is_tensor(&a.value) {
                self.c.push(Rule::KG104, range(&a.attr), format!("takes the tensor compute method `.{m}` on the forward path, to call it instead of your kernel"));
                return true;
            }
        }
        false
    }

    /// A fresh allocation: `torch.empty(...)`, `torch.zeros_like(x)`, `x.new_empty(...)`.
    fn is_alloc(&self, e: &Expr) -> bool {
        let Expr::Call(c) = e else { return false };
        if let Some(q) = self.c.names.qualify(&c.func) {
            return matches!(
                q.as_str(),
                "torch.empty"
                    | "torch.empty_like"
                    | "torch.empty_strided"
                    | "torch.zeros"
                    | "torch.zeros_like"
                    | "torch.ones"
                    | "torch.ones_like"
                    | "torch.full"
                    | "torch.full_like"
            );
        }
        matches!(c.func.as_ref(), Expr::Attribute(a) if matches!(a.attr.as_str(), "new_empty" | "new_zeros" | "new_ones" | "new_full"))
    }

    /// What an argument of an extension call is (see [`super::ArgKind`]).
    fn arg_kind(&self, e: &Expr) -> super::ArgKind {
        use super::ArgKind;
        if self.input_root(e).is_some() {
            return ArgKind::Input;
        }
        match e {
            Expr::NumberLiteral(_) | Expr::BooleanLiteral(_) | Expr::NoneLiteral(_) => {
                ArgKind::Owned
            }
            Expr::Attribute(a) if matches!(a.value.as_ref(), Expr::Name(n) if n.id.as_str() == "self") => {
                ArgKind::Owned
            }
            Expr::Name(n) if self.allocs.contains(n.id.as_str()) => ArgKind::Owned,
            Expr::Call(c) => match c.func.as_ref() {
                _ if self.is_alloc(e) => ArgKind::Owned,
                // `self.ws.view(-1)`, `out.contiguous()`: the receiver decides.
                Expr::Attribute(a) if SAME_STORAGE.contains(&a.attr.as_str()) => {
                    self.arg_kind(&a.value)
                }
                _ => ArgKind::Unknown,
            },
            _ => ArgKind::Unknown,
        }
    }

    fn check_live_call(&mut self, call: &'a ExprCall) {
        let q = self.c.names.qualify(&call.func);
        self.handled.insert(usize::from(call.func.start()));
        if let Expr::Attribute(a) = call.func.as_ref() {
            // On an extension object, or an exported name on something that is not a known
            // module (`torch.relu` is not the extension's `relu`).
            let on_ext = key_of(&a.value).is_some_and(|k| self.c.ext_objects.contains(&k))
                || (q.is_none() && self.c.ext_functions.contains(a.attr.as_str()));
            // A replaced `forward`'s own body is not evidence that custom code runs.
            if on_ext && !(self.entry && self.c.reach.forward_replaced) {
                let args = call
                    .arguments
                    .args
                    .iter()
                    .map(|x| self.arg_kind(x))
                    .collect();
                self.c.ext_calls.push(super::ExtCall {
                    name: a.attr.to_string(),
                    result_used: !self.discarded.contains(&usize::from(call.start())),
                    args,
                });
            }
        }
        for a in call
            .arguments
            .args
            .iter()
            .chain(call.arguments.keywords.iter().map(|k| &k.value))
        {
            if matches!(a, Expr::Attribute(_) | Expr::Name(_)) {
                self.handled.insert(usize::from(a.start()));
            }
        }
        let callee = match call.func.as_ref() {
            Expr::Name(n) if q.is_none() => Some(n.id.to_string()),
            Expr::Attribute(a) if matches!(a.value.as_ref(), Expr::Name(n) if n.id.as_str() == "self") => {
                Some(a.attr.to_string())
            }
            _ => None,
        };
        if let Some(callee) = callee {
            for (i, a) in call.arguments.args.iter().enumerate() {
                if self.is_tensor(a) {
                    self.tensor_args
                        .entry(callee.clone())
                        .or_default()
                        .0
                        .insert(i);
                }
            }
            for k in call.arguments.keywords.iter() {
                if let Some(arg) = k.arg.as_ref().filter(|_| self.is_tensor(&k.value)) {
                    let e = self.tensor_args.entry(callee.clone()).or_default();
                    e.1.insert(arg.to_string());
                }
            }
        }
        let fr = range(call.func.as_ref());
        if let Some(q) = &q {
            if q == "builtins.getattr" && call.arguments.args.len() >= 2 {
                // getattr(x, "sig" + "moid")(): a tensor method under a built name.
                let obj = &call.arguments.args[0];
                if self.c.names.qualify(obj).is_none() {
                    if let Some(m) = self.c.names.fold_str(&call.arguments.args[1]) {
                        if tensor_compute_method(&m) && !self.c.is_ext_call_target(obj, &m) {
                            self.c.push(Rule::KG104, range(call), format!("`getattr(..., \"{m}\")` fetches a tensor compute method on the forward path"));
                        }
                    }
                }
            }
            if let Some(op) = q.strip_prefix("operator.") {
                let arith = matches!(
                    op.trim_matches('_'),
                    "add"
                        | "iadd"
                        | "sub"
                        | "isub"
                        | "mul"
                        | "imul"
                        | "truediv"
                        | "itruediv"
                        | "floordiv"
                        | "pow"
                        | "ipow"
                        | "neg"
                        | "abs"
                        | "mod"
                        | "lt"
                        | "le"
                        | "gt"
                        | "ge"
                        | "eq"
                        | "ne"
                );
                if arith && call.arguments.args.iter().any(|a| self.tensor_operand(a)) {
                    self.operator_finding(fr.clone(), q);
                }
            }
            if matches!(
                q.as_str(),
                "operator.matmul" | "operator.imatmul" | "operator.__matmul__"
            ) {
                self.c.push(
                    Rule::KG103,
                    fr.clone(),
                    format!(
                        "`{q}` multiplies tensors with PyTorch's matmul instead of your kernel"
                    ),
                );
            } else if torch_compute(q) {
                let spelled = self.c.text(call.func.as_ref());
                let shown = if spelled == q {
                    format!("`{q}`")
                } else {
                    format!("`{spelled}` (`{q}`)")
                };
                self.c.push(Rule::KG101, fr.clone(), format!("{shown} runs a PyTorch compute op on the forward path instead of your kernel"));
            } else if q == "os.getenv" || q == "os.environ.get" {
                self.c.push(Rule::KG402, fr.clone(), format!("reads `{q}` on the forward path: behaviour can depend on the harness's phase"));
            } else if is_seed(q) {
                self.c.push(Rule::KG402, fr.clone(), format!("`{q}` reseeds the random generator on the forward path: the harness's inputs can be regenerated and their outputs precomputed"));
            } else if cupy_compute(q) {
                self.c.push(
                    Rule::KG101,
                    fr.clone(),
                    format!("`{q}` computes with CuPy's library kernels instead of your kernel"),
                );
            } else if is_clock(q) {
                self.c.push(Rule::KG402, fr.clone(), format!("reads the clock (`{q}`) on the forward path: behaviour can depend on when it is called"));
            } else if q == "builtins.next" {
                // `next(self._calls)` on an `itertools.count()` is a call counter.
                if let Some(k) = call
                    .arguments
                    .args
                    .first()
                    .and_then(|a| self.counter_key(a))
                {
                    self.counters.push((k, range(call)));
                }
            }
        }
        if let Expr::Name(n) = call.func.as_ref() {
            // sum(parts), abs(y): Python builtins on tensors dispatch to PyTorch's kernels.
            let builtin =
                q.is_none()
                    && matches!(
                        n.id.as_str(),
                        "sum" | "abs" | "pow" | "round" | "max" | "min"
                    )
                    && !self.c.module.body.iter().any(
                        |s| matches!(s, Stmt::FunctionDef(d) if d.name.as_str() == n.id.as_str()),
                    );
            let on_tensors = call.arguments.args.iter().any(|a| {
                self.is_tensor(a)
                    || matches!(a, Expr::Name(m) if self.tensor_lists.contains(m.id.as_str()))
            });
            if builtin && on_tensors {
                let name = n.id.to_string();
                self.operator_finding(fr.clone(), &format!("{name}()"));
            }
        }
        if let Expr::Attribute(a) = call.func.as_ref() {
            let m = a.attr.as_str();
            if m.ends_with('_') && !m.ends_with("__") && !INPLACE_HARMLESS.contains(&m) {
                if let Some(input) = self.input_root(&a.value) {
                    self.mutation(range(call), &input, &format!("`.{m}()`"));
                }
            }
            if matches!(m, "append" | "extend" | "insert" | "add" | "appendleft")
                && key_of(&a.value).is_some_and(|k| k.starts_with("self."))
            {
                if let Some(input) = call.arguments.args.iter().find_map(|x| self.input_root(x)) {
                    let holder = self.c.text(a.value.as_ref());
                    self.c.push(Rule::KG401, range(call), format!("keeps the input `{input}` in `{holder}` across calls: later calls can return or batch stored work"));
                }
            }
        }
        if let Expr::Attribute(a) = call.func.as_ref() {
            if matches!(a.attr.as_str(), "numpy" | "tolist")
                && call.arguments.is_empty()
                && self.c.names.qualify(&a.value).is_none()
            {
                self.c.push(
                    Rule::KG104,
                    range(&a.attr),
                    format!("`.{}()` moves the tensor to the host on the forward path: the host computes, not your kernel", a.attr),
                );
            }
        }
        if let Some(layer) = self.layer_target(&call.func) {
            if q.as_deref().is_none_or(|q| !nn_layer(q)) {
                self.c.push(Rule::KG102, fr.clone(), format!("calls the PyTorch layer `{}` ({layer}) on the forward path: PyTorch computes it, pass its weights to your kernel instead", self.c.text(call.func.as_ref())));
            }
        }
        if let Expr::Attribute(a) = call.func.as_ref() {
            let m = a.attr.as_str();
            let recv = a.value.as_ref();
            let plain_receiver = self.c.names.qualify(recv).is_none()
                && !matches!(recv, Expr::Name(n) if n.id.as_str() == "self" || n.id.as_str() == "cls")
                && !matches!(
                    recv,
                    Expr::StringLiteral(_)
                        | Expr::List(_)
                        | Expr::Dict(_)
                        | Expr::Tuple(_)
                        | Expr::NumberLiteral(_)
                );
            let args_ok = m != "log" || call.arguments.is_empty();
            if plain_receiver
                && args_ok
                && tensor_compute_method(m)
                && !self.c.is_ext_call_target(recv, m)
            {
                self.c.push(
                    Rule::KG104,
                    range(&a.attr),
                    format!(
                        "`.{m}()` runs a PyTorch kernel on the forward path instead of your kernel"
                    ),
                );
            }
        }
        // torch compute functions passed as values: map(torch.sigmoid, xs), apply(F.relu, x)
        for arg in call
            .arguments
            .args
            .iter()
            .chain(call.arguments.keywords.iter().map(|k| &k.value))
        {
            if matches!(arg, Expr::Attribute(_) | Expr::Name(_)) {
                if let Some(aq) = self.c.names.qualify(arg) {
                    if torch_compute(&aq) && !matches!(q.as_deref(), Some("builtins.isinstance")) {
                        self.c.push(Rule::KG101, range(arg), format!("passes the PyTorch compute op `{aq}` to be called on the forward path"));
                    }
                }
            }
        }
    }
}

/// Used by `lint_file`.
pub fn check_full(module: &ModModule, ctx: &Context) -> super::PythonOutput {
    let _ = BTreeSet::<u8>::new;
    Checker::new(module, ctx).run()
}
