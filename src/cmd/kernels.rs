//! `kernelgate kernels`: every candidate kernel with its problem, backend and precision; with
//! `--changed BASE`, the kernels a pull request re-evaluates and why.

use crate::cli::Cli;
use anyhow::Context;
use kernelgate::git::Git;
use kernelgate::pr::changes::{self, ChangeSet};
use kernelgate::pr::layout::Layout;
use kernelgate_model::{discover, Config};

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
    if let Some(base) = &args.changed {
        return changed(
            cli,
            &cfg,
            base,
            args.head.as_deref().unwrap_or("HEAD"),
            args.format,
        );
    }
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

/// `--changed BASE`: the change set `kernelgate pr` plans from, as a list. Exit 0 whatever it
/// holds (a kernel that cannot be mapped is the gate's to report); an unusable BASE or HEAD is
/// an error.
fn changed(cli: &Cli, cfg: &Config, base: &str, head: &str, format: Format) -> anyhow::Result<i32> {
    let git = Git::open(&cli.repo)?;
    let layout = Layout::from_config(cfg);
    let cs = changes::detect(&git, &layout, base, head, false)?;
    match format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&changed_json(&cs))?),
        Format::Human => {
            let rows: Vec<Vec<String>> = cs
                .kernels
                .iter()
                .map(|k| {
                    vec![
                        k.path.clone(),
                        k.status.as_str().to_string(),
                        k.changed_sources.join(", "),
                    ]
                })
                .collect();
            super::problems::print_table(
                &["KERNEL", "STATUS", "VIA"],
                rows.iter().map(Vec::as_slice),
            );
            println!(
                "\n{} kernel{} to evaluate; the gate {}",
                cs.kernels.len(),
                if cs.kernels.len() == 1 { "" } else { "s" },
                if cs.needs_gate() {
                    "has something to judge"
                } else {
                    "has nothing to judge (no kernel, source, problem, config or result changed)"
                }
            );
            for k in &cs.kernels {
                for why in k.sources.reasons() {
                    println!("note: {why}");
                }
            }
        }
    }
    Ok(0)
}

/// The JSON of `kernels --changed`.
pub fn changed_json(cs: &ChangeSet) -> serde_json::Value {
    let kernels: Vec<_> = cs
        .kernels
        .iter()
        .map(|k| {
            serde_json::json!({
                "path": k.path, "problem": k.problem, "status": k.status,
                "base_path": k.base_path, "changed_sources": k.changed_sources,
                "sources": k.sources.files, "unresolved_sources": k.sources.reasons(),
                "mapping_error": k.mapping_error,
            })
        })
        .collect();
    let references: Vec<&str> = cs.references.iter().map(|r| r.path.as_str()).collect();
    serde_json::json!({
        "base": cs.base, "head": cs.head, "merge_base": cs.merge_base,
        "kernels": kernels, "deleted_kernels": cs.deleted_kernels,
        "reference_changes": references, "config_changed": cs.config_changed,
        "results_changed": cs.results, "gate": cs.needs_gate(),
    })
}
