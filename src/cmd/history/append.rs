//! `kernelgate history append`: one run of the default branch into the store.

use kernelgate::history::Source;
use kernelgate::ops::history::{append, AppendOptions};
use std::path::PathBuf;

use crate::cli::{Cli, StoreArg};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The run's report.json (`kernelgate pr`, `merge`).
    #[arg(
        long,
        conflicts_with = "baselines",
        required_unless_present = "baselines"
    )]
    pub report: Option<PathBuf>,
    /// `kernelgate baseline` output: results/timing/<HARDWARE>/ directories or their files.
    #[arg(long, num_args = 1..)]
    pub baselines: Vec<PathBuf>,
    /// The commit the run measured (default: HEAD of --repo).
    #[arg(long, default_value = "HEAD")]
    pub commit: String,
    /// Commits kept per hardware file; older ones are dropped.
    #[arg(long, default_value_t = kernelgate_history::store::DEFAULT_KEEP_COMMITS)]
    pub keep: usize,
    #[command(flatten)]
    pub store: StoreArg,
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<i32> {
    let source = match &args.report {
        Some(r) => Source::Report(r.clone()),
        None => Source::Baselines(args.baselines.clone()),
    };
    let opts = AppendOptions {
        source,
        commit: args.commit.clone(),
        keep: args.keep,
    };
    print!("{}", append(&cli.repo, &args.store.options(cli), &opts)?);
    Ok(0)
}
