//! Name resolution: which module path a Python expression denotes, through every alias form a
//! candidate can use (`import torch as T`, `from torch import matmul as mm`, `Fn = torch.nn.functional`,
//! `T = __import__("torch")`, `op = getattr(torch, "mat" + "mul")`, `functools.partial(torch.mm)`).
//! Scopes are merged file-wide: a candidate gains nothing by aliasing inside a function.

// Match arms keep their conditions in the body: moving them into guards would send a
// non-matching node to the catch-all arm, which is the bug this style avoids.
#![allow(clippy::collapsible_match)]

use ruff_python_ast::visitor::{self, Visitor};
use ruff_python_ast::{Expr, ModModule, Operator, Stmt};
use ruff_text_size::Ranged;
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::ops::Range;

/// Builtins that matter to the rules; an unshadowed use resolves to `builtins.<name>`.
const BUILTINS: &[&str] = &[
    "exec",
    "eval",
    "compile",
    "__import__",
    "getattr",
    "setattr",
    "delattr",
    "globals",
    "locals",
    "vars",
    "open",
    "print",
    "exit",
    "quit",
    "id",
    "hash",
    "breakpoint",
    "__builtins__",
    "input",
    "next",
];

#[derive(Debug, Default)]
pub struct Names {
    /// Local name -> dotted path it denotes.
    bindings: HashMap<String, String>,
    /// Every place a binding to a module path is made: (path, range of the alias or call).
    pub sites: Vec<(String, Range<usize>)>,
    /// Module-level string constants, for folding `getattr(torch, OP)`.
    strings: HashMap<String, String>,
    /// Names bound to something that is not a module path (defs, classes, parameters, values).
    shadowed: HashSet<String>,
    /// Modules star-imported (`from torch import *`): unknown names may come from them.
    star: Vec<String>,
    /// Bodies of `if __name__ == "__main__":` blocks: they never run when the harness imports
    /// the file (unless the file assigns `__name__`).
    main_blocks: Vec<Range<usize>>,
    /// The file assigns `__name__`, so a `__main__` guard proves nothing.
    name_assigned: bool,
}

pub fn range(node: &impl Ranged) -> Range<usize> {
    let r = node.range();
    usize::from(r.start())..usize::from(r.end())
}

impl Names {
    pub fn build(module: &ModModule) -> Names {
        let mut n = Names::default();
        // Two passes: an alias assignment may precede (textually) the import it depends on
        // only through functions, which run later.
        for pass in 0..2 {
            let mut b = Builder {
                names: &mut n,
                pass,
            };
            for s in &module.body {
                b.visit_stmt(s);
            }
        }
        n
    }

    /// The dotted path an expression denotes, when it is rooted in an import or a builtin.
    pub fn qualify(&self, e: &Expr) -> Option<String> {
        match e {
            Expr::Name(n) => {
                let id = n.id.as_str();
                if let Some(p) = self.bindings.get(id) {
                    Some(p.clone())
                } else if self.shadowed.contains(id) {
                    None
                } else if BUILTINS.contains(&id) {
                    Some(format!("builtins.{id}"))
                } else {
                    self.star.first().map(|m| format!("{m}.{id}"))
                }
            }
            Expr::Attribute(a) => {
                let mut p = self.qualify(&a.value)?;
                p.push('.');
                p.push_str(a.attr.as_str());
                Some(p)
            }
            Expr::Call(c) => {
                // operator.attrgetter("relu")(torch)
                if let Expr::Call(g) = c.func.as_ref() {
                    if self.qualify(&g.func).as_deref() == Some("operator.attrgetter")
                        && g.arguments.args.len() == 1
                    {
                        let attr = self.fold_str(&g.arguments.args[0])?;
                        let base = self.qualify(c.arguments.args.first()?)?;
                        return Some(format!("{base}.{attr}"));
                    }
                }
                let f = self.qualify(&c.func)?;
                let arg0 = c.arguments.args.first();
                match f.as_str() {
                    "builtins.getattr" if c.arguments.args.len() >= 2 => {
                        let base = self.qualify(&c.arguments.args[0])?;
                        let attr = self.fold_str(&c.arguments.args[1])?;
                        Some(format!("{base}.{attr}"))
                    }
                    "builtins.__import__" | "importlib.import_module" | "importlib.__import__" => {
                        let name = self.fold_str(arg0?)?;
                        // `__import__("a.b")` returns `a`; `import_module("a.b")` returns `a.b`.
                        if f == "builtins.__import__" {
                            Some(name.split('.').next().unwrap_or_default().to_string())
                        } else {
                            Some(name)
                        }
                    }
                    "functools.partial" => self.qualify(arg0?),
                    // torch.__getattribute__("relu")
                    f if f.ends_with(".__getattribute__") || f.ends_with(".__getattr__") => {
                        let base = &f[..f.rfind('.').unwrap_or(0)];
                        Some(format!("{base}.{}", self.fold_str(arg0?)?))
                    }
                    // torch.__dict__.get("sigmoid")
                    f if f.ends_with(".__dict__.get") => {
                        let base = &f[..f.len() - ".__dict__.get".len()];
                        Some(format!("{base}.{}", self.fold_str(arg0?)?))
                    }
                    _ => None,
                }
            }
            // torch.__dict__["sigmoid"], vars(torch)["sigmoid"]
            Expr::Subscript(s) => {
                let base = match s.value.as_ref() {
                    Expr::Attribute(a) if a.attr.as_str() == "__dict__" => {
                        self.qualify(&a.value)?
                    }
                    Expr::Call(c)
                        if c.arguments.args.len() == 1
                            && self.qualify(&c.func).as_deref() == Some("builtins.vars") =>
                    {
                        self.qualify(&c.arguments.args[0])?
                    }
                    _ => return None,
                };
                Some(format!("{base}.{}", self.fold_str(&s.slice)?))
            }
            _ => None,
        }
    }

    /// Constant-fold a string expression: literals, `+`, implicit concatenation, literal-only
    /// f-strings, `"".join([...])`, and module-level string constants.
    pub fn fold_str(&self, e: &Expr) -> Option<String> {
        match e {
            Expr::StringLiteral(s) => Some(s.value.to_str().to_string()),
            Expr::BinOp(b) if b.op == Operator::Add => {
                Some(self.fold_str(&b.left)? + &self.fold_str(&b.right)?)
            }
            Expr::BinOp(b) if b.op == Operator::Mult => {
                let n = match b.right.as_ref() {
                    Expr::NumberLiteral(n) => n.value.as_int()?.as_u64()?,
                    _ => return None,
                };
                Some(self.fold_str(&b.left)?.repeat(n.min(64) as usize))
            }
            Expr::FString(f) => {
                let mut out = String::new();
                for part in f.value.iter() {
                    match part {
                        ruff_python_ast::FStringPart::Literal(l) => out.push_str(&l.value),
                        ruff_python_ast::FStringPart::FString(fs) => {
                            for el in fs.elements.iter() {
                                match el {
                                    ruff_python_ast::InterpolatedStringElement::Literal(l) => {
                                        out.push_str(&l.value)
                                    }
                                    ruff_python_ast::InterpolatedStringElement::Interpolation(
                                        i,
                                    ) => out.push_str(&self.fold_str(&i.expression)?),
                                }
                            }
                        }
                    }
                }
                Some(out)
            }
            Expr::Name(n) => self.strings.get(n.id.as_str()).cloned(),
            Expr::Call(c) => {
                // "sep".join([...]) and "abc"[::-1]-free forms only.
                if let Expr::Attribute(a) = c.func.as_ref() {
                    if a.attr.as_str() == "join" && c.arguments.args.len() == 1 {
                        let sep = self.fold_str(&a.value)?;
                        let items: Option<Vec<String>> = match &c.arguments.args[0] {
                            Expr::List(l) => l.elts.iter().map(|x| self.fold_str(x)).collect(),
                            Expr::Tuple(t) => t.elts.iter().map(|x| self.fold_str(x)).collect(),
                            _ => None,
                        };
                        return Some(items?.join(&sep));
                    }
                }
                None
            }
            _ => None,
        }
    }

    /// Is `offset` inside a `__main__` block that cannot run under the harness?
    pub fn in_main_block(&self, offset: usize) -> bool {
        !self.name_assigned && self.main_blocks.iter().any(|r| r.contains(&offset))
    }

    /// The path bound to a plain name (imports and aliases only).
    pub fn binding(&self, name: &str) -> Option<&str> {
        self.bindings.get(name).map(String::as_str)
    }
}

struct Builder<'n> {
    names: &'n mut Names,
    pass: u8,
}

impl Builder<'_> {
    fn bind(&mut self, name: &str, path: String, site: Range<usize>) {
        if self.pass == 0 {
            self.names.sites.push((path.clone(), site));
        }
        self.names.shadowed.remove(name);
        self.names.bindings.insert(name.to_string(), path);
    }

    fn shadow(&mut self, e: &Expr) {
        match e {
            Expr::Name(n) => {
                if !self.names.bindings.contains_key(n.id.as_str()) {
                    self.names.shadowed.insert(n.id.to_string());
                }
            }
            Expr::Tuple(t) => t.elts.iter().for_each(|x| self.shadow(x)),
            Expr::List(t) => t.elts.iter().for_each(|x| self.shadow(x)),
            _ => {}
        }
    }
}

/// `if __name__ == "__main__":` (either operand order).
pub fn is_main_guard(test: &Expr) -> bool {
    let Expr::Compare(c) = test else { return false };
    if c.ops.len() != 1 || c.ops[0] != ruff_python_ast::CmpOp::Eq {
        return false;
    }
    let is = |e: &Expr, name: bool| match e {
        Expr::Name(n) => name && n.id.as_str() == "__name__",
        Expr::StringLiteral(s) => !name && s.value.to_str() == "__main__",
        _ => false,
    };
    let (l, r) = (c.left.as_ref(), &c.comparators[0]);
    (is(l, true) && is(r, false)) || (is(l, false) && is(r, true))
}

impl<'a> Visitor<'a> for Builder<'_> {
    fn visit_stmt(&mut self, stmt: &'a Stmt) {
        if self.pass == 0 {
            match stmt {
                Stmt::If(i) if is_main_guard(&i.test) => self.names.main_blocks.push(range(stmt)),
                Stmt::Assign(a)
                    if a.targets
                        .iter()
                        .any(|t| matches!(t, Expr::Name(n) if n.id.as_str() == "__name__")) =>
                {
                    self.names.name_assigned = true
                }
                Stmt::AugAssign(a) if matches!(a.target.as_ref(), Expr::Name(n) if n.id.as_str() == "__name__") => {
                    self.names.name_assigned = true
                }
                _ => {}
            }
        }
        match stmt {
            Stmt::Import(i) => {
                for a in &i.names {
                    let full = a.name.as_str();
                    match &a.asname {
                        Some(as_) => self.bind(as_.as_str(), full.to_string(), range(a)),
                        None => {
                            let root = full.split('.').next().unwrap_or(full);
                            self.bind(root, root.to_string(), range(a));
                            if full != root && self.pass == 0 {
                                self.names.sites.push((full.to_string(), range(a)));
                            }
                        }
                    }
                }
            }
            Stmt::ImportFrom(i) => {
                let module = i.module.as_ref().map(|m| m.as_str()).unwrap_or("");
                for a in &i.names {
                    if a.name.as_str() == "*" {
                        if self.pass == 0 {
                            self.names.sites.push((format!("{module}.*"), range(a)));
                            self.names.star.push(module.to_string());
                        }
                        continue;
                    }
                    let local = a.asname.as_ref().unwrap_or(&a.name).as_str();
                    let path = if module.is_empty() {
                        a.name.to_string()
                    } else {
                        format!("{module}.{}", a.name.as_str())
                    };
                    self.bind(local, path, range(a));
                }
            }
            Stmt::Assign(a) => {
                if a.targets.len() == 1 {
                    if let Expr::Name(t) = &a.targets[0] {
                        if let Some(path) = self.names.qualify(&a.value) {
                            // `x = torch.randn(...)` is a value, not an alias: only paths that
                            // came from attribute/name/getattr/import forms are aliases.
                            let attrgetter = |c: &ruff_python_ast::ExprCall| matches!(c.func.as_ref(), Expr::Call(g) if self.names.qualify(&g.func).as_deref() == Some("operator.attrgetter"));
                            if !matches!(a.value.as_ref(), Expr::Call(c) if !is_alias_call(&self.names.qualify(&c.func)) && !attrgetter(c))
                            {
                                self.bind(t.id.as_str(), path, range(a.value.as_ref()));
                                return visitor::walk_stmt(self, stmt);
                            }
                        }
                        if let Some(s) = self.names.fold_str(&a.value) {
                            self.names.strings.insert(t.id.to_string(), s);
                        }
                    }
                }
                for t in &a.targets {
                    self.shadow(t);
                }
            }
            Stmt::FunctionDef(f) => {
                self.names.shadowed.insert(f.name.to_string());
                for p in f.parameters.iter() {
                    self.names.shadowed.insert(p.name().to_string());
                }
            }
            Stmt::ClassDef(c) => {
                self.names.shadowed.insert(c.name.to_string());
            }
            Stmt::For(f) => self.shadow(&f.target),
            _ => {}
        }
        visitor::walk_stmt(self, stmt);
    }
}

fn is_alias_call(func: &Option<String>) -> bool {
    matches!(
        func.as_deref(),
        Some(
            "builtins.getattr"
                | "builtins.__import__"
                | "importlib.import_module"
                | "importlib.__import__"
                | "functools.partial"
        )
    )
}

/// True when `path` is `prefix` or starts with `prefix.`.
pub fn under(path: &str, prefix: &str) -> bool {
    path == prefix || (path.starts_with(prefix) && path.as_bytes().get(prefix.len()) == Some(&b'.'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ruff_python_ast::Stmt;

    fn last_expr_path(src: &str) -> Option<String> {
        let parsed = ruff_python_parser::parse_module(src).unwrap();
        let m = parsed.syntax();
        let names = Names::build(m);
        match m.body.last().unwrap() {
            Stmt::Expr(e) => match e.value.as_ref() {
                Expr::Call(c) => names.qualify(&c.func),
                other => names.qualify(other),
            },
            _ => None,
        }
    }

    #[test]
    fn resolves_every_alias_form() {
        assert_eq!(
            last_expr_path("import torch as T\nT.matmul(a, b)").as_deref(),
            Some("torch.matmul")
        );
        assert_eq!(
            last_expr_path("from torch import matmul as mm\nmm(a, b)").as_deref(),
            Some("torch.matmul")
        );
        assert_eq!(
            last_expr_path("import torch.nn.functional as Fn\nFn.relu(x)").as_deref(),
            Some("torch.nn.functional.relu")
        );
        assert_eq!(
            last_expr_path("from torch import nn as N\nN.Linear(1, 2)").as_deref(),
            Some("torch.nn.Linear")
        );
        assert_eq!(
            last_expr_path("import torch\nop = getattr(torch, 'mat' + 'mul')\nop(a, b)").as_deref(),
            Some("torch.matmul")
        );
        assert_eq!(
            last_expr_path("T = __import__('torch')\nT.mm(a, b)").as_deref(),
            Some("torch.mm")
        );
        assert_eq!(
            last_expr_path("import torch\nX = 'ad' + 'dmm'\ngetattr(torch, X)(a)").as_deref(),
            Some("torch.addmm")
        );
        assert_eq!(
            last_expr_path("import torch\nx = torch.randn(3)\nx.sum()"),
            None
        );
        assert_eq!(
            last_expr_path("import torch\ntorch.__dict__['sig' + 'moid'](x)").as_deref(),
            Some("torch.sigmoid")
        );
        assert_eq!(
            last_expr_path("import torch\nvars(torch)['tanh'](x)").as_deref(),
            Some("torch.tanh")
        );
        assert_eq!(
            last_expr_path("import torch, operator\nf = operator.attrgetter('exp')(torch)\nf(x)")
                .as_deref(),
            Some("torch.exp")
        );
        assert_eq!(
            last_expr_path("import torch\ntorch.__getattribute__('ex' + 'p')(x)").as_deref(),
            Some("torch.exp")
        );
        assert_eq!(last_expr_path("def exec(x):\n    pass\nexec(1)"), None);
        assert_eq!(last_expr_path("exec(1)").as_deref(), Some("builtins.exec"));
    }

    #[test]
    fn main_guard_is_recognised_only_while_name_is_not_assigned() {
        let src = "import sys\nif __name__ == '__main__':\n    sys.exit(0)\n";
        let parsed = ruff_python_parser::parse_module(src).unwrap();
        let n = Names::build(parsed.syntax());
        assert!(n.in_main_block(src.find("sys.exit").unwrap()));
        assert!(!n.in_main_block(0));
        let forced = format!("__name__ = '__main__'\n{src}");
        let parsed = ruff_python_parser::parse_module(&forced).unwrap();
        let n = Names::build(parsed.syntax());
        assert!(!n.in_main_block(forced.find("sys.exit").unwrap()));
    }

    #[test]
    fn under_respects_dot_boundaries() {
        assert!(under("torch.cuda.Event.record", "torch.cuda.Event"));
        assert!(under("torch.cuda", "torch.cuda"));
        assert!(!under("torch.cudax", "torch.cuda"));
    }
}
