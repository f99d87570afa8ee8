//! `kernelgate history drift`: series whose time moved beyond the noise; exit 1 when one got
//! slower.

use kernelgate::ops::history::{drift, DriftOptions};

use crate::cli::{Cli, FilterArgs, Format, RuleArgs, StoreArg};

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub rule: RuleArgs,
    #[command(flatten)]
    pub store: StoreArg,
    #[command(flatten)]
    pub filter: FilterArgs,
    #[arg(long, value_enum, default_value = "human")]
    pub format: Format,
    /// Open (or update) one GitHub issue per series that got slower, labelled
    /// `kernelgate-drift`; needs `GITHUB_TOKEN` with `issues: write` and `GITHUB_REPOSITORY`.
    #[arg(long)]
    pub open_issues: bool,
    /// The published dashboard, linked from the issues (`https://owner.github.io/repo/`).
    #[arg(long, env = "KERNELGATE_DASHBOARD_URL")]
    pub dashboard_url: Option<String>,
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<i32> {
    let opts = DriftOptions {
        filter: args.filter.filter(),
        rule: args.rule.options(),
        open_issues: args.open_issues,
        dashboard_url: args.dashboard_url.clone(),
    };
    // Each issue is said as it is filed.
    let run = drift(&cli.repo, &args.store.options(cli), &opts, |i| {
        eprintln!("{i}")
    })?;
    match args.format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&run.drifts)?),
        Format::Human => print!("{run}"),
    }
    Ok(i32::from(run.any_slower()))
}
