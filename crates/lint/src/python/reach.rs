//! Which code runs when the harness calls `ModelNew.forward`.
//!
//! Starting at `ModelNew.forward` (or `__call__`, or an inherited module-level `forward`), a
//! function becomes reachable when live code names it: `self.method`, a module-level function
//! or class (a class brings its `__init__`, `forward`, `__call__`, `apply`), `self.attr(...)`
//! where `self.attr = SomeClass(...)`. Branches that are constantly false (`if False:`,
//! `if 0:`, `while False:`, `if TYPE_CHECKING:`) and statements after `return`/`raise` are dead.
//!
//! lint-cpp: `crate::reachable(module)` gives the live functions and calls; `called_attrs` holds
//! every attribute called in live code (`ext.relu(x)` -> `relu`), which is how an extension
//! function exported by `load_inline(functions=[...])` is "launched" from Python, and `names`
//! every name loaded in live code (a Triton kernel launched as `kernel[grid](...)` is a load of
//! `kernel`). `walk_live` visits a body with the same dead-branch rules.
//!
//! Values are followed through the names and attributes they are bound to (`self.act = relu`
//! with `relu = _Fn.apply` makes `_Fn` live), and `torch.ops.<ns>.<op>(...)` to the functions
//! the file registers for the op. Every live call whose callee the walk cannot name is recorded
//! in `unresolved` ([`super::resolve`]): rules that claim something never happens consult it.

use super::consts::{is_model_method, BranchFacts, Scope};
use super::names::Names;
use super::resolve::{module_values, LibraryOps, Resolver, Unresolved};
use ruff_python_ast::visitor::{self, Visitor};
use ruff_python_ast::{Expr, ExprCall, ModModule, Stmt, StmtClassDef, StmtFunctionDef};
use rustc_hash::FxHashSet as HashSet;
use std::collections::BTreeSet;

/// The code reachable from `ModelNew.forward`.
#[derive(Debug, Default)]
pub struct Reachability<'a> {
    /// Reachable functions (methods and module-level functions; nested defs are part of their
    /// parent's body), the entry point first, each with the class it belongs to.
    pub functions: Vec<(&'a StmtFunctionDef, Option<&'a StmtClassDef>)>,
    /// Every call in live code of those functions.
    pub calls: Vec<&'a ExprCall>,
    /// Attribute names that are called in live code (`self.ext.relu(x)` -> `relu`).
    pub called_attrs: BTreeSet<String>,
    /// Names loaded in live code.
    pub names: BTreeSet<String>,
    /// `self.<attr>` loads in live code.
    pub self_attrs: BTreeSet<String>,
    /// `ModelNew.forward` is replaced (`ModelNew.forward = f`, `self.forward = self._fast`):
    /// its own body may never run. Still walked for findings; not evidence of custom work.
    pub forward_replaced: bool,
    /// Live calls whose callee the walk could not follow (see [`super::resolve`]): a rule that
    /// claims something never happens is proven only when this is empty.
    pub unresolved: Unresolved,
}

impl Reachability<'_> {
    /// True when a function with this name (method or module-level) is reachable.
    pub fn has_function(&self, name: &str) -> bool {
        self.functions.iter().any(|(f, _)| f.name.as_str() == name)
    }
}

/// The module-level class named `name` (the last definition wins, like Python).
pub fn find_class<'a>(module: &'a ModModule, name: &str) -> Option<&'a StmtClassDef> {
    module.body.iter().rev().find_map(|s| match s {
        Stmt::ClassDef(c) if c.name.as_str() == name => Some(c),
        _ => None,
    })
}

/// The method `name` of a class, looking through module-level base classes.
pub fn find_method<'a>(
    module: &'a ModModule,
    class: &'a StmtClassDef,
    name: &str,
) -> Option<(&'a StmtFunctionDef, &'a StmtClassDef)> {
    let mut seen = HashSet::default();
    find_method_rec(module, class, name, &mut seen)
}

fn find_method_rec<'a>(
    module: &'a ModModule,
    class: &'a StmtClassDef,
    name: &str,
    seen: &mut HashSet<String>,
) -> Option<(&'a StmtFunctionDef, &'a StmtClassDef)> {
    if !seen.insert(class.name.to_string()) {
        return None;
    }
    for s in class.body.iter().rev() {
        if let Stmt::FunctionDef(f) = s {
            if f.name.as_str() == name {
                return Some((f, class));
            }
        }
    }
    for base in class.bases() {
        if let Expr::Name(n) = base {
            if let Some(b) = find_class(module, n.id.as_str()) {
                if let Some(found) = find_method_rec(module, b, name, seen) {
                    return Some(found);
                }
            }
        }
    }
    None
}

fn find_function<'a>(module: &'a ModModule, name: &str) -> Option<&'a StmtFunctionDef> {
    module.body.iter().rev().find_map(|s| match s {
        Stmt::FunctionDef(f) if f.name.as_str() == name => Some(f),
        _ => None,
    })
}

/// `Some(truth)` when an `if`/`while` test is a constant.
pub fn const_truth(expr: &Expr) -> Option<bool> {
    match expr {
        Expr::BooleanLiteral(b) => Some(b.value),
        Expr::NoneLiteral(_) => Some(false),
        Expr::NumberLiteral(n) => match &n.value {
            ruff_python_ast::Number::Int(i) => Some(i.as_u64() != Some(0)),
            ruff_python_ast::Number::Float(f) => Some(*f != 0.0),
            _ => None,
        },
        Expr::StringLiteral(s) => Some(!s.value.to_str().is_empty()),
        Expr::UnaryOp(u) if u.op == ruff_python_ast::UnaryOp::Not => {
            const_truth(&u.operand).map(|b| !b)
        }
        Expr::Name(n) if n.id.as_str() == "TYPE_CHECKING" => Some(false),
        Expr::Attribute(a) if a.attr.as_str() == "TYPE_CHECKING" => Some(false),
        _ => None,
    }
}

/// Visit the live statements of a body: skips constant-false branches (literal constants, and
/// what the problem decides: see [`super::consts`]) and code after an unconditional
/// `return`/`raise`/`continue`/`break`.
pub fn walk_live<'a, V: Visitor<'a> + ?Sized>(v: &mut V, body: &'a [Stmt]) {
    walk_live_in(v, body, Scope::none());
}

/// [`walk_live`] with `scope` deciding tests too: the statements after an `if` whose taken
/// branch returns are dead (see [`Scope::terminates`]).
pub fn walk_live_in<'a, V: Visitor<'a> + ?Sized>(v: &mut V, body: &'a [Stmt], scope: Scope) {
    for stmt in body {
        v.visit_stmt(stmt);
        if scope.terminates(stmt) {
            break;
        }
    }
}

/// The part of `walk_stmt` that knows about dead branches; call it from `visit_stmt` of a
/// visitor that wants only live code. `scope` decides tests beyond literal constants.
pub fn walk_stmt_live<'a, V: Visitor<'a> + ?Sized>(v: &mut V, stmt: &'a Stmt, scope: Scope) {
    match stmt {
        Stmt::If(s) => {
            v.visit_expr(&s.test);
            let mut taken = false;
            match scope.truth(&s.test) {
                Some(false) => {}
                Some(true) => {
                    walk_live_in(v, &s.body, scope);
                    taken = true;
                }
                None => walk_live_in(v, &s.body, scope),
            }
            for clause in &s.elif_else_clauses {
                if taken {
                    break;
                }
                match clause.test.as_ref() {
                    Some(t) => {
                        v.visit_expr(t);
                        match scope.truth(t) {
                            Some(false) => {}
                            Some(true) => {
                                walk_live_in(v, &clause.body, scope);
                                taken = true;
                            }
                            None => walk_live_in(v, &clause.body, scope),
                        }
                    }
                    None => walk_live_in(v, &clause.body, scope),
                }
            }
        }
        Stmt::While(s) => {
            v.visit_expr(&s.test);
            if scope.truth(&s.test) != Some(false) {
                walk_live_in(v, &s.body, scope);
            }
            walk_live_in(v, &s.orelse, scope);
        }
        _ => visitor::walk_stmt(v, stmt),
    }
}

/// Compute what is reachable from `ModelNew.forward`, with only literal constants deciding
/// branches. Empty when there is no `ModelNew` class.
pub fn reachable(module: &ModModule) -> Reachability<'_> {
    reachable_with(module, Scope::none().facts)
}

/// [`reachable`] with the problem's facts deciding branches too.
pub fn reachable_with<'a>(module: &'a ModModule, facts: &BranchFacts) -> Reachability<'a> {
    let names = Names::build(module);
    reachable_in(module, facts, &names, None)
}

/// [`reachable_with`] with the file's names (to follow `torch.ops` calls to the file's own
/// registrations and to judge which calls resolve) and its source (to show unresolved callees).
pub fn reachable_in<'a>(
    module: &'a ModModule,
    facts: &BranchFacts,
    names: &Names,
    source: Option<&str>,
) -> Reachability<'a> {
    let ops = LibraryOps::collect(module, names);
    let mut r = Reachability::default();
    let Some(model_new) = find_class(module, "ModelNew") else {
        return r;
    };
    let mut queue: Vec<(&StmtFunctionDef, Option<&StmtClassDef>)> = Vec::new();
    for entry in ["forward", "__call__"] {
        if let Some((f, owner)) = find_method(module, model_new, entry) {
            queue.push((f, Some(owner)));
        }
    }
    // What else decides what `ModelNew(...)(x)` runs: class decorators, a metaclass, and
    // module-level `ModelNew.forward = f` / `setattr(ModelNew, "forward", f)`.
    let mut outer: BTreeSet<String> = BTreeSet::new();
    for d in &model_new.decorator_list {
        let e = match &d.expression {
            Expr::Call(c) => c.func.as_ref(),
            e => e,
        };
        names_in(module, e, &mut outer);
    }
    for k in model_new.keywords() {
        names_in(module, &k.value, &mut outer);
    }
    for s in &module.body {
        match s {
            Stmt::Assign(a)
                if a.targets.iter().any(|t| {
                    matches!(t, Expr::Attribute(at) if matches!(at.value.as_ref(), Expr::Name(n) if n.id.as_str() == "ModelNew"))
                }) =>
            {
                if a.targets.iter().any(|t| matches!(t, Expr::Attribute(at) if at.attr.as_str() == "forward")) {
                    r.forward_replaced = true;
                }
                names_in(module, &a.value, &mut outer)
            }
            Stmt::Expr(e) => {
                if let Expr::Call(c) = e.value.as_ref() {
                    let args = &c.arguments.args;
                    if matches!(c.func.as_ref(), Expr::Name(n) if n.id.as_str() == "setattr")
                        && args.len() == 3
                        && matches!(&args[0], Expr::Name(n) if n.id.as_str() == "ModelNew")
                    {
                        if !matches!(&args[1], Expr::StringLiteral(l) if l.value.to_str() != "forward") {
                            r.forward_replaced = true;
                        }
                        names_in(module, &args[2], &mut outer);
                    }
                }
            }
            _ => {}
        }
    }
    // `self.forward = self._fast` in `__init__`: the instance attribute shadows the method.
    if !self_attr_values(model_new, "forward").is_empty() {
        r.forward_replaced = true;
    }
    for value in self_attr_values(model_new, "forward")
        .into_iter()
        .chain(self_attr_values(model_new, "__call__"))
    {
        names_in(module, value, &mut outer);
        if let Expr::Attribute(a) = value {
            if matches!(a.value.as_ref(), Expr::Name(n) if n.id.as_str() == "self") {
                if let Some((f, o)) = find_method(module, model_new, a.attr.as_str()) {
                    queue.push((f, Some(o)));
                }
            }
        }
    }
    for name in &outer {
        if let Some(func) = find_function(module, name) {
            queue.push((func, None));
        }
    }
    // `self.attr = SomeClass(...)` anywhere in a class: calling `self.attr(...)` runs it.
    let mut seen: HashSet<*const StmtFunctionDef> = HashSet::default();
    let mut classes_done: HashSet<String> = HashSet::default();
    let mut values_done: HashSet<String> = HashSet::default();
    for name in &outer {
        enqueue_class(module, name, &mut queue, &mut classes_done);
    }
    while let Some((f, owner)) = queue.pop() {
        if !seen.insert(f as *const _) {
            continue;
        }
        r.functions.push((f, owner));
        let mut c = Collector {
            scope: Scope {
                facts,
                self_is_model: is_model_method(owner, module),
            },
            calls: Vec::new(),
            names: BTreeSet::new(),
            self_attrs: BTreeSet::new(),
        };
        // A decorator runs around the function: `@with_epilogue` makes its wrapper live.
        for d in &f.decorator_list {
            c.visit_expr(&d.expression);
        }
        let scope = c.scope;
        walk_live_in(&mut c, &f.body, scope);
        for call in &c.calls {
            if let Expr::Attribute(a) = call.func.as_ref() {
                r.called_attrs.insert(a.attr.to_string());
            }
        }
        let mut resolver = Resolver::new(module, names, &ops, f, owner);
        resolver.source = source;
        for call in &c.calls {
            // `torch.ops.<ns>.<op>(...)`: the functions the file registers for it run.
            if let Some(op) = LibraryOps::op_of(names, &call.func) {
                for target in ops.targets(&op) {
                    queue.push((target, None));
                }
            }
            if let Some(u) = resolver.unresolved(call) {
                r.unresolved.push(u);
            }
        }
        r.calls.extend(c.calls);
        // self.<attr>: a method of the owner, or an instance of a module-level class.
        // Names a live value was built from: `self.post = _finish`, `STAGES = {"post": _epilogue}`,
        // `self.act = partial(helper, ...)` make those functions live when the value is used.
        let mut value_names: BTreeSet<String> = BTreeSet::new();
        if let Some(owner) = owner {
            for attr in &c.self_attrs {
                if let Some((m, o)) = find_method(module, owner, attr) {
                    queue.push((m, Some(o)));
                }
                for value in self_attr_values(owner, attr) {
                    names_in(module, value, &mut value_names);
                }
            }
        }
        // Names through the values bound to them, transitively: `self.act = relu` with
        // `relu = _Fn.apply` makes `_Fn` live.
        let mut pending: Vec<String> = c.names.iter().chain(value_names.iter()).cloned().collect();
        while let Some(name) = pending.pop() {
            if let Some(func) = find_function(module, &name) {
                queue.push((func, None));
            }
            enqueue_class(module, &name, &mut queue, &mut classes_done);
            if values_done.insert(name.clone()) {
                let mut more = BTreeSet::new();
                for value in module_values(module, &name) {
                    names_in(module, value, &mut more);
                }
                pending.extend(more);
            }
        }
        r.names.extend(c.names);
        r.self_attrs.extend(c.self_attrs);
    }
    r
}

fn enqueue_class<'a>(
    module: &'a ModModule,
    name: &str,
    queue: &mut Vec<(&'a StmtFunctionDef, Option<&'a StmtClassDef>)>,
    done: &mut HashSet<String>,
) {
    if name == "ModelNew" || !done.insert(name.to_string()) {
        return;
    }
    if let Some(class) = find_class(module, name) {
        for m in ["__init__", "__new__", "forward", "__call__", "apply"] {
            if let Some((f, o)) = find_method(module, class, m) {
                queue.push((f, Some(o)));
            }
        }
    }
}

/// Values assigned to `self.<attr>` in any method of `class`, or to `<attr>` in its body.
pub(super) fn self_attr_values<'a>(class: &'a StmtClassDef, attr: &str) -> Vec<&'a Expr> {
    struct Finder<'s, 'a> {
        attr: &'s str,
        out: Vec<&'a Expr>,
    }
    impl<'a> Visitor<'a> for Finder<'_, 'a> {
        fn visit_stmt(&mut self, stmt: &'a Stmt) {
            if let Stmt::Assign(a) = stmt {
                let hits = a.targets.iter().any(|t| is_self_attr(t, self.attr));
                if hits {
                    self.out.push(&a.value);
                }
            }
            // setattr(self, "attr", value)
            if let Stmt::Expr(e) = stmt {
                if let Expr::Call(c) = e.value.as_ref() {
                    let args = &c.arguments.args;
                    if matches!(c.func.as_ref(), Expr::Name(n) if n.id.as_str() == "setattr")
                        && args.len() == 3
                        && matches!(&args[0], Expr::Name(n) if n.id.as_str() == "self")
                        && matches!(&args[1], Expr::StringLiteral(l) if l.value.to_str() == self.attr)
                    {
                        self.out.push(&args[2]);
                    }
                }
            }
            visitor::walk_stmt(self, stmt);
        }
    }
    let mut f = Finder {
        attr,
        out: Vec::new(),
    };
    for s in &class.body {
        match s {
            Stmt::Assign(a)
                if a.targets
                    .iter()
                    .any(|t| matches!(t, Expr::Name(n) if n.id.as_str() == attr)) =>
            {
                f.out.push(&a.value)
            }
            _ => f.visit_stmt(s),
        }
    }
    f.out
}

/// Names a stored value can call later: names used as values (`fn` in `partial(fn)`, the
/// values of a dict, a bare `_finish`) and classes instantiated (`Cls(...)`: calling the
/// instance runs its `forward`). A function called while building the value ran then, at
/// import or in `__init__`, not on the forward path.
fn names_in(module: &ModModule, e: &Expr, out: &mut BTreeSet<String>) {
    struct N<'o, 'm> {
        module: &'m ModModule,
        out: &'o mut BTreeSet<String>,
    }
    impl<'a> Visitor<'a> for N<'_, '_> {
        fn visit_expr(&mut self, expr: &'a Expr) {
            match expr {
                Expr::Name(n) if n.ctx.is_load() => {
                    self.out.insert(n.id.to_string());
                }
                Expr::Call(c) => {
                    match c.func.as_ref() {
                        Expr::Name(n) => {
                            if find_class(self.module, n.id.as_str()).is_some() {
                                self.out.insert(n.id.to_string());
                            }
                        }
                        other => self.visit_expr(other),
                    }
                    for a in c.arguments.args.iter() {
                        self.visit_expr(a);
                    }
                    for k in c.arguments.keywords.iter() {
                        self.visit_expr(&k.value);
                    }
                    return;
                }
                _ => {}
            }
            visitor::walk_expr(self, expr);
        }
    }
    N { module, out }.visit_expr(e);
}

fn is_self_attr(e: &Expr, attr: &str) -> bool {
    matches!(e, Expr::Attribute(a) if a.attr.as_str() == attr
        && matches!(a.value.as_ref(), Expr::Name(n) if n.id.as_str() == "self"))
}

struct Collector<'a, 'f> {
    scope: Scope<'f>,
    calls: Vec<&'a ExprCall>,
    names: BTreeSet<String>,
    self_attrs: BTreeSet<String>,
}

impl<'a> Visitor<'a> for Collector<'a, '_> {
    fn visit_stmt(&mut self, stmt: &'a Stmt) {
        let scope = self.scope;
        walk_stmt_live(self, stmt, scope);
    }
    fn visit_expr(&mut self, expr: &'a Expr) {
        match expr {
            Expr::Call(c) => self.calls.push(c),
            Expr::Name(n) if n.ctx.is_load() => {
                self.names.insert(n.id.to_string());
            }
            Expr::Attribute(a) => {
                if let Expr::Name(n) = a.value.as_ref() {
                    if n.id.as_str() == "self" {
                        self.self_attrs.insert(a.attr.to_string());
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

    fn names(src: &str) -> Vec<String> {
        let parsed = ruff_python_parser::parse_module(src).unwrap();
        let r = reachable(parsed.syntax());
        let mut v: Vec<String> = r
            .functions
            .iter()
            .map(|(f, _)| f.name.to_string())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn follows_methods_functions_and_classes_but_not_dead_code() {
        let src = r#"
def helper(x):
    return x
def unused(x):
    return x
def dead(x):
    return x
class Inner(nn.Module):
    def forward(self, x):
        return x
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = Inner()
    def _impl(self, x):
        if False:
            return dead(x)
        return helper(x)
    def forward(self, x):
        y = self.inner(x)
        return self._impl(y)
        dead(x)
"#;
        assert_eq!(names(src), ["_impl", "forward", "forward", "helper"]);
    }

    #[test]
    fn no_model_new_means_nothing_reachable() {
        assert!(names("def forward(x):\n    return x\n").is_empty());
    }
}
