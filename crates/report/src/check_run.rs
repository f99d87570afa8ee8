//! GitHub check-run payloads (REST shapes): the conclusion, the output and the annotations in
//! batches of 50, GitHub's per-request maximum.

use crate::annotate::located;
use crate::comment::{floor_char_boundary, headline, render_comment_with_limit, STICKY_MARKER};
use crate::schema::{Report, Verdict};
use kernelgate_model::Severity;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

pub const ANNOTATIONS_PER_REQUEST: usize = 50;
/// GitHub's cap on `output.summary` and `output.text`, in bytes: a longer one is a 422 and the
/// check run would stay `in_progress`.
pub const OUTPUT_LIMIT: usize = 65_535;
/// GitHub's caps on an annotation's `message` (64 KB) and `title` (255), taken as bytes.
pub const ANNOTATION_MESSAGE_LIMIT: usize = 65_535;
pub const ANNOTATION_TITLE_LIMIT: usize = 255;

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
            message: truncate(&l.message, ANNOTATION_MESSAGE_LIMIT),
            title: truncate(&l.title, ANNOTATION_TITLE_LIMIT),
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

/// The body of `POST /repos/{o}/{r}/check-runs` that opens the check run. `external_id` lets a
/// retry find the check run a failed-looking POST created instead of creating a second one.
pub fn create_payload(name: &str, head_sha: &str, external_id: &str) -> Value {
    json!({
        "name": name,
        "head_sha": head_sha,
        "external_id": external_id,
        "status": "in_progress",
        "output": {"title": "kernelgate is running", "summary": "Linting, evaluating and timing the kernels this PR changes."},
    })
}

/// The PATCH body that completes a check run without a report (an error, a cancelled job, a
/// moved head, an unverified fork run): `conclusion` with `reason` as title and summary.
pub fn finish_payload(conclusion: &str, title: &str, reason: &str) -> Value {
    json!({
        "status": "completed",
        "conclusion": conclusion,
        "output": {
            "title": truncate(title, ANNOTATION_TITLE_LIMIT),
            "summary": truncate(reason, OUTPUT_LIMIT),
        },
    })
}

/// The check run's summary: `summary_md` when it fits in [`OUTPUT_LIMIT`] bytes, else the
/// report rendered again to fit, cut at a table row with a pointer to the full report.
pub fn summary_within_limit(report: &Report, summary_md: &str) -> String {
    if summary_md.len() <= OUTPUT_LIMIT {
        return summary_md.to_string();
    }
    let body = render_comment_with_limit(report, OUTPUT_LIMIT);
    let body = body
        .strip_prefix(STICKY_MARKER)
        .map(|b| b.trim_start().to_string())
        .unwrap_or(body);
    truncate(&body, OUTPUT_LIMIT)
}

/// PATCH bodies for the check run: the first completes it with the first batch of
/// annotations, each further one appends the next batch (GitHub appends annotations).
pub fn complete_payloads(report: &Report, summary_md: &str) -> Vec<Value> {
    let title = title(report);
    let summary = summary_within_limit(report, summary_md);
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

/// At most `max` bytes, cut at a character boundary with a visible mark.
pub fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    const MARK: &str = "\n… (truncated)";
    let mut out = s[..floor_char_boundary(s, max.saturating_sub(MARK.len()))].to_string();
    out.push_str(MARK);
    out
}
