//! The Python rules, a module per rule family with its registry entries beside its checks
//! (ruff's layout). Three passes over one parse share the file's [`SemanticModel`]: the whole
//! file (`file.rs`), the code reachable from `ModelNew.forward` (`live.rs`), and the file's
//! structure ([`Checker::structure_pass`]). The passes only dispatch; the families judge, and
//! each family raises its codes through its own functions.

// Match arms keep their conditions in the body: moving them into guards would send a
// non-matching node to the catch-all arm, which is the bug this style avoids.
#![allow(clippy::collapsible_match)]

mod banned;
mod bindings;
pub(crate) mod bypass;
pub(crate) mod concurrency;
mod file;
pub(crate) mod hooks;
pub(crate) mod input_mutation;
pub(crate) mod lazy_tensor;
mod live;
pub(crate) mod memoized_forward;
pub(crate) mod output_cache;
pub(crate) mod phase_detection;
pub(crate) mod precision;
pub(crate) mod sandbox;
pub(crate) mod structure;
pub(crate) mod tampering;
pub(crate) mod torch_fallback;

// The families and passes `use super::*`: these imports are their shared prelude.
use super::names::{range, under, Names};
use super::reach::{find_class, find_method, walk_stmt_live};
use super::semantic::SemanticModel;
use super::tables::{
    banned, nn_container, nn_layer, tamper_rule, tensor_compute_method, torch_compute, SIZE_NAMES,
};
use crate::rule::{Context, RawFinding, Rule};
use bindings::{key_of, module_level_names};
use bypass::reference_names;
use file::FileVisitor;
use kernelgate_model::{Backend, Precision};
use live::{tensor_params, LiveVisitor};
use phase_detection::{closure_counters, is_clock};
use ruff_python_ast::visitor::{self, Visitor};
use ruff_python_ast::{Expr, ExprCall, ModModule, Operator, Stmt, StmtFunctionDef};
use ruff_text_size::Ranged;
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use torch_fallback::cupy_compute;

/// One file's Python rule run: the shared model, what the rules learn about the file's own
/// names, and the findings.
pub struct Checker<'a, 'c> {
    pub module: &'a ModModule,
    pub ctx: &'c Context<'c>,
    pub model: &'c SemanticModel<'a>,
    /// Names and `self.<attr>`s bound to an extension module (`load_inline(...)`).
    ext_objects: HashSet<String>,
    /// Functions exported by extensions (`functions=[...]`).
    ext_functions: HashSet<String>,
    /// `self.<attr>`s and names holding nn compute layers.
    layers: HashMap<String, String>,
    /// Names assigned at module level (module state a counter can live in).
    module_names: HashSet<String>,
    /// Module-level names assigned from `os.environ`/`os.getenv`/`sys.argv`.
    env_names: HashSet<String>,
    /// `Model` and module-level names bound to it (`_Base = Model`).
    ref_names: HashSet<String>,
    pub out: Vec<RawFinding>,
    /// Extension calls in live code.
    ext_calls: Vec<super::ExtCall>,
    /// Reachable functions that join side streams back into the current stream before they
    /// return (`current_stream().wait_stream(s)`, `.wait_event(e)`, `torch.cuda.synchronize()`).
    joined: Vec<std::ops::Range<usize>>,
    /// Stream switches to the stream that is already current (or the default one), by the
    /// start offset of the switching callee: no switch at all.
    no_switch: HashMap<usize, concurrency::StreamArg>,
}

impl<'a, 'c> Checker<'a, 'c> {
    pub fn new(model: &'c SemanticModel<'a>, ctx: &'c Context<'c>) -> Self {
        let module = model.module;
        let mut c = Checker {
            module,
            ctx,
            model,
            ext_objects: HashSet::default(),
            ext_functions: HashSet::default(),
            layers: HashMap::default(),
            module_names: module_level_names(module),
            env_names: HashSet::default(),
            ref_names: reference_names(module),
            out: Vec::new(),
            ext_calls: Vec::new(),
            joined: Vec::new(),
            no_switch: HashMap::default(),
        };
        c.joined = c.joining_functions();
        c.no_switch = c.current_stream_switches();
        c.env_names = c.module_env_names();
        c.collect_bindings();
        c
    }

    pub fn run(mut self) -> super::PythonOutput {
        self.file_pass();
        self.live_pass();
        self.structure_pass();
        super::PythonOutput {
            findings: self.out,
            ext_calls: self.ext_calls,
        }
    }

    /// Every finding goes through here. Three rules decide their severity by where they fire,
    /// in their own module: a precision downgrade on a dead branch is no finding and on a
    /// branch of an undecided dtype test a warning, an input written on an undecided branch a
    /// warning, a side stream joined back a warning.
    fn push(&mut self, code: Rule, r: std::ops::Range<usize>, msg: impl Into<String>) {
        let msg = msg.into();
        let finding = match code {
            Rule::KG501 => self.downgrade_finding(r, msg),
            Rule::KG407 => Some(self.input_mutation_finding(r, msg)),
            Rule::KG403 => self.side_stream_finding(r, msg),
            _ => Some(RawFinding::new(code, r, msg)),
        };
        self.out.extend(finding);
    }

    /// The innermost test, as written, of an undecided branch `offset` lies on that `which`
    /// accepts (see [`crate::python::consts::Branches`]): the code there is not proven to run.
    fn undecided_test(&self, offset: usize, which: impl Fn(&str) -> bool) -> Option<String> {
        self.model
            .branches
            .undecided_tests(offset)
            .into_iter()
            .rev()
            .map(|t| {
                self.ctx.source[t]
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .find(|t| which(t))
    }

    fn text(&self, node: &impl Ranged) -> &'c str {
        let r = range(node);
        &self.ctx.source[r]
    }

    fn fp32(&self) -> bool {
        self.ctx.precision == Precision::Fp32
    }

    /// True when a byte offset lies inside a function reachable from `ModelNew.forward`.
    fn in_reachable(&self, offset: usize) -> bool {
        self.model
            .reach
            .functions
            .iter()
            .any(|(f, _)| range(*f).contains(&offset))
    }

    /// The whole-file pass: banned imports, every statement and call, and output caches in
    /// every function.
    fn file_pass(&mut self) {
        self.banned_imports();
        let module = self.module;
        let mut v = FileVisitor {
            c: self,
            in_inputs_fn: 0,
        };
        for s in &module.body {
            v.visit_stmt(s);
        }
        for s in &module.body {
            self.check_caches_in(s);
        }
    }

    /// The structure pass: what `ModelNew` is, what it inherits, what `forward` does, and
    /// what the file defines.
    fn structure_pass(&mut self) {
        let model_new = find_class(self.module, "ModelNew");
        let alias = self.model_new_alias();
        match model_new {
            None if alias.is_none() => self.missing_model_new(),
            None => {}
            Some(class) => {
                self.reference_uses(class);
                self.check_layer_base(class);
                self.check_forward(class);
                self.check_compute_once(class);
            }
        }
        self.check_inputs();
        self.check_custom_kernel();
        self.custom_code_only_in_dead_branches();
        self.stale_graph_replays();
    }
}

/// Every call in an expression, outermost first.
fn collect_calls<'a>(e: &'a Expr, out: &mut Vec<&'a ExprCall>) {
    CallCollector { out }.visit_expr(e);
}

/// Every call in a function body, in source order.
fn calls_in(body: &[Stmt]) -> Vec<&ExprCall> {
    let mut out = Vec::new();
    let mut v = CallCollector { out: &mut out };
    for s in body {
        v.visit_stmt(s);
    }
    out
}

struct CallCollector<'o, 'a> {
    out: &'o mut Vec<&'a ExprCall>,
}

impl<'a> Visitor<'a> for CallCollector<'_, 'a> {
    fn visit_expr(&mut self, expr: &'a Expr) {
        if let Expr::Call(c) = expr {
            self.out.push(c);
        }
        visitor::walk_expr(self, expr);
    }
}

fn global_names(f: &StmtFunctionDef) -> HashSet<String> {
    let mut out = HashSet::default();
    for s in &f.body {
        match s {
            Stmt::Global(g) => out.extend(g.names.iter().map(|n| n.to_string())),
            // A closure's `nonlocal n` outlives the call just like a global.
            Stmt::Nonlocal(g) => out.extend(g.names.iter().map(|n| n.to_string())),
            _ => {}
        }
    }
    out
}

/// Used by `lint_file`.
pub fn check_full(model: &SemanticModel, ctx: &Context) -> super::PythonOutput {
    Checker::new(model, ctx).run()
}
