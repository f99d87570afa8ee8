//! Publishing, in one place: a finished report to GitHub (check run, annotations, sticky
//! comment, job summary, step outputs) or as files, for `kernelgate pr` ([`publish_report`]) and
//! `kernelgate publish` ([`publish`]: open a check run, end one, or send a report). The second
//! stage of the fork-safe setup runs the latter with a write token and never executes PR code.
//! The command parses flags into [`PublishOptions`] and prints what [`publish`] did.

use kernelgate_github::{valid_sha, Ending, GithubContext, GithubError, Published, Publisher};
use kernelgate_report::{Report, ReportError};
use std::path::{Path, PathBuf};

/// Why a report, or a check run, could not be published, with what to do.
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    #[error(
        "the report has no head commit (`run.head_sha`); it cannot be published as a check run"
    )]
    NoReportHead,
    #[error(
        "the report is for repository `{report}`, but this workflow runs in `{workflow}`; refusing to publish it here"
    )]
    OtherRepository { report: String, workflow: String },
    #[error("no head commit: pass --head <sha> (the pull request's head SHA)")]
    NoHead,
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error(transparent)]
    Github(#[from] GithubError),
    #[error(transparent)]
    Report(#[from] ReportError),
}

/// The async runtime the GitHub client needs could not start.
#[derive(Debug, thiserror::Error)]
#[error("cannot start the async runtime: {0}")]
pub struct RuntimeError(std::io::Error);

/// Where a report goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Through the GitHub API (needs GITHUB_TOKEN and GITHUB_REPOSITORY).
    Github,
    /// Write check_run.json and comment.json next to the report instead.
    Files,
}

/// How to publish: check name, the token's bot login, whether the report is unverified, and
/// when it gets the sticky comment.
#[derive(Debug, Clone)]
pub struct Options {
    pub check_name: String,
    pub bot_login: String,
    pub unverified: bool,
    pub comment: kernelgate_github::CommentMode,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            check_name: kernelgate_github::CHECK_NAME.into(),
            bot_login: kernelgate_github::ACTIONS_BOT.into(),
            unverified: false,
            comment: kernelgate_github::CommentMode::Always,
        }
    }
}

pub fn runtime() -> Result<tokio::runtime::Runtime, RuntimeError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(RuntimeError)
}

/// Inside a tokio runtime: octocrab's client spawns its worker on the current one.
pub fn make_publisher(ctx: &GithubContext, options: &Options) -> Result<Publisher, GithubError> {
    Ok(Publisher::new(ctx)?
        .with_check_name(&options.check_name, ctx)
        .with_bot_login(&options.bot_login)
        .with_comment_mode(options.comment)
        .unverified(options.unverified))
}

/// Render the report into `out` and publish it with the default options (`kernelgate pr`).
pub fn publish_report(
    report: &Report,
    out: &Path,
    ctx: &GithubContext,
    mode: Mode,
    check_run_id: Option<u64>,
) -> Result<Vec<String>, PublishError> {
    let options = Options::default();
    let published = publish_report_with(report, out, ctx, mode, check_run_id, &options)?;
    Ok(published_lines(&published, Some(report), &options))
}

/// [`publish_report`] with `options`: what it did ([`published_lines`] says it in words).
pub fn publish_report_with(
    report: &Report,
    out: &Path,
    ctx: &GithubContext,
    mode: Mode,
    check_run_id: Option<u64>,
    options: &Options,
) -> Result<Published, PublishError> {
    let rendered = kernelgate_report::render_all(report, out)?;
    let published = match mode {
        Mode::Files => Published::Written {
            files: kernelgate_github::publish_files(report, out, &options.check_name)?,
        },
        Mode::Github => {
            check_provenance(report, ctx)?;
            let rt = runtime()?;
            rt.block_on(async {
                let publisher = make_publisher(ctx, options)?;
                publisher.publish(report, check_run_id).await
            })?
        }
    };
    if let Some(path) = &ctx.step_summary {
        kernelgate_github::append_step_summary(path, report)?;
    }
    if let Some(path) = &ctx.output {
        kernelgate_github::write_outputs(path, report, &rendered.report_json)?;
        kernelgate_github::write_published_outputs(path, &published)?;
    }
    Ok(published)
}

/// What publishing did, one line each, as the commands print it on stderr (`report`: the one
/// published, whose conclusion a completed check run took).
pub fn published_lines(
    published: &Published,
    report: Option<&Report>,
    options: &Options,
) -> Vec<String> {
    match published {
        Published::Written { files } => files
            .iter()
            .map(|p| format!("kernelgate: wrote {}", p.display()))
            .collect(),
        Published::Done {
            check_run,
            check_run_url,
            comment,
        } => {
            let mut lines = vec![format!(
                "kernelgate: check run {check_run} completed ({}{}){}",
                report.map_or("with its report", kernelgate_report::check_run::conclusion),
                if options.unverified {
                    ", published as unverified"
                } else {
                    ""
                },
                check_run_url
                    .as_ref()
                    .map(|u| format!(": {u}"))
                    .unwrap_or_default()
            )];
            if let Some(action) = comment {
                lines.push(format!("kernelgate: PR comment {action:?}"));
            }
            lines
        }
        Published::Superseded { check_run, head } => vec![format!(
            "kernelgate: the pull request's head moved to {head}; {} and the comment left alone",
            match check_run {
                Some(id) => format!("check run {id} completed as neutral"),
                None => "no check run was open".into(),
            }
        )],
        Published::Opened { check_run, head } => {
            vec![format!(
                "kernelgate: check run {check_run} opened on {head}"
            )]
        }
        Published::Ended { check_run, ending } => vec![format!(
            "kernelgate: check run {check_run} completed as {}",
            ending.as_str()
        )],
    }
}

/// Open the check run `in_progress` at the start of `kernelgate pr`; pass the id to
/// [`publish_report`] at the end so the same check run is completed.
pub fn start_check_run(ctx: &GithubContext, head_sha: &str) -> Result<u64, PublishError> {
    let rt = runtime()?;
    Ok(rt.block_on(async { Publisher::new(ctx)?.start_check_run(head_sha).await })?)
}

/// Complete a check run opened by [`start_check_run`] when `kernelgate pr` fails before it has
/// a report: `cancelled`, with the error as the reason. Best effort: a failure comes back as
/// the warning to show.
pub fn abandon_check_run(ctx: &GithubContext, id: u64, reason: &str) -> Option<String> {
    let done = runtime().map_err(PublishError::from).and_then(|rt| {
        rt.block_on(async {
            Publisher::new(ctx)?
                .finish_check_run(id, Ending::Cancelled, reason)
                .await
        })
        .map_err(PublishError::from)
    });
    done.err()
        .map(|e| format!("warning: cannot complete check run {id}: {e}"))
}

/// The report must be for this repository and, when the event names a commit, that commit.
fn check_provenance(report: &Report, ctx: &GithubContext) -> Result<(), PublishError> {
    if report.run.head_sha.is_empty() {
        return Err(PublishError::NoReportHead);
    }
    if !report.run.repo.is_empty() && !ctx.repo.is_empty() && report.run.repo != ctx.repo {
        return Err(PublishError::OtherRepository {
            report: report.run.repo.clone(),
            workflow: ctx.repo.clone(),
        });
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

/// Runs the action against the workflow's context `ctx` (its head replaced by `opts.head`):
/// what it did, and that in words ([`published_lines`]).
pub fn publish(
    ctx: GithubContext,
    opts: &PublishOptions,
) -> Result<(Published, Vec<String>), PublishError> {
    let mut report = None;
    let published = publish_action(ctx, opts, &mut report)?;
    let lines = published_lines(&published, report.as_ref(), &opts.options);
    Ok((published, lines))
}

fn publish_action(
    mut ctx: GithubContext,
    opts: &PublishOptions,
    report_read: &mut Option<Report>,
) -> Result<Published, PublishError> {
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
            let published =
                publish_report_with(&loaded, &out, &ctx, mode, opts.check_run_id, &opts.options);
            *report_read = Some(loaded);
            published
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
fn event_head(ctx: &GithubContext) -> Result<String, PublishError> {
    let head = ctx.head_sha.clone().ok_or(PublishError::NoHead)?;
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
