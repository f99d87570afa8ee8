//! The report of a gate run: the `report.json` schema (`kernelgate.report/1`) and its
//! renderings (`comment.md`, `summary.md`, `results.sarif`, check-run payloads).
//!
//! Plain data only: the pipeline fills a [`Report`], everything else reads it.

mod annotate;
pub mod check_run;
mod comment;
mod io;
pub mod sarif;
mod schema;
mod time_spent;

pub use annotate::{located, Located};
pub use comment::{
    render_comment, render_comment_with_limit, render_unverified_comment, COMMENT_LIMIT,
    STICKY_MARKER,
};
pub use io::{merge, ReportError};
pub use sarif::{findings_to_sarif, to_sarif, SARIF_SCHEMA_URI};
pub use schema::*;

use std::path::{Path, PathBuf};

/// Job summaries may be up to 1 MiB per step.
const SUMMARY_LIMIT: usize = 1024 * 1024 - 1024;

/// `summary.md`: the comment's content without the sticky marker, with a larger limit.
pub fn render_summary(report: &Report) -> String {
    let timings = time_spent::section(report);
    let body = render_comment_with_limit(report, SUMMARY_LIMIT - timings.len());
    let body = body
        .strip_prefix(STICKY_MARKER)
        .map(|b| b.trim_start().to_string())
        .unwrap_or(body);
    body + &timings
}

/// The files [`render_all`] wrote.
#[derive(Debug, Clone)]
pub struct Rendered {
    pub report_json: PathBuf,
    pub comment_md: PathBuf,
    pub summary_md: PathBuf,
    pub results_sarif: PathBuf,
}

/// Write `report.json`, `comment.md`, `summary.md` and `results.sarif` into `out_dir`
/// (created if missing), each atomically. Safe to call repeatedly while a run progresses.
pub fn render_all(report: &Report, out_dir: &Path) -> Result<Rendered, ReportError> {
    let rendered = Rendered {
        report_json: out_dir.join("report.json"),
        comment_md: out_dir.join("comment.md"),
        summary_md: out_dir.join("summary.md"),
        results_sarif: out_dir.join("results.sarif"),
    };
    report.write_atomic(&rendered.report_json)?;
    io::write_atomic(&rendered.comment_md, render_comment(report).as_bytes())?;
    io::write_atomic(&rendered.summary_md, render_summary(report).as_bytes())?;
    let sarif = serde_json::to_string_pretty(&to_sarif(report)).expect("sarif serialises") + "\n";
    io::write_atomic(&rendered.results_sarif, sarif.as_bytes())?;
    Ok(rendered)
}
