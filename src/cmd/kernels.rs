//! `kernelgate kernels`: every candidate kernel with its problem, backend and precision; with
//! `--changed BASE`, the kernels a pull request re-evaluates and why.

use crate::cli::Cli;
use kernelgate::ops::kernels::{changed, kernels};
use kernelgate_model::Config;

pub use crate::cli::Format;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// human (alias: table) or json.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
    /// Only the kernels that `kernelgate pr` would evaluate for the changes from the merge base
    /// with BASE to `--head`: a changed `.py`, a changed file it is built from (a `.cu` it
    /// loads, a header it includes, anywhere in the repository) or a changed problem. The JSON
    /// says whether the gate has anything to judge (`"gate"`).
    #[arg(long, value_name = "BASE")]
    pub changed: Option<String>,
    /// The head commit for `--changed` (default: `HEAD`).
    #[arg(long, value_name = "REV", requires = "changed")]
    pub head: Option<String>,
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<i32> {
    let cfg = Config::load(&cli.repo, cli.config.as_deref())?;
    // `--changed`: exit 0 whatever the set holds (a kernel that cannot be mapped is the gate's
    // to report).
    if let Some(base) = &args.changed {
        let head = args.head.as_deref().unwrap_or("HEAD");
        let changes = changed(&cli.repo, &cfg, base, head)?;
        match args.format {
            Format::Json => println!("{}", serde_json::to_string_pretty(&changes.to_json())?),
            Format::Human => print!("{changes}"),
        }
        return Ok(0);
    }
    let list = kernels(&cli.repo, &cfg)?;
    match args.format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&list.to_json())?),
        Format::Human => print!("{list}"),
    }
    for e in &list.errors {
        eprintln!("error: {e}");
    }
    Ok(if list.errors.is_empty() { 0 } else { 1 })
}
