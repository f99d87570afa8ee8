//! The per-file semantic model: what a candidate's Python means, computed once per file and
//! handed to every pass (the Python rules, the Triton rules, the extraction of embedded
//! C++/CUDA), so no pass resolves names or walks reachability a second time.

use super::consts::{BranchFacts, Branches};
use super::names::Names;
use super::reach::{reachable_in, Reachability};
use kernelgate_model::Precision;
use ruff_python_ast::visitor::{self, Visitor};
use ruff_python_ast::{Expr, ModModule, Stmt};
use rustc_hash::FxHashMap as HashMap;

/// One file's names, import aliases, reachability and branch constants.
pub struct SemanticModel<'a> {
    pub module: &'a ModModule,
    /// Every alias form resolved to the module path it denotes (see [`Names`]).
    pub names: Names,
    /// The plain import table: local name -> dotted path. Extraction and the Triton rules
    /// resolve through it, where an unknown name stands for itself (see [`qualname`]).
    pub imports: ImportAliases,
    /// What the problem decides about branches (literal constants, `__init__` arguments,
    /// precision).
    pub facts: BranchFacts,
    /// Code reachable from `ModelNew.forward`, with `facts` deciding branches; its
    /// `unresolved` calls are what the analysis could not follow.
    pub reach: Reachability<'a>,
    /// The branches of that code the facts prove dead, and those they leave undecided.
    pub branches: Branches,
}

impl<'a> SemanticModel<'a> {
    /// `problem` is the reference problem's module when the kernel's mapping resolves;
    /// `source` is the candidate's text (unresolved callees are shown as written).
    pub fn build(
        module: &'a ModModule,
        problem: Option<&ModModule>,
        precision: Precision,
        source: &str,
    ) -> Self {
        let facts = BranchFacts::build(module, problem, precision);
        let names = Names::build(module);
        let reach = reachable_in(module, &facts, &names, Some(source));
        let branches = Branches::build(module, &reach.functions, &facts);
        SemanticModel {
            module,
            names,
            branches,
            imports: ImportAliases::collect(&module.body),
            facts,
            reach,
        }
    }
}

/// Local name -> dotted qualified name, from every import in the module.
#[derive(Debug, Default, Clone)]
pub struct ImportAliases(HashMap<String, String>);

impl ImportAliases {
    pub fn collect(body: &[Stmt]) -> Self {
        struct V(HashMap<String, String>);
        impl<'a> Visitor<'a> for V {
            fn visit_stmt(&mut self, stmt: &'a Stmt) {
                match stmt {
                    Stmt::Import(imp) => {
                        for a in &imp.names {
                            let full = a.name.as_str();
                            match &a.asname {
                                Some(asn) => self.0.insert(asn.to_string(), full.to_string()),
                                None => {
                                    let first = full.split('.').next().unwrap_or(full);
                                    self.0.insert(first.to_string(), first.to_string())
                                }
                            };
                        }
                    }
                    Stmt::ImportFrom(imp) => {
                        let module = imp.module.as_ref().map_or("", |m| m.as_str());
                        for a in &imp.names {
                            let local = a.asname.as_ref().unwrap_or(&a.name).to_string();
                            self.0
                                .insert(local, format!("{module}.{}", a.name.as_str()));
                        }
                    }
                    _ => visitor::walk_stmt(self, stmt),
                }
            }
        }
        let mut v = V(HashMap::default());
        v.visit_body(body);
        ImportAliases(v.0)
    }

    pub fn get(&self, local: &str) -> Option<&String> {
        self.0.get(local)
    }
}

/// The dotted name of `expr` with the first segment resolved through imports.
pub fn qualname(expr: &Expr, aliases: &ImportAliases) -> Option<String> {
    match expr {
        Expr::Name(n) => Some(
            aliases
                .get(n.id.as_str())
                .cloned()
                .unwrap_or_else(|| n.id.to_string()),
        ),
        Expr::Attribute(a) => {
            let mut q = qualname(&a.value, aliases)?;
            q.push('.');
            q.push_str(a.attr.as_str());
            Some(q)
        }
        _ => None,
    }
}
