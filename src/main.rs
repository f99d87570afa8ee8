//! kernelgate: the merge gate for GPU-kernel pull requests.

use clap::{CommandFactory, FromArgMatches};

mod cli;
mod cmd;

// The linter allocates a node per token; mimalloc makes `kernelgate lint` about a tenth faster
// than glibc's malloc (crates/lint/benches/lint_throughput.rs uses it too).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    // Before anything else runs: the token in our environment is out of reach of other
    // processes of this user (candidates included).
    kernelgate_eval::sandbox::make_this_process_undumpable();
    let mut command = cli::Cli::command().version(cli::short_version());
    // The long form looks for the harness (it may ask Python): only when it is asked for.
    if std::env::args_os().any(|a| a == "--version") {
        command = command.long_version(cli::long_version());
    }
    let cli = cli::Cli::from_arg_matches(&command.get_matches()).unwrap_or_else(|e| e.exit());
    let code = match cmd::run(cli) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            2
        }
    };
    std::process::exit(code);
}
