//! Python-side rules over ruff's AST.

pub mod names;
pub mod reach;
pub mod rules;
pub mod tables;

use crate::rule::{Context, RawFinding};
use ruff_python_ast::ModModule;

/// Run every Python rule on a parsed module.
pub fn check(module: &ModModule, ctx: &Context) -> Vec<RawFinding> {
    rules::check(module, ctx)
}
