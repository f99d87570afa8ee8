//! KG401 `output-cache`: results stored and returned for repeated inputs. Containers keyed by
//! an input's identity or shape, identity compared with a stored one, a result computed once and
//! returned for every later input, inputs kept across calls; stored tensors loaded from disk are
//! module paths in the banned table. Every KG401 is raised through [`Checker::output_cache`].

use super::*;
use crate::rule::RuleMeta;
use kernelgate_model::Severity::Error;

impl<'a, 'c> Checker<'a, 'c> {
    /// Every KG401 finding is raised here.
    pub(super) fn output_cache(&mut self, r: std::ops::Range<usize>, msg: impl Into<String>) {
        self.push(Rule::KG401, r, msg);
    }
}

impl<'a, 'c> Checker<'a, 'c> {
    /// Output caches keyed by identity (KG401), per function.
    pub(super) fn check_caches_in(&mut self, stmt: &'a Stmt) {
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
                        self.output_cache(
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

    /// `if self.out is None: self.out = ext.run(x)` ... `return self.out`: the first call's
    /// result is returned for every later input. (A buffer allocated once and written by a
    /// kernel every call is fine: its value is an allocation, not a computation.)
    pub(super) fn check_compute_once(&mut self, class: &'a ruff_python_ast::StmtClassDef) {
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
                    .model
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
                self.output_cache(
                    r,
                    format!("`{k}` is computed once and returned for every later input: an output cache"),
                );
            }
        }
    }
}

impl<'a> LiveVisitor<'_, 'a, '_> {
    /// Identity of an input compared with stored state: `x.data_ptr() == self.last_ptr`,
    /// `x is self._x`. The stored result is returned when the same tensor comes back.
    pub(super) fn identity_compare(&mut self, c: &'a ruff_python_ast::ExprCompare) {
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
                    self.c.model.names.qualify(&call.func).as_deref(),
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
            self.c.output_cache(
                range(c),
                "compares an input's identity with one seen before: the stored result can be returned for a repeated tensor",
            );
        }
    }
}

impl<'a> LiveVisitor<'_, 'a, '_> {
    /// `self._pending = x`: an input kept beyond the call.
    pub(super) fn input_kept_in_self(&mut self, stmt: &Stmt, t: &Expr, value: &Expr) {
        if key_of(t).is_some_and(|k| k.starts_with("self.")) {
            if let Some(input) = self.input_root(value) {
                let msg = format!("keeps the input `{input}` in `{}` across calls: later calls can return or batch stored work", self.c.text(t));
                self.c.output_cache(range(stmt), msg);
            }
        }
    }

    /// `self.saved.append(x)`: an input kept beyond the call.
    pub(super) fn input_appended_to_self(&mut self, call: &ExprCall) {
        let Expr::Attribute(a) = call.func.as_ref() else {
            return;
        };
        if matches!(
            a.attr.as_str(),
            "append" | "extend" | "insert" | "add" | "appendleft"
        ) && key_of(&a.value).is_some_and(|k| k.starts_with("self."))
        {
            if let Some(input) = call.arguments.args.iter().find_map(|x| self.input_root(x)) {
                let holder = self.c.text(a.value.as_ref());
                self.c.output_cache(range(call), format!("keeps the input `{input}` in `{holder}` across calls: later calls can return or batch stored work"));
            }
        }
    }
}

// -------------------------------------------------------------------- caches keyed by inputs

pub(super) struct CacheVisitor<'x, 'a, 'c> {
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
pub(super) enum KeyKind {
    Identity,
    Shape,
    Plain,
}

impl<'a> CacheVisitor<'_, 'a, '_> {
    /// `cache[key]`, `cache.get(key)`: the container whose element `e` is, as returned.
    fn returned_from(&mut self, e: &Expr) {
        let container = match e {
            Expr::Subscript(s) => Some(s.value.as_ref()),
            Expr::Call(c) => match c.func.as_ref() {
                Expr::Attribute(a) if matches!(a.attr.as_str(), "get" | "setdefault" | "pop") => {
                    Some(a.value.as_ref())
                }
                _ => None,
            },
            _ => None,
        };
        if let Some(k) = container.and_then(|c| key_of(c).or_else(|| self.c.model.names.qualify(c)))
        {
            self.returned.insert(k);
        }
    }

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
            names: &self.c.model.names,
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
        let Some(name) = key_of(container).or_else(|| self.c.model.names.qualify(container)) else {
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
                self.c.output_cache(r, format!("`{name}` is keyed by tensor identity (`data_ptr()`/`id()`): an output cache"));
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
                    self.returned_from(v);
                    if let Expr::Name(n) = v {
                        // `out = cache[key]; return out`, `out = cache.get(key); return out`
                        if let Some(stored) = self.locals.get(n.id.as_str()).copied() {
                            self.returned_from(stored);
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
                if !matches!(s.value.as_ref(), Expr::Name(n) if self.c.model.names.binding(n.id.as_str()).is_some())
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

// ---------------------------------------------------------------- registry entries

pub(crate) const KG401: RuleMeta = RuleMeta {
    code: "KG401",
    name: "output-cache",
    severity: Error,
    summary: "Results are cached by tensor identity or shape",
    error_when: "whenever a result is kept and returned by identity, shape or content, or loaded from disk",
    warn_when: "never from its own analysis (`[lint] severity` can lower it per repository)",
    doc: "A container (also a default argument, a class attribute or a `weakref` dictionary) is indexed or probed with a key derived from `data_ptr()`, `id()`, `.shape`/`.size()`, `hash()` or a content fingerprint (`.tolist()`, `.item()`), an input's identity is compared with one stored from an earlier call (`x.data_ptr() == self.last_ptr`, `x is self.last_x`), a result computed from the inputs only when a stored attribute is unset is returned (`if self.out is None: self.out = ext.run(x)` ... `return self.out`), `forward` or a function that launches kernels is memoised with `functools.cache`/`lru_cache`, an input is kept in `self` across calls, or stored tensors are loaded from disk (`torch.load`, `numpy.load`, `pickle.load`). Returning a stored result for repeated inputs makes timing meaningless. Compute every call; cache only compiled kernels keyed by dtype or configuration.",
    bad: "_cache = {}\ndef forward(self, x):\n    key = x.data_ptr()\n    if key in _cache:\n        return _cache[key]",
    good: "def forward(self, x):\n    return ext.run(x)",
};
