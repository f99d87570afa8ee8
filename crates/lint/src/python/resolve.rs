//! What the analysis resolved on the forward path, and what it could not.
//!
//! A rule that claims something never happens (a Triton kernel is never launched, `forward`
//! never reaches custom code) is an error only when every call on the forward path resolved: to
//! a function, method or class of the file, a library function, a Triton launch, or an op the
//! file registers itself (`torch.ops.<ns>.<op>` with its `torch.library` registration in the
//! file, followed to the registered function). A call the walk cannot follow is recorded in
//! [`Unresolved`] with the indirection it goes through; those rules consult it and report a
//! warning instead, so the runtime op audit decides.
//!
//! The reachability walk ([`super::reach`]) asks [`Resolver::unresolved`] about every live call
//! and [`LibraryOps`] which functions a `torch.ops` call runs.

use super::names::{range, under, Names};
use super::reach::{find_class, find_method, self_attr_values};
use ruff_python_ast::visitor::{self, Visitor};
use ruff_python_ast::{Expr, ExprCall, ModModule, Stmt, StmtClassDef, StmtFunctionDef};
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::ops::Range;

/// How a call reaches code the analysis cannot name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Indirection {
    /// `Fn.apply` of an autograd Function the file does not define.
    Apply,
    /// `torch.ops.<ns>.<op>` with no Python registration in the file (a C++ `TORCH_LIBRARY`,
    /// an op registered to an extension function).
    TorchLibrary,
    /// A callable taken from a container (`OPS[k](x)`, `for f in self.fns: f(x)`) whose
    /// elements do not all resolve.
    Container,
    /// A function behind a decorator the analysis does not know (it may return anything).
    Decorator,
    /// A callable a call returned: `relu = make()`, `wrap(ext.relu)`, `getattr(obj, "f")`.
    CallResult,
    /// A callable passed in as a parameter.
    Parameter,
    /// A name or attribute bound to something the walk does not follow (`f = ext.relu`).
    Alias,
}

impl Indirection {
    /// What the indirection is, for messages.
    pub fn describe(self) -> &'static str {
        match self {
            Indirection::Apply => "an autograd Function's `apply` the file does not define",
            Indirection::TorchLibrary => {
                "a `torch.ops` op whose implementation is not registered in Python in this file"
            }
            Indirection::Container => "a callable taken from a container",
            Indirection::Decorator => "a function behind a decorator the analysis does not follow",
            Indirection::CallResult => "a callable returned by a call",
            Indirection::Parameter => "a callable passed in as a parameter",
            Indirection::Alias => "a name bound to a callable the analysis does not follow",
        }
    }
}

/// One call on the forward path whose callee the analysis could not resolve.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnresolvedCall {
    /// The callee's range in the `.py` file.
    pub range: Range<usize>,
    pub via: Indirection,
    /// The callee as written (`ACTS[self.act]`).
    pub shown: String,
    /// What the callee is bound to, when that says more (`_make()` for `relu`).
    pub bound: Option<String>,
}

/// Every live call the analysis could not resolve, in the order the walk met them.
#[derive(Debug, Default, Clone)]
pub struct Unresolved {
    pub calls: Vec<UnresolvedCall>,
}

impl Unresolved {
    pub fn is_empty(&self) -> bool {
        self.calls.is_empty()
    }

    /// The first unresolved call (in source order).
    pub fn first(&self) -> Option<&UnresolvedCall> {
        self.calls.iter().min_by_key(|c| c.range.start)
    }

    /// Why a "never" claim is not proven, for the finding's message: `None` when every path
    /// resolved.
    pub fn why(&self) -> Option<String> {
        let first = self.first()?;
        let more = match self.calls.len() {
            1 => String::new(),
            2 => " (and 1 more call)".to_string(),
            n => format!(" (and {} more calls)", n - 1),
        };
        let bound = first
            .bound
            .as_ref()
            .map(|b| format!(", bound to `{b}`"))
            .unwrap_or_default();
        Some(format!(
            "the forward path calls `{}` ({}{bound}){more}, which the analysis could not resolve",
            first.shown,
            first.via.describe()
        ))
    }

    pub(super) fn push(&mut self, call: UnresolvedCall) {
        if !self.calls.iter().any(|c| c.range == call.range) {
            self.calls.push(call);
        }
    }
}

/// PyTorch's own operator namespaces: `torch.ops.aten.mm` is PyTorch's op, resolved (and judged
/// by the torch-op rules).
const TORCH_NAMESPACES: &[&str] = &[
    "aten",
    "prims",
    "quantized",
    "_quantized",
    "c10d",
    "_c10d_functional",
    "c10d_functional",
    "_c10d_functional_autograd",
    "profiler",
    "mkldnn",
    "_caffe2",
    "higher_order",
    "inductor",
    "_inductor",
    "torchvision",
    "fbgemm",
    "debugprims",
    "rngprims",
];

/// The operators the file registers with `torch.library`, by `ns::op`: the Python functions that
/// implement them (`@torch.library.custom_op("ns::op")`, `@triton_op`, `@torch.library.impl`,
/// `lib.impl("op", fn, "CUDA")`, `torch.library.register_kernel(...)`), and the ops registered
/// to anything else (an extension function).
#[derive(Debug, Default)]
pub struct LibraryOps<'a> {
    defs: HashMap<String, Vec<&'a StmtFunctionDef>>,
    other: HashMap<String, String>,
}

impl<'a> LibraryOps<'a> {
    pub fn collect(module: &'a ModModule, names: &Names) -> Self {
        struct V<'a, 'n> {
            module: &'a ModModule,
            names: &'n Names,
            /// `lib = torch.library.Library("ns", ...)`: python name -> namespace.
            libs: HashMap<String, String>,
            /// Functions registered as ops, by name (for `@relu.register_kernel("cuda")`).
            op_fns: HashMap<String, String>,
            out: LibraryOps<'a>,
        }
        impl<'a> V<'a, '_> {
            /// `"ns::op"` / `"ns::op.overload"` -> `ns::op`; `(lib, "op")` -> `ns::op`.
            fn op_name(&self, args: &[Expr]) -> Option<String> {
                let first = args.first()?;
                if let Some(s) = self.names.fold_str(first) {
                    let (ns, op) = s.split_once("::")?;
                    let op = op.split('.').next().unwrap_or(op);
                    return Some(format!("{ns}::{op}"));
                }
                let Expr::Name(n) = first else { return None };
                let ns = self.libs.get(n.id.as_str())?;
                let op = self.names.fold_str(args.get(1)?)?;
                Some(format!("{ns}::{}", op.split('.').next().unwrap_or(&op)))
            }

            fn register_value(&mut self, op: String, value: &'a Expr) {
                let def = match value {
                    Expr::Name(n) => self.module.body.iter().rev().find_map(|s| match s {
                        Stmt::FunctionDef(f) if f.name.as_str() == n.id.as_str() => Some(f),
                        _ => None,
                    }),
                    _ => None,
                };
                match def {
                    Some(f) => self.out.defs.entry(op).or_default().push(f),
                    None => {
                        let shown = match value {
                            Expr::Name(n) => n.id.to_string(),
                            Expr::Attribute(a) => format!("….{}", a.attr),
                            _ => "a value".to_string(),
                        };
                        self.out.other.entry(op).or_insert(shown);
                    }
                }
            }
        }
        impl<'a> Visitor<'a> for V<'a, '_> {
            fn visit_stmt(&mut self, stmt: &'a Stmt) {
                match stmt {
                    Stmt::Assign(a) => {
                        if let (Expr::Call(c), [Expr::Name(t)]) =
                            (a.value.as_ref(), a.targets.as_slice())
                        {
                            if self.names.qualify(&c.func).as_deref()
                                == Some("torch.library.Library")
                            {
                                if let Some(ns) = c
                                    .arguments
                                    .args
                                    .first()
                                    .and_then(|x| self.names.fold_str(x))
                                {
                                    self.libs.insert(t.id.to_string(), ns);
                                }
                            }
                        }
                    }
                    Stmt::FunctionDef(f) => {
                        for d in &f.decorator_list {
                            let Expr::Call(c) = &d.expression else {
                                continue;
                            };
                            let q = self.names.qualify(&c.func).unwrap_or_default();
                            let op = if q.ends_with(".custom_op")
                                || q.ends_with(".triton_op")
                                || matches!(
                                    q.as_str(),
                                    "torch.library.impl" | "torch.library.register_kernel"
                                ) {
                                self.op_name(&c.arguments.args)
                            } else if let Expr::Attribute(a) = c.func.as_ref() {
                                // `@relu.register_kernel("cuda")`, `@lib.impl("op")`.
                                match (a.attr.as_str(), a.value.as_ref()) {
                                    ("register_kernel", Expr::Name(n)) => {
                                        self.op_fns.get(n.id.as_str()).cloned()
                                    }
                                    ("impl", Expr::Name(n)) => self
                                        .libs
                                        .get(n.id.as_str())
                                        .cloned()
                                        .zip(
                                            c.arguments
                                                .args
                                                .first()
                                                .and_then(|x| self.names.fold_str(x)),
                                        )
                                        .map(|(ns, op)| format!("{ns}::{op}")),
                                    _ => None,
                                }
                            } else {
                                None
                            };
                            if let Some(op) = op {
                                self.op_fns.insert(f.name.to_string(), op.clone());
                                self.out.defs.entry(op).or_default().push(f);
                            }
                        }
                    }
                    Stmt::Expr(e) => {
                        if let Expr::Call(c) = e.value.as_ref() {
                            let q = self.names.qualify(&c.func).unwrap_or_default();
                            let args = &c.arguments.args;
                            let func_kw = c
                                .arguments
                                .keywords
                                .iter()
                                .find(|k| k.arg.as_ref().is_some_and(|a| a.as_str() == "func"))
                                .map(|k| &k.value);
                            if matches!(
                                q.as_str(),
                                "torch.library.impl" | "torch.library.register_kernel"
                            ) {
                                // The functional form: `impl("ns::op", "cuda", fn)`.
                                if let (Some(op), Some(v)) =
                                    (self.op_name(args), args.get(2).or(func_kw))
                                {
                                    self.register_value(op, v);
                                }
                            } else if let Expr::Attribute(a) = c.func.as_ref() {
                                // `lib.impl("op", fn, "CUDA")`.
                                if let (Expr::Name(n), "impl") = (a.value.as_ref(), a.attr.as_str())
                                {
                                    let ns = self.libs.get(n.id.as_str()).cloned();
                                    let op = args.first().and_then(|x| self.names.fold_str(x));
                                    if let (Some(ns), Some(op), Some(v)) =
                                        (ns, op, args.get(1).or(func_kw))
                                    {
                                        let op = op.split('.').next().unwrap_or(&op).to_string();
                                        self.register_value(format!("{ns}::{op}"), v);
                                    }
                                }
                            }
                        }
                    }
                    _ => {}
                }
                visitor::walk_stmt(self, stmt);
            }
        }
        let mut v = V {
            module,
            names,
            libs: HashMap::default(),
            op_fns: HashMap::default(),
            out: LibraryOps::default(),
        };
        // Twice: a `Library` or an op function may be bound after its first use in the text.
        for _ in 0..2 {
            v.out = LibraryOps::default();
            v.visit_body(&module.body);
        }
        v.out
    }

    /// `torch.ops.<ns>.<op>[.<overload>]` outside PyTorch's own namespaces, as `ns::op`.
    pub fn op_of(names: &Names, callee: &Expr) -> Option<String> {
        let q = names.qualify(callee)?;
        let rest = q.strip_prefix("torch.ops.")?;
        let mut parts = rest.split('.');
        let (ns, op) = (parts.next()?, parts.next()?);
        if TORCH_NAMESPACES.contains(&ns) {
            return None;
        }
        Some(format!("{ns}::{op}"))
    }

    /// The Python functions that implement `op`.
    pub fn targets(&self, op: &str) -> &[&'a StmtFunctionDef] {
        self.defs.get(op).map_or(&[], Vec::as_slice)
    }

    /// What `op` is registered to when that is not a function of the file (`ext.relu`).
    pub fn registered_elsewhere(&self, op: &str) -> Option<&str> {
        self.other.get(op).map(String::as_str)
    }
}

/// Decides, for one reachable function, whether a call's callee resolves.
pub struct Resolver<'r, 'a> {
    pub module: &'a ModModule,
    pub names: &'r Names,
    pub ops: &'r LibraryOps<'a>,
    pub source: Option<&'r str>,
    pub owner: Option<&'a StmtClassDef>,
    params: HashSet<String>,
    /// Names the function binds: assigned values, loop targets (`None`: iteration over the
    /// expression), nested defs (resolved).
    locals: HashMap<String, Vec<Local<'a>>>,
}

#[derive(Debug, Clone, Copy)]
enum Local<'a> {
    Value(&'a Expr),
    Item(&'a Expr),
    Def,
    Other,
}

/// Depth limit for following values through names (`a = b`, `b = Fn.apply`).
const MAX_DEPTH: u32 = 6;

type Verdict = Option<(Indirection, String)>;

impl<'r, 'a> Resolver<'r, 'a> {
    pub fn new(
        module: &'a ModModule,
        names: &'r Names,
        ops: &'r LibraryOps<'a>,
        f: &'a StmtFunctionDef,
        owner: Option<&'a StmtClassDef>,
    ) -> Self {
        let params = f
            .parameters
            .iter()
            .map(|p| p.name().to_string())
            .filter(|p| p != "self" && p != "cls" && p != "ctx")
            .collect();
        struct L<'a> {
            out: HashMap<String, Vec<Local<'a>>>,
        }
        impl<'a> L<'a> {
            fn bind(&mut self, target: &'a Expr, local: Local<'a>) {
                match target {
                    Expr::Name(n) => self.out.entry(n.id.to_string()).or_default().push(local),
                    Expr::Tuple(t) => t.elts.iter().for_each(|e| self.bind(e, Local::Other)),
                    Expr::List(t) => t.elts.iter().for_each(|e| self.bind(e, Local::Other)),
                    Expr::Starred(s) => self.bind(&s.value, Local::Other),
                    _ => {}
                }
            }
        }
        impl<'a> Visitor<'a> for L<'a> {
            fn visit_stmt(&mut self, stmt: &'a Stmt) {
                match stmt {
                    Stmt::Assign(a) => {
                        for t in &a.targets {
                            self.bind(t, Local::Value(&a.value));
                        }
                    }
                    Stmt::AnnAssign(a) => match a.value.as_deref() {
                        Some(v) => self.bind(&a.target, Local::Value(v)),
                        None => self.bind(&a.target, Local::Other),
                    },
                    Stmt::AugAssign(a) => self.bind(&a.target, Local::Other),
                    Stmt::For(f) => match f.target.as_ref() {
                        t @ Expr::Name(_) => self.bind(t, Local::Item(&f.iter)),
                        t => self.bind(t, Local::Other),
                    },
                    Stmt::With(w) => {
                        for item in &w.items {
                            if let Some(v) = item.optional_vars.as_deref() {
                                self.bind(v, Local::Other);
                            }
                        }
                    }
                    Stmt::FunctionDef(f) => {
                        self.out
                            .entry(f.name.to_string())
                            .or_default()
                            .push(Local::Def);
                        return;
                    }
                    Stmt::ClassDef(c) => {
                        self.out
                            .entry(c.name.to_string())
                            .or_default()
                            .push(Local::Def);
                        return;
                    }
                    Stmt::Import(_) | Stmt::ImportFrom(_) => return,
                    _ => {}
                }
                visitor::walk_stmt(self, stmt);
            }
            fn visit_expr(&mut self, expr: &'a Expr) {
                let generators = match expr {
                    Expr::Named(n) => {
                        self.bind(&n.target, Local::Value(&n.value));
                        &[][..]
                    }
                    Expr::ListComp(c) => &c.generators[..],
                    Expr::SetComp(c) => &c.generators[..],
                    Expr::DictComp(c) => &c.generators[..],
                    Expr::Generator(c) => &c.generators[..],
                    _ => &[][..],
                };
                for g in generators {
                    match &g.target {
                        t @ Expr::Name(_) => self.bind(t, Local::Item(&g.iter)),
                        t => self.bind(t, Local::Other),
                    }
                }
                visitor::walk_expr(self, expr);
            }
        }
        let mut l = L {
            out: HashMap::default(),
        };
        l.visit_body(&f.body);
        Resolver {
            module,
            names,
            ops,
            source: None,
            owner,
            params,
            locals: l.out,
        }
    }

    /// The call's callee when the analysis cannot resolve it, with the indirection.
    pub fn unresolved(&self, call: &ExprCall) -> Option<UnresolvedCall> {
        let (via, bound) = self.callee(&call.func)?;
        let shown = self.shown(&call.func);
        let bound =
            (!bound.is_empty() && bound != shown && via != Indirection::Container).then_some(bound);
        Some(UnresolvedCall {
            range: range(call.func.as_ref()),
            via,
            shown,
            bound,
        })
    }

    fn shown(&self, e: &Expr) -> String {
        let text = self
            .source
            .and_then(|s| s.get(range(e)))
            .unwrap_or("the callee");
        let mut one_line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
        if one_line.chars().count() > 60 {
            one_line = one_line.chars().take(57).collect::<String>() + "...";
        }
        one_line
    }

    fn callee(&self, func: &'a Expr) -> Verdict {
        match func {
            // `kernel[grid](...)`: a launch of a function; `OPS[k](...)`: an element.
            Expr::Subscript(s) => {
                if self.is_function(&s.value, 0) {
                    return None;
                }
                match self.elements(&s.value, 0) {
                    Some(items) => self
                        .all(items, 0)
                        .map(|(_, bound)| (Indirection::Container, bound)),
                    None => Some((Indirection::Container, String::new())),
                }
            }
            Expr::Name(n) => self.name(n.id.as_str(), 0),
            Expr::Attribute(a) => {
                if let Some(op) = LibraryOps::op_of(self.names, func) {
                    if !self.ops.targets(&op).is_empty() {
                        return None;
                    }
                    let to = self.ops.registered_elsewhere(&op).unwrap_or_default();
                    return Some((Indirection::TorchLibrary, to.to_string()));
                }
                if is_self(&a.value) {
                    return self.self_attr(a.attr.as_str(), 0);
                }
                None
            }
            Expr::Lambda(_) => None,
            Expr::Call(c) if self.known_call(c) => None,
            Expr::Call(_) => Some((Indirection::CallResult, String::new())),
            _ => Some((Indirection::Alias, String::new())),
        }
    }

    /// A plain name called: a parameter, a local, a function or class of the module, a
    /// module-level value, or an import/builtin (resolved).
    fn name(&self, id: &str, depth: u32) -> Verdict {
        if depth > MAX_DEPTH {
            return Some((Indirection::Alias, id.to_string()));
        }
        if depth == 0 {
            if self.params.contains(id) {
                return Some((Indirection::Parameter, String::new()));
            }
            if let Some(bindings) = self.locals.get(id) {
                for b in bindings {
                    let v = match b {
                        Local::Value(v) => self.value(v, depth + 1),
                        Local::Item(it) => match self.elements(it, depth + 1) {
                            Some(items) => self
                                .all(items, depth + 1)
                                .map(|(_, bound)| (Indirection::Container, bound)),
                            None => Some((Indirection::Container, self.shown(it))),
                        },
                        Local::Def => None,
                        Local::Other => Some((Indirection::Alias, String::new())),
                    };
                    if v.is_some() {
                        return v;
                    }
                }
                return None;
            }
        }
        if let Some(f) = self.module_def(id) {
            return self.decorated(f);
        }
        if find_class(self.module, id).is_some() {
            return None;
        }
        let values = module_values(self.module, id);
        if !values.is_empty() {
            for v in values {
                if let Some(u) = self.value(v, depth + 1) {
                    return Some(u);
                }
            }
            return None;
        }
        None
    }

    /// `self.<attr>(...)`: a method (through the module's base classes), or what `__init__`
    /// stored there; an attribute nothing in the class sets is inherited (nn.Module's API).
    fn self_attr(&self, attr: &str, depth: u32) -> Verdict {
        let owner = self.owner?;
        if let Some((m, _)) = find_method(self.module, owner, attr) {
            return self.decorated(m);
        }
        for v in self_attr_values(owner, attr) {
            if let Some(u) = self.value(v, depth + 1) {
                return Some(u);
            }
        }
        None
    }

    /// A value stored to be called later.
    fn value(&self, v: &'a Expr, depth: u32) -> Verdict {
        if depth > MAX_DEPTH {
            return Some((Indirection::Alias, self.shown(v)));
        }
        match v {
            Expr::Name(n) => {
                if self.names.qualify(v).is_some() {
                    return None;
                }
                let id = n.id.as_str();
                if self.module_def(id).is_some()
                    || find_class(self.module, id).is_some()
                    || !module_values(self.module, id).is_empty()
                {
                    return self.name(id, depth);
                }
                // A parameter of the function that stored it (`self.act = act`).
                Some((Indirection::Parameter, self.shown(v)))
            }
            Expr::Attribute(a) => {
                if a.attr.as_str() == "apply" {
                    if let Expr::Name(n) = a.value.as_ref() {
                        if find_class(self.module, n.id.as_str()).is_some() {
                            return None;
                        }
                    }
                    if self.names.qualify(v).is_some_and(|q| under(&q, "torch")) {
                        return None;
                    }
                    return Some((Indirection::Apply, self.shown(v)));
                }
                if let Some(op) = LibraryOps::op_of(self.names, v) {
                    if !self.ops.targets(&op).is_empty() {
                        return None;
                    }
                    return Some((Indirection::TorchLibrary, self.shown(v)));
                }
                if self.names.qualify(v).is_some() {
                    return None;
                }
                if is_self(&a.value) {
                    return self.self_attr(a.attr.as_str(), depth + 1);
                }
                Some((Indirection::Alias, self.shown(v)))
            }
            Expr::Lambda(_) | Expr::NoneLiteral(_) => None,
            Expr::Call(c) => {
                if self.names.qualify(&c.func).as_deref() == Some("functools.partial") {
                    return match c.arguments.args.first() {
                        Some(f) => self.value(f, depth + 1),
                        None => Some((Indirection::CallResult, self.shown(v))),
                    };
                }
                if self.known_call(c) {
                    return None;
                }
                Some((Indirection::CallResult, self.shown(v)))
            }
            Expr::If(t) => self
                .value(&t.body, depth + 1)
                .or_else(|| self.value(&t.orelse, depth + 1)),
            Expr::BoolOp(b) => b.values.iter().find_map(|x| self.value(x, depth + 1)),
            Expr::Subscript(s) => match self.elements(&s.value, depth + 1) {
                Some(items) => self.all(items, depth + 1),
                None => Some((Indirection::Container, self.shown(v))),
            },
            _ => Some((Indirection::Container, self.shown(v))),
        }
    }

    /// A call whose result is a callable the walk follows: an instance of a class of the file
    /// (calling it runs its `forward`), a PyTorch module or compiled function, a Triton kernel.
    fn known_call(&self, c: &ExprCall) -> bool {
        if let Expr::Name(n) = c.func.as_ref() {
            if find_class(self.module, n.id.as_str()).is_some() {
                return true;
            }
        }
        self.names
            .qualify(&c.func)
            .is_some_and(|q| under(&q, "torch") || under(&q, "triton"))
    }

    /// Every element of a container resolves.
    fn all(&self, items: Vec<&'a Expr>, depth: u32) -> Verdict {
        items.into_iter().find_map(|e| self.value(e, depth + 1))
    }

    /// The elements of a container expression, when it is one the analysis can read: a literal,
    /// `nn.ModuleList([...])`/`nn.Sequential(...)`/`nn.ModuleDict({...})`/`list(...)`, through
    /// a module-level name or `self.<attr>`.
    fn elements(&self, e: &'a Expr, depth: u32) -> Option<Vec<&'a Expr>> {
        if depth > MAX_DEPTH {
            return None;
        }
        match e {
            Expr::List(l) => Some(l.elts.iter().collect()),
            Expr::Tuple(t) => Some(t.elts.iter().collect()),
            Expr::Set(s) => Some(s.elts.iter().collect()),
            Expr::Dict(d) => Some(d.iter_values().collect()),
            Expr::Call(c) => {
                let q = self
                    .names
                    .qualify(&c.func)
                    .unwrap_or_else(|| match c.func.as_ref() {
                        Expr::Name(n) => n.id.to_string(),
                        _ => String::new(),
                    });
                let last = q.rsplit('.').next().unwrap_or("");
                match last {
                    "ModuleList" | "ModuleDict" | "list" | "tuple" | "dict" => {
                        match c.arguments.args.first() {
                            Some(a) => self.elements(a, depth + 1),
                            None => Some(Vec::new()),
                        }
                    }
                    "Sequential" => Some(c.arguments.args.iter().collect()),
                    _ => None,
                }
            }
            Expr::Name(n) => {
                if self.locals.contains_key(n.id.as_str()) || self.params.contains(n.id.as_str()) {
                    return None;
                }
                let values = module_values(self.module, n.id.as_str());
                let mut out = Vec::new();
                for v in values {
                    out.extend(self.elements(v, depth + 1)?);
                }
                (!out.is_empty()).then_some(out)
            }
            Expr::Attribute(a) if is_self(&a.value) => {
                let owner = self.owner?;
                let values = self_attr_values(owner, a.attr.as_str());
                let mut out = Vec::new();
                for v in values {
                    out.extend(self.elements(v, depth + 1)?);
                }
                (!out.is_empty()).then_some(out)
            }
            _ => None,
        }
    }

    /// The value names a function: a def or a class of the module, a parameter or local (a
    /// Triton kernel handed to a launcher), `self.<attr>` bound to one, `triton.jit(fn)` or
    /// `wrap_triton(kernel)`.
    fn is_function(&self, e: &Expr, depth: u32) -> bool {
        if depth > MAX_DEPTH {
            return false;
        }
        match e {
            Expr::Name(n) => {
                let id = n.id.as_str();
                self.params.contains(id)
                    || self.module_def(id).is_some()
                    || self.locals.get(id).is_some_and(|b| {
                        b.iter().all(|l| match l {
                            Local::Value(v) => self.is_function(v, depth + 1),
                            Local::Def => true,
                            _ => false,
                        })
                    })
                    || module_values(self.module, id)
                        .iter()
                        .any(|v| self.is_function(v, depth + 1))
                    || self.names.qualify(e).is_some()
            }
            Expr::Attribute(a) if is_self(&a.value) => self.owner.is_some_and(|o| {
                self_attr_values(o, a.attr.as_str())
                    .iter()
                    .any(|v| self.is_function(v, depth + 1))
            }),
            Expr::Call(c) => self.names.qualify(&c.func).is_some_and(|q| {
                under(&q, "triton") || q.ends_with("wrap_triton") || q.ends_with("capture_triton")
            }),
            _ => false,
        }
    }

    fn module_def(&self, id: &str) -> Option<&'a StmtFunctionDef> {
        self.module.body.iter().rev().find_map(|s| match s {
            Stmt::FunctionDef(f) if f.name.as_str() == id => Some(f),
            _ => None,
        })
    }

    /// A function behind a decorator the analysis does not know: calling it may run anything.
    fn decorated(&self, f: &StmtFunctionDef) -> Verdict {
        f.decorator_list
            .iter()
            .find(|d| !self.known_decorator(&d.expression))
            .map(|d| {
                (
                    Indirection::Decorator,
                    format!("@{}", self.shown(&d.expression)),
                )
            })
    }

    fn known_decorator(&self, e: &Expr) -> bool {
        let target = match e {
            Expr::Call(c) => c.func.as_ref(),
            other => other,
        };
        if let Expr::Name(n) = target {
            if matches!(
                n.id.as_str(),
                "staticmethod" | "classmethod" | "property" | "dataclass" | "jit"
            ) && self.module_def(n.id.as_str()).is_none()
            {
                return true;
            }
        }
        if let Expr::Attribute(a) = target {
            if matches!(
                a.attr.as_str(),
                "register_fake"
                    | "register_kernel"
                    | "register_autograd"
                    | "register_torch_dispatch"
                    | "register_vmap"
                    | "setter"
                    | "getter"
                    | "deleter"
            ) {
                return true;
            }
        }
        self.names.qualify(target).is_some_and(|q| {
            [
                "torch",
                "triton",
                "functools",
                "typing",
                "abc",
                "dataclasses",
            ]
            .iter()
            .any(|p| under(&q, p))
        })
    }
}

fn is_self(e: &Expr) -> bool {
    matches!(e, Expr::Name(n) if n.id.as_str() == "self")
}

/// Values assigned to the module-level name `name`.
pub(super) fn module_values<'a>(module: &'a ModModule, name: &str) -> Vec<&'a Expr> {
    module
        .body
        .iter()
        .filter_map(|s| match s {
            Stmt::Assign(a)
                if a.targets
                    .iter()
                    .any(|t| matches!(t, Expr::Name(n) if n.id.as_str() == name)) =>
            {
                Some(a.value.as_ref())
            }
            Stmt::AnnAssign(a)
                if matches!(a.target.as_ref(), Expr::Name(n) if n.id.as_str() == name) =>
            {
                a.value.as_deref()
            }
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::python::consts::BranchFacts;
    use kernelgate_model::Precision;

    /// The unresolved calls of `src`'s forward path: (indirection, callee as shown).
    fn unresolved(src: &str) -> Vec<(Indirection, String)> {
        let parsed = ruff_python_parser::parse_module(src).unwrap();
        let m = parsed.syntax();
        let facts = BranchFacts::build(m, None, Precision::Fp32);
        let names = Names::build(m);
        let r = super::super::reach::reachable_in(m, &facts, &names, Some(src));
        let mut out: Vec<(Indirection, String)> = r
            .unresolved
            .calls
            .iter()
            .map(|c| (c.via, c.shown.clone()))
            .collect();
        out.sort();
        out
    }

    const EXT: &str = "import torch\nimport torch.nn as nn\nfrom torch.utils.cpp_extension import load_inline\next = load_inline(name='k', cpp_sources='', functions=['relu'])\n";

    #[test]
    fn direct_calls_methods_layers_and_launches_resolve() {
        let src = format!(
            "{EXT}import triton\n@triton.jit\ndef k(x): pass\nclass Fn(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, x):\n        return ext.relu(x)\nrelu = Fn.apply\ndef helper(x):\n    return x\nclass ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(4, 4)\n        self.blocks = nn.ModuleList([nn.ReLU()])\n        self.act = relu\n    def _impl(self, x):\n        return helper(x)\n    def forward(self, x):\n        k[(1,)](x)\n        for b in self.blocks:\n            x = b(x)\n        x = self.act(self.fc(x))\n        y = torch.empty_like(x)\n        f = lambda t: t\n        return self._impl(f(len(x) and y.contiguous()))\n"
        );
        assert_eq!(unresolved(&src), vec![]);
    }

    #[test]
    fn each_indirection_is_recorded_with_its_kind() {
        let cases: &[(&str, Indirection)] = &[
            // A callable from a table of extension functions.
            ("OPS = {'r': ext.relu}\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return OPS['r'](x)\n", Indirection::Container),
            // Iteration over a list the module fills at run time.
            ("class ModelNew(nn.Module):\n    def __init__(self, fns):\n        super().__init__()\n        self.fns = fns\n    def forward(self, x):\n        for f in self.fns:\n            x = f(x)\n        return x\n", Indirection::Container),
            // `apply` of a Function defined elsewhere.
            ("from kernels import Fn\nrelu = Fn.apply\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return relu(x)\n", Indirection::Apply),
            // An op registered in C++.
            ("class ModelNew(nn.Module):\n    def forward(self, x):\n        return torch.ops.mylib.relu(x)\n", Indirection::TorchLibrary),
            // A decorator the analysis does not follow.
            ("def deco(fn):\n    return fn\n@deco\ndef run(x):\n    return ext.relu(x)\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return run(x)\n", Indirection::Decorator),
            // A factory's result.
            ("def make():\n    return ext.relu\nrelu = make()\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return relu(x)\n", Indirection::CallResult),
            // A callback.
            ("def launch(fn, x):\n    return fn(x)\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return launch(ext.relu, x)\n", Indirection::Parameter),
            // An alias of an extension function.
            ("relu = ext.relu\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return relu(x)\n", Indirection::Alias),
        ];
        for (body, via) in cases {
            let src = format!("{EXT}{body}");
            let got = unresolved(&src);
            assert_eq!(got.len(), 1, "{body}: {got:?}");
            assert_eq!(got[0].0, *via, "{body}: {got:?}");
        }
    }

    #[test]
    fn torch_ops_follow_the_files_own_registrations() {
        let src = format!(
            "{EXT}@torch.library.custom_op('kg::relu', mutates_args=())\ndef relu(x: torch.Tensor) -> torch.Tensor:\n    return ext.relu(x)\nlib = torch.library.Library('kg2', 'DEF')\ndef impl2(x):\n    return ext.relu(x)\nlib.impl('act', impl2, 'CUDA')\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return torch.ops.kg2.act(torch.ops.kg.relu.default(x))\n"
        );
        assert_eq!(unresolved(&src), vec![]);
        let parsed = ruff_python_parser::parse_module(&src).unwrap();
        let m = parsed.syntax();
        let names = Names::build(m);
        let facts = BranchFacts::build(m, None, Precision::Fp32);
        let r = super::super::reach::reachable_in(m, &facts, &names, Some(&src));
        assert!(r.has_function("relu") && r.has_function("impl2"));
    }
}
