//! `kernelgate pr`: from a pull request's diff to a judged report.
//!
//! `gate` (the whole run, for the CLI and other callers) → `judgment` (the config that judges
//! the pull request: the trusted side's, never the head's) → `changes` (git) → `plan` (files per
//! kernel, shards) → `run` (lint, evaluate on every device, incremental report) → `policy`
//! (verdicts); `schedule` runs builds and evals (`cores` shares a GPU runner's CPUs out).
//! Evaluation and lint are traits (`evaluator`), so the pipeline is tested with fakes and wired
//! to the real crates in `adapters`, whose `convert` moves the harness's result onto its row.

pub mod adapters;
pub mod changes;
pub mod cores;
pub mod evaluator;
pub mod gate;
pub mod judgment;
pub mod layout;
pub mod plan;
pub mod policy;
pub mod progress;
pub mod run;
pub mod schedule;
pub mod shard;
