//! The file side of publishing: step summary, step outputs, and local "publish to files".

use crate::{sticky_marker, GithubError, Published};
use kernelgate_report::{check_run, render_comment, render_summary, Report, STICKY_MARKER};
use serde_json::json;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Append `text` to a file such as `GITHUB_OUTPUT` (`name=value` lines).
pub fn append_output(path: &Path, text: &str) -> Result<(), GithubError> {
    append(path, text)
}

fn append(path: &Path, text: &str) -> Result<(), GithubError> {
    let io = |error| GithubError::Io {
        path: path.to_path_buf(),
        error,
    };
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(io)?;
    f.write_all(text.as_bytes()).map_err(io)
}

/// Append the job summary to `GITHUB_STEP_SUMMARY`.
pub fn append_step_summary(path: &Path, report: &Report) -> Result<(), GithubError> {
    append(path, &format!("{}\n", render_summary(report)))
}

/// Append `verdict`, `geomean_speedup`, the verdict counts (`failed`, `warned`, `passed`,
/// `skipped`) and `report` to `GITHUB_OUTPUT`.
pub fn write_outputs(path: &Path, report: &Report, report_path: &Path) -> Result<(), GithubError> {
    let s = &report.summary;
    let text = format!(
        "verdict={}\ngeomean_speedup={}\nfailed={}\nwarned={}\npassed={}\nskipped={}\nreport={}\n",
        s.verdict.as_str(),
        s.geomean_speedup
            .map(|g| format!("{g:.4}"))
            .unwrap_or_default(),
        s.failed,
        s.warned,
        s.passed,
        s.skipped,
        report_path.display()
    );
    append(path, &text)
}

/// Append what publishing did to `GITHUB_OUTPUT`: `check-run-url` (the completed check run's
/// page) and `comment-id` (the sticky comment created or updated), each empty when it did not
/// happen, so a later step can link to them.
pub fn write_published_outputs(path: &Path, published: &Published) -> Result<(), GithubError> {
    let (url, comment) = match published {
        Published::Done {
            check_run_url,
            comment,
            ..
        } => (
            check_run_url.clone().unwrap_or_default(),
            comment.map(|c| c.id().to_string()).unwrap_or_default(),
        ),
        _ => (String::new(), String::new()),
    };
    // One line each: a value with a newline would forge further outputs.
    let url = url.replace(['\n', '\r'], "");
    append(
        path,
        &format!("check-run-url={url}\ncomment-id={comment}\n"),
    )
}

/// Local mode: write what would be sent to GitHub as JSON files in `out_dir`:
/// `check_run.json` (create and complete payloads) and `comment.json` (the sticky comment).
pub fn publish_files(
    report: &Report,
    out_dir: &Path,
    check_name: &str,
) -> Result<Vec<PathBuf>, GithubError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |error| GithubError::Io { path, error }
    };
    std::fs::create_dir_all(out_dir).map_err(io(out_dir))?;
    let summary = render_summary(report);
    let check = json!({
        "create": check_run::create_payload(check_name, &report.run.head_sha, &format!("kernelgate:files:{check_name}")),
        "complete": check_run::complete_payloads(report, &summary),
    });
    let marker = sticky_marker(check_name);
    let body = render_comment(report);
    let body = match body.strip_prefix(STICKY_MARKER) {
        Some(rest) => format!("{marker}{rest}"),
        None => body,
    };
    let comment = json!({
        "marker": marker,
        "pr_number": report.run.pr_number,
        "body": body,
    });
    let mut written = Vec::new();
    for (name, value) in [("check_run.json", check), ("comment.json", comment)] {
        let path = out_dir.join(name);
        let text = serde_json::to_string_pretty(&value).expect("json serialises") + "\n";
        std::fs::write(&path, text).map_err(io(&path))?;
        written.push(path);
    }
    Ok(written)
}
