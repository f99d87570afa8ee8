//! Publishing a kernelgate report to GitHub: a check run with annotations, one sticky PR
//! comment, the job summary and step outputs; or, without a token, the same payloads as files.

mod context;
mod files;
mod publisher;

pub use context::GithubContext;
pub use files::{append_step_summary, publish_files, write_outputs};
pub use publisher::{CommentAction, Publisher, RetryPolicy};

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
