//! Publishing a finished report: to GitHub (check run, annotations, sticky comment, job
//! summary, step outputs) or as files. `kernelgate pr` and `kernelgate publish` both call it.

use anyhow::Context;
use kernelgate_github::{Ending, GithubContext, GithubError, Published, Publisher};
use kernelgate_report::Report;
use std::path::Path;

/// Where a report goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// Through the GitHub API (needs GITHUB_TOKEN and GITHUB_REPOSITORY).
    Github,
    /// Write check_run.json and comment.json next to the report instead.
    Files,
}

/// How to publish: check name, the token's bot login, and whether the report is unverified.
#[derive(Debug, Clone)]
pub struct Options {
    pub check_name: String,
    pub bot_login: String,
    pub unverified: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            check_name: kernelgate_github::CHECK_NAME.into(),
            bot_login: kernelgate_github::ACTIONS_BOT.into(),
            unverified: false,
        }
    }
}

pub fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

/// Inside a tokio runtime: octocrab's client spawns its worker on the current one.
pub fn make_publisher(ctx: &GithubContext, options: &Options) -> Result<Publisher, GithubError> {
    Ok(Publisher::new(ctx)?
        .with_check_name(&options.check_name, ctx)
        .with_bot_login(&options.bot_login)
        .unverified(options.unverified))
}

/// Render the report into `out` and publish it with the default options (`kernelgate pr`).
pub fn publish_report(
    report: &Report,
    out: &Path,
    ctx: &GithubContext,
    mode: Mode,
    check_run_id: Option<u64>,
) -> anyhow::Result<()> {
    publish_report_with(report, out, ctx, mode, check_run_id, &Options::default())
}

pub fn publish_report_with(
    report: &Report,
    out: &Path,
    ctx: &GithubContext,
    mode: Mode,
    check_run_id: Option<u64>,
    options: &Options,
) -> anyhow::Result<()> {
    let rendered = kernelgate_report::render_all(report, out)?;
    match mode {
        Mode::Files => {
            let written = kernelgate_github::publish_files(report, out, &options.check_name)?;
            for p in written {
                eprintln!("kernelgate: wrote {}", p.display());
            }
        }
        Mode::Github => {
            check_provenance(report, ctx)?;
            let rt = runtime()?;
            rt.block_on(async {
                let publisher = make_publisher(ctx, options)?;
                match publisher.publish(report, check_run_id).await? {
                    Published::Done { check_run, comment } => {
                        eprintln!(
                            "kernelgate: check run {check_run} completed ({}{})",
                            kernelgate_report::check_run::conclusion(report),
                            if options.unverified { ", published as unverified" } else { "" }
                        );
                        if let Some(action) = comment {
                            eprintln!("kernelgate: PR comment {action:?}");
                        }
                    }
                    Published::Superseded { check_run, head } => {
                        eprintln!(
                            "kernelgate: the pull request's head moved to {head}; {} and the comment left alone",
                            match check_run {
                                Some(id) => format!("check run {id} completed as neutral"),
                                None => "no check run was open".into(),
                            }
                        );
                    }
                }
                Ok::<_, GithubError>(())
            })?;
        }
    }
    if let Some(path) = &ctx.step_summary {
        kernelgate_github::append_step_summary(path, report)?;
    }
    if let Some(path) = &ctx.output {
        kernelgate_github::write_outputs(path, report, &rendered.report_json)?;
    }
    Ok(())
}

/// Open the check run `in_progress` at the start of `kernelgate pr`; pass the id to
/// [`publish_report`] at the end so the same check run is completed.
pub fn start_check_run(ctx: &GithubContext, head_sha: &str) -> anyhow::Result<u64> {
    let rt = runtime()?;
    Ok(rt.block_on(async { Publisher::new(ctx)?.start_check_run(head_sha).await })?)
}

/// Complete a check run opened by [`start_check_run`] when `kernelgate pr` fails before it has
/// a report: `cancelled`, with the error as the reason. Best effort: a failure is printed.
pub fn abandon_check_run(ctx: &GithubContext, id: u64, reason: &str) {
    let done = runtime().and_then(|rt| {
        rt.block_on(async {
            Publisher::new(ctx)?
                .finish_check_run(id, Ending::Cancelled, reason)
                .await
        })
        .map_err(anyhow::Error::from)
    });
    if let Err(e) = done {
        eprintln!("warning: cannot complete check run {id}: {e}");
    }
}

/// The report must be for this repository and, when the event names a commit, that commit.
fn check_provenance(report: &Report, ctx: &GithubContext) -> anyhow::Result<()> {
    if report.run.head_sha.is_empty() {
        anyhow::bail!(
            "the report has no head commit (`run.head_sha`); it cannot be published as a check run"
        );
    }
    if !report.run.repo.is_empty() && !ctx.repo.is_empty() && report.run.repo != ctx.repo {
        anyhow::bail!(
            "the report is for repository `{}`, but this workflow runs in `{}`; refusing to publish it here",
            report.run.repo,
            ctx.repo
        );
    }
    if let Some(event_head) = &ctx.head_sha {
        if *event_head != report.run.head_sha {
            return Err(GithubError::ShaMismatch {
                report: report.run.head_sha.clone(),
                event: event_head.clone(),
            }
            .into());
        }
    }
    Ok(())
}
