//! `kernelgate lint` as a library operation: which files to lint and with what each file's
//! mapping gives it (precision, backend, its problem's source), then the findings. The command
//! parses flags into [`RepoLintOptions`] and formats the [`LintRun`].

use kernelgate_lint::{lint_path, output, Backend, Finding, LintOptions, Precision, Severity};
use kernelgate_model::{discover, Config, Kernel, ProblemSet};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Why the lint could not run, with what to do.
#[derive(Debug, thiserror::Error)]
pub enum RepoLintError {
    /// The configuration's fault (an unknown rule code), said against its file.
    #[error("{config}: {error}")]
    Config {
        config: String,
        error: kernelgate_lint::LintError,
    },
    #[error("{}: no such file or directory", path.display())]
    NotFound { path: PathBuf },
    #[error("cannot list {}", dir.display())]
    List {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// What to lint (the flags of `kernelgate lint`).
#[derive(Debug, Clone, Default)]
pub struct RepoLintOptions {
    /// Files or directories; empty: every kernel of the repository.
    pub paths: Vec<PathBuf>,
    /// For files with no problem mapping (default: `fp32`).
    pub precision: Option<Precision>,
    /// For files with no problem mapping (default: inferred from the file).
    pub backend: Option<Backend>,
}

/// The findings of one lint run, with the files linted and their sources for excerpts.
#[derive(Debug, Default)]
pub struct LintRun {
    pub findings: Vec<Finding>,
    /// Every file linted, as shown (relative to the repository where it was found by walking).
    pub files: Vec<String>,
    sources: BTreeMap<String, String>,
}

impl LintRun {
    /// The source of a linted file (none when it could not be read).
    pub fn source(&self, file: &str) -> Option<&str> {
        self.sources.get(file).map(String::as_str)
    }

    pub fn summary(&self) -> output::Summary {
        output::Summary::of(&self.findings, self.files.len())
    }

    pub fn has_errors(&self) -> bool {
        self.findings.iter().any(|f| f.severity == Severity::Error)
    }

    /// SARIF with every rule and its documentation in the driver.
    pub fn sarif(&self) -> serde_json::Value {
        kernelgate_report::findings_to_sarif(&self.findings, &self.files, &sarif_rules())
    }
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

/// Lints what `opts` names in `repo`, whose `kernelgate.toml` is `config`.
pub fn lint(
    repo: &Path,
    config: &Config,
    opts: &RepoLintOptions,
) -> Result<LintRun, RepoLintError> {
    let overrides = kernelgate_lint::severity_overrides(&config.lint);
    let mut run = LintRun::default();
    for t in targets(repo, config, opts)? {
        let lint_opts = LintOptions {
            precision: t.precision,
            backend: t.backend,
            severity_overrides: overrides.clone(),
            problem_source: t.problem_source,
            // The files a kernel loads are read inside the repository.
            root: Some(repo.to_path_buf()),
            ..LintOptions::default()
        };
        // An unreadable or non-UTF-8 file is one KG000 finding on its own row; an error here is
        // the configuration's (an unknown rule code).
        let (mut found, source) =
            lint_path(&t.shown, &t.path, &lint_opts).map_err(|error| RepoLintError::Config {
                config: config
                    .path
                    .as_ref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_else(|| "kernelgate.toml".into()),
                error,
            })?;
        // Findings in a file the kernel loads (`relu.cu`) quote that file.
        for f in &found {
            if f.file != t.shown && !run.sources.contains_key(&f.file) {
                let text = [Path::new(&f.file).to_path_buf(), repo.join(&f.file)]
                    .iter()
                    .find_map(|p| std::fs::read_to_string(p).ok());
                if let Some(text) = text {
                    run.sources.insert(f.file.clone(), text);
                }
            }
        }
        run.findings.append(&mut found);
        if let Some(source) = source {
            run.sources.insert(t.shown.clone(), source);
        }
        run.files.push(t.shown);
    }
    Ok(run)
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

fn targets(
    repo: &Path,
    cfg: &Config,
    opts: &RepoLintOptions,
) -> Result<Vec<Target>, RepoLintError> {
    let unmapped = |path: PathBuf, shown: String| Target {
        path,
        shown,
        precision: opts.precision.unwrap_or_default(),
        backend: opts.backend,
        problem_source: None,
    };
    // Problems let a kernel's mapping give its precision and backend; without them, flags decide.
    let problems = cfg.dataset_spec(repo).load().ok();
    if opts.paths.is_empty() {
        if let Some(problems) = &problems {
            let (kernels, errors) = discover(repo, cfg, problems);
            if !kernels.is_empty() || !errors.is_empty() {
                let mut out: Vec<Target> = kernels
                    .into_iter()
                    .map(|k| mapped(repo, k, problems))
                    .collect();
                // A kernel whose mapping is broken is still linted, with the flags' defaults
                // (`kernelgate kernels` reports the mapping error itself).
                for e in errors {
                    let full = repo.join(e.path());
                    if full.is_file() {
                        out.push(unmapped(full, e.path().display().to_string()));
                    }
                }
                out.sort_by(|a, b| a.shown.cmp(&b.shown));
                return Ok(out);
            }
        }
        let mut files = Vec::new();
        walk(&repo.join("kernels"), &mut files)?;
        return Ok(files
            .into_iter()
            .map(|p| {
                let shown = p.strip_prefix(repo).unwrap_or(&p).display().to_string();
                unmapped(p, shown)
            })
            .collect());
    }
    let mut out = Vec::new();
    for p in &opts.paths {
        let full = if p.is_absolute() || p.exists() {
            p.clone()
        } else {
            repo.join(p)
        };
        if !full.exists() {
            return Err(RepoLintError::NotFound { path: p.clone() });
        }
        let mut files = Vec::new();
        if full.is_dir() {
            walk(&full, &mut files)?;
        } else {
            files.push(full);
        }
        for f in files {
            let kernel = problems
                .as_ref()
                .and_then(|ps| Some((Kernel::resolve_one(repo, &f, cfg, ps).ok()?, ps)));
            out.push(match kernel {
                Some((k, ps)) => Target {
                    shown: f.display().to_string(),
                    path: f,
                    ..mapped(repo, k, ps)
                },
                None => unmapped(f.clone(), f.display().to_string()),
            });
        }
    }
    Ok(out)
}

/// A kernel with a resolved mapping, shown as the mapping names it.
fn mapped(repo: &Path, k: Kernel, problems: &ProblemSet) -> Target {
    Target {
        shown: k.path.display().to_string(),
        // `Path::join` keeps an absolute path as it is.
        path: repo.join(&k.path),
        precision: k.precision,
        backend: Some(k.backend),
        problem_source: problems.get(&k.problem_key).map(|p| p.source.clone()),
    }
}

/// Every `.py` file below `dir`, sorted, skipping hidden directories, caches and `target/`.
fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), RepoLintError> {
    if !dir.is_dir() {
        return Ok(());
    }
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(|source| RepoLintError::List {
            dir: dir.to_path_buf(),
            source,
        })?
        .flatten()
        .map(|e| e.path())
        .collect();
    entries.sort();
    for p in entries {
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if p.is_dir() {
            let skipped =
                name.starts_with('.') || matches!(name, "__pycache__" | "target" | "node_modules");
            if !skipped {
                walk(&p, out)?;
            }
        } else if name.ends_with(".py") {
            out.push(p);
        }
    }
    Ok(())
}
