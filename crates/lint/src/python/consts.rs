//! Branches the problem decides. A candidate written as a general-purpose module keeps branches
//! its problem never takes: `if self.bias is not None:` when `get_init_inputs()` gives no bias,
//! a CPU fallback (`if not x.is_cuda:`), a half-precision path on an fp32 problem. Torch ops in
//! them never run under the gate, so they are dead code like `if False:`.
//!
//! What is known: the constructor's arguments (the problem's `get_init_inputs()` values by
//! position, the candidate's defaults for the rest), the `self.<attr>`s `ModelNew.__init__` sets
//! from them (when no other method, `setattr` or `__dict__` can change them), and, for `forward`'s
//! own inputs (never rebound), that they are CUDA tensors in the problem's precision. Anything
//! else is unknown, and an unknown test keeps both branches live.

use super::reach::{const_truth, find_class, find_method};
use kernelgate_model::Precision;
use ruff_python_ast::visitor::{self, Visitor};
use ruff_python_ast::{
    BoolOp, CmpOp, Expr, ModModule, Number, ParameterWithDefault, Stmt, UnaryOp,
};
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

/// A value known statically.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    /// Something that is not `None` and is truthy (a parameter, a tensor, a layer).
    Object,
}

impl Value {
    fn truth(&self) -> bool {
        match self {
            Value::None => false,
            Value::Bool(b) => *b,
            Value::Int(i) => *i != 0,
            Value::Float(f) => *f != 0.0,
            Value::Str(s) => !s.is_empty(),
            Value::Object => true,
        }
    }
}

/// What the problem fixes about the code `ModelNew.forward` runs.
#[derive(Debug, Clone, Default)]
pub struct BranchFacts {
    precision: Precision,
    /// `self.<attr>` of a `ModelNew` instance, as `__init__` left it.
    attrs: HashMap<String, Value>,
    /// `forward`'s tensor inputs that it never rebinds.
    inputs: HashSet<String>,
}

/// The facts seen from one function: `self` means the `ModelNew` instance only in its methods.
#[derive(Debug, Clone, Copy)]
pub struct Scope<'f> {
    pub facts: &'f BranchFacts,
    pub self_is_model: bool,
}

static NO_FACTS: std::sync::LazyLock<BranchFacts> = std::sync::LazyLock::new(BranchFacts::default);

impl Scope<'static> {
    /// Only literal constants (`if False:`) decide.
    pub fn none() -> Scope<'static> {
        Scope {
            facts: &NO_FACTS,
            self_is_model: false,
        }
    }
}

impl Scope<'_> {
    /// `Some(truth)` when the test of an `if`/`while`/ternary is decided.
    pub fn truth(&self, e: &Expr) -> Option<bool> {
        if let Some(b) = const_truth(e) {
            return Some(b);
        }
        match e {
            Expr::UnaryOp(u) if u.op == UnaryOp::Not => self.truth(&u.operand).map(|b| !b),
            Expr::BoolOp(b) => {
                let vals: Vec<Option<bool>> = b.values.iter().map(|v| self.truth(v)).collect();
                match b.op {
                    // `a and b`: false as soon as one is known false; true when all are true.
                    BoolOp::And if vals.contains(&Some(false)) => Some(false),
                    BoolOp::Or if vals.contains(&Some(true)) => Some(true),
                    _ if vals.iter().all(Option::is_some) => Some(b.op == BoolOp::And),
                    _ => None,
                }
            }
            Expr::Compare(c) if c.ops.len() == 1 => {
                let (l, r) = (c.left.as_ref(), &c.comparators[0]);
                match c.ops[0] {
                    CmpOp::Is | CmpOp::IsNot => {
                        let (lv, rv) = (self.eval(l)?, self.eval(r)?);
                        // Identity is known only against `None`.
                        if lv != Value::None && rv != Value::None {
                            return None;
                        }
                        Some((lv == rv) == (c.ops[0] == CmpOp::Is))
                    }
                    CmpOp::Eq | CmpOp::NotEq => {
                        let (lv, rv) = (self.eval(l)?, self.eval(r)?);
                        if matches!(lv, Value::Object) || matches!(rv, Value::Object) {
                            return None;
                        }
                        Some((lv == rv) == (c.ops[0] == CmpOp::Eq))
                    }
                    CmpOp::In | CmpOp::NotIn => {
                        let lv = self.eval(l)?;
                        let items = match r {
                            Expr::Tuple(t) => &t.elts,
                            Expr::List(t) => &t.elts,
                            Expr::Set(t) => &t.elts,
                            _ => return None,
                        };
                        let mut found = false;
                        for it in items {
                            let v = self.eval(it)?;
                            if v == Value::Object {
                                return None;
                            }
                            found |= v == lv;
                        }
                        Some(found == (c.ops[0] == CmpOp::In))
                    }
                    _ => None,
                }
            }
            _ => self.eval(e).map(|v| v.truth()),
        }
    }

    /// True when the statement never falls through under this scope: a `return`/`raise`
    /// (or `continue`/`break`, which end the enclosing loop's body), or an `if` whose taken
    /// branch (or every branch that may be taken, an `else` among them) does. The statements
    /// after it are dead: `if self.dim == 1: return ext.mean(x)` then `return torch.mean(x)`
    /// on a problem with `dim = 1`.
    pub fn terminates(&self, s: &Stmt) -> bool {
        match s {
            Stmt::Return(_) | Stmt::Raise(_) | Stmt::Continue(_) | Stmt::Break(_) => true,
            Stmt::If(i) => {
                let clauses = std::iter::once((Some(i.test.as_ref()), i.body.as_slice())).chain(
                    i.elif_else_clauses
                        .iter()
                        .map(|c| (c.test.as_ref(), c.body.as_slice())),
                );
                for (test, body) in clauses {
                    match test.map_or(Some(true), |t| self.truth(t)) {
                        Some(false) => continue,
                        Some(true) => return self.body_terminates(body),
                        None if !self.body_terminates(body) => return false,
                        None => {}
                    }
                }
                // No clause is certainly taken: the `if` may fall through.
                false
            }
            _ => false,
        }
    }

    fn body_terminates(&self, body: &[Stmt]) -> bool {
        body.iter().any(|s| self.terminates(s))
    }

    fn eval(&self, e: &Expr) -> Option<Value> {
        if let Some(v) = literal(e) {
            return Some(v);
        }
        if let Some(d) = torch_dtype(e) {
            return Some(Value::Str(d.into()));
        }
        let Expr::Attribute(a) = e else { return None };
        let attr = a.attr.as_str();
        match a.value.as_ref() {
            Expr::Name(n) if n.id.as_str() == "self" && self.self_is_model => {
                self.facts.attrs.get(attr).cloned()
            }
            Expr::Name(n) if self.facts.inputs.contains(n.id.as_str()) => match attr {
                // The gate runs the problem's inputs on the GPU, in the problem's precision.
                "is_cuda" => Some(Value::Bool(true)),
                "is_cpu" => Some(Value::Bool(false)),
                "dtype" => Some(Value::Str(precision_dtype(self.facts.precision).into())),
                _ => None,
            },
            // `x.device.type`
            Expr::Attribute(inner) if attr == "type" && inner.attr.as_str() == "device" => {
                match inner.value.as_ref() {
                    Expr::Name(n) if self.facts.inputs.contains(n.id.as_str()) => {
                        Some(Value::Str("cuda".into()))
                    }
                    _ => None,
                }
            }
            _ => None,
        }
    }
}

fn precision_dtype(p: Precision) -> &'static str {
    match p {
        Precision::Fp32 => "float32",
        Precision::Fp16 => "float16",
        Precision::Bf16 => "bfloat16",
    }
}

/// `torch.float16`, `torch.half`, ... as a canonical dtype name.
fn torch_dtype(e: &Expr) -> Option<&'static str> {
    let Expr::Attribute(a) = e else { return None };
    if !matches!(a.value.as_ref(), Expr::Name(n) if n.id.as_str() == "torch") {
        return None;
    }
    Some(match a.attr.as_str() {
        "float32" | "float" => "float32",
        "float16" | "half" => "float16",
        "bfloat16" => "bfloat16",
        "float64" | "double" => "float64",
        "int8" => "int8",
        "int32" | "int" => "int32",
        "int64" | "long" => "int64",
        _ => return None,
    })
}

fn literal(e: &Expr) -> Option<Value> {
    Some(match e {
        Expr::NoneLiteral(_) => Value::None,
        Expr::BooleanLiteral(b) => Value::Bool(b.value),
        Expr::NumberLiteral(n) => match &n.value {
            Number::Int(i) => Value::Int(i.as_i64()?),
            Number::Float(f) => Value::Float(*f),
            _ => return None,
        },
        Expr::StringLiteral(s) => Value::Str(s.value.to_str().to_string()),
        Expr::UnaryOp(u) if u.op == UnaryOp::USub => match literal(&u.operand)? {
            Value::Int(i) => Value::Int(-i),
            Value::Float(f) => Value::Float(-f),
            _ => return None,
        },
        // A tuple or list literal is an object (truthy when non-empty).
        Expr::Tuple(t) if !t.elts.is_empty() => Value::Object,
        Expr::List(t) if !t.elts.is_empty() => Value::Object,
        _ => return None,
    })
}

impl BranchFacts {
    /// Facts for a candidate; `problem` is the reference problem's source when the kernel's
    /// mapping resolves (without it the constructor's arguments are unknown).
    pub fn build(module: &ModModule, problem: Option<&ModModule>, precision: Precision) -> Self {
        let mut facts = BranchFacts {
            precision,
            ..Default::default()
        };
        let Some(model) = find_class(module, "ModelNew") else {
            return facts;
        };
        if let Some((forward, _)) = find_method(module, model, "forward") {
            let rebound = stored_names(&forward.body);
            facts.inputs = forward
                .parameters
                .args
                .iter()
                .map(|p| p.parameter.name.to_string())
                .filter(|n| n != "self" && !rebound.contains(n))
                .collect();
        }
        // Without the problem (or with a `get_init_inputs()` the lint cannot read) the
        // constructor's arguments are unknown, but what `__init__` sets from literals is not.
        let init_args = problem.and_then(init_inputs);
        let Some((init, _)) = find_method(module, model, "__init__") else {
            return facts;
        };
        // Constructor arguments: the problem's values by position, defaults after them.
        let params: Vec<&ParameterWithDefault> = init
            .parameters
            .posonlyargs
            .iter()
            .chain(init.parameters.args.iter())
            .filter(|p| p.parameter.name.as_str() != "self")
            .collect();
        if init_args
            .as_ref()
            .is_some_and(|a| a.len() > params.len() && init.parameters.vararg.is_none())
        {
            // More arguments than parameters: the constructor would fail; know nothing.
            return facts;
        }
        let mut locals: HashMap<String, Option<Value>> = HashMap::default();
        for (i, p) in params.iter().enumerate() {
            let v = match init_args.as_ref().map(|a| a.get(i)) {
                Some(Some(v)) => v.clone(),
                Some(None) => p.default.as_deref().and_then(literal),
                None => None,
            };
            locals.insert(p.parameter.name.to_string(), v);
        }
        // Keyword-only parameters and `*args`/`**kwargs` take no positional argument: their
        // defaults when the problem is known.
        for p in &init.parameters.kwonlyargs {
            let v = init_args
                .as_ref()
                .and_then(|_| p.default.as_deref().and_then(literal));
            locals.insert(p.parameter.name.to_string(), v);
        }
        let mut walker = InitWalker {
            locals,
            attrs: HashMap::default(),
            poisoned: false,
        };
        walker.body(&init.body);
        // What any other method (or `__init__`'s nested code) may change is not known.
        let mut changed = Changed::default();
        for s in &model.body {
            if let Stmt::FunctionDef(f) = s {
                if f.name.as_str() != "__init__" {
                    changed.visit_body(&f.body);
                }
            }
        }
        if changed.everything || walker.poisoned {
            return facts;
        }
        facts.attrs = walker
            .attrs
            .into_iter()
            .filter(|(k, _)| !changed.attrs.contains(k))
            .filter_map(|(k, v)| v.map(|v| (k, v)))
            .collect();
        facts
    }
}

/// `get_init_inputs()`'s returned list, each element's value if known.
fn init_inputs(problem: &ModModule) -> Option<Vec<Option<Value>>> {
    let f = problem.body.iter().rev().find_map(|s| match s {
        Stmt::FunctionDef(f) if f.name.as_str() == "get_init_inputs" => Some(f),
        _ => None,
    })?;
    let ret = f.body.iter().find_map(|s| match s {
        Stmt::Return(r) => r.value.as_deref(),
        _ => None,
    })?;
    let items = match ret {
        Expr::List(l) => &l.elts,
        Expr::Tuple(t) => &t.elts,
        _ => return None,
    };
    if items.iter().any(|e| matches!(e, Expr::Starred(_))) {
        return None;
    }
    Some(
        items
            .iter()
            .map(|e| match e {
                Expr::Name(n) => module_constant(problem, n.id.as_str()),
                other => literal(other),
            })
            .collect(),
    )
}

/// The value of a module-level `name = <literal>` assigned exactly once.
fn module_constant(module: &ModModule, name: &str) -> Option<Value> {
    let mut found = None;
    for s in &module.body {
        if let Stmt::Assign(a) = s {
            if a.targets
                .iter()
                .any(|t| matches!(t, Expr::Name(n) if n.id.as_str() == name))
            {
                if found.is_some() {
                    return None;
                }
                found = Some(literal(&a.value).unwrap_or(Value::Object));
            }
        }
    }
    found
}

/// Names a body stores to (rebinds), nested blocks included.
fn stored_names(body: &[Stmt]) -> HashSet<String> {
    struct S(HashSet<String>);
    impl<'a> Visitor<'a> for S {
        fn visit_expr(&mut self, e: &'a Expr) {
            if let Expr::Name(n) = e {
                if n.ctx.is_store() || n.ctx.is_del() {
                    self.0.insert(n.id.to_string());
                }
            }
            visitor::walk_expr(self, e);
        }
    }
    let mut s = S(HashSet::default());
    s.visit_body(body);
    s.0
}

/// Walks `__init__` in order, following decided branches.
struct InitWalker {
    /// Constructor arguments and locals: `None` when unknown.
    locals: HashMap<String, Option<Value>>,
    /// `self.<attr>` values: `None` when unknown.
    attrs: HashMap<String, Option<Value>>,
    /// `setattr` with a computed name or `__dict__`: no attribute is known.
    poisoned: bool,
}

impl InitWalker {
    fn scope_truth(&self, e: &Expr) -> Option<bool> {
        self.value(e).map(|v| v.truth()).or_else(|| match e {
            Expr::UnaryOp(u) if u.op == UnaryOp::Not => self.scope_truth(&u.operand).map(|b| !b),
            Expr::Compare(c) if c.ops.len() == 1 => {
                let (l, r) = (self.value(&c.left)?, self.value(&c.comparators[0])?);
                match c.ops[0] {
                    CmpOp::Is | CmpOp::IsNot if l == Value::None || r == Value::None => {
                        Some((l == r) == (c.ops[0] == CmpOp::Is))
                    }
                    CmpOp::Eq | CmpOp::NotEq if l != Value::Object && r != Value::Object => {
                        Some((l == r) == (c.ops[0] == CmpOp::Eq))
                    }
                    _ => None,
                }
            }
            Expr::BoolOp(b) => {
                let vals: Vec<Option<bool>> =
                    b.values.iter().map(|v| self.scope_truth(v)).collect();
                match b.op {
                    BoolOp::And if vals.contains(&Some(false)) => Some(false),
                    BoolOp::Or if vals.contains(&Some(true)) => Some(true),
                    _ if vals.iter().all(Option::is_some) => Some(b.op == BoolOp::And),
                    _ => None,
                }
            }
            _ => None,
        })
    }

    fn value(&self, e: &Expr) -> Option<Value> {
        if let Some(v) = literal(e) {
            return Some(v);
        }
        match e {
            Expr::Name(n) => self.locals.get(n.id.as_str()).cloned().flatten(),
            Expr::Attribute(a) if matches!(a.value.as_ref(), Expr::Name(n) if n.id.as_str() == "self") => {
                self.attrs.get(a.attr.as_str()).cloned().flatten()
            }
            Expr::If(t) => match self.scope_truth(&t.test)? {
                true => self.value(&t.body),
                false => self.value(&t.orelse),
            },
            // A PyTorch constructor (`nn.Parameter(...)`, `torch.zeros(...)`) is never `None`.
            Expr::Call(c) if torch_rooted(&c.func) => Some(Value::Object),
            _ => None,
        }
    }

    fn body(&mut self, body: &[Stmt]) {
        for s in body {
            self.stmt(s);
            if matches!(s, Stmt::Return(_) | Stmt::Raise(_)) {
                break;
            }
        }
    }

    fn stmt(&mut self, s: &Stmt) {
        match s {
            Stmt::Assign(a) => {
                let v = self.value(&a.value);
                for t in &a.targets {
                    match t {
                        Expr::Name(n) => {
                            self.locals.insert(n.id.to_string(), v.clone());
                        }
                        Expr::Attribute(at) if matches!(at.value.as_ref(), Expr::Name(n) if n.id.as_str() == "self") =>
                        {
                            self.attrs.insert(at.attr.to_string(), v.clone());
                        }
                        other => self.unknown_in_expr(other),
                    }
                }
            }
            Stmt::AnnAssign(a) => {
                let v = a.value.as_deref().and_then(|e| self.value(e));
                match a.target.as_ref() {
                    Expr::Name(n) => {
                        self.locals.insert(n.id.to_string(), v);
                    }
                    Expr::Attribute(at) if matches!(at.value.as_ref(), Expr::Name(n) if n.id.as_str() == "self") =>
                    {
                        self.attrs.insert(at.attr.to_string(), v);
                    }
                    _ => {}
                }
            }
            Stmt::If(i) => {
                let mut clauses: Vec<(Option<&Expr>, &[Stmt])> =
                    vec![(Some(i.test.as_ref()), i.body.as_slice())];
                for c in &i.elif_else_clauses {
                    clauses.push((c.test.as_ref(), c.body.as_slice()));
                }
                for (test, body) in clauses {
                    match test.map(|t| self.scope_truth(t)) {
                        Some(Some(false)) => continue,
                        Some(Some(true)) | None => {
                            self.body(body);
                            return;
                        }
                        Some(None) => {
                            // Undecided: whatever the remaining clauses set is unknown.
                            self.unknown_in(s);
                            return;
                        }
                    }
                }
            }
            Stmt::Expr(e) => {
                // `self.register_parameter("bias", None)` / `register_buffer(...)`.
                if let Expr::Call(c) = e.value.as_ref() {
                    if let Expr::Attribute(f) = c.func.as_ref() {
                        let on_self =
                            matches!(f.value.as_ref(), Expr::Name(n) if n.id.as_str() == "self");
                        let name = c.arguments.args.first().and_then(|a| match a {
                            Expr::StringLiteral(l) => Some(l.value.to_str().to_string()),
                            _ => None,
                        });
                        if on_self
                            && matches!(f.attr.as_str(), "register_parameter" | "register_buffer")
                        {
                            match name {
                                Some(n) => {
                                    let v = c.arguments.args.get(1).and_then(|a| self.value(a));
                                    self.attrs.insert(n, v);
                                }
                                None => self.poisoned = true,
                            }
                            return;
                        }
                    }
                }
                self.unknown_in(s);
            }
            _ => self.unknown_in(s),
        }
    }

    /// Every `self.<attr>` and local a statement may set becomes unknown.
    fn unknown_in(&mut self, s: &Stmt) {
        let mut c = Changed::default();
        c.visit_stmt(s);
        if c.everything {
            self.poisoned = true;
        }
        for a in c.attrs {
            self.attrs.insert(a, None);
        }
        for n in stored_names(std::slice::from_ref(s)) {
            self.locals.insert(n, None);
        }
    }

    fn unknown_in_expr(&mut self, e: &Expr) {
        let mut c = Changed::default();
        c.visit_expr(e);
        for a in c.attrs {
            self.attrs.insert(a, None);
        }
    }
}

fn torch_rooted(e: &Expr) -> bool {
    match e {
        Expr::Name(n) => matches!(n.id.as_str(), "torch" | "nn"),
        Expr::Attribute(a) => torch_rooted(&a.value),
        _ => false,
    }
}

/// `self.<attr>`s a piece of code may change: stores, `del`, `setattr(self, "attr", ...)`;
/// `everything` for `setattr` with a computed name, `self.__dict__` or `vars(self)`.
#[derive(Default)]
struct Changed {
    attrs: HashSet<String>,
    everything: bool,
}

impl<'a> Visitor<'a> for Changed {
    fn visit_expr(&mut self, e: &'a Expr) {
        match e {
            Expr::Attribute(a) if matches!(a.value.as_ref(), Expr::Name(n) if n.id.as_str() == "self") =>
            {
                if !a.ctx.is_load() {
                    self.attrs.insert(a.attr.to_string());
                }
                if a.attr.as_str() == "__dict__" {
                    self.everything = true;
                }
            }
            Expr::Call(c) => {
                if let Expr::Name(f) = c.func.as_ref() {
                    let on_self = matches!(c.arguments.args.first(), Some(Expr::Name(n)) if n.id.as_str() == "self");
                    match f.id.as_str() {
                        "setattr" | "delattr" if on_self => match c.arguments.args.get(1) {
                            Some(Expr::StringLiteral(l)) => {
                                self.attrs.insert(l.value.to_str().to_string());
                            }
                            _ => self.everything = true,
                        },
                        "vars" if on_self => self.everything = true,
                        _ => {}
                    }
                }
                // `self.register_parameter("bias", ...)` outside `__init__`.
                if let Expr::Attribute(f) = c.func.as_ref() {
                    if matches!(f.attr.as_str(), "register_parameter" | "register_buffer") {
                        match c.arguments.args.first() {
                            Some(Expr::StringLiteral(l)) => {
                                self.attrs.insert(l.value.to_str().to_string());
                            }
                            _ => self.everything = true,
                        }
                    }
                }
            }
            _ => {}
        }
        visitor::walk_expr(self, e);
    }
}

/// Byte ranges of the `if`/`elif`/`else` bodies in `body` (nested blocks included) that the
/// scope proves are never taken.
pub fn dead_ranges(body: &[Stmt], scope: Scope) -> Vec<std::ops::Range<usize>> {
    struct D<'f> {
        scope: Scope<'f>,
        out: Vec<std::ops::Range<usize>>,
    }
    fn span(body: &[Stmt]) -> Option<std::ops::Range<usize>> {
        use ruff_text_size::Ranged;
        Some(usize::from(body.first()?.start())..usize::from(body.last()?.end()))
    }
    impl<'a> Visitor<'a> for D<'_> {
        fn visit_body(&mut self, body: &'a [Stmt]) {
            for (i, s) in body.iter().enumerate() {
                self.visit_stmt(s);
                if self.scope.terminates(s) {
                    self.out.extend(span(&body[i + 1..]));
                    break;
                }
            }
        }
        fn visit_stmt(&mut self, s: &'a Stmt) {
            if let Stmt::If(i) = s {
                let mut taken = false;
                let mut clauses: Vec<(Option<&Expr>, &[Stmt])> =
                    vec![(Some(i.test.as_ref()), i.body.as_slice())];
                for c in &i.elif_else_clauses {
                    clauses.push((c.test.as_ref(), c.body.as_slice()));
                }
                for (test, body) in clauses {
                    let truth = match test {
                        Some(t) => self.scope.truth(t),
                        None => Some(true),
                    };
                    if taken || truth == Some(false) {
                        self.out.extend(span(body));
                    } else if truth == Some(true) {
                        taken = true;
                    }
                }
            }
            visitor::walk_stmt(self, s);
        }
    }
    let mut d = D {
        scope,
        out: Vec::new(),
    };
    d.visit_body(body);
    d.out
}

/// What the problem decides about the branches of the code `forward` reaches: the bodies it
/// proves are never taken, and those whose test it cannot decide. A finding on an undecided
/// branch claims that code runs without proof.
#[derive(Debug, Default, Clone)]
pub struct Branches {
    /// Bodies never taken (and code after a statement that always returns).
    pub dead: Vec<std::ops::Range<usize>>,
    /// Bodies of `if`/`elif`/`else` clauses whose test is not decided, with the range of the
    /// test that leaves them open (for an `else`, the last test before it).
    pub undecided: Vec<(std::ops::Range<usize>, std::ops::Range<usize>)>,
}

impl Branches {
    /// Over the live code of `functions` (each with the class it belongs to).
    pub fn build<'a>(
        module: &ModModule,
        functions: &[(
            &'a ruff_python_ast::StmtFunctionDef,
            Option<&'a ruff_python_ast::StmtClassDef>,
        )],
        facts: &BranchFacts,
    ) -> Self {
        let mut out = Branches::default();
        for (f, owner) in functions {
            let scope = Scope {
                facts,
                self_is_model: is_model_method(*owner, module),
            };
            out.dead.extend(dead_ranges(&f.body, scope));
            out.undecided.extend(undecided_ranges(&f.body, scope));
        }
        out
    }

    /// Is `offset` on a branch the problem never takes?
    pub fn is_dead(&self, offset: usize) -> bool {
        self.dead.iter().any(|d| d.contains(&offset))
    }

    /// The tests (innermost last) of the undecided branches `offset` lies on.
    pub fn undecided_tests(&self, offset: usize) -> Vec<std::ops::Range<usize>> {
        let mut tests: Vec<(usize, std::ops::Range<usize>)> = self
            .undecided
            .iter()
            .filter(|(body, _)| body.contains(&offset))
            .map(|(body, test)| (body.start, test.clone()))
            .collect();
        tests.sort_by_key(|(start, _)| *start);
        tests.into_iter().map(|(_, t)| t).collect()
    }
}

/// Byte ranges of the `if`/`elif`/`else` bodies in `body` (nested blocks included) whose test
/// the scope does not decide, each with the test's range. A clause after one that is certainly
/// taken is dead, not undecided.
pub fn undecided_ranges(
    body: &[Stmt],
    scope: Scope,
) -> Vec<(std::ops::Range<usize>, std::ops::Range<usize>)> {
    struct U<'f> {
        scope: Scope<'f>,
        out: Vec<(std::ops::Range<usize>, std::ops::Range<usize>)>,
    }
    fn span(body: &[Stmt]) -> Option<std::ops::Range<usize>> {
        use ruff_text_size::Ranged;
        Some(usize::from(body.first()?.start())..usize::from(body.last()?.end()))
    }
    fn of(e: &Expr) -> std::ops::Range<usize> {
        use ruff_text_size::Ranged;
        usize::from(e.start())..usize::from(e.end())
    }
    impl<'a> Visitor<'a> for U<'_> {
        fn visit_stmt(&mut self, s: &'a Stmt) {
            if let Stmt::If(i) = s {
                let mut clauses: Vec<(Option<&Expr>, &[Stmt])> =
                    vec![(Some(i.test.as_ref()), i.body.as_slice())];
                for c in &i.elif_else_clauses {
                    clauses.push((c.test.as_ref(), c.body.as_slice()));
                }
                // The test that leaves the clause open: its own, or for an `else` the last
                // undecided one before it.
                let mut open: Option<std::ops::Range<usize>> = None;
                for (test, body) in clauses {
                    let truth = test.map_or(Some(true), |t| self.scope.truth(t));
                    match (truth, test) {
                        (Some(false), _) => continue,
                        (None, Some(t)) => {
                            open = Some(of(t));
                            self.out.extend(span(body).map(|b| (b, of(t))));
                        }
                        (Some(true), _) => {
                            // Taken whenever the earlier undecided tests are false.
                            if let Some(t) = &open {
                                self.out.extend(span(body).map(|b| (b, t.clone())));
                            }
                            break;
                        }
                        (None, None) => {}
                    }
                }
            }
            visitor::walk_stmt(self, s);
        }
    }
    let mut u = U {
        scope,
        out: Vec::new(),
    };
    u.visit_body(body);
    u.out
}

/// The function a method is, for scoping: `self` is the `ModelNew` instance only in methods
/// of `ModelNew` (or the module-level bases it inherits them from).
pub fn is_model_method(owner: Option<&ruff_python_ast::StmtClassDef>, module: &ModModule) -> bool {
    let Some(owner) = owner else { return false };
    let Some(model) = find_class(module, "ModelNew") else {
        return false;
    };
    if std::ptr::eq(owner, model) {
        return true;
    }
    // A base class of ModelNew: its methods run on the ModelNew instance.
    let mut seen = HashSet::default();
    let mut stack = vec![model];
    while let Some(c) = stack.pop() {
        if !seen.insert(c.name.to_string()) {
            continue;
        }
        for b in c.bases() {
            if let Expr::Name(n) = b {
                if let Some(bc) = find_class(module, n.id.as_str()) {
                    if std::ptr::eq(bc, owner) {
                        return true;
                    }
                    stack.push(bc);
                }
            }
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(src: &str, problem: &str) -> (ruff_python_parser::Parsed<ModModule>, BranchFacts) {
        let m = ruff_python_parser::parse_module(src).unwrap();
        let p = ruff_python_parser::parse_module(problem).unwrap();
        let f = BranchFacts::build(m.syntax(), Some(p.syntax()), Precision::Fp32);
        (m, f)
    }

    fn test_expr(src: &str) -> Expr {
        ruff_python_parser::parse_expression(src)
            .unwrap()
            .into_expr()
    }

    const PROBLEM: &str = "in_c = 3\nout_c = 8\ndef get_init_inputs():\n    return [in_c, out_c]\n";

    #[test]
    fn constructor_defaults_and_problem_values_decide_self_attributes() {
        let src = "class ModelNew(nn.Module):\n    def __init__(self, a, b, bias=False, scale=None):\n        super().__init__()\n        if bias:\n            self.bias = nn.Parameter(torch.zeros(b))\n        else:\n            self.register_parameter('bias', None)\n        self.scale = scale\n        self.w = nn.Parameter(torch.zeros(a, b)) if a == 3 else None\n    def forward(self, x):\n        return x\n";
        let (_m, f) = facts(src, PROBLEM);
        let s = Scope {
            facts: &f,
            self_is_model: true,
        };
        assert_eq!(s.truth(&test_expr("self.bias is not None")), Some(false));
        assert_eq!(s.truth(&test_expr("self.scale is None")), Some(true));
        assert_eq!(s.truth(&test_expr("self.w is not None")), Some(true));
        assert_eq!(s.truth(&test_expr("not x.is_cuda")), Some(false));
        assert_eq!(s.truth(&test_expr("x.dtype == torch.float16")), Some(false));
        assert_eq!(
            s.truth(&test_expr("x.dtype in (torch.half, torch.bfloat16)")),
            Some(false)
        );
        assert_eq!(s.truth(&test_expr("x.device.type == 'cpu'")), Some(false));
        assert_eq!(
            s.truth(&test_expr("self.bias is not None and x.is_cuda")),
            Some(false)
        );
        // Not ModelNew's `self`, an unknown attribute, a tensor that is not an input.
        let other = Scope {
            facts: &f,
            self_is_model: false,
        };
        assert_eq!(other.truth(&test_expr("self.bias is not None")), None);
        assert_eq!(s.truth(&test_expr("self.other is None")), None);
        assert_eq!(s.truth(&test_expr("y.dtype == torch.float16")), None);
    }

    #[test]
    fn attributes_another_method_can_change_are_unknown() {
        let src = "class ModelNew(nn.Module):\n    def __init__(self, a, b, bias=False):\n        super().__init__()\n        self.bias = None\n        self.flag = False\n    def enable(self):\n        self.bias = torch.zeros(3)\n    def forward(self, x):\n        x = x.half()\n        return x\n";
        let (_m, f) = facts(src, PROBLEM);
        let s = Scope {
            facts: &f,
            self_is_model: true,
        };
        assert_eq!(s.truth(&test_expr("self.bias is not None")), None);
        assert_eq!(s.truth(&test_expr("self.flag")), Some(false));
        // `x` is rebound in forward: its dtype is not the problem's any more.
        assert_eq!(s.truth(&test_expr("x.dtype == torch.float16")), None);
        let dynamic = "class ModelNew(nn.Module):\n    def __init__(self, a, b):\n        super().__init__()\n        self.bias = None\n    def forward(self, x, name):\n        setattr(self, name, x)\n        return x\n";
        let (_m, f) = facts(dynamic, PROBLEM);
        let s = Scope {
            facts: &f,
            self_is_model: true,
        };
        assert_eq!(s.truth(&test_expr("self.bias is None")), None);
    }

    #[test]
    fn without_the_problem_constructor_arguments_are_unknown() {
        let src = "class ModelNew(nn.Module):\n    def __init__(self, a, bias=False):\n        super().__init__()\n        self.bias = nn.Parameter(torch.zeros(a)) if bias else None\n    def forward(self, x):\n        return x\n";
        let m = ruff_python_parser::parse_module(src).unwrap();
        let f = BranchFacts::build(m.syntax(), None, Precision::Fp32);
        let s = Scope {
            facts: &f,
            self_is_model: true,
        };
        assert_eq!(s.truth(&test_expr("self.bias is not None")), None);
        assert_eq!(s.truth(&test_expr("not x.is_cuda")), Some(false));
    }
}
