//! `kernelgate problems`: the problems of the dataset with their identity hashes.

use crate::cli::Cli;
use kernelgate::ops::problems::{pip_name, problems, ProblemsOptions};
use kernelgate_model::Config;
use std::time::Duration;

pub use crate::cli::Format;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Only this level.
    #[arg(long)]
    pub level: Option<u32>,
    /// human (alias: table) or json.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
    /// Dataset instead of `[dataset]` in kernelgate.toml: a directory, `hf:<owner>/<name>`,
    /// a `.parquet` or a `.jsonl` file.
    #[arg(long, value_name = "SPEC")]
    pub dataset: Option<String>,
    /// Load each problem in the harness's Python on the CPU (import, `Model(*get_init_inputs())`,
    /// `get_inputs()` shapes); name missing packages; exit 1 if any problem fails.
    #[arg(long)]
    pub check: bool,
    /// With --check: seconds allowed to load one problem (counted once torch is imported).
    #[arg(long, default_value_t = 120, value_name = "SECONDS")]
    pub check_timeout: u64,
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<i32> {
    let cfg = Config::load(&cli.repo, cli.config.as_deref())?;
    let opts = ProblemsOptions {
        dataset: args.dataset.clone(),
        level: args.level,
        check: args.check.then(|| Duration::from_secs(args.check_timeout)),
    };
    let human = args.format == Format::Human;
    let list = problems(&cli.repo, &cfg, &opts, |python, n| {
        if human {
            eprintln!(
                "checking {n} problem(s) with {} on the CPU...",
                python.display()
            );
        }
    })?;
    match args.format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&list.to_json())?),
        Format::Human => print!("{list}"),
    }
    if list.problems.is_empty() {
        eprintln!(
            "warning: no problems{}",
            args.level
                .map(|l| format!(" at level {l}"))
                .unwrap_or_default()
        );
    }
    let broken = list.broken();
    if let Some(checks) = &list.checks {
        let missing = checks.missing_modules();
        if !missing.is_empty() {
            let pkgs: Vec<&str> = missing.iter().map(|m| pip_name(m)).collect();
            eprintln!(
                "missing Python package(s) {}: pip install {}  (for this interpreter: {} -m pip install {})",
                missing.join(", "),
                pkgs.join(" "),
                checks.python.display(),
                pkgs.join(" ")
            );
        }
        let failed = checks.failed().count();
        if failed > 0 {
            eprintln!(
                "error: {failed} of {} problem(s) failed to load; see the DETAIL column",
                checks.by_key.len()
            );
            return Ok(1);
        }
        if human {
            eprintln!("all {} problem(s) load", checks.by_key.len());
        }
    } else if !broken.is_empty() {
        eprintln!(
            "warning: {} problem file(s) are not usable ({}); run `kernelgate problems --check`",
            broken.len(),
            broken.join(", ")
        );
    }
    Ok(0)
}
