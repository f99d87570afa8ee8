//! `kernelgate history`: the store's records, listed; its subcommands (one module each) append
//! a run, find drift and export one, all through [`kernelgate::ops::history`].

use kernelgate::ops::history::list;

use crate::cli::{Cli, FilterArgs, Format, StoreArg};

mod append;
mod drift;
mod export;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub command: Option<Sub>,
    #[command(flatten)]
    pub store: StoreArg,
    #[command(flatten)]
    pub filter: FilterArgs,
    #[arg(long, value_enum, default_value = "human")]
    pub format: Format,
}

#[derive(Debug, clap::Subcommand)]
pub enum Sub {
    /// Record a run of the default branch: one record per kernel and per reference.
    Append(append::Args),
    /// Series whose time moved beyond the noise (exit 1 when a kernel or reference got slower).
    Drift(drift::Args),
    /// One run as Bencher's BMF JSON or github-action-benchmark's customSmallerIsBetter JSON.
    Export(export::Args),
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<i32> {
    match &args.command {
        Some(Sub::Append(sub)) => append::run(cli, sub),
        Some(Sub::Drift(sub)) => drift::run(cli, sub),
        Some(Sub::Export(sub)) => export::run(cli, sub),
        None => {
            let listing = list(&cli.repo, &args.store.options(cli), &args.filter.filter())?;
            match args.format {
                Format::Json => println!("{}", serde_json::to_string_pretty(&listing.records)?),
                Format::Human => print!("{listing}"),
            }
            Ok(0)
        }
    }
}
