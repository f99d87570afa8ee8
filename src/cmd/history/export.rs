//! `kernelgate history export`: one run as a benchmark tool's JSON.

use kernelgate::ops::history::{export, ExportFormat, ExportOptions};
use std::path::PathBuf;

use crate::cli::{Cli, StoreArg};

#[derive(Debug, clap::Args)]
pub struct Args {
    #[arg(long, value_enum)]
    pub to: ExportArg,
    /// The run's report.json (default: the store's newest commit).
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// The commit of --report (default: its head_sha, else HEAD).
    #[arg(long)]
    pub commit: Option<String>,
    #[command(flatten)]
    pub store: StoreArg,
}

/// `--to` ([`ExportFormat`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportArg {
    /// Bencher Metric Format (latency in nanoseconds).
    Bmf,
    /// github-action-benchmark's `customSmallerIsBetter` (milliseconds).
    BenchmarkAction,
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<i32> {
    let opts = ExportOptions {
        to: match args.to {
            ExportArg::Bmf => ExportFormat::Bmf,
            ExportArg::BenchmarkAction => ExportFormat::BenchmarkAction,
        },
        report: args.report.clone(),
        commit: args.commit.clone(),
    };
    let doc = export(&cli.repo, &args.store.options(cli), &opts)?;
    println!("{}", serde_json::to_string_pretty(&doc)?);
    Ok(0)
}
