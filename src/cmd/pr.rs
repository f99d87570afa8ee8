//! `kernelgate pr`: the gate for one pull request ([`kernelgate::pr::gate`]).

use kernelgate::pr::gate;
use kernelgate::pr::progress::{Event, Kind};
use kernelgate::pr::shard::Shard;
use kernelgate_github::GithubContext;
use std::path::PathBuf;

use crate::cli::{Cli, DeviceArg, PublishArg};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Base commit or ref. Default: the pull request's base from the GitHub event, else
    /// `origin/main`, else `main`.
    #[arg(long)]
    pub base: Option<String>,
    /// Head commit or ref. Default: the pull request's head from the GitHub event, else `HEAD`.
    #[arg(long)]
    pub head: Option<String>,
    /// Evaluate every kernel, not only the changed ones.
    #[arg(long)]
    pub all: bool,
    /// Evaluate only shard i of n of the plan (workflow matrix); `kernelgate merge` joins them.
    #[arg(long, value_name = "I/N")]
    pub shard: Option<Shard>,
    /// Output directory for report.json and its renderings.
    #[arg(long, default_value = "kg-out")]
    pub out: PathBuf,
    #[arg(long, value_enum, default_value = "auto")]
    pub publish: PublishArg,
    /// Treat this label as present on the PR (e.g. `kernelgate:ack-speedup` acknowledges an
    /// excessive speedup). Repeatable; adds to the labels of the GitHub event.
    #[arg(long = "ack-label", value_name = "LABEL")]
    pub ack_labels: Vec<String>,
    /// Where kernels run: auto (CUDA when present), cuda or cpu. Default: `[defaults] device`.
    #[arg(long, value_enum)]
    pub device: Option<DeviceArg>,
    /// Fixed seed (KernelBench uses 42); default: secret and random, printed in the report.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Check correctness only; skip timing.
    #[arg(long)]
    pub no_timing: bool,
    /// Print the plan as JSON and exit without running anything.
    #[arg(long)]
    pub plan: bool,
    /// No progress lines.
    #[arg(long, short)]
    pub quiet: bool,
    /// The config that judges the pull request (sandbox, policy, thresholds, harness), read from
    /// this file instead of the base commit's kernelgate.toml: the default branch's, checked out
    /// apart from the pull request. Never the head's: its changes apply after merge.
    #[arg(long, value_name = "FILE")]
    pub trusted_config: Option<PathBuf>,
    /// true: a significant timing regression fails the check; false: it only warns. Default: the
    /// judging config's `[policy]`. From the workflow, never from the pull request's config.
    #[arg(long, env = "KERNELGATE_FAIL_ON_REGRESSION", value_name = "BOOL",
          action = clap::ArgAction::Set, value_parser = clap::builder::BoolishValueParser::new())]
    pub fail_on_regression: Option<bool>,
    #[command(flatten)]
    pub eval: crate::cli::EvalOptions,
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<i32> {
    let gh = GithubContext::from_env()?;
    let opts = gate::Options {
        base: args.base.clone(),
        head: args.head.clone(),
        all: args.all,
        shard: args.shard,
        out: args.out.clone(),
        publish: args.publish.into(),
        ack_labels: args.ack_labels.clone(),
        device: args.device.map(Into::into),
        seed: args.seed,
        no_timing: args.no_timing,
        config: cli.config.clone(),
        trusted_config: args.trusted_config.clone(),
    };
    // The judging config (the trusted side's, never the head's), then this run's own flags.
    let mut judgment = gate::judge(&cli.repo, &gh, &opts)?;
    args.eval.apply(&mut judgment.config)?;
    if let Some(fail) = args.fail_on_regression {
        (judgment.config.policy).set_fails(kernelgate_model::Condition::Regression, fail);
    }
    if args.plan {
        let plan = gate::plan_json(&gate::plan(&cli.repo, &judgment, &opts)?, &judgment);
        println!("{}", serde_json::to_string_pretty(&plan)?);
        return Ok(0);
    }
    // Progress on stdout (each kernel's result) and stderr (builds, evals, trouble); inside
    // GitHub Actions, annotations and one `::group::` per kernel.
    let (quiet, actions) = (args.quiet, gh.actions);
    let printer = |e: &Event<'_>| match (e, e.kind()) {
        (Event::Changed { file, message }, _) if actions => {
            println!("::warning file={file}::{message}")
        }
        (_, Kind::Notice) => eprintln!("{e}"),
        _ if quiet => {}
        (_, Kind::Progress) => eprintln!("{e}"),
        (Event::Finished(f), _) if actions => println!("{}", f.actions_group()),
        _ => println!("{e}"),
    };
    Ok(gate::gate(&cli.repo, &judgment, &gh, &opts, &printer)?)
}
