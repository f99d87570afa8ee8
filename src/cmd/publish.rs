//! `kernelgate publish`: send a finished report to GitHub (check run, annotations, sticky
//! comment, job summary, step outputs) or write the same payloads as files. The second stage
//! of the fork-safe setup: it runs with a write token and never executes PR code.

use kernelgate::ops::publish::{publish, Action, Mode, Options, PublishOptions};
use kernelgate_github::{CommentMode, Ending, GithubContext};
use std::path::PathBuf;

use crate::cli::Cli;

/// `--publish`: where the report goes ([`Mode`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ModeArg {
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
    pub publish: Option<ModeArg>,
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
    /// When the report gets the sticky comment on its pull request (GitHub publishing): always,
    /// on-change (something was judged), on-regression (it does not pass) or never. A comment
    /// the gate already wrote is updated in every mode but never.
    #[arg(long, env = "KERNELGATE_COMMENT", default_value = "always",
          value_parser = clap::builder::TypedValueParser::map(
              clap::builder::PossibleValuesParser::new(CommentMode::NAMES),
              |s: String| s.parse::<CommentMode>().expect("one of the names")))]
    pub comment: CommentMode,
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
    let action = if args.start {
        Action::Start
    } else if let Some(end) = args.end {
        Action::End {
            ending: match end {
                EndArg::Cancelled => Ending::Cancelled,
                EndArg::Neutral => Ending::Neutral,
                EndArg::Success => Ending::Success,
            },
            reason: args.reason.clone().unwrap_or_default(),
        }
    } else {
        Action::Report {
            report: args.report.clone().expect("clap requires --report"),
            out: args.out.clone(),
            mode: args.publish.map(|m| match m {
                ModeArg::Github => Mode::Github,
                ModeArg::Files => Mode::Files,
            }),
        }
    };
    let opts = PublishOptions {
        action,
        head: args.head.clone(),
        check_run_id: args.check_run_id,
        options: Options {
            check_name: args.check_name.clone(),
            bot_login: args.bot_login.clone(),
            unverified: args.unverified,
            comment: args.comment,
        },
    };
    let (_, lines) = publish(GithubContext::from_env()?, &opts)?;
    for line in lines {
        eprintln!("{line}");
    }
    Ok(0)
}
