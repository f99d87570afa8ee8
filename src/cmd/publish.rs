//! `kernelgate publish`: send a finished report to GitHub (check run, annotations, sticky
//! comment, job summary, step outputs) or write the same payloads as files. The second stage
//! of the fork-safe setup: it runs with a write token and never executes PR code.

use anyhow::Context;
use kernelgate_github::{GithubContext, GithubError, Publisher};
use kernelgate_report::Report;
use std::path::{Path, PathBuf};

use crate::cli::Cli;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// Through the GitHub API (needs GITHUB_TOKEN and GITHUB_REPOSITORY).
    Github,
    /// Write check_run.json and comment.json next to the report instead.
    Files,
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The report.json written by `kernelgate pr` or `kernelgate merge`.
    #[arg(long)]
    pub report: PathBuf,
    /// Where to write comment.md, summary.md, results.sarif (and payloads in files mode).
    /// Default: the report's directory.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Default: github when GITHUB_TOKEN is set, else files.
    #[arg(long, value_enum)]
    pub publish: Option<Mode>,
    /// Complete this check run (opened earlier) instead of creating a new one.
    #[arg(long)]
    pub check_run_id: Option<u64>,
}

pub fn run(_cli: &Cli, args: &Args) -> anyhow::Result<i32> {
    let report = Report::read(&args.report)?;
    let out = match &args.out {
        Some(dir) => dir.clone(),
        None => args
            .report
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."))
            .to_path_buf(),
    };
    let ctx = GithubContext::from_env()?;
    let mode = args.publish.unwrap_or(if ctx.token.is_some() {
        Mode::Github
    } else {
        Mode::Files
    });
    publish_report(&report, &out, &ctx, mode, args.check_run_id)?;
    Ok(0)
}

/// Render the report into `out` and publish it; `kernelgate pr` calls this too.
pub fn publish_report(
    report: &Report,
    out: &Path,
    ctx: &GithubContext,
    mode: Mode,
    check_run_id: Option<u64>,
) -> anyhow::Result<()> {
    let rendered = kernelgate_report::render_all(report, out)?;
    match mode {
        Mode::Files => {
            let written = kernelgate_github::publish_files(report, out)?;
            for p in written {
                eprintln!("kernelgate: wrote {}", p.display());
            }
        }
        Mode::Github => {
            check_provenance(report, ctx)?;
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .context("cannot start the async runtime")?;
            rt.block_on(async {
                let publisher = Publisher::new(ctx)?;
                if let Some(pr) = report.run.pr_number {
                    // A report is an artifact a fork could have forged: only publish it on the
                    // pull request whose head it was computed for.
                    let head = publisher.pr_head_sha(pr).await?;
                    if head != report.run.head_sha {
                        return Err(GithubError::ShaMismatch {
                            report: report.run.head_sha.clone(),
                            event: head,
                        });
                    }
                }
                let action = publisher.publish(report, check_run_id).await?;
                eprintln!(
                    "kernelgate: check run completed ({})",
                    kernelgate_report::check_run::conclusion(report)
                );
                if let Some(action) = action {
                    eprintln!("kernelgate: PR comment {action:?}");
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
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    Ok(rt.block_on(async { Publisher::new(ctx)?.start_check_run(head_sha).await })?)
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
