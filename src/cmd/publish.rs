//! `kernelgate publish`: send a finished report to GitHub (check run, annotations, sticky
//! comment, job summary, step outputs) or write the same payloads as files. The second stage
//! of the fork-safe setup: it runs with a write token and never executes PR code.

use anyhow::Context;
use kernelgate::publish::{make_publisher, publish_report_with, runtime, Mode, Options};
use kernelgate_github::{valid_sha, Ending, GithubContext, GithubError};
use kernelgate_report::Report;
use std::path::{Path, PathBuf};

use crate::cli::Cli;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum EndArg {
    /// The job was cancelled or failed before it had a report (not a pass).
    Cancelled,
    /// No verdict here (e.g. the run was superseded).
    Neutral,
    /// The pull request changes no kernel.
    Success,
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The report.json written by `kernelgate pr` or `kernelgate merge`.
    #[arg(long, required_unless_present_any = ["start", "end"])]
    pub report: Option<PathBuf>,
    /// Where to write comment.md, summary.md, results.sarif (and payloads in files mode).
    /// Default: the report's directory.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Default: github when GITHUB_TOKEN is set, else files.
    #[arg(long, value_enum)]
    pub publish: Option<Mode>,
    /// Complete this check run (opened earlier) instead of the one this run attempt opened.
    #[arg(long)]
    pub check_run_id: Option<u64>,
    /// Name of the check run, and of its own sticky comment: one per gate, so several gates
    /// (one per GPU type) coexist on a pull request.
    #[arg(long, env = "KERNELGATE_CHECK_NAME", default_value = kernelgate_github::CHECK_NAME)]
    pub check_name: String,
    /// Login the token posts as when `GET /user` cannot say (an installation token): the
    /// workflow's GITHUB_TOKEN is github-actions[bot], a GitHub App's is <app-slug>[bot].
    #[arg(long, env = "KERNELGATE_BOT_LOGIN", default_value = kernelgate_github::ACTIONS_BOT)]
    pub bot_login: String,
    /// The report comes from a fork's own workflow run and may be forged: a passing report is
    /// published as `neutral` ("unverified"), never `success`.
    #[arg(long)]
    pub unverified: bool,
    /// Open the check run `in_progress` for --head before anything runs; writes
    /// `check-run-id` to GITHUB_OUTPUT.
    #[arg(long, conflicts_with_all = ["report", "end"])]
    pub start: bool,
    /// Complete the check run of this run attempt without a report (an `if: cancelled()` or
    /// failure step), creating it if it was never opened, so a required check never waits.
    #[arg(long, value_enum, requires = "reason", conflicts_with = "report")]
    pub end: Option<EndArg>,
    /// Why the check run ends without a report (with --end).
    #[arg(long)]
    pub reason: Option<String>,
    /// The head commit for --start and --end (default: the event's head SHA); with --report,
    /// the report must be for this commit.
    #[arg(long)]
    pub head: Option<String>,
}

pub fn run(_cli: &Cli, args: &Args) -> anyhow::Result<i32> {
    let mut ctx = GithubContext::from_env()?;
    if let Some(head) = &args.head {
        if !valid_sha(head) {
            return Err(GithubError::BadSha {
                sha: head.escape_debug().to_string(),
            }
            .into());
        }
        // The commit this run was authorised for: a report for another one is refused.
        ctx.head_sha = Some(head.clone());
    }
    if args.start || args.end.is_some() {
        let head = args
            .head
            .clone()
            .or_else(|| ctx.head_sha.clone())
            .context("no head commit: pass --head <sha> (the pull request's head SHA)")?;
        if !valid_sha(&head) {
            return Err(GithubError::BadSha {
                sha: head.escape_debug().to_string(),
            }
            .into());
        }
        let rt = runtime()?;
        let options = Options::from(args);
        if args.start {
            let id = rt
                .block_on(async { make_publisher(&ctx, &options)?.start_check_run(&head).await })?;
            eprintln!("kernelgate: check run {id} opened on {head}");
            if let Some(path) = &ctx.output {
                kernelgate_github::append_output(
                    path,
                    &format!("check-run-id={id}\nhead={head}\n"),
                )?;
            }
        } else if let Some(end) = args.end {
            let ending = match end {
                EndArg::Cancelled => Ending::Cancelled,
                EndArg::Neutral => Ending::Neutral,
                EndArg::Success => Ending::Success,
            };
            let reason = args.reason.as_deref().unwrap_or_default();
            let id = rt.block_on(async {
                make_publisher(&ctx, &options)?
                    .end(&head, args.check_run_id, ending, reason)
                    .await
            })?;
            eprintln!(
                "kernelgate: check run {id} completed as {}",
                ending.as_str()
            );
        }
        return Ok(0);
    }
    let report_path = args.report.as_ref().expect("clap requires --report");
    let report = Report::read(report_path)?;
    let out = match &args.out {
        Some(dir) => dir.clone(),
        None => report_path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."))
            .to_path_buf(),
    };
    let mode = args.publish.unwrap_or(if ctx.token.is_some() {
        Mode::Github
    } else {
        Mode::Files
    });
    let options = Options::from(args);
    publish_report_with(&report, &out, &ctx, mode, args.check_run_id, &options)?;
    Ok(0)
}

impl From<&Args> for Options {
    fn from(args: &Args) -> Self {
        Options {
            check_name: args.check_name.clone(),
            bot_login: args.bot_login.clone(),
            unverified: args.unverified,
        }
    }
}
