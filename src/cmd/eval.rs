//! `kernelgate eval`: one candidate against one problem, in an isolated child process.

use kernelgate::ops::eval::{Builds, EvalOptions};
use kernelgate_model::Config;
use std::path::PathBuf;

use crate::cli::{Cli, DeviceArg};

pub use crate::cli::Format;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Problem: a file path, or a dataset key such as `level1/19_ReLU`. Default: the kernel's
    /// `# kernelgate: problem=...` directive or its path mapping, as `kernelgate kernels` shows.
    #[arg(long)]
    pub problem: Option<String>,
    /// Candidate kernel file (defines `ModelNew`).
    #[arg(long)]
    pub kernel: PathBuf,
    /// Previous version of the kernel, timed against `--kernel` (regression check).
    #[arg(long)]
    pub base_kernel: Option<PathBuf>,
    /// Where to run: CUDA when a GPU and its driver are present (auto), or forced.
    #[arg(long, value_enum)]
    pub device: Option<DeviceArg>,
    /// A number (42 reproduces KernelBench), or `random` (default: secret, reported afterwards).
    #[arg(long, default_value = "random", value_parser = parse_seed)]
    pub seed: SeedArg,
    /// Host memory limit for the job, MiB.
    #[arg(long)]
    pub memory_limit: Option<u64>,
    /// Correctness only.
    #[arg(long)]
    pub no_timing: bool,
    /// Skip the op audit (the extra, untimed call that measures the custom share).
    #[arg(long)]
    pub no_audit: bool,
    /// GPU index (sets CUDA_VISIBLE_DEVICES for the job).
    #[arg(long)]
    pub gpu: Option<u32>,
    /// A shared extensions cache with one build per kernel source, as `pr` keeps it. Default:
    /// torch's own build directory, so what `python kernel.py` (or an earlier eval) built with
    /// the same sources, flags and torch is loaded, not compiled again.
    #[arg(long, conflicts_with = "fresh_build")]
    pub extensions_dir: Option<PathBuf>,
    /// Build the kernel's extensions in a fresh directory that is removed afterwards.
    #[arg(long)]
    pub fresh_build: bool,
    /// Extra trials on signed/scaled inputs (0-2).
    #[arg(long, default_value_t = 1)]
    pub shifted_trials: u32,
    /// Generate inputs on the CPU as KernelBench does (slow for large problems; bit-identical inputs).
    #[arg(long)]
    pub host_inputs: bool,
    /// human (alias: table) or json.
    #[arg(long, value_enum, default_value = "human")]
    pub format: Format,
    #[command(flatten)]
    pub eval: crate::cli::EvalOptions,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeedArg {
    Random,
    Fixed(u64),
}

fn parse_seed(s: &str) -> Result<SeedArg, String> {
    if s.eq_ignore_ascii_case("random") {
        return Ok(SeedArg::Random);
    }
    s.parse::<u64>()
        .map(SeedArg::Fixed)
        .map_err(|_| format!("`{s}` is not a seed: give a non-negative integer (42 reproduces KernelBench) or `random`"))
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<i32> {
    let mut config = Config::load(&cli.repo, cli.config.as_deref())?;
    args.eval.apply(&mut config)?;
    let opts = EvalOptions {
        problem: args.problem.clone(),
        kernel: args.kernel.clone(),
        base_kernel: args.base_kernel.clone(),
        device: args.device.map(Into::into),
        seed: match args.seed {
            SeedArg::Random => None,
            SeedArg::Fixed(s) => Some(s),
        },
        precision: args.eval.precision,
        memory_limit_mb: args.memory_limit,
        no_timing: args.no_timing,
        no_audit: args.no_audit,
        gpu: args.gpu,
        builds: match &args.extensions_dir {
            Some(d) => Builds::Keyed(d.clone()),
            None if args.fresh_build => Builds::Fresh,
            None => Builds::TorchDefault,
        },
        shifted_trials: args.shifted_trials,
        host_inputs: args.host_inputs,
    };
    let local = kernelgate::ops::eval::eval(&cli.repo, &config, &opts, |s| eprintln!("{s}"))?;
    match args.format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&local.to_json())?),
        Format::Human => print!("{local}"),
    }
    Ok(local.exit_code())
}
