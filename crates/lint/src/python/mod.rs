//! Python-side rules over ruff's AST.

pub mod reach;

use crate::rule::{Context, RawFinding};
use ruff_python_ast::ModModule;

/// Run every Python rule on a parsed module.
pub fn check(_module: &ModModule, _ctx: &Context) -> Vec<RawFinding> {
    Vec::new()
}
