use crate::cli::Cli;

#[derive(Debug, clap::Args)]
pub struct Args {}

pub fn run(_cli: &Cli, _args: &Args) -> anyhow::Result<i32> {
    anyhow::bail!("not implemented yet")
}
