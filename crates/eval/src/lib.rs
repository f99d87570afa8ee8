//! The CLI side of the harness: one job = one candidate kernel against one problem, run in a
//! child process (the runner's Python importing the `kernelgate_harness` extension) with its
//! own process group, time and memory limits, a scrubbed environment and an authenticated
//! result channel. [`run_job`] never fails on a candidate: every way a candidate can go wrong
//! is an [`Outcome`].

mod child;
mod extensions;
mod hardware;
mod job;
pub mod locate;
pub mod outcome;
mod pch;
pub mod protocol;
pub mod sandbox;
mod shown;

use kernelgate_model::config::L2Mode;
use kernelgate_model::{Device, Finding, RanOn, Severity};
use kernelgate_timing::Series;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub use child::{
    allowed_cpus, is_secret_var, run_script, spawn_streaming, Script, ScriptEnd, StreamingScript,
};
pub use extensions::{extensions_subdir, shared_extensions_dir, ExtensionsDir};
pub use hardware::{hardware_key, nvidia_smi, Machine};
pub use job::{runner_python, JobRequest, JobSpec, Stage};
pub use locate::{find_harness, find_python, is_cpu_kernel, libcuda_present, HARNESS_PACKAGE};
pub use outcome::{
    EvalResult, ExitInfo, ExtensionBuild, Floor, Mismatch, Outcome, Phase, ProblemWork,
    TimingResult, TrialMismatch,
};
pub use pch::{build_pch, pch_root, PchBuild, PCH_DIR_ENV};
pub use protocol::HARNESS_PROTOCOL;
use protocol::{Job, JobTiming, RunnerResult};
pub use sandbox::{SandboxLevel, SandboxMode};
pub use shown::ShownPaths;

/// Errors of the set-up, before any candidate runs (reported as `harness_error` by `run_job`).
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    #[error(
        "the harness extension {HARNESS_LIB} was not found (looked at {}); install it with \
         `pip install kernelgate` into the Python that holds torch (or set KERNELGATE_PYTHON to \
         that Python), build it with `cargo build -p kernelgate-harness` (same profile as the \
         CLI), or point KERNELGATE_HARNESS at it",
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
    #[error(transparent)]
    Sandbox(#[from] sandbox::SandboxError),
    /// The candidate's file is unreadable or not UTF-8: its own compile error, never an
    /// infrastructure outcome.
    #[error("{0}")]
    KernelSource(String),
}

use locate::HARNESS_LIB;

/// Runs one job to an outcome. Never panics on candidate behaviour and never returns an error:
/// set-up problems are `harness_error` outcomes with a message saying what to fix.
pub fn run_job(spec: &JobSpec) -> EvalResult {
    prepare_job(spec).finish()
}

/// A job whose child process is started (confined, importing torch) but not yet given its job:
/// start the next job on a device while the current one runs, then [`PreparedJob::finish`] it
/// when the device is free. The limits' clocks start at `finish`.
pub struct PreparedJob {
    spec: JobSpec,
    result: EvalResult,
    started: Result<Started, EvalError>,
}

struct Started {
    spawned: child::Spawned,
    python: PathBuf,
    /// Deleted with the job: the child's working directory, result file and logs.
    _dir: tempfile::TempDir,
}

/// Starts the job's child process; see [`PreparedJob`].
pub fn prepare_job(spec: &JobSpec) -> PreparedJob {
    let (seed, seed_random) = match spec.seed {
        Some(s) => (s, false),
        None => (rand::random::<u32>() as u64, true),
    };
    let result = EvalResult::new(
        spec.problem_label
            .clone()
            .unwrap_or_else(|| spec.problem.display().to_string()),
        spec.kernel_label
            .clone()
            .unwrap_or_else(|| spec.kernel.display().to_string()),
        seed,
        seed_random,
    );
    PreparedJob {
        started: start(spec, seed),
        spec: spec.clone(),
        result,
    }
}

impl PreparedJob {
    /// Runs the job to its end; never fails on a candidate (every failure is an [`Outcome`]).
    pub fn finish(self) -> EvalResult {
        let PreparedJob {
            spec,
            mut result,
            started,
        } = self;
        if let Err(e) = started.and_then(|s| conclude(&spec, s, &mut result)) {
            let message = e.to_string();
            result.outcome = match e {
                EvalError::KernelSource(why) => Outcome::CompileError {
                    message: format!("{}: {why}", result.kernel),
                    log_tail: String::new(),
                },
                // A required sandbox that cannot be had must fail, not pass as neutral.
                EvalError::Sandbox(_) => Outcome::HarnessError {
                    message,
                    traceback: String::new(),
                },
                _ => Outcome::Infrastructure {
                    message,
                    traceback: String::new(),
                },
            };
        }
        result
    }
}

/// The job's interpreter. The child starts in its own directory: a relative path to it (not a
/// bare name looked up on `PATH`) must not move with it.
fn job_python(spec: &JobSpec) -> PathBuf {
    let python = spec
        .python
        .clone()
        .unwrap_or_else(|| find_python(Path::new(".")));
    if python.components().count() > 1 && python.is_relative() {
        std::env::current_dir()
            .map(|c| c.join(&python))
            .unwrap_or(python)
    } else {
        python
    }
}

fn start(spec: &JobSpec, seed: u64) -> Result<Started, EvalError> {
    let harness = match &spec.harness {
        Some(h) => h.clone(),
        None => find_harness()?,
    };
    let harness = std::fs::canonicalize(&harness).unwrap_or(harness);
    let python = job_python(spec);
    // An unreadable or non-UTF-8 kernel is the candidate's failure, not the harness's.
    let kernel_src = kernelgate_model::read_source(&spec.kernel)
        .map_err(|e| EvalError::KernelSource(e.to_string()))?;
    let base_src = match &spec.base_kernel {
        Some(b) => Some(
            std::fs::read_to_string(b).map_err(|source| EvalError::Read {
                path: b.clone(),
                source,
            })?,
        ),
        None => None,
    };
    std::fs::metadata(&spec.problem).map_err(|source| EvalError::Read {
        path: spec.problem.clone(),
        source,
    })?;
    let abs = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let cpu_backend = is_cpu_kernel(&kernel_src);
    // CPU-only C++ kernels run on the CPU even under `--device cuda` (they cannot take CUDA tensors).
    let may_use_gpu =
        spec.device != Device::Cpu && !cpu_backend && !spec.build_only && libcuda_present();

    let dir = tempfile::Builder::new()
        .prefix("kernelgate-job-")
        .tempdir()
        .map_err(|source| EvalError::Read {
            path: std::env::temp_dir(),
            source,
        })?;
    let job_id: String = format!("{:016x}", rand::random::<u64>());
    let mut job = Job {
        protocol: HARNESS_PROTOCOL,
        job_id,
        problem: abs(&spec.problem).display().to_string(),
        kernel: abs(&spec.kernel).display().to_string(),
        base_kernel: spec
            .base_kernel
            .as_deref()
            .map(|p| abs(p).display().to_string()),
        base_extensions_dir: None,
        base_prebuilt: false,
        device: spec.device,
        cpu_backend,
        precision: spec.precision,
        tolerance: spec.precision.tolerance(),
        trials: spec.trials.max(1),
        seed,
        shifted_trials: spec.shifted_trials.min(2),
        inputs_on_device: spec.inputs_on_device,
        count_flops: spec.count_flops.unwrap_or(may_use_gpu),
        audit: spec.audit,
        build_only: spec.build_only,
        timing: spec.timing.as_ref().map(|t| JobTiming {
            warmup: t.warmup,
            min_samples: t.min_samples,
            max_samples: t.max_samples,
            budget_s: t.budget_s,
            ci_target_pct: t.ci_target_pct,
            l2: t.l2,
            input_sets: 3,
        }),
        result_path: String::new(),
        progress_path: String::new(),
        sandbox: None,
        spawn_unix: None,
    };
    // The child works in its own directory: a relative cache path would land there.
    let absolute = |d: &Path| {
        if d.is_relative() {
            std::env::current_dir()
                .map(|c| c.join(d))
                .unwrap_or_else(|_| d.to_path_buf())
        } else {
            d.to_path_buf()
        }
    };
    let dirs = spec.extensions_dir.job_dirs(
        dir.path(),
        &kernel_src,
        base_src.as_deref(),
        spec.base_prebuilt,
    );
    let ext_dir = absolute(&dirs.head);
    let base_ext_dir = dirs.base.as_deref().map(absolute);
    job.base_extensions_dir = base_ext_dir.as_ref().map(|d| d.display().to_string());
    job.base_prebuilt = dirs.base_read_only;
    let mut env = match &spec.extensions_dir {
        // The runner names torch's own `py<ver>_<cuda>` folder under the root.
        ExtensionsDir::Torch { exact: false, .. } => vec![(
            "KERNELGATE_TORCH_BUILD_ROOT".to_string(),
            ext_dir.display().to_string(),
        )],
        _ => vec![(
            "TORCH_EXTENSIONS_DIR".to_string(),
            ext_dir.display().to_string(),
        )],
    };
    if let Some(gpu) = spec.gpu {
        let parent = std::env::var("CUDA_VISIBLE_DEVICES").ok();
        env.push((
            "CUDA_VISIBLE_DEVICES".into(),
            visible_device(parent.as_deref(), gpu),
        ));
    }
    if !may_use_gpu {
        // Keep a CPU job (and a build) off the GPU even where one exists.
        env.push(("CUDA_VISIBLE_DEVICES".into(), String::new()));
    }
    if spec.build_only || matches!(spec.extensions_dir, ExtensionsDir::Keyed(_)) {
        // The build (no GPU visible) and the eval must compile for the same architectures,
        // or the eval rebuilds what the build left. A job that builds for itself keeps the
        // environment's own list, as `python kernel.py` does, so it can load that build.
        if let Some(arch) = cuda_arch_list() {
            env.push(("TORCH_CUDA_ARCH_LIST".into(), arch));
        }
    }
    if let Some(switch) = nvcc_side_by_side(
        &spec.extensions_dir,
        std::env::var(NVCC_PARALLEL_ENV).ok().as_deref(),
    ) {
        env.push((NVCC_PARALLEL_ENV.into(), switch.into()));
    }
    if may_use_gpu && spec.audit && std::env::var("KERNELGATE_WARM_PROFILER").as_deref() == Ok("1")
    {
        // Opt-in only: the profiler started at load saves its start (2-6 s) in the audit, but
        // on the H200 it made a short reference read up to 1.8x slower between the candidate's
        // calls, in its own process and in the eval beside it (docs/timing.md, issue 28).
        env.push(("KERNELGATE_WARM_PROFILER".into(), "1".into()));
    }
    if spec.build_only && std::env::var_os("MAX_JOBS").is_none() {
        // Several builds run at once: two compiler processes each.
        env.push(("MAX_JOBS".into(), "2".into()));
    }
    // The precompiled torch header (`kernelgate pch`): read, never written, by the child.
    let pch_root = pch::job_pch_root();
    if let Some(root) = &pch_root {
        env.push((pch::PCH_DIR_ENV.into(), root.display().to_string()));
    }
    if spec.extensions_dir.is_shared() {
        // It must exist to be granted to the sandboxed child.
        let _ = std::fs::create_dir_all(&ext_dir);
    }
    if let Some(d) = &base_ext_dir {
        // Granted to the child (read-only when prebuilt), so it must exist.
        let _ = std::fs::create_dir_all(d);
    }
    let spawned = child::spawn(child::Launch {
        python: &python,
        harness: &harness,
        job,
        dir: dir.path(),
        compile_timeout: spec.compile_timeout,
        run_timeout: spec.run_timeout,
        memory_limit_bytes: spec.memory_limit_mb.saturating_mul(1 << 20),
        rlimit_as: !may_use_gpu,
        env,
        sandbox: spec.sandbox,
        progress: spec.progress,
        cpus: spec.cpus.clone(),
        read_files: [
            Some(&spec.problem),
            Some(&spec.kernel),
            spec.base_kernel.as_ref(),
        ]
        .into_iter()
        .flatten()
        .map(|p| abs(p))
        .chain(kernel_dir(&abs(&spec.kernel)))
        // A prebuilt base's directory is read, never written: later jobs load that build.
        .chain(base_ext_dir.clone().filter(|_| dirs.base_read_only))
        .chain(pch_root)
        .collect(),
        write_dirs: spec
            .extensions_dir
            .is_shared()
            .then(|| ext_dir.clone())
            .into_iter()
            .chain(base_ext_dir.clone().filter(|_| !dirs.base_read_only))
            .collect(),
    })
    .map_err(|e| launch_error(e, &python))?;
    Ok(Started {
        spawned,
        python,
        _dir: dir,
    })
}

fn launch_error(e: child::LaunchError, python: &Path) -> EvalError {
    match e {
        child::LaunchError::Io(source) => EvalError::Spawn {
            python: python.to_path_buf(),
            source,
        },
        child::LaunchError::Sandbox(e) => EvalError::Sandbox(e),
    }
}

/// Gives the started child its job, supervises it and turns what it reported into the result.
fn conclude(spec: &JobSpec, job: Started, result: &mut EvalResult) -> Result<(), EvalError> {
    let started = std::time::Instant::now();
    let Started {
        spawned,
        python,
        _dir,
    } = job;
    let report = spawned.supervise().map_err(|e| launch_error(e, &python))?;
    result.sandbox = Some(report.sandbox.clone());
    match &report.sandbox {
        SandboxLevel::Off => eprintln!(
            "warning: the sandbox is OFF for {}: the candidate ran unconfined (it could read the \
             runner's files and secrets); unset {} / set [sandbox] enabled = true",
            result.kernel,
            sandbox::SANDBOX_ENV
        ),
        SandboxLevel::Unavailable(reason) => eprintln!(
            "warning: sandbox: unavailable ({reason}): {} ran unconfined",
            result.kernel
        ),
        _ => {}
    }

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
        child::Ended::Result(payload) => absorb(&payload, spec, result),
        child::Ended::Forged => Outcome::Crash {
            reason: "the result channel held a forged or corrupted result (bad HMAC): something in the \
                     candidate's process wrote the harness's result file"
                .into(),
            signal: report.exit.signal,
            exit_code: report.exit.code,
            phase: report.phase.clone(),
            traceback: String::new(),
        },
        child::Ended::NoResult if report.phase.is_none() => Outcome::Infrastructure {
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
    if let Outcome::HarnessError { message, .. } | Outcome::Infrastructure { message, .. } =
        &mut result.outcome
    {
        if message.contains("No module named 'torch'") {
            // Name the interpreter and how to pick another.
            *message = format!(
                "{} cannot import torch (No module named 'torch'): set KERNELGATE_PYTHON (or \
                 `[harness] python` in kernelgate.toml) to a Python with torch, or run `{} -m pip \
                 install torch`",
                python.display(),
                python.display()
            );
        }
    }
    if report.strays > 0 {
        // Work that outlives the job can run on the GPU during the next candidate's timing.
        result.findings.push(Finding::runtime(
            result.kernel.clone(),
            RULE_STRAY_PROCESS,
            Severity::Error,
            format!(
                "{} process(es) of the candidate left the job's process group (setsid/setpgid) and \
                 were still running when it ended; they were killed. A candidate must not leave \
                 processes behind",
                report.strays
            ),
        ));
    }
    result.phases.push(Phase {
        name: "job_wall".into(),
        ms: started.elapsed().as_secs_f64() * 1000.0,
    });
    Ok(())
}

/// The kernel's own directory, which the job may read: kernels load sources kept beside them
/// (`load(sources=[".../kernel.cu"])`), tables and headers. Not when it is a repository's root
/// (its `.git` holds the remote's URL and maybe credentials) or the filesystem's root.
fn kernel_dir(kernel: &Path) -> Option<PathBuf> {
    let dir = kernel.parent()?;
    let is_root = dir.parent().is_none() || dir.join(".git").exists();
    (!is_root).then(|| dir.to_path_buf())
}

/// The variable that switches nvcc's host and device steps side by side (`kg_nvcc.py`).
const NVCC_PARALLEL_ENV: &str = "KERNELGATE_NVCC_PARALLEL";

/// The child's `KERNELGATE_NVCC_PARALLEL`: opt-in (`1` in this process) until a GPU run has
/// shown the wrapper's objects load and pass (docs/eval.md), and then only for builds kept
/// per source (`pr`, `baseline`). torch writes the wrapper into `build.ninja`, so a build and
/// its eval agree; a build for the contributor's own directory keeps nvcc as torch finds it,
/// or `python kernel.py`'s build would not be reused.
fn nvcc_side_by_side(dir: &ExtensionsDir, ours: Option<&str>) -> Option<&'static str> {
    match dir {
        ExtensionsDir::Keyed(_) if ours == Some("1") => Some("1"),
        _ => None,
    }
}

/// `TORCH_CUDA_ARCH_LIST` for extension builds: the environment's own when set, else the
/// compute capabilities of this machine's GPUs (`nvidia-smi`), e.g. `9.0`; `None` without GPUs.
fn cuda_arch_list() -> Option<String> {
    static ARCH: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    ARCH.get_or_init(|| {
        if let Some(v) = std::env::var("TORCH_CUDA_ARCH_LIST")
            .ok()
            .filter(|v| !v.is_empty())
        {
            return Some(v);
        }
        let out = nvidia_smi(&["--query-gpu=compute_cap", "--format=csv,noheader"])?;
        let mut caps: Vec<String> = out
            .lines()
            .map(|l| l.trim().to_string())
            .filter(|l| !l.is_empty() && l.chars().all(|c| c.is_ascii_digit() || c == '.'))
            .collect();
        caps.sort();
        caps.dedup();
        (!caps.is_empty()).then(|| caps.join(";"))
    })
    .clone()
}

/// Runtime finding: processes of the candidate outlived its job outside the job's group.
pub const RULE_STRAY_PROCESS: &str = "eval/stray-process";
/// The harness found a PyTorch function, Tensor method or the reference's module code replaced
/// after the candidate's import (`kg_integrity`).
pub const RULE_TORCH_PATCHED: &str = "eval/torch-patched";
/// The harness found hooks that run candidate code inside PyTorch's operations: RecordFunction
/// callbacks, a mode left on the stack, a replaced dispatcher entry of an `aten` op.
pub const RULE_HARNESS_HOOKED: &str = "eval/harness-hooked";
/// The candidate's error against a float64 reference is far beyond the reference's own.
pub const RULE_PRECISION_DOWNGRADE: &str = "eval/precision-downgrade";

/// Takes the runner's (authenticated) result into `result` and returns the outcome: runtime
/// findings, timing comparisons, the escaped-work and physical-floor checks.
fn absorb(payload: &str, spec: &JobSpec, result: &mut EvalResult) -> Outcome {
    let r = match serde_json::from_str::<RunnerResult>(payload) {
        Ok(r) => r,
        Err(e) => {
            return Outcome::Infrastructure {
                message: format!("the runner's result does not parse: {e}"),
                traceback: payload.chars().take(2000).collect(),
            }
        }
    };
    result.device = r.device.map(|d| d.in_slot(spec.gpu));
    result.torch = r.torch;
    result.machine = r.machine;
    result.work = r.work;
    result.memory = r.memory;
    result.precision_audit = r.precision_audit;
    result.extensions = r.extensions;
    result.extensions_dir = r.extensions_dir;
    result.precompiled_header = r.precompiled_header;
    result.phases = r
        .phases
        .into_iter()
        .map(|(name, ms)| Phase { name, ms })
        .collect();
    let file = result.kernel.clone();
    result.findings = r
        .findings
        .into_iter()
        .map(|f| {
            Finding::runtime(
                file.clone(),
                format!("eval/{}", f.rule),
                f.severity,
                f.message,
            )
        })
        .collect();
    if let Some(samples) = r.timing {
        let on_gpu = result.device.as_ref().and_then(RanOn::gpu_name).is_some();
        let mut timing = summarise_timing(samples, spec, &file, on_gpu, &mut result.findings);
        let l2 = spec.timing.as_ref().map(|t| t.l2).unwrap_or(L2Mode::Cold);
        timing.floor = physical_floor(
            result.device.as_ref(),
            result.work.as_ref(),
            r.bandwidth_gbs,
            l2,
        );
        if let (Some(floor), Some(c)) = (&timing.floor, timing.samples.get(&Series::Candidate)) {
            let ms = kernelgate_timing::sample::event_ms(c);
            if let Ok(st) = kernelgate_timing::SeriesStats::from_samples(&ms) {
                // The excessive speedup is the policy's (it sees the row's speedup); only the floor here.
                result
                    .findings
                    .extend(kernelgate_timing::check_plausibility(
                        &file,
                        st.median,
                        Some(floor.floor_ms),
                        None,
                        f64::INFINITY,
                    ));
            }
        }
        result.timing = Some(timing);
    }
    if let Some(audit) = r.audit.filter(|a| !a.is_null()) {
        match serde_json::from_value::<kernelgate_model::OpAudit>(audit) {
            Ok(a) => result.audit = Some(a),
            Err(e) => result.findings.push(Finding::runtime(
                file.clone(),
                "eval/audit-failed",
                Severity::Warning,
                format!("the op audit's result does not parse ({e}); the custom share is unknown"),
            )),
        }
    }
    r.outcome
}

/// What the child's `CUDA_VISIBLE_DEVICES` must say for GPU `index` of this process: the
/// index-th entry of our own list when one is set (CUDA renumbers visible GPUs from 0, so `2,3`
/// makes GPU 1 the physical GPU 3, or a UUID), else the index itself.
fn visible_device(parent: Option<&str>, index: u32) -> String {
    parent
        .and_then(|list| {
            list.split(',')
                .map(str::trim)
                .take_while(|e| !e.is_empty() && *e != "-1")
                .nth(index as usize)
        })
        .map(str::to_string)
        .unwrap_or_else(|| index.to_string())
}

/// The physical floor of `work` on the GPU named in `device`: its datasheet peaks, the bandwidth
/// raised to `measured_gbs` when that is higher. `None` on the CPU (no datasheet; a measured CPU
/// bandwidth would not be a bound with caches this size), for a GPU without datasheet numbers,
/// without counted work, or when nothing is left to bound (warm L2 and no counted FLOPs).
pub fn physical_floor(
    device: Option<&RanOn>,
    work: Option<&ProblemWork>,
    measured_gbs: Option<f64>,
    l2: L2Mode,
) -> Option<Floor> {
    let gpu = device?.gpu_name()?;
    let work = work?;
    let measured_gbs = measured_gbs.filter(|b| b.is_finite() && *b > 0.0);
    let spec = kernelgate_timing::DeviceSpec::lookup(gpu)?.with_measured_bandwidth(measured_gbs);
    // Warm L2 keeps small inputs in cache between calls: memory bandwidth bounds nothing there.
    let bandwidth_gbs = match l2 {
        L2Mode::Cold => spec.bandwidth_gbs,
        L2Mode::Warm => 0.0,
    };
    let bytes = (work.input_bytes + work.output_bytes) as f64;
    let flops = work.flops.unwrap_or(0) as f64;
    let memory_ms = kernelgate_timing::floor_ms(bytes, 0.0, bandwidth_gbs, 0.0);
    let compute_ms = kernelgate_timing::floor_ms(0.0, flops, 0.0, spec.peak_tflops);
    let floor_ms = memory_ms.max(compute_ms);
    if !(floor_ms > 0.0 && floor_ms.is_finite()) {
        return None;
    }
    Some(Floor {
        floor_ms,
        bound: if memory_ms >= compute_ms {
            "memory"
        } else {
            "compute"
        }
        .into(),
        gpu: gpu.to_string(),
        bandwidth_gbs,
        measured_bandwidth_gbs: measured_gbs,
        peak_tflops: spec.peak_tflops,
    })
}

fn summarise_timing(
    samples: BTreeMap<Series, Vec<kernelgate_timing::Sample>>,
    spec: &JobSpec,
    file: &str,
    on_gpu: bool,
    findings: &mut Vec<Finding>,
) -> TimingResult {
    let threshold = spec
        .timing
        .as_ref()
        .map(|t| t.threshold_pct)
        .unwrap_or(kernelgate_timing::DEFAULT_THRESHOLD_PCT);
    let ms = |k: Series| {
        samples
            .get(&k)
            .map(|v| kernelgate_timing::sample::event_ms(v))
    };
    let candidate = ms(Series::Candidate);
    let against = |base: Option<Vec<f64>>| match (base, &candidate) {
        (Some(b), Some(c)) => kernelgate_timing::compare(&b, c, threshold).ok(),
        _ => None,
    };
    let mut vs_reference = against(ms(Series::Reference));
    let vs_base = against(ms(Series::Base));
    if let Some(c) = samples.get(&Series::Candidate) {
        findings.extend(kernelgate_timing::escaped_work(file, c));
    }
    use kernelgate_timing::integrity::{self as ig, ReferenceWitness};
    if let (Some(c), Some(r)) = (
        samples.get(&Series::Candidate),
        samples.get(&Series::CandidateRepeated),
    ) {
        findings.extend(ig::input_reuse(file, c, r));
    }
    let mut reference_check = None;
    if let (Some(alone), Some(interleaved)) = (
        samples.get(&Series::ReferenceBeforeImport),
        samples.get(&Series::Reference),
    ) {
        // The harness's witness of a changed PyTorch: what a tampering verdict rests on.
        let patched = findings
            .iter()
            .find(|f| f.rule == RULE_TORCH_PATCHED || f.rule == RULE_HARNESS_HOOKED)
            .map(|f| f.message.clone());
        let w = ReferenceWitness {
            patched: patched.as_deref(),
            alone,
            control_alone: samples.get(&Series::ControlBeforeImport).map(Vec::as_slice),
            interleaved,
            control: samples.get(&Series::Control).map(Vec::as_slice),
            after: samples.get(&Series::ReferenceAfterCalls).map(Vec::as_slice),
            control_after: samples.get(&Series::ControlAfterCalls).map(Vec::as_slice),
        };
        let slower = ig::reference_tampered(file, &w, on_gpu);
        if let Some(alone) = ig::speedup_reference(&w, slower.as_ref()) {
            let alone = kernelgate_timing::sample::event_ms(alone);
            vs_reference = against(Some(alone)).or(vs_reference);
        }
        findings.extend(slower);
        reference_check = Some(ig::reference_check(&w));
    }
    TimingResult {
        samples,
        vs_reference,
        vs_base,
        floor: None,
        reference_check,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kernelgate_timing::plausibility::RULE_BELOW_FLOOR;

    fn blank(kernel: &str) -> EvalResult {
        EvalResult::new("level1/19_ReLU".into(), kernel.into(), 1, false)
    }

    /// A runner result as `runner.py` writes it: candidate at `cand_ms`, reference at 10x that.
    fn payload(device: &str, bytes: u64, flops: u64, bw: Option<f64>, cand_ms: f64) -> String {
        let series = |base: f64| {
            (0..12)
                .map(|i| serde_json::json!({"ms": base * (1.0 + 0.001 * i as f64), "trailing_sync_ms": 0.001, "wall_ms": base}))
                .collect::<Vec<_>>()
        };
        serde_json::json!({
            "outcome": {"kind": "passed", "trials": 5},
            "findings": [],
            "phases": [["total", 1.0]],
            "device": device,
            "torch": "2.11.0",
            "timing": {"reference": series(cand_ms * 10.0), "candidate": series(cand_ms)},
            "work": {"input_bytes": bytes / 2, "output_bytes": bytes / 2, "flops": flops},
            "bandwidth_gbs": bw,
        })
        .to_string()
    }

    fn run(payload: &str, l2: L2Mode) -> EvalResult {
        let mut spec = JobSpec::new("p.py", "k.py");
        spec.timing = Some(kernelgate_model::config::TimingConfig {
            l2,
            ..kernelgate_model::config::TimingConfig::default()
        });
        let mut r = blank("kernels/relu.py");
        r.outcome = absorb(payload, &spec, &mut r);
        r
    }

    fn below_floor(r: &EvalResult) -> Vec<&Finding> {
        r.findings
            .iter()
            .filter(|f| f.rule == RULE_BELOW_FLOOR)
            .collect()
    }

    // 4.8 GB at the H200's 4800 GB/s: a floor of exactly 1 ms.
    const GB4_8: u64 = 4_800_000_000;

    #[test]
    fn below_the_floor_is_an_error_finding_on_the_kernel() {
        let r = run(
            &payload("cuda:0 (NVIDIA H200)", GB4_8, 0, Some(3841.0), 0.5),
            L2Mode::Cold,
        );
        assert!(r.passed());
        assert_eq!(r.work.unwrap().input_bytes, GB4_8 / 2);
        let floor = r.timing.as_ref().unwrap().floor.clone().unwrap();
        assert!((floor.floor_ms - 1.0).abs() < 1e-12, "{floor:?}");
        assert_eq!(floor.bound, "memory");
        assert_eq!(floor.gpu, "NVIDIA H200");
        // Measured below the datasheet: the datasheet stays (the floor must stay a lower bound).
        assert_eq!(floor.bandwidth_gbs, 4800.0);
        assert_eq!(floor.measured_bandwidth_gbs, Some(3841.0));
        let f = below_floor(&r);
        assert_eq!(f.len(), 1, "{:?}", r.findings);
        assert_eq!(f[0].severity, Severity::Error);
        assert_eq!(f[0].file, "kernels/relu.py");
        assert!(f[0].message.contains("1.0000 ms"), "{}", f[0].message);
        // Only the floor: the excessive speedup (10x here) is the policy's to flag.
        assert!(r
            .findings
            .iter()
            .all(|f| f.rule != kernelgate_timing::plausibility::RULE_EXCESSIVE_SPEEDUP));
    }

    #[test]
    fn above_the_floor_gives_no_finding() {
        let r = run(
            &payload("cuda:0 (NVIDIA H200)", GB4_8, 0, None, 1.2),
            L2Mode::Cold,
        );
        assert!(r.timing.as_ref().unwrap().floor.is_some());
        assert!(below_floor(&r).is_empty(), "{:?}", r.findings);
    }

    #[test]
    fn a_higher_measured_bandwidth_lowers_the_floor() {
        let r = run(
            &payload("cuda:0 (NVIDIA H200)", GB4_8, 0, Some(9600.0), 0.6),
            L2Mode::Cold,
        );
        let floor = r.timing.as_ref().unwrap().floor.clone().unwrap();
        assert!((floor.floor_ms - 0.5).abs() < 1e-12, "{floor:?}");
        assert!(below_floor(&r).is_empty());
    }

    #[test]
    fn flops_set_the_floor_when_they_dominate() {
        // 989e9 FLOP at 989 TFLOP/s: 1 ms; the bytes give 1 us.
        let r = run(
            &payload(
                "cuda:0 (NVIDIA H200)",
                4_800_000,
                989_000_000_000,
                None,
                0.9,
            ),
            L2Mode::Cold,
        );
        let floor = r.timing.as_ref().unwrap().floor.clone().unwrap();
        assert_eq!(floor.bound, "compute");
        assert!((floor.floor_ms - 1.0).abs() < 1e-9, "{floor:?}");
        assert_eq!(below_floor(&r).len(), 1);
    }

    #[test]
    fn warm_l2_drops_the_bytes_term() {
        let r = run(
            &payload("cuda:0 (NVIDIA H200)", GB4_8, 0, None, 0.5),
            L2Mode::Warm,
        );
        assert!(r.timing.as_ref().unwrap().floor.is_none());
        assert!(below_floor(&r).is_empty());
    }

    #[test]
    fn unknown_gpu_cpu_or_uncounted_work_give_no_floor() {
        for device in ["cuda:0 (Mystery Accelerator 9000)", "cpu"] {
            let r = run(
                &payload(device, GB4_8, 0, Some(3000.0), 0.001),
                L2Mode::Cold,
            );
            assert!(r.timing.as_ref().unwrap().floor.is_none(), "{device}");
            assert!(below_floor(&r).is_empty(), "{device}: {:?}", r.findings);
        }
        let mut v: serde_json::Value =
            serde_json::from_str(&payload("cuda:0 (NVIDIA H200)", GB4_8, 0, None, 0.001)).unwrap();
        v["work"] = serde_json::Value::Null;
        let r = run(&v.to_string(), L2Mode::Cold);
        assert!(r.work.is_none());
        assert!(r.timing.as_ref().unwrap().floor.is_none());
        assert!(below_floor(&r).is_empty());
    }

    #[test]
    fn results_without_work_fields_still_parse() {
        let r = run(
            r#"{"outcome": {"kind": "passed", "trials": 5}, "device": "cpu"}"#,
            L2Mode::Cold,
        );
        assert!(r.passed());
        assert!(r.work.is_none() && r.timing.is_none());
        // An authenticated result that does not parse is kernelgate's fault, not the candidate's.
        let r = run("not json", L2Mode::Cold);
        assert_eq!(r.outcome.kind(), "infrastructure");
    }

    #[test]
    fn a_job_on_gpu_n_sees_the_nth_visible_gpu() {
        assert_eq!(visible_device(None, 1), "1");
        assert_eq!(visible_device(Some(""), 0), "0");
        assert_eq!(visible_device(Some("2,3"), 0), "2");
        assert_eq!(visible_device(Some("2, 3"), 1), "3");
        assert_eq!(visible_device(Some("GPU-aa,GPU-bb"), 1), "GPU-bb");
        // Fewer entries than the index: the index (CUDA then reports no device, an outcome).
        assert_eq!(visible_device(Some("5"), 1), "1");
    }

    #[test]
    fn the_audit_is_typed_and_a_malformed_one_is_a_warning_not_a_lost_result() {
        let mut v: serde_json::Value =
            serde_json::from_str(&payload("cpu", 1000, 0, None, 0.5)).unwrap();
        v["audit"] = serde_json::json!({
            "clock": "cpu", "total_ms": 2.0, "custom_ms": 0.5, "custom_share": 0.25, "glue_ms": 1.0,
            "forward_ms": 3.0, "audit_ms": 9.0, "extension_modules": ["ext"], "aten_ops": ["aten.mm.default"],
            "entries": [
                {"op": "mm", "class": "pytorch", "library": null, "by_extension": null, "ms": 1.5, "share": 0.75, "calls": 1},
                {"op": "ext.relu", "class": "custom", "library": null, "by_extension": null, "ms": 0.5, "share": 0.25, "calls": 1}
            ],
            "extension_calls": [{"function": "ext.relu", "calls": 1, "ineffective": 0, "reason": null, "checked": true}]
        });
        let r = run(&v.to_string(), L2Mode::Cold);
        assert!(r.passed(), "{:?}", r.outcome);
        let a = r.audit.expect("typed audit");
        assert_eq!(a.custom_share, Some(0.25));
        assert_eq!(a.describe_left(3), "mm → PyTorch 75%");
        v["audit"] = serde_json::json!({"clock": "sundial"});
        let r = run(&v.to_string(), L2Mode::Cold);
        assert!(
            r.passed(),
            "a bad audit must not cost the result: {:?}",
            r.outcome
        );
        assert!(r.audit.is_none());
        assert!(r
            .findings
            .iter()
            .any(|f| f.rule == "eval/audit-failed" && f.severity == Severity::Warning));
    }

    #[test]
    fn nvcc_side_by_side_is_opt_in_and_only_for_kept_builds() {
        let keyed = ExtensionsDir::Keyed("/runner/ext".into());
        assert_eq!(nvcc_side_by_side(&keyed, Some("1")), Some("1"));
        assert_eq!(nvcc_side_by_side(&keyed, None), None);
        assert_eq!(nvcc_side_by_side(&keyed, Some("0")), None);
        // The contributor's own build directory and a job's throwaway one: nvcc as torch finds it.
        let torch = ExtensionsDir::Torch {
            root: "/home/u/.cache/torch_extensions".into(),
            exact: false,
        };
        assert_eq!(nvcc_side_by_side(&torch, Some("1")), None);
        assert_eq!(nvcc_side_by_side(&ExtensionsDir::PerJob, Some("1")), None);
    }
}
