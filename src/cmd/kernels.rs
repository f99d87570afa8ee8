//! `kernelgate kernels`: every candidate kernel with its problem, backend and precision.

use crate::cli::Cli;
use anyhow::Context;
use kernelgate_model::{discover, Config};

pub use crate::cli::Format;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// human (alias: table) or json.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<i32> {
    let cfg = Config::load(&cli.repo, cli.config.as_deref())?;
    let spec = cfg.dataset_spec(&cli.repo);
    let problems = spec
        .load()
        .with_context(|| format!("loading problems from {spec}"))?;
    let (kernels, errors) = discover(&cli.repo, &cfg, &problems);
    match args.format {
        Format::Json => {
            let errors: Vec<_> = errors
                .iter()
                .map(|e| {
                    serde_json::json!({
                        "path": e.path(),
                        "line": e.line(),
                        "message": e.to_string(),
                    })
                })
                .collect();
            println!(
                "{}",
                serde_json::to_string_pretty(&serde_json::json!({
                    "kernels": kernels,
                    "errors": errors,
                }))?
            );
        }
        Format::Human => {
            let rows: Vec<Vec<String>> = kernels
                .iter()
                .map(|k| {
                    vec![
                        k.path.display().to_string(),
                        k.problem_key.clone(),
                        k.backend.to_string(),
                        k.precision.to_string(),
                        k.mapped_by.to_string(),
                    ]
                })
                .collect();
            super::problems::print_table(
                &["KERNEL", "PROBLEM", "BACKEND", "PRECISION", "MAPPED BY"],
                rows.iter().map(Vec::as_slice),
            );
            println!(
                "\n{} kernel{}, {} error{}",
                kernels.len(),
                if kernels.len() == 1 { "" } else { "s" },
                errors.len(),
                if errors.len() == 1 { "" } else { "s" }
            );
        }
    }
    for e in &errors {
        eprintln!("error: {e}");
    }
    Ok(if errors.is_empty() { 0 } else { 1 })
}
