//! kernelgate: the merge gate for GPU-kernel pull requests.

use clap::Parser;

mod cli;
mod cmd;

fn main() {
    let cli = cli::Cli::parse();
    let code = match cmd::run(cli) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            2
        }
    };
    std::process::exit(code);
}
