//! [`EvalError`]: what goes wrong in a job's set-up, before its candidate runs.

use crate::locate::HARNESS_LIB;
use crate::sandbox;
use std::path::PathBuf;

/// Errors of the set-up, before any candidate runs (reported as `harness_error` by `run_job`).
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    #[error(
        "the harness extension {HARNESS_LIB} was not found (looked at {}); install it with \
         `pip install kernelgate` into the Python that holds torch (or set KERNELGATE_PYTHON to \
         that Python), build it with `cargo build -p kernelgate-harness` (same profile as the \
         CLI), or point KERNELGATE_HARNESS at it",
        looked.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
    )]
    HarnessMissing { looked: Vec<PathBuf> },
    #[error("{path}: cannot read the file: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot start the job's child process with {python}: {source} (set KERNELGATE_PYTHON to a Python with torch)")]
    Spawn {
        python: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Sandbox(#[from] sandbox::SandboxError),
    /// The candidate's file is unreadable or not UTF-8: its own compile error, never an
    /// infrastructure outcome.
    #[error("{0}")]
    KernelSource(String),
}
