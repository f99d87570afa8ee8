//! `kernelgate problems`: the problems of the dataset with their identity hashes.

use crate::cli::Cli;
use anyhow::Context;
use kernelgate_model::{Config, DatasetSpec};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Table,
    Json,
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Only this level.
    #[arg(long)]
    pub level: Option<u32>,
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Dataset instead of `[dataset]` in kernelgate.toml: a directory, `hf:<owner>/<name>`,
    /// a `.parquet` or a `.jsonl` file.
    #[arg(long, value_name = "SPEC")]
    pub dataset: Option<String>,
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<i32> {
    let cfg = Config::load(&cli.repo, cli.config.as_deref())?;
    let spec = match &args.dataset {
        Some(s) => DatasetSpec::parse(s).map_err(|e| anyhow::anyhow!("--dataset: {e}"))?,
        None => cfg.dataset_spec(&cli.repo),
    };
    let set = spec
        .load()
        .with_context(|| format!("loading problems from {spec}"))?;
    let problems: Vec<_> = set
        .iter()
        .filter(|p| args.level.is_none_or(|l| p.level == l))
        .collect();
    match args.format {
        Format::Json => {
            println!("{}", serde_json::to_string_pretty(&problems)?);
        }
        Format::Table => {
            let rows: Vec<[String; 5]> = problems
                .iter()
                .map(|p| {
                    [
                        p.key.clone(),
                        p.sha256[..12].to_string(),
                        p.md5.clone(),
                        p.path.display().to_string(),
                        String::new(),
                    ]
                })
                .collect();
            let header = ["PROBLEM", "SHA256", "MD5 (KernelBench)", "PATH", ""];
            print_table(&header[..4], rows.iter().map(|r| &r[..4]));
            let mut levels: Vec<(u32, usize)> = Vec::new();
            for p in &problems {
                match levels.last_mut() {
                    Some((l, n)) if *l == p.level => *n += 1,
                    _ => levels.push((p.level, 1)),
                }
            }
            let per_level: Vec<String> = levels
                .iter()
                .map(|(l, n)| format!("level{l}: {n}"))
                .collect();
            println!(
                "\n{} problem{} from {} ({})",
                problems.len(),
                if problems.len() == 1 { "" } else { "s" },
                set.origin,
                per_level.join(", ")
            );
        }
    }
    if problems.is_empty() {
        eprintln!(
            "warning: no problems{}",
            args.level
                .map(|l| format!(" at level {l}"))
                .unwrap_or_default()
        );
    }
    Ok(0)
}

/// Left-aligned columns separated by two spaces.
pub(crate) fn print_table<'a>(header: &[&str], rows: impl Iterator<Item = &'a [String]> + Clone) {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows.clone() {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let mut out = String::new();
        for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
            if i + 1 == cells.len() {
                out.push_str(cell);
            } else {
                out.push_str(&format!("{cell:<w$}  "));
            }
        }
        println!("{}", out.trim_end());
    };
    line(header.to_vec());
    for row in rows {
        line(row.iter().map(String::as_str).collect());
    }
}
