//! `kernelgate problems` as a library operation: the dataset's problems with their identity
//! hashes and structure warnings, and with `check` each one loaded in the harness's Python on the
//! CPU. The command parses flags into [`ProblemsOptions`] and prints the [`ProblemList`].

use anyhow::Context;
use kernelgate_model::{Config, DatasetSpec, Problem};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Which problems, and whether to load them (the flags of `kernelgate problems`).
#[derive(Debug, Clone, Default)]
pub struct ProblemsOptions {
    /// A dataset spec instead of `[dataset]` in kernelgate.toml.
    pub dataset: Option<String>,
    pub level: Option<u32>,
    /// Load each problem, with this limit per problem.
    pub check: Option<Duration>,
}

/// The problems asked for, sorted by level then id.
#[derive(Debug)]
pub struct ProblemList {
    pub problems: Vec<Problem>,
    /// Where they came from, for messages.
    pub origin: String,
    /// Problem key → why its file is not usable as a problem (empty: usable).
    pub warnings: BTreeMap<String, Vec<String>>,
    /// With `check`: each problem's load, and the Python that loaded them.
    pub checks: Option<Checks>,
}

#[derive(Debug)]
pub struct Checks {
    pub python: PathBuf,
    pub by_key: BTreeMap<String, Check>,
}

impl Checks {
    pub fn failed(&self) -> impl Iterator<Item = &Check> {
        self.by_key.values().filter(|c| !c.ok)
    }

    /// The distinct modules that failed loads were missing, sorted.
    pub fn missing_modules(&self) -> Vec<&str> {
        let mut missing: Vec<&str> = self.failed().filter_map(|c| c.missing.as_deref()).collect();
        missing.sort();
        missing.dedup();
        missing
    }
}

impl ProblemList {
    /// Keys of the problems whose files are not usable.
    pub fn broken(&self) -> Vec<&str> {
        self.warnings
            .iter()
            .filter(|(_, w)| !w.is_empty())
            .map(|(k, _)| k.as_str())
            .collect()
    }

    /// `level1: 3, level2: 1`.
    pub fn per_level(&self) -> String {
        per_level(&self.problems)
    }
}

/// Lists (and with `check` loads) the problems `opts` names for `repo`, whose `kernelgate.toml`
/// is `config`. `on_check` hears the Python and the count before the loads start.
pub fn problems(
    repo: &Path,
    config: &Config,
    opts: &ProblemsOptions,
    on_check: impl FnOnce(&Path, usize),
) -> anyhow::Result<ProblemList> {
    let spec = match &opts.dataset {
        Some(s) => DatasetSpec::parse(s).map_err(|e| anyhow::anyhow!("--dataset: {e}"))?,
        None => config.dataset_spec(repo),
    };
    let set = spec
        .load()
        .with_context(|| format!("loading problems from {spec}"))?;
    let problems: Vec<Problem> = set
        .iter()
        .filter(|p| opts.level.is_none_or(|l| p.level == l))
        .cloned()
        .collect();
    let warnings: BTreeMap<String, Vec<String>> = problems
        .iter()
        .map(|p| (p.key.clone(), p.structure_warnings()))
        .collect();
    let checks = match opts.check {
        Some(limit) => {
            let python = kernelgate_eval::runner_python(config, repo);
            on_check(&python, problems.len());
            let by_key = check(
                &python,
                &problems,
                &warnings,
                limit.max(Duration::from_secs(1)),
            )?;
            Some(Checks { python, by_key })
        }
        None => None,
    };
    Ok(ProblemList {
        problems,
        origin: set.origin.clone(),
        warnings,
        checks,
    })
}

/// `level1: 3, level2: 1` for problems sorted by level.
fn per_level(problems: &[Problem]) -> String {
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
pub struct Check {
    pub ok: bool,
    /// `float32[16, 16384]`, ... of `get_inputs()`.
    pub inputs: Vec<String>,
    pub error: Option<String>,
    /// Top-level module of a `ModuleNotFoundError`.
    pub missing: Option<String>,
}

impl Check {
    fn failed(error: impl Into<String>) -> Check {
        Check {
            error: Some(error.into()),
            ..Check::default()
        }
    }

    pub fn detail(&self) -> String {
        match (&self.missing, &self.error) {
            _ if self.ok => format!("inputs {}", self.inputs.join(", ")),
            (Some(m), _) => format!("missing Python package `{m}`: pip install {}", pip_name(m)),
            (None, Some(e)) => e.clone(),
            (None, None) => "failed".into(),
        }
    }

    pub fn to_json(&self) -> serde_json::Value {
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
pub fn pip_name(module: &str) -> &str {
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
    problems: &[Problem],
    warnings: &BTreeMap<String, Vec<String>>,
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
