use super::*;
use crate::embedded::extract;
use crate::rule::Context;

/// (code, line, column) of every finding of the cpp rules on a .py source.
pub(crate) fn run(py: &str, precision: Precision) -> Vec<(&'static str, u32, u32)> {
    let parsed = ruff_python_parser::parse_module(py).expect("valid python");
    let ctx = Context::new("t.py", py, precision, None);
    let mut v: Vec<_> = extract(parsed.syntax(), py)
        .iter()
        .flat_map(|e| check(e, &ctx))
        .map(|f| {
            let (l, c) = ctx.line_col(f.range.start);
            (f.code, l, c)
        })
        .collect();
    v.sort();
    v
}
