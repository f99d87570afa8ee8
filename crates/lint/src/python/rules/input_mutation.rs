//! KG407 `input-mutation`: `forward` writes into its inputs (or returns one as its output), so
//! the work is done in place or not at all.

use super::*;
use crate::rule::RuleMeta;
use kernelgate_model::Severity::Error;

impl Checker<'_, '_> {
    /// The KG407 finding for `msg` at `r`: an error where the write is proven to run, a warning
    /// on a branch whose test the analysis cannot decide for this problem (`if
    /// self.conv.bias is not None:` with the bias inside a kept layer): the runtime check of the
    /// inputs decides.
    pub(super) fn input_mutation_finding(
        &self,
        r: std::ops::Range<usize>,
        msg: String,
    ) -> RawFinding {
        let start = r.start;
        let finding = RawFinding::new(Rule::KG407, r, msg);
        match self.undecided_test(start, |_| true) {
            Some(test) => finding.unproven(&format!(
                "it is on a branch of `{test}`, which the analysis cannot decide for this problem, so it is not proven to run"
            )),
            None => finding,
        }
    }
}

impl<'a> LiveVisitor<'_, 'a, '_> {
    /// Every KG407 finding is raised here.
    pub(super) fn mutation(&mut self, r: std::ops::Range<usize>, input: &str, how: &str) {
        self.c.push(
            Rule::KG407,
            r,
            if how == "returning it as the output" {
                format!("`forward` returns its input `{input}` (or a view of it): the output aliases an input, so the work was done in place or not at all")
            } else {
                format!("{how} writes into the input `{input}`: inputs must stay unchanged; write to a fresh output")
            },
        );
    }

    /// A write through an assignment target: `x[...] = v`, `x.data = v`, `x += v`.
    pub(super) fn target_mutation(&mut self, t: &Expr, how: &str) {
        let root = match t {
            Expr::Subscript(s) => self.input_root(&s.value),
            Expr::Attribute(a) if a.attr.as_str() == "data" => self.input_root(&a.value),
            Expr::Name(_) if how.ends_with('=') && how != "=" => self.input_root(t),
            _ => None,
        };
        if let Some(input) = root {
            self.mutation(range(t), &input, how);
        }
    }

    /// `x += v` on an input (or a view of one).
    pub(super) fn augmented_mutation(&mut self, a: &ruff_python_ast::StmtAugAssign) {
        let how = format!("`{}=`", a.op.as_str());
        match a.target.as_ref() {
            Expr::Name(_) => {
                if let Some(input) = self.input_root(&a.target) {
                    self.mutation(range(a.target.as_ref()), &input, &how);
                }
            }
            t => self.target_mutation(t, &how),
        }
    }

    /// `ext.relu_(x); return x`: the output is the input, computed in place. (Under
    /// `if x.numel() == 0:` the input is the right, empty, answer.)
    pub(super) fn returned_input(&mut self, stmt: &Stmt, r: &ruff_python_ast::StmtReturn) {
        let guarded = self.under_empty_input_guard(usize::from(stmt.start()));
        let values: Vec<&Expr> = match r.value.as_deref() {
            _ if guarded => vec![],
            Some(Expr::Tuple(t)) => t.elts.iter().collect(),
            Some(v) => vec![v],
            None => vec![],
        };
        for v in values {
            if let Some(input) = self.input_root(v) {
                self.mutation(range(v), &input, "returning it as the output");
            }
        }
    }

    /// `x.add_(y)`: an in-place method on an input.
    pub(super) fn inplace_method(&mut self, call: &ExprCall) {
        let Expr::Attribute(a) = call.func.as_ref() else {
            return;
        };
        let m = a.attr.as_str();
        if m.ends_with('_') && !m.ends_with("__") && !INPLACE_HARMLESS.contains(&m) {
            if let Some(input) = self.input_root(&a.value) {
                self.mutation(range(call), &input, &format!("`.{m}()`"));
            }
        }
    }
}

/// In-place tensor methods that do not change values.
pub(super) const INPLACE_HARMLESS: &[&str] = &["requires_grad_", "share_memory_", "record_stream"];

// ---------------------------------------------------------------- registry entries

pub(crate) const KG407: RuleMeta = RuleMeta {
    code: "KG407",
    name: "input-mutation",
    severity: Error,
    summary: "ModelNew.forward writes into one of its inputs",
    error_when: "the write into an input (or returning it) is on a path proven to run: off every branch whose test the analysis cannot decide for this problem",
    warn_when: "the write is on a branch whose test the analysis cannot decide (`if self.conv.bias is not None:` with the bias inside a kept layer): not proven to run; the harness's input check decides. Branches the problem never takes raise nothing",
    doc: "Code on the forward path modifies an input tensor or a view of one: an in-place method (`x.zero_()`, `x.copy_(out)`, `x.fill_(0)`, `x.add_(1)`), an item assignment (`x[...] = v`), `x.data = ...` or an augmented assignment (`x += y`), or `forward` returns an input or a view of it after calling a kernel (`ext.relu_(x); return x`). A mutated input can make a later reference run agree with a wrong answer, or hand the harness its own buffer back. Allocate an output (`torch.empty_like(x)`) and write there.",
    bad: "def forward(self, x):\n    out = ext.relu(x)\n    x.copy_(out)\n    return x",
    good: "def forward(self, x):\n    return ext.relu(x)",
};
