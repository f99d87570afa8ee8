//! `kernelgate lint`: the static reward-hack checker over candidate kernels.

use crate::cli::Cli;
use anyhow::Context;
use kernelgate::ops::lint::{lint, RepoLintOptions};
use kernelgate_lint::{output, Backend, Precision};
use kernelgate_model::Config;
use std::io::IsTerminal;
use std::path::PathBuf;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Findings with source excerpts, for people (alias: `table`, as the other commands).
    #[value(alias = "table")]
    Human,
    Json,
    Sarif,
    Github,
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Files or directories to lint (default: every kernel of the repository).
    pub paths: Vec<PathBuf>,
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
    /// Precision for files with no problem mapping (fp32, fp16, bf16).
    #[arg(long)]
    pub precision: Option<Precision>,
    /// Backend for files with no problem mapping (default: inferred from the file).
    #[arg(long)]
    pub backend: Option<Backend>,
    /// Write the report here instead of stdout.
    #[arg(long, short)]
    pub output: Option<PathBuf>,
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<i32> {
    let cfg = Config::load(&cli.repo, cli.config.as_deref())?;
    let opts = RepoLintOptions {
        paths: args.paths.clone(),
        precision: args.precision,
        backend: args.backend,
    };
    let run = lint(&cli.repo, &cfg, &opts)?;
    let text = match args.format {
        Format::Human => {
            let color = args.output.is_none()
                && std::io::stdout().is_terminal()
                && std::env::var_os("NO_COLOR").is_none();
            let summary = run.summary();
            let mut s = output::human(&run.findings, |f| run.source(f), color);
            s.push_str(&format!(
                "{} file{} linted: {} error{}, {} warning{}\n",
                summary.files,
                plural(summary.files),
                summary.errors,
                plural(summary.errors),
                summary.warnings,
                plural(summary.warnings)
            ));
            s
        }
        Format::Json => {
            serde_json::to_string_pretty(&output::json(&run.findings, &run.files))? + "\n"
        }
        Format::Sarif => serde_json::to_string_pretty(&run.sarif())? + "\n",
        Format::Github => output::github(&run.findings),
    };
    match &args.output {
        Some(p) => {
            std::fs::write(p, text).with_context(|| format!("cannot write {}", p.display()))?
        }
        None => print!("{text}"),
    }
    Ok(i32::from(run.has_errors()))
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}
