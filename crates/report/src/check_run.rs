//! GitHub check-run payloads (REST shapes): the conclusion, the output and the annotations in
//! batches of 50, GitHub's per-request maximum.

use crate::annotate::located;
use crate::comment::headline;
use crate::schema::{Report, Verdict};
use kernelgate_model::Severity;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

pub const ANNOTATIONS_PER_REQUEST: usize = 50;
/// GitHub's cap on `output.summary` and `output.text`.
const OUTPUT_LIMIT: usize = 65_535;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Annotation {
    pub path: String,
    pub start_line: u32,
    pub end_line: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_column: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end_column: Option<u32>,
    /// `notice`, `warning` or `failure`.
    pub annotation_level: String,
    pub message: String,
    pub title: String,
}

pub fn annotations(report: &Report) -> Vec<Annotation> {
    located(report)
        .into_iter()
        .map(|l| Annotation {
            path: l.path,
            start_line: l.start_line,
            end_line: l.end_line,
            start_column: l.start_column,
            end_column: l.end_column,
            annotation_level: match l.severity {
                Severity::Error => "failure",
                Severity::Warning => "warning",
            }
            .into(),
            message: truncate(&l.message, 64 * 1024 - 1),
            title: truncate(&l.title, 255),
        })
        .collect()
}

/// `success`, `neutral` (warnings, or an unfinished run without failures) or `failure`.
pub fn conclusion(report: &Report) -> &'static str {
    match report.summary.verdict {
        Verdict::Fail => "failure",
        Verdict::Warn => "neutral",
        _ if !report.run.complete => "neutral",
        _ => "success",
    }
}

pub fn title(report: &Report) -> String {
    let h = headline(report);
    let t = h.trim_start_matches("## ").to_string();
    if report.run.complete {
        t
    } else {
        format!("{t} (incomplete run)")
    }
}

/// The body of `POST /repos/{o}/{r}/check-runs` that opens the check run.
pub fn create_payload(name: &str, head_sha: &str) -> Value {
    json!({
        "name": name,
        "head_sha": head_sha,
        "status": "in_progress",
        "output": {"title": "kernelgate is running", "summary": "Linting, evaluating and timing the kernels this PR changes."},
    })
}

/// PATCH bodies for the check run: the first completes it with the first batch of
/// annotations, each further one appends the next batch (GitHub appends annotations).
pub fn complete_payloads(report: &Report, summary_md: &str) -> Vec<Value> {
    let title = title(report);
    let summary = truncate(summary_md, OUTPUT_LIMIT);
    let annotations = annotations(report);
    let mut batches: Vec<&[Annotation]> = annotations.chunks(ANNOTATIONS_PER_REQUEST).collect();
    if batches.is_empty() {
        batches.push(&[]);
    }
    batches
        .into_iter()
        .enumerate()
        .map(|(i, batch)| {
            let mut body = json!({
                "output": {"title": title, "summary": summary, "annotations": batch},
            });
            if i == 0 {
                body["status"] = json!("completed");
                body["conclusion"] = json!(conclusion(report));
                if let Some(t) = &report.run.finished_at {
                    body["completed_at"] = json!(t);
                }
            }
            body
        })
        .collect()
}

fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max.saturating_sub(20)).collect();
    out.push_str("\n… (truncated)");
    out
}
