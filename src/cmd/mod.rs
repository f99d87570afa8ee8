//! One module per subcommand. Each returns the process exit code.

use crate::cli::{Cli, Command};

pub mod baseline;
pub mod dashboard;
pub mod eval;
pub mod history;
pub mod kernels;
pub mod lint;
pub mod merge;
pub mod pch;
pub mod pr;
pub mod problems;
pub mod publish;
pub mod rule;

pub fn run(cli: Cli) -> anyhow::Result<i32> {
    match &cli.command {
        Command::Problems(args) => problems::run(&cli, args),
        Command::Kernels(args) => kernels::run(&cli, args),
        Command::Lint(args) => lint::run(&cli, args),
        Command::Rule(args) => rule::run(&cli, args),
        Command::Baseline(args) => baseline::run(&cli, args),
        Command::Eval(args) => eval::run(&cli, args),
        Command::Pr(args) => pr::run(&cli, args),
        Command::Publish(args) => publish::run(&cli, args),
        Command::Merge(args) => merge::run(&cli, args),
        Command::History(args) => history::run(&cli, args),
        Command::Dashboard(args) => dashboard::run(&cli, args),
        Command::Pch(args) => pch::run(&cli, args),
    }
}
