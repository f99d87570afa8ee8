//! What the Python rules know about names beyond the semantic model: which names hold an
//! extension module (`load_inline(...)`) and its exported functions, which hold nn compute
//! layers, and which functions are GPU kernels written in a Python DSL.

use super::*;

impl<'a, 'c> Checker<'a, 'c> {
    /// Extension objects, their exported functions, and nn layer attributes.
    pub(super) fn collect_bindings(&mut self) {
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
                                    if let Some(s) = self.c.model.names.fold_str(it) {
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

    pub(super) fn is_ext_builder(&self, call: &ExprCall) -> bool {
        let q = self.model.names.qualify(&call.func);
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
    pub(super) fn layer_kind(&self, call: &ExprCall) -> Option<String> {
        let Some(q) = self.model.names.qualify(&call.func) else {
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
    pub(super) fn layer_base(
        &self,
        class: &ruff_python_ast::StmtClassDef,
        depth: u8,
    ) -> Option<String> {
        if depth > 8 {
            return None;
        }
        class
            .bases()
            .iter()
            .find_map(|b| match self.model.names.qualify(b) {
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

    pub(super) fn is_ext_call_target(&self, recv: &Expr, method: &str) -> bool {
        self.ext_functions.contains(method)
            || key_of(recv).is_some_and(|k| self.ext_objects.contains(&k))
    }

    /// Functions compiled for the GPU by a DSL (Triton, CuTe, TileLang, Numba): their bodies are kernels.
    pub(super) fn gpu_dsl(&self, f: &StmtFunctionDef) -> bool {
        f.decorator_list.iter().any(|d| {
            let e = match &d.expression {
                Expr::Call(c) => c.func.as_ref(),
                e => e,
            };
            self.model.names.qualify(e).is_some_and(|q| {
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
}

/// Module-level variables and classes: module state a counter can live in
/// (`ModelNew.calls += 1` is module state too).
pub(super) fn module_level_names(module: &ModModule) -> HashSet<String> {
    module
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
        .collect()
}

/// `name` or `self.attr` as a lookup key.
pub(super) fn key_of(e: &Expr) -> Option<String> {
    match e {
        Expr::Name(n) => Some(n.id.to_string()),
        Expr::Attribute(a) => match a.value.as_ref() {
            Expr::Name(n) if n.id.as_str() == "self" => Some(format!("self.{}", a.attr.as_str())),
            _ => None,
        },
        _ => None,
    }
}
