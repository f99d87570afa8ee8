//! `kernelgate eval` as a library operation: one candidate against one problem, in an isolated
//! child process. The command parses flags into [`EvalOptions`] and prints the [`LocalEval`].

use kernelgate_eval::{EvalError, EvalResult, ExtensionsDir, JobRequest, JobSpec, Outcome};
use kernelgate_model::{
    Config, DatasetError, Device, KernelError, LookupError, Precision, ProblemError, ProblemSet,
    Severity,
};
use serde::Serialize;
use std::fmt;
use std::path::{Path, PathBuf};

/// Why the eval could not start, with what to do. (A kernel that fails is a result, not this.)
#[derive(Debug, thiserror::Error)]
pub enum LocalEvalError {
    #[error(
        "{}: no such kernel file (give the path of a Python file defining ModelNew)",
        kernel.display()
    )]
    NoKernel { kernel: PathBuf },
    #[error("{}: no such base kernel file", kernel.display())]
    NoBaseKernel { kernel: PathBuf },
    #[error(
        "`{query}` is not a file, and the dataset at {} could not be loaded to look it up",
        root.display()
    )]
    NoDataset {
        query: String,
        root: PathBuf,
        #[source]
        source: ProblemError,
    },
    #[error("looking up --problem in {}", root.display())]
    Lookup {
        root: PathBuf,
        #[source]
        source: LookupError,
    },
    #[error(
        "--problem not given, and the problems to map the kernel to could not be loaded from {spec}"
    )]
    NoProblems {
        spec: String,
        #[source]
        source: DatasetError,
    },
    #[error(
        "--problem not given, and {} maps to no problem: {error}\n  help: pass --problem KEY \
         (`kernelgate problems` lists them), or add `# kernelgate: problem=level1/19_ReLU` \
         near the top of the kernel",
        kernel.display()
    )]
    // Boxed: a mapping error is large and rare.
    Unmapped {
        kernel: PathBuf,
        error: Box<KernelError>,
    },
    #[error("{} maps to {key}, which is not a problem", kernel.display())]
    MappedToNothing { kernel: PathBuf, key: String },
    #[error(transparent)]
    Eval(#[from] EvalError),
}

/// Where the eval's extension builds go.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Builds {
    /// torch's own build directory: what `python kernel.py` built is loaded.
    #[default]
    TorchDefault,
    /// A shared cache with one build per kernel source, as `pr` keeps it.
    Keyed(PathBuf),
    /// A fresh directory, removed afterwards.
    Fresh,
}

/// What a local eval is asked to do (the flags of `kernelgate eval`).
#[derive(Debug, Clone, Default)]
pub struct EvalOptions {
    /// A file path or a dataset key; `None`: the kernel's mapping.
    pub problem: Option<String>,
    pub kernel: PathBuf,
    pub base_kernel: Option<PathBuf>,
    pub device: Option<Device>,
    /// `None`: a secret random seed.
    pub seed: Option<u64>,
    /// `None`: the kernel's mapping, else `[defaults] precision`.
    pub precision: Option<Precision>,
    pub memory_limit_mb: Option<u64>,
    pub no_timing: bool,
    pub no_audit: bool,
    pub gpu: Option<u32>,
    pub builds: Builds,
    pub shifted_trials: u32,
    pub host_inputs: bool,
}

/// A finished local eval.
#[derive(Debug)]
pub struct LocalEval {
    /// Paths in it as the user gave them.
    pub result: EvalResult,
    /// torch found no CUDA on a CPU run: the machine cannot judge this kernel (neutral, as
    /// `kernelgate pr` rows say `skipped — needs a GPU`), not the candidate's failure.
    pub needs_gpu: bool,
}

impl LocalEval {
    /// 0 when the kernel passed with no error finding (or the machine cannot judge it), else 1.
    pub fn exit_code(&self) -> i32 {
        if self.needs_gpu {
            return 0;
        }
        let failing_finding = self
            .result
            .findings
            .iter()
            .any(|f| f.severity == Severity::Error);
        if self.result.passed() && !failing_finding {
            0
        } else {
            1
        }
    }
}

/// The harness is about to start (torch import, reference): the slow part begins.
#[derive(Debug)]
pub struct Starting<'a> {
    pub kernel: &'a Path,
    pub problem: &'a str,
}

impl std::fmt::Display for Starting<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "kernelgate eval: {} against {}: starting the harness (torch import, reference)...",
            self.kernel.display(),
            self.problem
        )
    }
}

/// Runs one eval as `kernelgate.toml` in `repo` (already loaded into `config`) and `opts` ask;
/// `starting` hears when the harness starts, before the wait.
pub fn eval(
    repo: &Path,
    config: &Config,
    opts: &EvalOptions,
    starting: impl FnOnce(&Starting<'_>),
) -> Result<LocalEval, LocalEvalError> {
    if !opts.kernel.is_file() {
        return Err(LocalEvalError::NoKernel {
            kernel: opts.kernel.clone(),
        });
    }
    let (problem, problem_label, mapped_precision) = match &opts.problem {
        Some(q) => {
            let (p, label) = resolve_problem(repo, config, q)?;
            (p, label, None)
        }
        None => {
            let (p, label, precision) = mapped_problem(repo, config, &opts.kernel)?;
            (p, label, Some(precision))
        }
    };
    if let Some(b) = &opts.base_kernel {
        if !b.is_file() {
            return Err(LocalEvalError::NoBaseKernel { kernel: b.clone() });
        }
    }
    let harness = kernelgate_eval::find_harness()?;
    let request = JobRequest {
        problem_label: Some(problem_label),
        base_kernel: opts.base_kernel.clone(),
        // What the kernel's build reads besides itself: read by the child, keying its build.
        sources: kernelgate_model::deps::sources_on_disk(repo, &opts.kernel),
        base_sources: opts
            .base_kernel
            .as_deref()
            .map(|b| kernelgate_model::deps::sources_on_disk(repo, b))
            .unwrap_or_default(),
        device: opts.device,
        // --precision, else the kernel's mapping (when it chose the problem), else the config.
        precision: opts.precision.or(mapped_precision),
        seed: opts.seed,
        memory_limit_mb: opts.memory_limit_mb,
        no_timing: opts.no_timing,
        no_audit: opts.no_audit,
        host_inputs: opts.host_inputs,
        gpu: opts.gpu,
        harness: Some(harness),
        extensions_dir: match &opts.builds {
            Builds::Keyed(d) => ExtensionsDir::Keyed(d.clone()),
            Builds::Fresh => ExtensionsDir::PerJob,
            Builds::TorchDefault => ExtensionsDir::torch_default().unwrap_or_default(),
        },
        // In torch's own directory the child writes only the builds its source names.
        extension_names: kernelgate_model::read_source(&opts.kernel)
            .ok()
            .and_then(|src| kernelgate_lint::embedded::extension_names(&src)),
        shifted_trials: Some(opts.shifted_trials),
        progress: true,
        ..JobRequest::default()
    };
    let spec = JobSpec::build(config, repo, &problem, &opts.kernel, &request)?;
    starting(&Starting {
        kernel: &opts.kernel,
        problem: spec.problem_label.as_deref().unwrap_or("?"),
    });
    let mut result = kernelgate_eval::run_job(&spec);
    // `kernelgate pr` leaves the excessive-speedup flag to its policy; a lone eval has none.
    if let Some(c) = result.timing.as_ref().and_then(|t| t.vs_reference.as_ref()) {
        let file = result.kernel.clone();
        result
            .findings
            .extend(kernelgate_timing::check_plausibility(
                &file,
                c.head.median,
                None,
                Some(c.speedup().0),
                config.timing.excessive_speedup,
            ));
    }
    // The kernel and problem as given, not as the runner's absolute paths.
    let mut shown = kernelgate_eval::ShownPaths::default();
    for path in [opts.kernel.as_path(), problem.as_path()] {
        shown.add(path, path.display().to_string());
    }
    shown.apply_outcome(&mut result.outcome);
    let needs_gpu = needs_gpu(&result);
    Ok(LocalEval { result, needs_gpu })
}

/// A file path when it exists, else a key of the dataset named by the config.
fn resolve_problem(
    repo: &Path,
    config: &Config,
    query: &str,
) -> Result<(PathBuf, String), LocalEvalError> {
    let as_path = PathBuf::from(query);
    let candidates = [as_path.clone(), repo.join(&as_path)];
    if let Some(p) = candidates.iter().find(|p| p.is_file()) {
        let label = ProblemSet::load(&repo.join(&config.dataset.root))
            .ok()
            .and_then(|set| set.by_path(p).map(|pr| pr.key.clone()))
            .unwrap_or_else(|| query.to_string());
        return Ok((p.clone(), label));
    }
    let root = repo.join(&config.dataset.root);
    let set = ProblemSet::load(&root).map_err(|source| LocalEvalError::NoDataset {
        query: query.to_string(),
        root: root.clone(),
        source,
    })?;
    let problem = set.find(query).map_err(|source| LocalEvalError::Lookup {
        root: root.clone(),
        source,
    })?;
    Ok((problem.path.clone(), problem.key.clone()))
}

/// The problem and precision the kernel's directive or path maps it to (`kernelgate kernels`).
fn mapped_problem(
    repo: &Path,
    config: &Config,
    kernel: &Path,
) -> Result<(PathBuf, String, Precision), LocalEvalError> {
    let spec = config.dataset_spec(repo);
    let set = spec.load().map_err(|source| LocalEvalError::NoProblems {
        spec: spec.to_string(),
        source,
    })?;
    let k = kernelgate_model::Kernel::resolve_one(repo, kernel, config, &set).map_err(|error| {
        LocalEvalError::Unmapped {
            kernel: kernel.to_path_buf(),
            error: Box::new(error),
        }
    })?;
    let p = set
        .get(&k.problem_key)
        .ok_or_else(|| LocalEvalError::MappedToNothing {
            kernel: kernel.to_path_buf(),
            key: k.problem_key.clone(),
        })?;
    Ok((p.path.clone(), p.key.clone(), k.precision))
}

/// A CPU run whose failure is torch reporting that CUDA is missing.
fn needs_gpu(r: &EvalResult) -> bool {
    let on_cpu = r
        .device
        .as_ref()
        .is_none_or(kernelgate_model::RanOn::is_cpu);
    on_cpu && r.outcome.torch_found_no_cuda()
}

impl LocalEval {
    /// The `--format json` document: the result's object and whether it needs a GPU.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(EvalJson::new(&self.result, self.needs_gpu))
            .expect("the eval document is plain data")
    }
}

/// The human table (`--format human`): one line per fact, then the sections that apply.
impl fmt::Display for LocalEval {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = &self.result;
        if !self.needs_gpu {
            return write_table(f, r);
        }
        writeln!(f, "problem  {}", r.problem)?;
        writeln!(f, "kernel   {}", r.kernel)?;
        writeln!(f, "device   {}", shown_device(r.device.as_ref()))?;
        writeln!(
            f,
            "outcome  SKIPPED — needs a GPU: torch found no CUDA on this machine ({}); run it \
             on a GPU machine",
            r.outcome.summary().lines().next().unwrap_or("").trim()
        )
    }
}

/// The `--format json` document (docs/eval.md): what a reader of one eval needs, the seed,
/// phases and log tails, and whether the kernel needs a GPU. A view of the [`EvalResult`], so
/// every key is one of its fields or computed from them here.
#[derive(Debug, Serialize)]
struct EvalJson<'a> {
    problem: &'a str,
    kernel: &'a str,
    device: Option<&'a kernelgate_model::RanOn>,
    outcome: &'a Outcome,
    findings: Vec<FindingJson<'a>>,
    timing: Option<&'a kernelgate_eval::TimingResult>,
    /// The physical floor of the problem's work on this device.
    floor_ms: Option<f64>,
    work: Option<&'a kernelgate_eval::ProblemWork>,
    audit: Option<&'a kernelgate_model::OpAudit>,
    memory: Option<&'a kernelgate_model::MemoryUse>,
    precision_audit: Option<&'a kernelgate_model::PrecisionAudit>,
    seed: u64,
    seed_random: bool,
    sandbox: Option<&'a kernelgate_model::SandboxLevel>,
    extensions: &'a [kernelgate_eval::ExtensionBuild],
    extensions_dir: Option<&'a str>,
    precompiled_header: Option<&'a str>,
    /// [`EvalResult::build_note`].
    build: Option<String>,
    torch: Option<&'a str>,
    phases: &'a [kernelgate_eval::Phase],
    exit: &'a kernelgate_eval::ExitInfo,
    stdout_tail: &'a str,
    stderr_tail: &'a str,
    needs_gpu: bool,
}

/// A runtime finding as the document shows it (no line: runtime findings have none).
#[derive(Debug, Serialize)]
struct FindingJson<'a> {
    rule: &'a str,
    severity: Severity,
    message: &'a str,
}

impl<'a> EvalJson<'a> {
    fn new(r: &'a EvalResult, needs_gpu: bool) -> EvalJson<'a> {
        EvalJson {
            problem: &r.problem,
            kernel: &r.kernel,
            device: r.device.as_ref(),
            outcome: &r.outcome,
            findings: r
                .findings
                .iter()
                .map(|f| FindingJson {
                    rule: &f.rule,
                    severity: f.severity,
                    message: &f.message,
                })
                .collect(),
            timing: r.timing.as_ref(),
            floor_ms: r
                .timing
                .as_ref()
                .and_then(|t| t.floor.as_ref())
                .map(|f| f.floor_ms),
            work: r.work.as_ref(),
            audit: r.audit.as_ref(),
            memory: r.memory.as_ref(),
            precision_audit: r.precision_audit.as_ref(),
            seed: r.seed,
            seed_random: r.seed_random,
            sandbox: r.sandbox.as_ref(),
            extensions: &r.extensions,
            extensions_dir: r.extensions_dir.as_deref(),
            precompiled_header: r.precompiled_header.as_deref(),
            build: r.build_note(),
            torch: r.torch.as_deref(),
            phases: &r.phases,
            exit: &r.exit,
            stdout_tail: &r.stdout_tail,
            stderr_tail: &r.stderr_tail,
            needs_gpu,
        }
    }
}

fn write_table(f: &mut fmt::Formatter<'_>, r: &EvalResult) -> fmt::Result {
    writeln!(f, "problem  {}", r.problem)?;
    writeln!(f, "kernel   {}", r.kernel)?;
    writeln!(f, "device   {}", shown_device(r.device.as_ref()))?;
    writeln!(
        f,
        "seed     {}{}",
        r.seed,
        if r.seed_random {
            " (random; pass --seed to reproduce)"
        } else {
            ""
        }
    )?;
    if let Some(level) = &r.sandbox {
        writeln!(f, "sandbox  {level}")?;
    }
    if let Some(note) = r.build_note() {
        writeln!(f, "build    {note}")?;
    }
    let failing = r
        .findings
        .iter()
        .filter(|x| x.severity == Severity::Error)
        .count();
    let verdict = if r.passed() && failing > 0 {
        format!("PASSED BUT {failing} FAILING FINDING(S)")
    } else if r.passed() {
        "PASSED".to_string()
    } else {
        r.outcome.kind().to_uppercase()
    };
    writeln!(f, "outcome  {verdict}: {}", r.outcome.summary())?;
    match &r.outcome {
        Outcome::CompileError { log_tail, .. } if !log_tail.is_empty() => {
            writeln!(f, "\ncompiler log (tail):\n{}", indent(log_tail))?;
        }
        Outcome::RuntimeError { traceback, .. } | Outcome::Crash { traceback, .. }
            if !traceback.is_empty() =>
        {
            writeln!(f, "\ntraceback (tail):\n{}", indent(traceback))?;
        }
        _ => {}
    }
    if !r.findings.is_empty() {
        writeln!(f, "\nfindings")?;
        for x in &r.findings {
            writeln!(f, "  {:7} {}: {}", x.severity.as_str(), x.rule, x.message)?;
        }
    }
    if let Some(a) = &r.audit {
        writeln!(
            f,
            "\nop audit ({} time, {:.1} ms)",
            match a.clock {
                kernelgate_model::AuditClock::Gpu => "GPU",
                kernelgate_model::AuditClock::Cpu => "CPU",
            },
            a.audit_ms
        )?;
        writeln!(
            f,
            "  custom share {} of {:.4} ms",
            a.share_label(),
            a.total_ms
        )?;
        for e in &a.entries {
            let who = match (&e.library, &e.by_extension) {
                (Some(lib), _) => format!("{} ({lib})", e.class.as_str()),
                (None, Some(by)) => format!("{} (called by {by})", e.class.as_str()),
                _ => e.class.as_str().to_string(),
            };
            writeln!(
                f,
                "  {:>5.1}%  {:.4} ms  {:30} {who}",
                e.share.unwrap_or(0.0) * 100.0,
                e.ms,
                e.op
            )?;
        }
        let ineffective = a.describe_ineffective();
        if !ineffective.is_empty() {
            writeln!(f, "  no effect: {ineffective}")?;
        }
    }
    if let Some(t) = &r.timing {
        writeln!(f, "\ntiming")?;
        for (name, s) in &t.samples {
            let ms: Vec<f64> = s.iter().map(|x| x.ms).collect();
            if let Ok(st) = kernelgate_timing::SeriesStats::from_samples(&ms) {
                let floor = match (&t.floor, name) {
                    (Some(fl), kernelgate_timing::Series::Candidate) => {
                        format!("  floor {:.4} ms", fl.floor_ms)
                    }
                    _ => String::new(),
                };
                writeln!(
                    f,
                    "  {name:10} median {:.4} ms  IQR {:.4} ms  n {}{floor}",
                    st.median, st.iqr, st.n
                )?;
            }
        }
        writeln!(f, "  {}", floor_line(r))?;
        if let Some(c) = &t.vs_reference {
            let (s, (lo, hi)) = c.speedup();
            writeln!(
                f,
                "  speedup over reference {s:.3}x (95% CI {lo:.3}-{hi:.3}), {}",
                c.verdict.as_str()
            )?;
        }
        if let Some(c) = &t.vs_base {
            writeln!(
                f,
                "  against base {:+.2}% ({})",
                c.change_pct(),
                c.verdict.as_str()
            )?;
        }
    }
    if !r.phases.is_empty() {
        writeln!(f, "\nphases (ms)")?;
        for p in &r.phases {
            writeln!(f, "  {:20} {:10.1}", p.name, p.ms)?;
        }
    }
    if !r.passed() && !r.stderr_tail.trim().is_empty() {
        writeln!(f, "\nstderr (tail):\n{}", indent(r.stderr_tail.trim_end()))?;
    }
    Ok(())
}

/// How the physical floor was set, or why there is none.
fn floor_line(r: &EvalResult) -> String {
    let work = match &r.work {
        Some(w) => format!(
            "{} B in, {} B out, {}",
            w.input_bytes,
            w.output_bytes,
            w.flops
                .map(|f| format!("{f} FLOP"))
                .unwrap_or_else(|| "FLOPs not counted".into())
        ),
        None => "work not counted".into(),
    };
    match r.timing.as_ref().and_then(|t| t.floor.as_ref()) {
        Some(f) => format!(
            "floor {:.4} ms ({}-bound; {work}; {} at {:.0} GB/s{}, {:.0} TFLOP/s)",
            f.floor_ms,
            f.bound,
            f.gpu,
            f.bandwidth_gbs,
            f.measured_bandwidth_gbs
                .map(|m| format!(" (measured {m:.0})"))
                .unwrap_or_default(),
            f.peak_tflops
        ),
        None => {
            let why = match r
                .device
                .as_ref()
                .and_then(kernelgate_model::RanOn::gpu_name)
            {
                None => "the CPU has no datasheet bandwidth".to_string(),
                Some(_) if r.work.is_none() => "the problem's work could not be counted".into(),
                Some(g) if kernelgate_timing::DeviceSpec::lookup(g).is_none() => {
                    format!("no datasheet numbers for {g}")
                }
                Some(_) => "a warm L2 bounds no bytes and no FLOPs were counted".into(),
            };
            format!("floor none: {why} ({work})")
        }
    }
}

fn indent(s: &str) -> String {
    s.lines()
        .map(|l| format!("  {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn shown_device(d: Option<&kernelgate_model::RanOn>) -> String {
    d.map_or_else(|| "-".to_string(), ToString::to_string)
}
