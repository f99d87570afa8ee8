//! The CLI side of the harness: one job = one candidate kernel against one problem, run in a
//! child process (the runner's Python importing the `kernelgate_harness` extension) with its
//! own process group, time and memory limits, a scrubbed environment and an authenticated
//! result channel. [`run_job`] never fails on a candidate: every way a candidate can go wrong
//! is an [`Outcome`].

mod child;
pub mod locate;
pub mod outcome;

use kernelgate_model::config::{L2Mode, TimingConfig};
use kernelgate_model::{Device, Finding, Precision, Severity};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use child::is_secret_var;
pub use locate::{find_harness, find_python, is_cpu_kernel, libcuda_present};
pub use outcome::{EvalResult, ExitInfo, Mismatch, Outcome, Phase, TimingResult, TrialMismatch};

/// Errors of the set-up, before any candidate runs (reported as `harness_error` by `run_job`).
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    #[error(
        "the harness extension {HARNESS_LIB} was not found (looked at {}); build it with \
         `cargo build -p kernelgate-harness` (same profile as the CLI) or point KERNELGATE_HARNESS at it",
        looked.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
    )]
    HarnessMissing { looked: Vec<PathBuf> },
    #[error("{path}: cannot read the file: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot start the job's child process with {python}: {source} (set KERNELGATE_PYTHON to a Python with torch)")]
    Spawn {
        python: PathBuf,
        source: std::io::Error,
    },
}

use locate::HARNESS_LIB;

/// One evaluation. Build with [`JobSpec::new`] and adjust the public fields.
#[derive(Debug, Clone)]
pub struct JobSpec {
    /// The problem file (`KernelBench/level1/19_ReLU.py`).
    pub problem: PathBuf,
    /// The candidate (`kernels/.../19_ReLU.py`, defines `ModelNew`).
    pub kernel: PathBuf,
    /// The PR's base version of the kernel, timed against the head for the regression check.
    pub base_kernel: Option<PathBuf>,
    /// Names used in the result (e.g. `level1/19_ReLU` and a repo-relative kernel path).
    pub problem_label: Option<String>,
    pub kernel_label: Option<String>,
    pub device: Device,
    pub precision: Precision,
    /// Correctness trials (KernelBench: 5).
    pub trials: u32,
    /// `None`: a secret random seed, reported in the result afterwards. `Some(42)`: KernelBench's.
    pub seed: Option<u64>,
    pub compile_timeout: Duration,
    pub run_timeout: Duration,
    /// Host memory limit for the whole job (0: none).
    pub memory_limit_mb: u64,
    /// `None`: correctness only.
    pub timing: Option<TimingConfig>,
    /// GPU index on a multi-GPU runner (sets `CUDA_VISIBLE_DEVICES`).
    pub gpu: Option<u32>,
    /// The runner's Python; `None`: [`find_python`] from the current directory.
    pub python: Option<PathBuf>,
    /// The harness cdylib; `None`: [`find_harness`].
    pub harness: Option<PathBuf>,
    /// Torch extensions cache shared between jobs (faster rebuilds); `None`: one per job.
    pub extensions_dir: Option<PathBuf>,
    /// Extra trials on signed/scaled inputs (0 to 2).
    pub shifted_trials: u32,
    /// Generate inputs directly on the GPU (fast; different random values than KernelBench's
    /// CPU generation for the same seed). Ignored on CPU.
    pub inputs_on_device: bool,
}

impl JobSpec {
    pub fn new(problem: impl Into<PathBuf>, kernel: impl Into<PathBuf>) -> JobSpec {
        JobSpec {
            problem: problem.into(),
            kernel: kernel.into(),
            base_kernel: None,
            problem_label: None,
            kernel_label: None,
            device: Device::Auto,
            precision: Precision::Fp32,
            trials: 5,
            seed: None,
            compile_timeout: Duration::from_secs(300),
            run_timeout: Duration::from_secs(120),
            memory_limit_mb: 16384,
            timing: None,
            gpu: None,
            python: None,
            harness: None,
            extensions_dir: None,
            shifted_trials: 1,
            inputs_on_device: true,
        }
    }
}

/// What the runner writes (after the HMAC was checked).
#[derive(Deserialize)]
struct RunnerResult {
    outcome: Outcome,
    #[serde(default)]
    findings: Vec<RawFinding>,
    #[serde(default)]
    phases: Vec<(String, f64)>,
    #[serde(default)]
    device: Option<String>,
    #[serde(default)]
    torch: Option<String>,
    #[serde(default)]
    timing: Option<BTreeMap<String, Vec<kernelgate_timing::Sample>>>,
}

#[derive(Deserialize)]
struct RawFinding {
    rule: String,
    severity: Severity,
    message: String,
}

/// Runs one job to an outcome. Never panics on candidate behaviour and never returns an error:
/// set-up problems are `harness_error` outcomes with a message saying what to fix.
pub fn run_job(spec: &JobSpec) -> EvalResult {
    let (seed, seed_random) = match spec.seed {
        Some(s) => (s, false),
        None => (rand::random::<u32>() as u64, true),
    };
    let mut result = EvalResult {
        problem: spec
            .problem_label
            .clone()
            .unwrap_or_else(|| spec.problem.display().to_string()),
        kernel: spec
            .kernel_label
            .clone()
            .unwrap_or_else(|| spec.kernel.display().to_string()),
        device: None,
        outcome: Outcome::Passed { trials: 0 },
        findings: Vec::new(),
        timing: None,
        seed,
        seed_random,
        torch: None,
        phases: Vec::new(),
        exit: ExitInfo::default(),
        stdout_tail: String::new(),
        stderr_tail: String::new(),
    };
    if let Err(e) = execute(spec, seed, &mut result) {
        result.outcome = Outcome::HarnessError {
            message: e.to_string(),
            traceback: String::new(),
        };
    }
    result
}

fn execute(spec: &JobSpec, seed: u64, result: &mut EvalResult) -> Result<(), EvalError> {
    let started = std::time::Instant::now();
    let harness = match &spec.harness {
        Some(h) => h.clone(),
        None => find_harness()?,
    };
    let harness = std::fs::canonicalize(&harness).unwrap_or(harness);
    let python = spec
        .python
        .clone()
        .unwrap_or_else(|| find_python(Path::new(".")));
    // The child starts in its own directory: a relative interpreter path must not move with it.
    let python = if python.components().count() > 1 && python.is_relative() {
        std::env::current_dir()
            .map(|c| c.join(&python))
            .unwrap_or(python)
    } else {
        python
    };
    let kernel_src = std::fs::read_to_string(&spec.kernel).map_err(|source| EvalError::Read {
        path: spec.kernel.clone(),
        source,
    })?;
    std::fs::metadata(&spec.problem).map_err(|source| EvalError::Read {
        path: spec.problem.clone(),
        source,
    })?;
    let abs = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let cpu_backend = is_cpu_kernel(&kernel_src);
    // CPU-only C++ kernels run on the CPU even under `--device cuda` (they cannot take CUDA tensors).
    let may_use_gpu = spec.device != Device::Cpu && !cpu_backend && libcuda_present();

    let dir = tempfile::Builder::new()
        .prefix("kernelgate-job-")
        .tempdir()
        .map_err(|source| EvalError::Read {
            path: std::env::temp_dir(),
            source,
        })?;
    let job_id: String = format!("{:016x}", rand::random::<u64>());
    let job = serde_json::json!({
        "job_id": job_id,
        "problem": abs(&spec.problem).display().to_string(),
        "kernel": abs(&spec.kernel).display().to_string(),
        "base_kernel": spec.base_kernel.as_deref().map(|p| abs(p).display().to_string()),
        "device": spec.device.as_str(),
        "cpu_backend": cpu_backend,
        "precision": spec.precision.as_str(),
        "trials": spec.trials.max(1),
        "seed": seed,
        "shifted_trials": spec.shifted_trials.min(2),
        "inputs_on_device": spec.inputs_on_device,
        "timing": spec.timing.as_ref().map(|t| serde_json::json!({
            "warmup": t.warmup,
            "min_samples": t.min_samples,
            "max_samples": t.max_samples,
            "budget_s": t.budget_s,
            "ci_target_pct": t.ci_target_pct,
            "l2": match t.l2 { L2Mode::Cold => "cold", L2Mode::Warm => "warm" },
            "input_sets": 3,
        })),
    });
    // The child works in its own directory: a relative cache path would land there.
    let ext_dir = match &spec.extensions_dir {
        Some(d) if d.is_relative() => std::env::current_dir()
            .map(|c| c.join(d))
            .unwrap_or_else(|_| d.clone()),
        Some(d) => d.clone(),
        None => dir.path().join("torch_extensions"),
    };
    let mut env = vec![(
        "TORCH_EXTENSIONS_DIR".to_string(),
        ext_dir.display().to_string(),
    )];
    if let Some(gpu) = spec.gpu {
        env.push(("CUDA_VISIBLE_DEVICES".into(), gpu.to_string()));
    }
    if !may_use_gpu {
        // Keep a CPU job off the GPU even where one exists.
        env.push(("CUDA_VISIBLE_DEVICES".into(), String::new()));
    }
    let report = child::run(child::Launch {
        python: &python,
        harness: &harness,
        job,
        dir: dir.path(),
        compile_timeout: spec.compile_timeout,
        run_timeout: spec.run_timeout,
        memory_limit_bytes: spec.memory_limit_mb.saturating_mul(1 << 20),
        rlimit_as: !may_use_gpu,
        env,
    })
    .map_err(|source| EvalError::Spawn {
        python: python.clone(),
        source,
    })?;

    result.exit = report.exit.clone();
    result.stdout_tail = report.stdout_tail.clone();
    result.stderr_tail = report.stderr_tail.clone();
    let signal_name = |s: i32| match s {
        libc::SIGSEGV => "SIGSEGV".to_string(),
        libc::SIGBUS => "SIGBUS".to_string(),
        libc::SIGABRT => "SIGABRT".to_string(),
        libc::SIGKILL => "SIGKILL".to_string(),
        libc::SIGFPE => "SIGFPE".to_string(),
        libc::SIGILL => "SIGILL".to_string(),
        other => format!("signal {other}"),
    };
    result.outcome = match report.ended {
        child::Ended::Result(payload) => match serde_json::from_str::<RunnerResult>(&payload) {
            Ok(r) => {
                result.device = r.device;
                result.torch = r.torch;
                result.phases = r.phases.into_iter().map(|(name, ms)| Phase { name, ms }).collect();
                let file = result.kernel.clone();
                result.findings = r
                    .findings
                    .into_iter()
                    .map(|f| Finding {
                        file: file.clone(),
                        line: 0,
                        column: 0,
                        end_line: 0,
                        end_column: 0,
                        rule: format!("eval/{}", f.rule),
                        severity: f.severity,
                        message: f.message,
                    })
                    .collect();
                if let Some(samples) = r.timing {
                    result.timing = Some(summarise_timing(samples, spec, &file, &mut result.findings));
                }
                r.outcome
            }
            Err(e) => Outcome::HarnessError {
                message: format!("the runner's result does not parse: {e}"),
                traceback: payload.chars().take(2000).collect(),
            },
        },
        child::Ended::Forged => Outcome::Crash {
            reason: "the result channel held a forged or corrupted result (bad HMAC): something in the \
                     candidate's process wrote the harness's result file"
                .into(),
            signal: report.exit.signal,
            exit_code: report.exit.code,
            phase: report.phase.clone(),
            traceback: String::new(),
        },
        child::Ended::NoResult if report.phase.is_none() => Outcome::HarnessError {
            message: format!(
                "the child process ({}) ended before the harness started ({}); stderr: {}",
                python.display(),
                match (report.exit.code, report.exit.signal) {
                    (_, Some(s)) => format!("killed by {}", signal_name(s)),
                    (Some(c), _) => format!("exit status {c}"),
                    _ => "no status".into(),
                },
                report.stderr_tail.trim()
            ),
            traceback: String::new(),
        },
        child::Ended::NoResult => Outcome::Crash {
            reason: match (report.exit.signal, report.exit.code) {
                (Some(s), _) => format!(
                    "the process was killed by {} during the {} phase",
                    signal_name(s),
                    report.phase.as_deref().unwrap_or("?")
                ),
                (None, Some(c)) => format!(
                    "the process exited with status {c} during the {} phase without a result: the candidate \
                     ended the process (os._exit, sys.exit from a thread, abort)",
                    report.phase.as_deref().unwrap_or("?")
                ),
                _ => "the process ended without a result".into(),
            },
            signal: report.exit.signal,
            exit_code: report.exit.code,
            phase: report.phase.clone(),
            traceback: String::new(),
        },
        child::Ended::Timeout { phase, limit } => Outcome::Timeout {
            message: format!(
                "the {phase} phase ran past its limit of {} s; the process group was killed{}",
                limit.as_secs_f64(),
                if phase == "compile" { " (raise it with --compile-timeout)" } else { " (raise it with --run-timeout)" }
            ),
            phase,
            limit_s: limit.as_secs_f64(),
        },
        child::Ended::MemoryKilled { rss_bytes } => Outcome::Crash {
            reason: format!(
                "memory limit: the job used {} MiB of host memory, over the limit of {} MiB; the process group was killed",
                rss_bytes >> 20,
                spec.memory_limit_mb
            ),
            signal: Some(libc::SIGKILL),
            exit_code: None,
            phase: report.phase.clone(),
            traceback: String::new(),
        },
    };
    result.phases.push(Phase {
        name: "job_wall".into(),
        ms: started.elapsed().as_secs_f64() * 1000.0,
    });
    Ok(())
}

fn summarise_timing(
    samples: BTreeMap<String, Vec<kernelgate_timing::Sample>>,
    spec: &JobSpec,
    file: &str,
    findings: &mut Vec<Finding>,
) -> TimingResult {
    let threshold = spec
        .timing
        .as_ref()
        .map(|t| t.threshold_pct)
        .unwrap_or(kernelgate_timing::DEFAULT_THRESHOLD_PCT);
    let ms = |k: &str| {
        samples
            .get(k)
            .map(|v| kernelgate_timing::sample::event_ms(v))
    };
    let vs_reference = match (ms("reference"), ms("candidate")) {
        (Some(r), Some(c)) => kernelgate_timing::compare(&r, &c, threshold).ok(),
        _ => None,
    };
    let vs_base = match (ms("base"), ms("candidate")) {
        (Some(b), Some(c)) => kernelgate_timing::compare(&b, &c, threshold).ok(),
        _ => None,
    };
    if let Some(c) = samples.get("candidate") {
        findings.extend(kernelgate_timing::escaped_work(file, c));
    }
    TimingResult {
        samples,
        vs_reference,
        vs_base,
    }
}
