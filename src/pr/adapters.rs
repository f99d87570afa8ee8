//! The real lint, harness and timing behind the pipeline's traits.

use kernelgate_eval::{EvalResult, JobRequest, JobSpec, Outcome, ShownPaths, Stage};
use kernelgate_lint::{LintOptions, SeverityOrOff};
use kernelgate_model::{Condition, Config, Finding};
use kernelgate_report::{
    ComparisonSummary, ComparisonVerdict, Flag, Interval, KernelRow, OutcomeKind, OutcomeSummary,
};
use std::path::PathBuf;

use super::evaluator::{Device, Evaluated, Evaluator, Linter};
use super::plan::Job;
use crate::baseline::judge::RunKey;

/// `kernelgate_lint::lint_file` with the repository's severity overrides.
pub struct RepoLinter {
    overrides: std::collections::BTreeMap<String, SeverityOrOff>,
}

impl RepoLinter {
    pub fn new(cfg: &Config) -> RepoLinter {
        RepoLinter {
            overrides: kernelgate_lint::severity_overrides(&cfg.lint),
        }
    }
}

impl Linter for RepoLinter {
    fn lint(&self, job: &Job) -> Result<Vec<Finding>, String> {
        let opts = LintOptions {
            precision: job.precision,
            backend: Some(job.backend),
            severity_overrides: self.overrides.clone(),
            // The problem decides dead branches (`get_init_inputs()`); unreadable: unknown.
            problem_source: job
                .problem_file
                .as_ref()
                .and_then(|p| std::fs::read_to_string(p).ok()),
            // The files it loads are read inside the checkout (or the plan's copy of head),
            // and named as the repository names them.
            root: checkout_root(&job.kernel_file, job.path()),
            ..LintOptions::default()
        };
        // The file on disk, not the plan's lossy copy: unreadable or not UTF-8 is KG000.
        kernelgate_lint::lint_path(job.path(), &job.kernel_file, &opts)
            .map(|(findings, _)| findings)
            .map_err(|e| e.to_string())
    }
}

/// The root of the tree `file` lies in, when it is `rel` (a repository path) below it.
fn checkout_root(file: &std::path::Path, rel: &str) -> Option<PathBuf> {
    let mut root = file.to_path_buf();
    for _ in std::path::Path::new(rel).components() {
        root = root.parent()?.to_path_buf();
    }
    file.ends_with(rel).then_some(root)
}

/// `kernelgate_eval::run_job`: correctness, then timing of reference vs candidate and base vs head.
pub struct HarnessEvaluator {
    /// The job's settings, runner's Python included ([`JobSpec::build`]).
    pub config: Config,
    /// Device preference (`auto`, `cuda`, `cpu`) from the command line or config.
    pub device: kernelgate_model::Device,
    /// The runner's build store (`KERNELGATE_BUILD_STORE`): a build of the same files,
    /// flags, torch and toolchain is never compiled twice, across pull requests too. `None`:
    /// every job builds for itself.
    pub store: Option<kernelgate_eval::BuildStore>,
    pub seed: Option<u64>,
    /// Correctness only (no timing), for quick local runs.
    pub no_timing: bool,
    /// The repository's root: absolute paths under it become relative in messages.
    pub repo_root: Option<PathBuf>,
    /// False on a machine without a GPU: kernels that need one are skipped, never built.
    pub has_gpu: bool,
    /// Processes started ahead of their device's turn ([`Evaluator::prepare`]).
    pub prepared: std::sync::Mutex<Vec<(String, Device, kernelgate_eval::PreparedJob)>>,
    /// Kernels whose base version the build stage builds (or built) in a build job of its own:
    /// their evals load that build read-only ([`JobSpec::base_prebuilt`]).
    pub bases_built: std::sync::Mutex<std::collections::BTreeSet<String>>,
    /// What the build stage did with each kernel's build (by path): a build compiled ahead is
    /// loaded by its eval from the store, and its row says it was compiled in this run.
    pub built_ahead:
        std::sync::Mutex<std::collections::BTreeMap<String, kernelgate_eval::StoreUse>>,
    /// A GPU runner's CPUs shared out between builds/GPU evals and the CPU lanes; `None`: every
    /// job on every CPU.
    pub cores: Option<super::cores::CorePlan>,
    /// The CPU lanes' sets not in use by a CPU eval right now.
    pub free_lanes: std::sync::Mutex<Vec<Vec<usize>>>,
}

/// A CPU lane's set, taken for one eval and given back when it ends.
struct LaneLease<'a> {
    pool: &'a std::sync::Mutex<Vec<Vec<usize>>>,
    cpus: Option<Vec<usize>>,
}

impl Drop for LaneLease<'_> {
    fn drop(&mut self) {
        if let Some(cpus) = self.cpus.take() {
            self.pool
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(cpus);
        }
    }
}

impl HarnessEvaluator {
    /// What `pr` asks of a job on `device`: the same for its build, its prepared process and its
    /// eval, so the eval finds what the build wrote (same extensions directory, same
    /// architecture list).
    fn request(&self, job: &Job, device: Device, stage: Stage) -> JobRequest {
        JobRequest {
            stage,
            problem_label: Some(job.problem().to_string()),
            kernel_label: Some(job.path().to_string()),
            base_kernel: job.base_file.clone(),
            sources: job.sources.clone(),
            base_sources: job.base_sources.clone(),
            base_prebuilt: self
                .bases_built
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .contains(job.path()),
            device: Some(self.device),
            precision: Some(job.precision),
            seed: self.seed,
            no_timing: self.no_timing,
            gpu: match device {
                Device::Cuda(i) => Some(i),
                Device::Cpu => None,
            },
            extensions_dir: self
                .store
                .clone()
                .map(kernelgate_eval::ExtensionsDir::Store)
                .unwrap_or_default(),
            sources_known: sources_known(job),
            // Builds and GPU evals keep off the CPU lanes; a CPU eval gets its lane's.
            cpus: match device {
                Device::Cuda(_) => self.gpu_side(),
                Device::Cpu if stage == Stage::Build => self.gpu_side(),
                Device::Cpu => None,
            },
            ..JobRequest::default()
        }
    }

    /// The job's spec for `kernel` (the head's file, or the base's for the base's build).
    fn spec(
        &self,
        job: &Job,
        kernel: &std::path::Path,
        request: &JobRequest,
    ) -> Result<JobSpec, String> {
        let problem_file = job.problem_file.as_ref().ok_or("no problem file")?;
        let repo = self
            .repo_root
            .as_deref()
            .unwrap_or(std::path::Path::new("."));
        JobSpec::build(&self.config, repo, problem_file, kernel, request).map_err(|e| e.to_string())
    }

    fn stash(
        &self,
    ) -> std::sync::MutexGuard<'_, Vec<(String, Device, kernelgate_eval::PreparedJob)>> {
        self.prepared.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Evaluator for HarnessEvaluator {
    fn needs_build(&self, job: &Job) -> bool {
        self.builds_extension(job) && !self.skips_for_want_of_a_gpu(job, None)
    }

    fn runs_on_cpu(&self, job: &Job) -> bool {
        // The harness's own rule (launch.rs asks the same): a CPU-only C++ extension cannot
        // take CUDA tensors.
        kernelgate_model::classify(Some(job.backend), &job.source, None).runs_on_cpu
    }

    fn cpu_lanes(&self) -> Option<usize> {
        self.cores.as_ref().map(|c| c.lanes.len())
    }

    fn build(&self, job: &Job) -> Result<(), String> {
        let request = self.request(job, Device::Cpu, Stage::Build);
        let spec = self.spec(job, &job.kernel_file, &request)?;
        // The base builds beside the head, in a process of its own.
        let result = std::thread::scope(|s| {
            let base = s.spawn(|| self.build_base(job));
            let result = kernelgate_eval::run_job(&spec);
            let _ = base.join();
            result
        });
        if let Some(u) = &result.build_store {
            self.built_ahead
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(job.path().to_string(), u.clone());
        }
        match result.outcome {
            Outcome::Passed { .. } => Ok(()),
            other => {
                let mut why = other.summary();
                self.relativize(job, &mut why);
                Err(why)
            }
        }
    }

    fn prepare(&self, job: &Job, device: Device) {
        if !self.config.harness.start_ahead || self.skips_for_want_of_a_gpu(job, Some(device)) {
            return;
        }
        self.build_base(job);
        let request = self.request(job, device, Stage::Eval);
        if let Ok(spec) = self.spec(job, &job.kernel_file, &request) {
            let prepared = kernelgate_eval::prepare_job(&spec);
            self.stash()
                .push((job.path().to_string(), device, prepared));
        }
    }

    fn discard(&self, job: &Job, device: Device) {
        self.stash()
            .retain(|(path, d, _)| !(path == job.path() && *d == device));
    }

    fn evaluate(&self, job: &Job, device: Device) -> Evaluated {
        if job.problem_file.is_none() {
            return Evaluated::skipped("no problem file");
        }
        // No GPU for this run and a kernel that needs one: neutral, decided before the harness.
        if self.skips_for_want_of_a_gpu(job, Some(device)) {
            self.discard(job, device);
            return Evaluated::skipped(self.no_gpu_message(job));
        }
        self.build_base(job);
        // Held until this eval ends: the lane's CPUs are this eval's alone.
        let lane = self.lease_lane(device);
        let mut request = self.request(job, device, Stage::Eval);
        if device == Device::Cpu {
            request.cpus = lane.cpus.clone();
        }
        let spec = match self.spec(job, &job.kernel_file, &request) {
            Ok(spec) => spec,
            Err(e) => return Evaluated::Error(e),
        };
        let prepared = {
            let mut stash = self.stash();
            let mine = stash
                .iter()
                .position(|(path, d, _)| path == job.path() && *d == device)
                .map(|k| stash.swap_remove(k).2);
            // Started for this kernel on another device that did not take it: let it go.
            stash.retain(|(path, _, _)| path != job.path());
            mine
        };
        let mut result = prepared
            .unwrap_or_else(|| kernelgate_eval::prepare_job(&spec))
            .finish();
        // Compiled by the build stage of this run, then loaded from the store by the eval.
        let ahead = self
            .built_ahead
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(job.path());
        if let Some(u) = ahead.filter(|u| u.compiled()) {
            if result.build_store == Some(kernelgate_eval::StoreUse::Store) {
                result.build_store = Some(u);
            }
        }
        let run_key = result.machine.as_ref().map(|machine| RunKey {
            key: kernelgate_eval::hardware_key(machine, job.precision),
            l2: self.config.timing.l2,
        });
        if device == Device::Cpu && !self.has_gpu && result.outcome.torch_found_no_cuda() {
            // torch found no CUDA (no toolkit, driver or device): the machine's limit, not the
            // candidate's failure.
            return Evaluated::Skipped {
                reason: self.no_gpu_message(job),
                run_key,
            };
        }
        self.shown_paths(job).apply_result(&mut result);
        Evaluated::Ran {
            result: Box::new(result),
            run_key,
        }
    }
}

impl HarnessEvaluator {
    /// Triton compiles at its first launch, on the GPU; Python kernels build nothing. The
    /// others build a torch extension, built ahead and kept when there is a build store.
    fn builds_extension(&self, job: &Job) -> bool {
        use kernelgate_model::Backend;
        matches!(
            job.backend,
            Backend::Cuda | Backend::Cute | Backend::Hip | Backend::Thunderkittens | Backend::Cpp
        ) && job.problem_file.is_some()
            && self.store.is_some()
            // A build ahead is kept for the eval in the store only.
            && sources_known(job)
    }

    /// Builds the base version of an edited kernel, once, in a build job of its own, kept in
    /// the build store under its own key (the one it had as a head: nothing to do when its pull
    /// request or main's baseline kept it), before any process of the head's eval starts: the
    /// eval loads that build from the store, read-only, so no candidate can change what later
    /// jobs load. The build
    /// stage calls it beside the head's build; a run without one (no GPU), before the eval. A
    /// base that does not build is the eval's warning (`base-kernel-failed`), not the head's.
    fn build_base(&self, job: &Job) {
        if job.base_file.is_none() || !self.builds_extension(job) {
            return;
        }
        // Recorded first: a process started ahead while this builds loads it too.
        let first = self
            .bases_built
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(job.path().to_string());
        let (true, Some(base)) = (first, &job.base_file) else {
            return;
        };
        let mut request = self.request(job, Device::Cpu, Stage::Build);
        request.kernel_label = Some(format!("{} (base)", job.path()));
        // The base builds from the files it had at the merge base.
        request.sources = job.base_sources.clone();
        if let Ok(spec) = self.spec(job, base, &request) {
            kernelgate_eval::run_job(&spec);
        }
    }

    /// The CPUs of builds and GPU evals when the CPU lanes have their own.
    fn gpu_side(&self) -> Option<Vec<usize>> {
        self.cores.as_ref().map(|c| c.gpu_side.clone())
    }

    /// A free CPU lane for an eval on `device` (none on a GPU, or without lanes). The scheduler
    /// runs one CPU worker per lane, so one is always free.
    fn lease_lane(&self, device: Device) -> LaneLease<'_> {
        let cpus = match device {
            Device::Cpu if self.cores.is_some() => self
                .free_lanes
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .pop(),
            _ => None,
        };
        LaneLease {
            pool: &self.free_lanes,
            cpus,
        }
    }

    /// True when the kernel needs a GPU and this run has none (`device`: the job's device, when
    /// known; a job on the CPU lane of a GPU runner is not skipped for want of one).
    fn skips_for_want_of_a_gpu(&self, job: &Job, device: Option<Device>) -> bool {
        let on_cpu = match device {
            Some(d) => d == Device::Cpu && !self.has_gpu,
            None => !self.has_gpu,
        };
        on_cpu && super::plan::needs_gpu(job.backend, &job.source)
    }

    /// `text` with the job's absolute paths written as the repository names them.
    fn relativize(&self, job: &Job, text: &mut String) {
        self.shown_paths(job).apply(text);
    }

    /// The job's absolute paths (kernel, base copy, problem, repository, extensions cache) and
    /// the names the repository gives them: messages and logs never show the runner's absolute
    /// paths or temporary copies.
    fn shown_paths(&self, job: &Job) -> ShownPaths {
        let mut shown = ShownPaths::default();
        shown.add(&job.kernel_file, job.path());
        if let (Some(b), Some(bp)) = (&job.base_file, &job.change.base_path) {
            shown.add(b, format!("{bp} (base version)"));
        }
        if let Some(root) = &self.repo_root {
            if let Some(p) = &job.problem_file {
                if let Ok(rel) = p.strip_prefix(root) {
                    shown.add(p, rel.display().to_string());
                }
            }
            shown.add(root, ".");
        }
        if let Some(store) = &self.store {
            shown.add(store.root(), "$KERNELGATE_BUILD_STORE");
        }
        shown
    }

    fn no_gpu_message(&self, job: &Job) -> String {
        let why = if self.device == kernelgate_model::Device::Cpu {
            "this run uses the CPU (--device cpu or `[defaults] device`)"
        } else {
            "no GPU was detected on this machine"
        };
        format!(
            "skipped — needs a GPU: {} is a {} kernel and {why}; run the gate on a GPU runner",
            job.path(),
            job.backend.as_str()
        )
    }
}

/// Every file the kernel's builds (its head's and its base's) read is known: only such a
/// build is kept in the build store, whose key is made of them.
fn sources_known(job: &Job) -> bool {
    job.change.sources.complete()
        && job
            .change
            .base_sources
            .as_ref()
            .is_none_or(|d| d.complete())
}

/// Moves the harness's result onto its kernel's row: the one mapping from the harness's
/// vocabulary onto the report's. The row's lint findings stay; what only the pipeline knows
/// (the device's key, committed baselines, a changed reference) it adds after.
pub fn convert(result: EvalResult, row: &mut KernelRow) {
    let kind = match &result.outcome {
        Outcome::Passed { .. } => OutcomeKind::Correct,
        Outcome::Incorrect { .. }
        | Outcome::ShapeMismatch(_)
        | Outcome::DtypeMismatch(_)
        | Outcome::DeviceMismatch(_) => OutcomeKind::Incorrect,
        Outcome::NotATensor { .. }
        | Outcome::InputMutated { .. }
        | Outcome::OutputAliased { .. } => OutcomeKind::Hack,
        Outcome::CompileError { .. } => OutcomeKind::CompileError,
        Outcome::RuntimeError {
            memory_limit: true, ..
        } => OutcomeKind::OutOfMemory,
        Outcome::RuntimeError { .. } => OutcomeKind::RuntimeError,
        Outcome::Crash { .. } => OutcomeKind::Crash,
        Outcome::Timeout { .. } => OutcomeKind::Timeout,
        Outcome::HarnessError { .. } => OutcomeKind::Other,
        Outcome::Infrastructure { .. } => OutcomeKind::Infrastructure,
    };
    let mut outcome = OutcomeSummary::new(kind, result.outcome.summary());
    let mut details = serde_json::to_value(&result.outcome).unwrap_or_default();
    if let Some(obj) = details.as_object_mut() {
        obj.insert("outcome".into(), result.outcome.kind().into());
        obj.insert("seed".into(), result.seed.into());
        obj.insert("seed_random".into(), result.seed_random.into());
        if let Some(level) = &result.sandbox {
            obj.insert("sandbox".into(), level.to_string().into());
        }
        if let Some(d) = &result.device {
            obj.insert("device".into(), d.to_string().into());
        }
        if let Some(t) = &result.torch {
            obj.insert("torch".into(), t.clone().into());
        }
    }
    outcome.details = details;
    outcome.log_tail = match &result.outcome {
        Outcome::CompileError { log_tail, .. } => Some(log_tail.clone()),
        Outcome::RuntimeError { traceback, .. } | Outcome::Crash { traceback, .. }
            if !traceback.is_empty() =>
        {
            Some(traceback.clone())
        }
        Outcome::Passed { .. } => None,
        _ => Some(result.stderr_tail.clone()).filter(|t| !t.trim().is_empty()),
    };

    // Timing findings become flags the policy knows; other runtime findings stay findings.
    let mut flags = Vec::new();
    for f in result.findings {
        let flag_code = match f.rule.as_str() {
            kernelgate_timing::sample::RULE_ESCAPED => Some(Condition::EscapedWork),
            kernelgate_timing::plausibility::RULE_BELOW_FLOOR => Some(Condition::ImplausibleTime),
            kernelgate_timing::plausibility::RULE_EXCESSIVE_SPEEDUP => {
                Some(Condition::ExcessiveSpeedup)
            }
            _ => None,
        };
        match flag_code {
            Some(c) => flags.push(Flag {
                code: c,
                severity: f.severity,
                message: f.message,
            }),
            None => row.findings.push(f),
        }
    }
    if outcome.kind == OutcomeKind::Correct
        && flags.iter().any(|f| f.code == Condition::EscapedWork)
    {
        // Correct numbers, but the timing cannot be trusted.
        outcome.kind = OutcomeKind::EscapedWork;
        outcome.message = "correct, but work escaped the timed region".into();
        flags.retain(|f| f.code != Condition::EscapedWork);
    }
    row.outcome = outcome;
    row.flags.extend(flags);
    row.seed = Some(result.seed);
    row.memory = result.memory;
    row.precision_audit = result.precision_audit;
    row.audit = result.audit;
    let Some(t) = result.timing else {
        return;
    };
    row.reference_check = t.reference_check;
    row.efficiency = t.efficiency;
    if let Some(c) = &t.vs_reference {
        let (s, (lo, hi)) = c.speedup();
        row.speedup_eager = Some(Interval::new(s, lo, hi));
        row.reference_ms = Some(c.base.median);
        row.reference_ci_ms = Some(c.base.ci95_median);
        row.time_ms = Some(c.head.median);
        row.time_ci_ms = Some(c.head.ci95_median);
    }
    if let Some(c) = &t.vs_base {
        row.vs_base = Some(ComparisonSummary {
            ratio: c.ratio,
            ci_lo: Some(c.ci95.0),
            ci_hi: Some(c.ci95.1),
            verdict: match c.verdict {
                kernelgate_timing::Verdict::Faster => ComparisonVerdict::Faster,
                kernelgate_timing::Verdict::Slower => ComparisonVerdict::Slower,
                kernelgate_timing::Verdict::Unchanged => ComparisonVerdict::Same,
            },
            against: None,
        });
        row.time_ms.get_or_insert(c.head.median);
        row.time_ci_ms.get_or_insert(c.head.ci95_median);
    }
}
