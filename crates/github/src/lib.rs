//! Publishing a kernelgate report to GitHub: a check run with annotations, one sticky PR
//! comment, the job summary and step outputs; or, without a token, the same payloads as files.

mod context;
mod files;
mod publisher;

pub use context::{valid_sha, GithubContext};
pub use files::{
    append_output, append_step_summary, publish_files, write_outputs, write_published_outputs,
};
pub use publisher::{
    sticky_marker, CommentAction, CommentMode, Ending, Published, Publisher, RetryPolicy, SleepFn,
    ACTIONS_BOT, DRIFT_LABEL, UNVERIFIED,
};

use std::path::PathBuf;

/// Name of the check run kernelgate creates.
pub const CHECK_NAME: &str = "kernelgate";

#[derive(Debug, thiserror::Error)]
pub enum GithubError {
    #[error("{0}")]
    Config(String),
    #[error("cannot use the event payload `{path}`: {message}")]
    Event { path: PathBuf, message: String },
    #[error(
        "GitHub refused to {action} (403): the token lacks `{permission}`; add `permissions: {permission}` \
         to the workflow job (pull requests from forks get a read-only token: publish from a \
         `workflow_run` workflow instead). GitHub said: {message}"
    )]
    Forbidden {
        action: String,
        permission: &'static str,
        message: String,
    },
    #[error("GitHub answered {status} to {action}: {message}")]
    Api {
        action: String,
        status: u16,
        message: String,
    },
    #[error(
        "GitHub kept failing to {action} ({attempts} attempts; last: {last}); the check run is \
         left for the workflow's cleanup step (`kernelgate publish --end cancelled`) to complete, \
         re-run the job when GitHub is healthy"
    )]
    GaveUp {
        action: String,
        attempts: u32,
        last: String,
    },
    #[error(
        "GitHub's rate limit for this token asks to wait {wait_s} s before trying to {action} \
         again, longer than kernelgate waits; re-run the job later or publish with another token"
    )]
    RateLimited { action: String, wait_s: u64 },
    #[error(
        "`{sha}` is not a commit SHA (40 lowercase hex digits); pass the full head SHA of the pull request"
    )]
    BadSha { sha: String },
    #[error("cannot reach GitHub to {action}: {error}")]
    Http {
        action: String,
        error: octocrab::Error,
    },
    #[error("cannot write `{path}`: {error}")]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error(
        "the report is for commit {report}, but this workflow run is for {event}; refusing to publish a report for another commit"
    )]
    ShaMismatch { report: String, event: String },
}
