//! Located messages: static findings and runtime failures placed on a line of a file. Both
//! the check-run annotations and SARIF results are made from these.

use crate::schema::{ComparisonVerdict, KernelRow, OutcomeKind, Report, Verdict};
use kernelgate_model::Severity;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    pub path: String,
    pub start_line: u32,
    pub end_line: u32,
    /// Columns only when the span is on one line (GitHub rejects them otherwise).
    pub start_column: Option<u32>,
    pub end_column: Option<u32>,
    pub rule: String,
    pub severity: Severity,
    pub title: String,
    pub message: String,
}

/// Every finding, every runtime failure and every flag of the report, in row order.
pub fn located(report: &Report) -> Vec<Located> {
    report.kernels.iter().flat_map(row_located).collect()
}

fn row_located(row: &KernelRow) -> Vec<Located> {
    let anchor = row.annotate_line.unwrap_or(1).max(1);
    let mut out = Vec::new();
    for f in &row.findings {
        let (start, end) = if f.line == 0 {
            (anchor, anchor)
        } else {
            (f.line, f.end_line.max(f.line))
        };
        let one_line = f.line != 0 && start == end && f.column > 0;
        out.push(Located {
            // GitHub drops annotations on paths outside the repository: absolute ones go on
            // the row's own file.
            path: if f.file.is_empty() || f.file.starts_with('/') {
                row.path.clone()
            } else {
                f.file.clone()
            },
            start_line: start,
            end_line: end,
            start_column: one_line.then_some(f.column),
            end_column: (one_line && f.end_column >= f.column).then_some(f.end_column),
            rule: f.rule.clone(),
            severity: f.severity,
            title: format!("kernelgate: {}", f.rule),
            message: f.message.clone(),
        });
    }
    if is_failure(row.outcome.kind) {
        let mut message = row.outcome.message.clone();
        if message.is_empty() {
            message = row.outcome.kind.as_str().replace('_', " ");
        }
        out.push(Located {
            path: row.path.clone(),
            start_line: anchor,
            end_line: anchor,
            start_column: None,
            end_column: None,
            rule: format!("runtime/{}", row.outcome.kind.as_str()),
            severity: Severity::Error,
            title: format!(
                "kernelgate: {} ({})",
                row.outcome.kind.as_str().replace('_', " "),
                row.problem
            ),
            message,
        });
    }
    for flag in &row.flags {
        out.push(Located {
            path: row.path.clone(),
            start_line: anchor,
            end_line: anchor,
            start_column: None,
            end_column: None,
            rule: format!("flag/{}", flag.code),
            severity: flag.severity,
            title: format!("kernelgate: {}", flag.code),
            message: flag.message.clone(),
        });
    }
    // A slower kernel that failed or warned: the regression goes on the `ModelNew` line.
    let slower = |c: &Option<crate::schema::ComparisonSummary>| {
        c.as_ref()
            .is_some_and(|c| c.verdict == ComparisonVerdict::Slower)
    };
    let regressed = slower(&row.vs_base) || slower(&row.vs_baseline);
    let failing = matches!(row.verdict, Verdict::Fail | Verdict::Warn);
    let severity = if row.verdict == Verdict::Fail {
        Severity::Error
    } else {
        Severity::Warning
    };
    // Every failing row gets an annotation, even one failed only for its timing or a reason.
    let annotated = out.iter().any(|l| l.severity == severity);
    if failing && (regressed || !annotated) {
        let message = if row.reasons.is_empty() {
            format!("{} ({})", row.verdict.as_str(), row.outcome.kind.as_str())
        } else {
            row.reasons.join("\n")
        };
        out.push(Located {
            path: row.path.clone(),
            start_line: anchor,
            end_line: anchor,
            start_column: None,
            end_column: None,
            rule: if regressed {
                "timing/regression".into()
            } else {
                format!("verdict/{}", row.verdict.as_str())
            },
            severity,
            title: if regressed {
                format!("kernelgate: slower than before ({})", row.problem)
            } else {
                format!("kernelgate: {} ({})", row.verdict.as_str(), row.problem)
            },
            message,
        });
    }
    out
}

/// Outcomes that are failures of the kernel itself (not "not run yet" or "skipped").
pub fn is_failure(kind: OutcomeKind) -> bool {
    !matches!(
        kind,
        OutcomeKind::Correct | OutcomeKind::Skipped | OutcomeKind::NotRun
    )
}
