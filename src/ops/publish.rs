//! `kernelgate publish` as a library operation: open a check run, end one, or send a finished
//! report (check run, annotations, sticky comment, job summary, step outputs) to GitHub or to
//! files. The second stage of the fork-safe setup: it runs with a write token and never executes
//! PR code. The command parses flags into [`PublishOptions`] and prints what [`publish`] did.

use anyhow::Context;
use kernelgate_github::{valid_sha, Ending, GithubContext, GithubError};
use kernelgate_report::Report;
use std::path::{Path, PathBuf};

use crate::publish::{make_publisher, publish_report_with, runtime, Mode, Options};

/// What to publish.
#[derive(Debug, Clone)]
pub enum Action {
    /// Open the check run `in_progress` on the head commit.
    Start,
    /// Complete the check run without a report (`cancelled`, `neutral`, `success`).
    End { ending: Ending, reason: String },
    /// Render `report` and publish it: into `out` (default: the report's folder), by `mode`
    /// (default: GitHub with a token, else files).
    Report {
        report: PathBuf,
        out: Option<PathBuf>,
        mode: Option<Mode>,
    },
}

/// The flags of `kernelgate publish`.
#[derive(Debug, Clone)]
pub struct PublishOptions {
    pub action: Action,
    /// The commit this run was authorised for: a report for another one is refused.
    pub head: Option<String>,
    /// The check run `Start` opened, to complete it rather than open another.
    pub check_run_id: Option<u64>,
    pub options: Options,
}

/// What [`publish`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Published {
    Opened { check_run: u64, head: String },
    Ended { check_run: u64, ending: Ending },
    Report,
}

/// Runs the action against the workflow's context `ctx` (its head replaced by `opts.head`).
pub fn publish(mut ctx: GithubContext, opts: &PublishOptions) -> anyhow::Result<Published> {
    if let Some(head) = &opts.head {
        ctx.head_sha = Some(checked_sha(head)?);
    }
    match &opts.action {
        Action::Start => {
            let head = event_head(&ctx)?;
            let rt = runtime()?;
            let id = rt.block_on(async {
                make_publisher(&ctx, &opts.options)?
                    .start_check_run(&head)
                    .await
            })?;
            if let Some(path) = &ctx.output {
                kernelgate_github::append_output(
                    path,
                    &format!("check-run-id={id}\nhead={head}\n"),
                )?;
            }
            Ok(Published::Opened {
                check_run: id,
                head,
            })
        }
        Action::End { ending, reason } => {
            let head = event_head(&ctx)?;
            let rt = runtime()?;
            let id = rt.block_on(async {
                make_publisher(&ctx, &opts.options)?
                    .end(&head, opts.check_run_id, *ending, reason)
                    .await
            })?;
            Ok(Published::Ended {
                check_run: id,
                ending: *ending,
            })
        }
        Action::Report { report, out, mode } => {
            let loaded = Report::read(report)?;
            let out = out.clone().unwrap_or_else(|| report_folder(report));
            let mode = mode.unwrap_or(if ctx.token.is_some() {
                Mode::Github
            } else {
                Mode::Files
            });
            publish_report_with(&loaded, &out, &ctx, mode, opts.check_run_id, &opts.options)?;
            Ok(Published::Report)
        }
    }
}

/// A head commit must be a full SHA: it goes into API paths.
fn checked_sha(head: &str) -> Result<String, GithubError> {
    if valid_sha(head) {
        Ok(head.to_string())
    } else {
        Err(GithubError::BadSha {
            sha: head.escape_debug().to_string(),
        })
    }
}

/// The head a check run is opened or ended on: `--head`, else the event's.
fn event_head(ctx: &GithubContext) -> anyhow::Result<String> {
    let head = ctx
        .head_sha
        .clone()
        .context("no head commit: pass --head <sha> (the pull request's head SHA)")?;
    Ok(checked_sha(&head)?)
}

/// The report's own folder (`.` for a bare file name).
fn report_folder(report: &Path) -> PathBuf {
    report
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .to_path_buf()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_head_that_is_not_a_full_sha_is_refused_before_any_request() {
        let ctx = GithubContext::default();
        let opts = PublishOptions {
            action: Action::Start,
            head: Some("main; rm -rf /".into()),
            check_run_id: None,
            options: Options::default(),
        };
        let e = publish(ctx, &opts).unwrap_err().to_string();
        assert!(e.contains("main; rm -rf /"), "{e}");
    }

    #[test]
    fn opening_a_check_run_needs_a_head() {
        let opts = PublishOptions {
            action: Action::Start,
            head: None,
            check_run_id: None,
            options: Options::default(),
        };
        let e = publish(GithubContext::default(), &opts)
            .unwrap_err()
            .to_string();
        assert!(e.contains("pass --head"), "{e}");
    }

    #[test]
    fn a_report_is_rendered_beside_itself_unless_told_otherwise() {
        assert_eq!(report_folder(Path::new("report.json")), PathBuf::from("."));
        assert_eq!(
            report_folder(Path::new("kg-out/report.json")),
            PathBuf::from("kg-out")
        );
    }
}
