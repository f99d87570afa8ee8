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
    /// With --check: seconds allowed to load one problem.
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
    let warnings = &list.warnings;
    match args.format {
        Format::Json => {
            let rows: Vec<serde_json::Value> = list
                .problems
                .iter()
                .map(|p| {
                    let mut v = serde_json::to_value(p).unwrap_or_default();
                    if let Some(obj) = v.as_object_mut() {
                        obj.insert("warnings".into(), warnings[&p.key].clone().into());
                        if let Some(checks) = &list.checks {
                            obj.insert("check".into(), checks.by_key[&p.key].to_json());
                        }
                    }
                    v
                })
                .collect();
            println!("{}", serde_json::to_string_pretty(&rows)?);
        }
        Format::Human => {
            let rows: Vec<Vec<String>> = list
                .problems
                .iter()
                .map(|p| match &list.checks {
                    Some(checks) => {
                        let c = &checks.by_key[&p.key];
                        vec![
                            p.key.clone(),
                            if c.ok { "ok" } else { "error" }.to_string(),
                            c.detail(),
                        ]
                    }
                    None => vec![
                        p.key.clone(),
                        p.sha256[..12].to_string(),
                        p.md5.clone(),
                        p.path.display().to_string(),
                        warnings[&p.key].join("; "),
                    ],
                })
                .collect();
            if list.checks.is_some() {
                print_table(
                    &["PROBLEM", "CHECK", "DETAIL"],
                    rows.iter().map(Vec::as_slice),
                );
            } else {
                let any_warning = warnings.values().any(|w| !w.is_empty());
                let header = ["PROBLEM", "SHA256", "MD5 (KernelBench)", "PATH", "WARNING"];
                let n = if any_warning { 5 } else { 4 };
                print_table(&header[..n], rows.iter().map(|r| &r[..n]));
            }
            let n = list.problems.len();
            println!(
                "\n{n} problem{} from {} ({})",
                if n == 1 { "" } else { "s" },
                list.origin,
                list.per_level()
            );
        }
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
