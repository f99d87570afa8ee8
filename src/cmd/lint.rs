//! `kernelgate lint`: the static reward-hack checker over candidate kernels.

use crate::cli::Cli;
use anyhow::Context;
use kernelgate_lint::{lint_path, output, Backend, Finding, LintOptions, Precision, Severity};
use kernelgate_model::{discover, Config, Kernel, ProblemSet};
use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

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

/// One file to lint with the options its mapping gives it.
struct Target {
    path: PathBuf,
    shown: String,
    precision: Precision,
    backend: Option<Backend>,
    /// The mapped problem's source: its `get_init_inputs()` decides dead branches.
    problem_source: Option<String>,
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<i32> {
    let cfg = Config::load(&cli.repo, cli.config.as_deref())?;
    let overrides = kernelgate::pr::adapters::severity_overrides(&cfg);
    let targets = targets(cli, args, &cfg)?;
    let mut findings: Vec<Finding> = Vec::new();
    let mut sources: BTreeMap<String, String> = BTreeMap::new();
    let mut files = Vec::new();
    for t in &targets {
        let opts = LintOptions {
            precision: t.precision,
            backend: t.backend,
            severity_overrides: overrides.clone(),
            problem_source: t.problem_source.clone(),
        };
        // An unreadable or non-UTF-8 file is one KG000 finding on its own row.
        let (mut found, source) = lint_path(&t.shown, &t.path, &opts).map_err(|e| {
            let at = cfg
                .path
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_else(|| "kernelgate.toml".into());
            anyhow::anyhow!("{at}: {e}")
        })?;
        findings.append(&mut found);
        files.push(t.shown.clone());
        if let Some(source) = source {
            sources.insert(t.shown.clone(), source);
        }
    }
    let summary = output::Summary::of(&findings, files.len());
    let text = match args.format {
        Format::Human => {
            let color = args.output.is_none()
                && std::io::stdout().is_terminal()
                && std::env::var_os("NO_COLOR").is_none();
            let mut s = output::human(&findings, |f| sources.get(f).map(String::as_str), color);
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
        Format::Json => serde_json::to_string_pretty(&output::json(&findings, &files))? + "\n",
        Format::Sarif => {
            let sarif = kernelgate_report::findings_to_sarif(&findings, &files, &sarif_rules());
            serde_json::to_string_pretty(&sarif)? + "\n"
        }
        Format::Github => output::github(&findings),
    };
    match &args.output {
        Some(p) => {
            std::fs::write(p, text).with_context(|| format!("cannot write {}", p.display()))?
        }
        None => print!("{text}"),
    }
    Ok(if findings.iter().any(|f| f.severity == Severity::Error) {
        1
    } else {
        0
    })
}

/// Every lint rule, with its documentation, as the SARIF driver lists it.
fn sarif_rules() -> Vec<kernelgate_report::sarif::SarifRule> {
    use kernelgate_report::sarif::{RuleDoc, SarifRule};
    kernelgate_lint::rules()
        .iter()
        .map(|r| SarifRule {
            id: r.code.to_string(),
            name: r.name.to_string(),
            summary: r.summary.to_string(),
            doc: Some(RuleDoc {
                description: r.doc.to_string(),
                help_text: format!("{}\n\nBad:\n{}\n\nGood:\n{}", r.doc, r.bad, r.good),
                help_markdown: format!(
                    "{}\n\nBad:\n```python\n{}\n```\n\nGood:\n```python\n{}\n```",
                    r.doc, r.bad, r.good
                ),
            }),
            level: r.severity,
        })
        .collect()
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

fn targets(cli: &Cli, args: &Args, cfg: &Config) -> anyhow::Result<Vec<Target>> {
    let default_precision = args.precision.unwrap_or_default();
    // Problems let a kernel's mapping give its precision and backend; without them, flags decide.
    let problems = cfg.dataset_spec(&cli.repo).load().ok();
    if args.paths.is_empty() {
        if let Some(problems) = &problems {
            let (kernels, errors) = discover(&cli.repo, cfg, problems);
            if !kernels.is_empty() || !errors.is_empty() {
                let mut out: Vec<Target> = kernels
                    .into_iter()
                    .map(|k| from_kernel(&cli.repo, k, problems))
                    .collect();
                // A kernel whose mapping is broken is still linted, with the flags' defaults
                // (`kernelgate kernels` reports the mapping error itself).
                for e in errors {
                    let full = if e.path().is_absolute() {
                        e.path().to_path_buf()
                    } else {
                        cli.repo.join(e.path())
                    };
                    if full.is_file() {
                        out.push(Target {
                            shown: e.path().display().to_string(),
                            path: full,
                            precision: default_precision,
                            backend: args.backend,
                            problem_source: None,
                        });
                    }
                }
                out.sort_by(|a, b| a.shown.cmp(&b.shown));
                return Ok(out);
            }
        }
        let mut files = Vec::new();
        walk(&cli.repo.join("kernels"), &mut files)?;
        return Ok(files
            .into_iter()
            .map(|p| Target {
                shown: shown(&cli.repo, &p),
                path: p,
                precision: default_precision,
                backend: args.backend,
                problem_source: None,
            })
            .collect());
    }
    let mut out = Vec::new();
    for p in &args.paths {
        let full = if p.is_absolute() || p.exists() {
            p.clone()
        } else {
            cli.repo.join(p)
        };
        if !full.exists() {
            anyhow::bail!("{}: no such file or directory", p.display());
        }
        let mut files = Vec::new();
        if full.is_dir() {
            walk(&full, &mut files)?;
        } else {
            files.push(full);
        }
        for f in files {
            let mapped = problems
                .as_ref()
                .and_then(|ps| Kernel::resolve_one(&cli.repo, &f, cfg, ps).ok());
            out.push(match mapped {
                Some(k) => Target {
                    path: f.clone(),
                    shown: f.display().to_string(),
                    precision: k.precision,
                    backend: Some(k.backend),
                    problem_source: problems
                        .as_ref()
                        .and_then(|ps| ps.get(&k.problem_key))
                        .map(|p| p.source.clone()),
                },
                None => Target {
                    shown: f.display().to_string(),
                    path: f,
                    precision: default_precision,
                    backend: args.backend,
                    problem_source: None,
                },
            });
        }
    }
    Ok(out)
}

fn from_kernel(repo: &Path, k: Kernel, problems: &ProblemSet) -> Target {
    let full = if k.path.is_absolute() {
        k.path.clone()
    } else {
        repo.join(&k.path)
    };
    Target {
        shown: k.path.display().to_string(),
        path: full,
        precision: k.precision,
        backend: Some(k.backend),
        problem_source: problems.get(&k.problem_key).map(|p| p.source.clone()),
    }
}

fn shown(repo: &Path, p: &Path) -> String {
    p.strip_prefix(repo).unwrap_or(p).display().to_string()
}

/// Every `.py` file below `dir`, sorted, skipping hidden directories, caches and `target/`.
fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    if !dir.is_dir() {
        return Ok(());
    }
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot list {}", dir.display()))?
        .flatten()
        .map(|e| e.path())
        .collect();
    entries.sort();
    for p in entries {
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if p.is_dir() {
            if !name.starts_with('.')
                && name != "__pycache__"
                && name != "target"
                && name != "node_modules"
            {
                walk(&p, out)?;
            }
        } else if name.ends_with(".py") {
            out.push(p);
        }
    }
    Ok(())
}
