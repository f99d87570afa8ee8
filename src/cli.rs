//! Command-line surface. Each subcommand's arguments live beside its implementation in `cmd/`.

use clap::{Parser, Subcommand};
use kernelgate_history::DriftRule;
use kernelgate_model::{Config, Precision};
use std::path::PathBuf;

use crate::cmd;

/// The commit kernelgate was built from: `KERNELGATE_COMMIT` at build time (set by
/// `scripts/build-wheel.sh` and the release workflow).
pub fn commit() -> &'static str {
    option_env!("KERNELGATE_COMMIT")
        .filter(|c| !c.is_empty())
        .unwrap_or("unknown")
}

/// The harness ABI: a CPython stable-ABI (abi3) extension for Python >= 3.9, and the job protocol.
pub fn harness_abi() -> String {
    format!("abi3-py39, protocol {}", kernelgate_eval::HARNESS_PROTOCOL)
}

/// `kernelgate -V`: version, commit and harness ABI on one line.
pub fn short_version() -> &'static str {
    let v = format!(
        "{} (commit {}, harness {})",
        env!("CARGO_PKG_VERSION"),
        commit(),
        harness_abi()
    );
    Box::leak(v.into_boxed_str())
}

/// `kernelgate --version`: the short line, then where the harness and the runner's Python are.
pub fn long_version() -> &'static str {
    let harness = match kernelgate_eval::find_harness() {
        Ok(p) => p.display().to_string(),
        Err(e) => format!("not found: {e}"),
    };
    let v = format!(
        "{}\ncommit: {}\nharness: {} ({})\nharness module: {}\npython: {}",
        env!("CARGO_PKG_VERSION"),
        commit(),
        kernelgate_eval::HARNESS_PACKAGE,
        harness_abi(),
        harness,
        kernelgate_eval::find_python(std::path::Path::new(".")).display(),
    );
    Box::leak(v.into_boxed_str())
}

#[derive(Debug, Parser)]
#[command(name = "kernelgate", about = "Merge gate for GPU-kernel pull requests")]
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
    /// The performance history of the default branch: append a run, list, find drift, export.
    History(cmd::history::Args),
    /// Write the history's static dashboard (GitHub Pages ready) into a directory.
    Dashboard(cmd::dashboard::Args),
    /// Precompile torch's extension header for this runner's C++ builds (once per torch).
    Pch(cmd::pch::Args),
}

/// `--format` of the listing commands (`problems`, `kernels`, `eval`). One vocabulary with
/// `lint` (`human|json|sarif|github`): `human` for people, `json` for tools; `table`, the old
/// name, is accepted as an alias of `human`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Aligned text for people (alias: `table`).
    #[value(alias = "table")]
    Human,
    /// One JSON document on stdout.
    Json,
}

/// `--device` of `eval`, `pr` and `baseline`: where kernels run (default: `[defaults] device`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DeviceArg {
    /// CUDA when a GPU and its driver are present, else the CPU.
    Auto,
    Cuda,
    Cpu,
}

impl From<DeviceArg> for kernelgate_model::Device {
    fn from(d: DeviceArg) -> Self {
        match d {
            DeviceArg::Auto => kernelgate_model::Device::Auto,
            DeviceArg::Cuda => kernelgate_model::Device::Cuda,
            DeviceArg::Cpu => kernelgate_model::Device::Cpu,
        }
    }
}

/// The evaluation options shared by `eval`, `pr` and `baseline` (flattened into each), so the
/// flags that messages tell users to raise exist wherever kernels run. Each overrides its
/// `kernelgate.toml` key for this run.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct EvalOptions {
    /// Correctness trials per kernel (default: `[harness] trials`, 5).
    #[arg(long, value_name = "N")]
    pub trials: Option<u32>,
    /// Seconds allowed for importing (compiling) a kernel (default: `[harness] compile_timeout_s`).
    #[arg(long, value_name = "SECONDS")]
    pub compile_timeout: Option<u64>,
    /// Seconds allowed for everything after the import (default: `[harness] run_timeout_s`).
    #[arg(long, value_name = "SECONDS")]
    pub run_timeout: Option<u64>,
    /// fp32, fp16 or bf16 for kernels whose directive or mapping names none (tolerance 1e-4 or
    /// 1e-2, as KernelBench; default: `[defaults] precision`).
    #[arg(long, value_parser = parse_precision)]
    pub precision: Option<Precision>,
    /// Regression threshold in percent: slower than the base by more than this (and
    /// significantly) is a regression (default: `[timing] threshold_pct`, 2).
    #[arg(long, value_name = "PERCENT")]
    pub threshold: Option<f64>,
}

fn parse_precision(s: &str) -> Result<Precision, String> {
    s.parse()
}

impl EvalOptions {
    /// Writes the given options over the configuration.
    pub fn apply(&self, cfg: &mut Config) -> anyhow::Result<()> {
        if let Some(t) = self.trials {
            if t == 0 {
                anyhow::bail!("--trials must be at least 1");
            }
            cfg.harness.trials = t;
        }
        if let Some(s) = self.compile_timeout {
            if s == 0 {
                anyhow::bail!("--compile-timeout must be at least 1 second");
            }
            cfg.harness.compile_timeout_s = s;
        }
        if let Some(s) = self.run_timeout {
            if s == 0 {
                anyhow::bail!("--run-timeout must be at least 1 second");
            }
            cfg.harness.run_timeout_s = s;
        }
        if let Some(p) = self.precision {
            cfg.defaults.precision = p;
        }
        if let Some(t) = self.threshold {
            if !t.is_finite() || t < 0.0 {
                anyhow::bail!("--threshold {t}: give a percentage of 0 or more (2 means 2%)");
            }
            cfg.timing.threshold_pct = t;
        }
        Ok(())
    }
}

/// `--store` of `history` and `dashboard`: the store they read (`$KERNELGATE_HISTORY`, else
/// `[history] store` below the repository).
#[derive(Debug, Clone, clap::Args)]
pub struct StoreArg {
    /// History store directory (JSON Lines, one file per hardware key).
    #[arg(long, env = "KERNELGATE_HISTORY", value_name = "DIR")]
    pub store: Option<PathBuf>,
}

impl StoreArg {
    pub fn options(&self, cli: &Cli) -> kernelgate::ops::history::StoreOptions {
        kernelgate::ops::history::StoreOptions {
            dir: self.store.clone(),
            config: cli.config.clone(),
        }
    }
}

/// Which history records `history` and `history drift` look at.
#[derive(Debug, Clone, clap::Args)]
pub struct FilterArgs {
    /// Only this kernel (its path, or part of it).
    #[arg(long)]
    pub kernel: Option<String>,
    /// Only this problem (`19_ReLU`, `level1/19_ReLU.py`).
    #[arg(long)]
    pub problem: Option<String>,
    /// Only commits dated at or after this (`2026-11-01` or RFC 3339).
    #[arg(long)]
    pub since: Option<String>,
    /// Only this hardware (`H200`, `NVIDIA_H200 fp32`).
    #[arg(long)]
    pub hardware: Option<String>,
}

impl FilterArgs {
    pub fn filter(&self) -> kernelgate_history::Filter {
        kernelgate_history::Filter {
            kernel: self.kernel.clone(),
            problem: self.problem.clone(),
            since: self.since.clone(),
            hardware: self.hardware.clone(),
        }
    }
}

/// The drift rule's knobs of `history drift` and `dashboard` (defaults: docs/history.md).
#[derive(Debug, Clone, clap::Args)]
pub struct RuleArgs {
    /// Commits the change-point test looks back over.
    #[arg(long, default_value_t = DriftRule::default().window)]
    pub window: usize,
    /// Smallest change of the median that is reported, in percent.
    #[arg(long, value_name = "PERCENT", default_value_t = DriftRule::default().min_change_pct)]
    pub min_change: f64,
    /// Commits needed on each side of a change.
    #[arg(long, default_value_t = DriftRule::default().min_segment)]
    pub min_commits: usize,
}

impl RuleArgs {
    pub fn options(&self) -> kernelgate::ops::history::RuleOptions {
        kernelgate::ops::history::RuleOptions {
            window: self.window,
            min_commits: self.min_commits,
            min_change_pct: self.min_change,
        }
    }
}

/// `--publish`: where the report goes ([`kernelgate::pr::gate::Publish`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PublishArg {
    /// GitHub when a token and a pull request are known, else files.
    Auto,
    Github,
    Files,
    None,
}

impl From<PublishArg> for kernelgate::pr::gate::Publish {
    fn from(p: PublishArg) -> Self {
        use kernelgate::pr::gate::Publish;
        match p {
            PublishArg::Auto => Publish::Auto,
            PublishArg::Github => Publish::Github,
            PublishArg::Files => Publish::Files,
            PublishArg::None => Publish::None,
        }
    }
}
