//! `kernelgate publish`: send a finished report to GitHub (check run, annotations, sticky
//! comment, job summary, step outputs) or write the same payloads as files. The second stage
//! of the fork-safe setup: it runs with a write token and never executes PR code.

use anyhow::Context;
use kernelgate_github::{valid_sha, Ending, GithubContext, GithubError, Published, Publisher};
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

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
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

/// Inside a tokio runtime: octocrab's client spawns its worker on the current one.
fn make_publisher(ctx: &GithubContext, options: &Options) -> Result<Publisher, GithubError> {
    Ok(Publisher::new(ctx)?
        .with_check_name(&options.check_name, ctx)
        .with_bot_login(&options.bot_login)
        .unverified(options.unverified))
}

/// Render the report into `out` and publish it; `kernelgate pr` calls this too.
pub fn publish_report(
    report: &Report,
    out: &Path,
    ctx: &GithubContext,
    mode: Mode,
    check_run_id: Option<u64>,
) -> anyhow::Result<()> {
    publish_report_with(report, out, ctx, mode, check_run_id, &Options::default())
}

fn publish_report_with(
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
