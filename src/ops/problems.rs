//! `kernelgate problems` as a library operation: the dataset's problems with their identity
//! hashes and structure warnings, and with `check` each one loaded in the harness's Python on the
//! CPU. The command parses flags into [`ProblemsOptions`] and prints the [`ProblemList`].

use kernelgate_model::{Config, DatasetError, DatasetSpec, Problem};
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Why the problems could not be listed or loaded, with what to do.
#[derive(Debug, thiserror::Error)]
pub enum ProblemsError {
    #[error("--dataset: {0}")]
    BadDataset(String),
    #[error("loading problems from {spec}")]
    Load {
        spec: String,
        #[source]
        source: DatasetError,
    },
    #[error("writing {key} to {}", dir.display())]
    Materialize {
        key: String,
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "cannot start {}: set KERNELGATE_PYTHON (or `[harness] python` in kernelgate.toml) to a Python with torch",
        python.display()
    )]
    Start {
        python: PathBuf,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error(
        "{} cannot import torch ({error}): set KERNELGATE_PYTHON (or `[harness] python` in kernelgate.toml) to a Python with torch, or `{} -m pip install torch`",
        python.display(),
        python.display()
    )]
    NoTorch { python: PathBuf, error: String },
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

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

    /// One object per problem, with its warnings and, when checked, its load.
    pub fn to_json(&self) -> serde_json::Value {
        let rows: Vec<serde_json::Value> = self
            .problems
            .iter()
            .map(|p| {
                let mut v = serde_json::to_value(p).unwrap_or_default();
                if let Some(obj) = v.as_object_mut() {
                    obj.insert("warnings".into(), self.warnings[&p.key].clone().into());
                    if let Some(checks) = &self.checks {
                        obj.insert("check".into(), checks.by_key[&p.key].to_json());
                    }
                }
                v
            })
            .collect();
        rows.into()
    }
}

/// The human listing: a table (hashes, or each problem's load when checked) and a count.
impl fmt::Display for ProblemList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let warnings = &self.warnings;
        let rows: Vec<Vec<String>> = self
            .problems
            .iter()
            .map(|p| match &self.checks {
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
        if self.checks.is_some() {
            let header = ["PROBLEM", "CHECK", "DETAIL"];
            f.write_str(&crate::table::render(
                &header,
                rows.iter().map(Vec::as_slice),
            ))?;
        } else {
            // The WARNING column only when a problem has one.
            let any_warning = warnings.values().any(|w| !w.is_empty());
            let header = ["PROBLEM", "SHA256", "MD5 (KernelBench)", "PATH", "WARNING"];
            let n = if any_warning { 5 } else { 4 };
            let table = crate::table::render(&header[..n], rows.iter().map(|r| &r[..n]));
            f.write_str(&table)?;
        }
        let n = self.problems.len();
        writeln!(
            f,
            "\n{n} problem{} from {} ({})",
            if n == 1 { "" } else { "s" },
            self.origin,
            self.per_level()
        )
    }
}

/// Lists (and with `check` loads) the problems `opts` names for `repo`, whose `kernelgate.toml`
/// is `config`. `on_check` hears the Python and the count before the loads start.
pub fn problems(
    repo: &Path,
    config: &Config,
    opts: &ProblemsOptions,
    on_check: impl FnOnce(&Path, usize),
) -> Result<ProblemList, ProblemsError> {
    let spec = match &opts.dataset {
        Some(s) => DatasetSpec::parse(s).map_err(ProblemsError::BadDataset)?,
        None => config.dataset_spec(repo),
    };
    let set = spec.load().map_err(|source| ProblemsError::Load {
        spec: spec.to_string(),
        source,
    })?;
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

/// How long the check's Python may take to start and import torch (its own limit, apart from
/// each problem's `--check-timeout`).
const STARTUP_LIMIT: Duration = Duration::from_secs(120);

/// Loads every problem in one Python process (torch imported once); a problem that hangs or
/// kills the process costs only its own row, and the rest continue in a fresh process.
fn check(
    python: &Path,
    problems: &[Problem],
    warnings: &BTreeMap<String, Vec<String>>,
    limit: Duration,
) -> Result<BTreeMap<String, Check>, ProblemsError> {
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
            .map_err(|source| ProblemsError::Materialize {
                key: p.key.clone(),
                dir: scratch.path().to_path_buf(),
                source,
            })?;
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
        .map_err(|e| ProblemsError::Start {
            python: python.to_path_buf(),
            source: Box::new(e),
        })?;
        let rx = &script.lines;
        let mut done = 0;
        let mut stopped: Option<String> = None;
        // Until the script says torch is imported, the wait is the interpreter's start, not a
        // problem's: a loaded runner's torch import must not count against the first problem.
        let mut ready = false;
        while done < todo.len() {
            let key = &todo[done].0;
            let wait = if ready {
                limit
            } else {
                limit.max(STARTUP_LIMIT)
            };
            match rx.recv_timeout(wait) {
                Ok(line) => {
                    let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) else {
                        continue; // a problem's own print
                    };
                    if v.get("ready").is_some() {
                        ready = true;
                        continue;
                    }
                    if v.get("fatal").is_some() {
                        drop(script);
                        return Err(ProblemsError::NoTorch {
                            python: python.to_path_buf(),
                            error: v["error"].as_str().unwrap_or("").to_string(),
                        });
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
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) if !ready => {
                    stopped = Some(format!(
                        "Python and torch did not start within {} s; the problem was not loaded",
                        wait.as_secs()
                    ));
                    break;
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
