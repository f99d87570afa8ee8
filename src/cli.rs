//! Command-line surface. Each subcommand's arguments live beside its implementation in `cmd/`.

use clap::{Parser, Subcommand};
use std::path::PathBuf;

use crate::cmd;

#[derive(Debug, Parser)]
#[command(
    name = "kernelgate",
    version,
    about = "Merge gate for GPU-kernel pull requests"
)]
pub struct Cli {
    /// Repository root (where `kernelgate.toml`, `KernelBench/` and `kernels/` live).
    #[arg(long, global = true, default_value = ".")]
    pub repo: PathBuf,
    /// Config file (default: `<repo>/kernelgate.toml` when it exists).
    #[arg(long, global = true)]
    pub config: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// List the problems of the dataset.
    Problems(cmd::problems::Args),
    /// List candidate kernels with their problem, backend and precision.
    Kernels(cmd::kernels::Args),
    /// Check kernels for reward hacks statically (exit 1 on errors).
    Lint(cmd::lint::Args),
    /// Show the documentation of a lint rule (`--all` for every rule).
    Rule(cmd::rule::Args),
    /// Evaluate one kernel against its problem in an isolated child process.
    Eval(cmd::eval::Args),
    /// Time the references on this machine and write results/timing/<HARDWARE>/ baselines.
    Baseline(cmd::baseline::Args),
    /// Gate a pull request: lint, evaluate and time the kernels it changes; report and publish.
    Pr(cmd::pr::Args),
    /// Publish a report.json to GitHub (check run, annotations, sticky comment) or to files.
    Publish(cmd::publish::Args),
    /// Join the report.json files of a sharded run into one report and render it.
    Merge(cmd::merge::Args),
}
