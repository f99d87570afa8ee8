//! `kernelgate problems`: the problems of the dataset with their identity hashes.

use crate::cli::Cli;
use anyhow::Context;
use kernelgate_model::{Config, DatasetSpec, Problem};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
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
    let warnings: BTreeMap<&str, Vec<String>> = problems
        .iter()
        .map(|p| (p.key.as_str(), p.structure_warnings()))
        .collect();
    let checks = if args.check {
        let python = kernelgate_eval::runner_python(&cfg, &cli.repo);
        if args.format == Format::Human {
            eprintln!(
                "checking {} problem(s) with {} on the CPU...",
                problems.len(),
                python.display()
            );
        }
        Some((
            check(
                &python,
                &problems,
                &warnings,
                Duration::from_secs(args.check_timeout.max(1)),
            )?,
            python,
        ))
    } else {
        None
    };
    match args.format {
        Format::Json => {
            let rows: Vec<serde_json::Value> = problems
                .iter()
                .map(|p| {
                    let mut v = serde_json::to_value(p).unwrap_or_default();
                    if let Some(obj) = v.as_object_mut() {
                        obj.insert("warnings".into(), warnings[p.key.as_str()].clone().into());
                        if let Some((checks, _)) = &checks {
                            obj.insert("check".into(), checks[&p.key].to_json());
                        }
                    }
                    v
                })
                .collect();
            println!("{}", serde_json::to_string_pretty(&rows)?);
        }
        Format::Human => {
            let rows: Vec<Vec<String>> = problems
                .iter()
                .map(|p| match &checks {
                    Some((checks, _)) => {
                        let c = &checks[&p.key];
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
                        warnings[p.key.as_str()].join("; "),
                    ],
                })
                .collect();
            if checks.is_some() {
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
            println!(
                "\n{} problem{} from {} ({})",
                problems.len(),
                if problems.len() == 1 { "" } else { "s" },
                set.origin,
                per_level(&problems)
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
    let broken: Vec<&str> = warnings
        .iter()
        .filter(|(_, w)| !w.is_empty())
        .map(|(k, _)| *k)
        .collect();
    if let Some((checks, python)) = &checks {
        let failed: Vec<&Check> = checks.values().filter(|c| !c.ok).collect();
        let mut missing: Vec<&str> = failed.iter().filter_map(|c| c.missing.as_deref()).collect();
        missing.sort();
        missing.dedup();
        if !missing.is_empty() {
            let pkgs: Vec<&str> = missing.iter().map(|m| pip_name(m)).collect();
            eprintln!(
                "missing Python package(s) {}: pip install {}  (for this interpreter: {} -m pip install {})",
                missing.join(", "),
                pkgs.join(" "),
                python.display(),
                pkgs.join(" ")
            );
        }
        if !failed.is_empty() {
            eprintln!(
                "error: {} of {} problem(s) failed to load; see the DETAIL column",
                failed.len(),
                checks.len()
            );
            return Ok(1);
        }
        if args.format == Format::Human {
            eprintln!("all {} problem(s) load", checks.len());
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

/// `level1: 3, level2: 1` for problems sorted by level.
fn per_level(problems: &[&kernelgate_model::Problem]) -> String {
    let mut levels: Vec<(u32, usize)> = Vec::new();
    for p in problems {
        match levels.last_mut() {
            Some((l, n)) if *l == p.level => *n += 1,
            _ => levels.push((p.level, 1)),
        }
    }
    levels
        .iter()
        .map(|(l, n)| format!("level{l}: {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The outcome of loading one problem.
#[derive(Debug, Clone, Default)]
struct Check {
    ok: bool,
    /// `float32[16, 16384]`, ... of `get_inputs()`.
    inputs: Vec<String>,
    error: Option<String>,
    /// Top-level module of a `ModuleNotFoundError`.
    missing: Option<String>,
}

impl Check {
    fn failed(error: impl Into<String>) -> Check {
        Check {
            error: Some(error.into()),
            ..Check::default()
        }
    }

    fn detail(&self) -> String {
        match (&self.missing, &self.error) {
            _ if self.ok => format!("inputs {}", self.inputs.join(", ")),
            (Some(m), _) => format!("missing Python package `{m}`: pip install {}", pip_name(m)),
            (None, Some(e)) => e.clone(),
            (None, None) => "failed".into(),
        }
    }

    fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "ok": self.ok,
            "inputs": self.inputs,
            "error": self.error,
            "missing_package": self.missing,
            "install": self.missing.as_deref().map(|m| format!("pip install {}", pip_name(m))),
        })
    }
}

/// The pip distribution of a top-level module, where the names differ.
fn pip_name(module: &str) -> &str {
    match module {
        "cv2" => "opencv-python",
        "sklearn" => "scikit-learn",
        "skimage" => "scikit-image",
        "PIL" => "pillow",
        "yaml" => "pyyaml",
        "bs4" => "beautifulsoup4",
        "google" => "protobuf",
        other => other,
    }
}

const CHECK_SCRIPT: &str = include_str!("check_problems.py");

/// Loads every problem in one Python process (torch imported once); a problem that hangs or
/// kills the process costs only its own row, and the rest continue in a fresh process.
fn check(
    python: &Path,
    problems: &[&Problem],
    warnings: &BTreeMap<&str, Vec<String>>,
    limit: Duration,
) -> anyhow::Result<BTreeMap<String, Check>> {
    let scratch = tempfile::Builder::new()
        .prefix("kernelgate-check-")
        .tempdir()?;
    let mut out = BTreeMap::new();
    let mut todo: Vec<(String, PathBuf)> = Vec::new();
    for p in problems {
        let w = &warnings[p.key.as_str()];
        if !w.is_empty() {
            // Not importable as a problem: say why without running it.
            out.insert(p.key.clone(), Check::failed(w.join("; ")));
            continue;
        }
        let file = p
            .materialize(scratch.path())
            .with_context(|| format!("writing {} to {}", p.key, scratch.path().display()))?;
        todo.push((p.key.clone(), std::fs::canonicalize(&file).unwrap_or(file)));
    }
    let mut round = 0;
    while !todo.is_empty() {
        round += 1;
        let jobs = scratch.path().join(format!("jobs-{round}.json"));
        std::fs::write(&jobs, serde_json::to_string(&todo)?)?;
        let dir = scratch.path().join(format!("child-{round}"));
        // The problems are the repository's own code: started like `baseline`'s reference child
        // (scrubbed environment, own process group), off the GPU.
        let script = kernelgate_eval::spawn_streaming(kernelgate_eval::Script {
            python,
            harness: None,
            code: CHECK_SCRIPT,
            args: vec![jobs.into()],
            dir: &dir,
            // Not enforced for a streamed script: each problem's `recv_timeout` below is.
            limit: Duration::MAX,
            memory_limit_bytes: 0,
            rlimit_as: false,
            env: vec![("CUDA_VISIBLE_DEVICES", "")],
        })
        .with_context(|| {
            format!(
                "cannot start {}: set KERNELGATE_PYTHON (or `[harness] python` in kernelgate.toml) to a Python with torch",
                python.display()
            )
        })?;
        let rx = &script.lines;
        let mut done = 0;
        let mut stopped: Option<String> = None;
        while done < todo.len() {
            let key = &todo[done].0;
            match rx.recv_timeout(limit) {
                Ok(line) => {
                    let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) else {
                        continue; // a problem's own print
                    };
                    if v.get("fatal").is_some() {
                        drop(script);
                        anyhow::bail!(
                            "{} cannot import torch ({}): set KERNELGATE_PYTHON (or `[harness] python` in kernelgate.toml) to a Python with torch, or `{} -m pip install torch`",
                            python.display(),
                            v["error"].as_str().unwrap_or(""),
                            python.display()
                        );
                    }
                    if v["key"].as_str() != Some(key.as_str()) {
                        continue;
                    }
                    let check = if v["ok"] == true {
                        Check {
                            ok: true,
                            inputs: v["inputs"]
                                .as_array()
                                .map(|a| {
                                    a.iter()
                                        .filter_map(|x| x.as_str().map(String::from))
                                        .collect()
                                })
                                .unwrap_or_default(),
                            ..Check::default()
                        }
                    } else {
                        Check {
                            error: v["error"].as_str().map(String::from),
                            missing: v["missing"]
                                .as_str()
                                .filter(|m| !m.is_empty())
                                .map(String::from),
                            ..Check::default()
                        }
                    };
                    out.insert(key.clone(), check);
                    done += 1;
                }
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    stopped = Some(format!(
                        "loading took over {} s and was stopped (raise --check-timeout)",
                        limit.as_secs()
                    ));
                    break;
                }
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    stopped = Some(String::new());
                    break;
                }
            }
        }
        let (status, tail) = script.finish();
        if let Some(why) = stopped {
            let why = if why.is_empty() {
                let last: Vec<&str> = tail.trim().lines().rev().take(3).collect();
                format!(
                    "the Python process ended while loading it ({}){}",
                    status.map(|s| s.to_string()).unwrap_or_default(),
                    if last.is_empty() {
                        String::new()
                    } else {
                        format!(
                            ": {}",
                            last.into_iter().rev().collect::<Vec<_>>().join(" | ")
                        )
                    }
                )
            } else {
                why
            };
            if done < todo.len() {
                out.insert(todo[done].0.clone(), Check::failed(why));
                done += 1;
            }
        }
        todo.drain(..done.min(todo.len()));
    }
    Ok(out)
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
