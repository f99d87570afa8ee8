//! One module per subcommand. Each returns the process exit code.

use crate::cli::{Cli, Command};

pub mod eval;
pub mod kernels;
pub mod pr;
pub mod problems;

pub fn run(cli: Cli) -> anyhow::Result<i32> {
    match &cli.command {
        Command::Problems(args) => problems::run(&cli, args),
        Command::Kernels(args) => kernels::run(&cli, args),
        Command::Eval(args) => eval::run(&cli, args),
        Command::Pr(args) => pr::run(&cli, args),
    }
}
