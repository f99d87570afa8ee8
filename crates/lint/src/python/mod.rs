//! Python-side rules over ruff's AST.

pub mod consts;
pub mod names;
pub mod reach;
pub mod resolve;
pub mod rules;
pub mod semantic;
pub mod tables;

use crate::rule::{Context, RawFinding};
use ruff_python_ast::ModModule;
pub use semantic::SemanticModel;

/// Run every Python rule on a parsed module (without the reference problem's facts).
pub fn check(module: &ModModule, ctx: &Context) -> Vec<RawFinding> {
    let model = SemanticModel::build(module, None, ctx.precision, ctx.source);
    rules::check_full(&model, ctx).findings
}

/// What an argument handed to an extension function is, seen from `ModelNew.forward`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgKind {
    /// One of `forward`'s input tensors (or a view of one).
    Input,
    /// Owned by the candidate: `self.<attr>` (a workspace, a weight), a fresh allocation, a
    /// scalar. Writing it mutates no input.
    Owned,
    Unknown,
}

/// A call of an extension function in code reachable from `ModelNew.forward`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtCall {
    /// The Python name called (`ext.relu(x)` -> `relu`).
    pub name: String,
    /// The result is used (assigned, returned, passed on), not thrown away as a statement.
    pub result_used: bool,
    /// Positional arguments.
    pub args: Vec<ArgKind>,
}

/// The Python rules' findings and the extension calls on the forward path.
pub struct PythonOutput {
    pub findings: Vec<RawFinding>,
    pub ext_calls: Vec<ExtCall>,
}

/// [`check`] with the extension calls the C++ rules and the torch-op severity need.
pub fn check_full(model: &SemanticModel, ctx: &Context) -> PythonOutput {
    rules::check_full(model, ctx)
}
