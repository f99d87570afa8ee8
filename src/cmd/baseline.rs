//! `kernelgate baseline`: time the references (and with `--kernels` the accepted kernels) on
//! this machine and write `results/timing/<HARDWARE>/` ([`kernelgate::baseline::record`]).

use anyhow::Context;
use kernelgate::baseline::{self, Event, Request};
use kernelgate_model::Config;
use std::time::Duration;

use crate::cli::{Cli, DeviceArg};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Only problems of this level.
    #[arg(long)]
    pub level: Option<u32>,
    /// Only these problems (`level1/3_ReLU`, `3_ReLU` or a path); repeatable.
    #[arg(long = "problem", value_name = "KEY")]
    pub problems: Vec<String>,
    /// Also time `torch.compile` (inductor, default mode) of each reference.
    #[arg(long)]
    pub compile: bool,
    /// Only `torch.compile`, not eager.
    #[arg(long, conflicts_with = "compile")]
    pub compile_only: bool,
    /// Where the references run: auto (CUDA when present), cuda or cpu. Default:
    /// `[defaults] device`.
    #[arg(long, value_enum)]
    pub device: Option<DeviceArg>,
    /// Folder name under results/timing/ (default: from the device name, e.g. NVIDIA_H200).
    #[arg(long)]
    pub hardware: Option<String>,
    /// Also time the accepted kernels of this checkout (normally `main`) through the isolated
    /// harness into `kernelgate_kernels.json`, so pull requests compare against them.
    #[arg(long)]
    pub kernels: bool,
    /// Whole-run limit in seconds (default: 60 s per problem and variant, plus 120 s).
    #[arg(long)]
    pub timeout: Option<u64>,
    /// Print what the run would time as JSON (with `--kernels`: each kernel and its mapping,
    /// as `kernelgate kernels` maps it) and exit without running anything.
    #[arg(long)]
    pub plan: bool,
    #[command(flatten)]
    pub eval: crate::cli::EvalOptions,
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<i32> {
    let mut cfg = Config::load(&cli.repo, cli.config.as_deref())?;
    args.eval.apply(&mut cfg)?;
    let spec = cfg.dataset_spec(&cli.repo);
    let set = spec
        .load()
        .with_context(|| format!("loading problems from {spec}"))?;
    let request = Request {
        level: args.level,
        problems: args.problems.clone(),
        compile: args.compile,
        compile_only: args.compile_only,
        device: args.device.map(Into::into),
        hardware: args.hardware.clone(),
        kernels: args.kernels,
        timeout: args.timeout.map(Duration::from_secs),
    };
    if args.plan {
        let plan = baseline::plan(&cli.repo, &cfg, &set, &request)?;
        println!("{}", serde_json::to_string_pretty(&plan)?);
        return Ok(0);
    }
    let recorded = baseline::record(&cli.repo, &cfg, &set, &request, &print)?;
    eprintln!("{recorded}");
    Ok(recorded.exit_code())
}

/// The table on stdout; what happens around it on stderr.
fn print(e: &Event<'_>) {
    match e {
        Event::Timing { .. }
        | Event::TimedOut { .. }
        | Event::Traceback { .. }
        | Event::Unmapped(_) => eprintln!("{e}"),
        _ => println!("{e}"),
    }
}
