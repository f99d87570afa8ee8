//! The `report.json` model: plain data, versioned, written by `kernelgate pr` and read back by
//! `kernelgate publish` / `kernelgate merge` (possibly on another machine, another version).

use kernelgate_model::{Backend, Finding, Precision, SandboxLevel, Severity};
use serde::{Deserialize, Serialize};

/// Schema identifier written into every report. Readers refuse other major versions.
pub const SCHEMA: &str = "kernelgate.report/1";

/// One gate run over one pull request (or one shard of it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub schema: String,
    pub run: RunInfo,
    #[serde(default)]
    pub policy: PolicyInfo,
    #[serde(default)]
    pub kernels: Vec<KernelRow>,
    #[serde(default)]
    pub reference_changes: Vec<ReferenceChange>,
    /// Observations about problems rather than kernels, once per problem: no kernel's verdict.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub problem_observations: Vec<ProblemObservation>,
    /// Other changed paths worth reporting (committed results, deleted references, ...).
    #[serde(default)]
    pub other_changes: Vec<String>,
    /// The settings of `kernelgate.toml` this pull request changes, each with the value this run
    /// was judged with and the head's (docs/config.md#where-the-judging-config-comes-from).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub config_changes: Vec<ConfigChange>,
    #[serde(default)]
    pub summary: Summary,
}

/// What a run observed about a problem rather than a kernel (docs/policy.md): its inputs let a
/// trivial output pass, its data does not fit the harness's memory budget, the pull request
/// edits it. Nothing in a kernel can change it, so it is reported once per problem, in a
/// section of its own, and is no kernel's verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProblemObservation {
    /// Problem key, e.g. `level1/19_ReLU`.
    pub problem: String,
    /// A runtime check's rule (`eval/trivial-output-passes`) or a policy condition
    /// (`reference_changed`).
    pub code: String,
    pub severity: Severity,
    pub message: String,
    /// The kernels whose runs observed it, in the order they did.
    #[serde(default)]
    pub kernels: Vec<String>,
}

impl ProblemObservation {
    /// A changed reference keeps the run from a silent pass (a policy condition that always
    /// warns); the runtime checks' observations change no verdict.
    pub fn warns_the_run(&self) -> bool {
        kernelgate_model::Condition::parse(&self.code).is_some_and(|c| c.always_warns())
    }
}

impl Report {
    /// An empty report for a run; `summary` is recomputed by [`Report::finalize`].
    pub fn new(run: RunInfo) -> Self {
        Report {
            schema: SCHEMA.to_string(),
            run,
            policy: PolicyInfo::default(),
            kernels: Vec::new(),
            reference_changes: Vec::new(),
            problem_observations: Vec::new(),
            other_changes: Vec::new(),
            config_changes: Vec::new(),
            summary: Summary::default(),
        }
    }

    /// Recompute the summary from the rows (call before writing).
    pub fn finalize(&mut self) {
        self.summary = Summary::compute(&self.kernels);
        let changed = !self.reference_changes.is_empty()
            || self
                .problem_observations
                .iter()
                .any(ProblemObservation::warns_the_run);
        if changed && self.summary.verdict == Verdict::Pass {
            // A changed reference makes every speedup suspect: never a silent pass.
            self.summary.verdict = Verdict::Warn;
        }
    }

    /// Moves what row `i` observed about its problem rather than itself (the runtime checks'
    /// [`kernelgate_model::PROBLEM_RUNTIME_RULES`] findings, flags of conditions
    /// [`kernelgate_model::Condition::about_problem`]) into [`Report::problem_observations`],
    /// once per problem: the row keeps only what is about the kernel.
    pub fn take_problem_observations(&mut self, i: usize) {
        let Some(row) = self.kernels.get_mut(i) else {
            return;
        };
        let mut taken: Vec<(String, Severity, String)> = Vec::new();
        row.findings.retain(|f| {
            let about = f.is_about_problem();
            if about {
                taken.push((f.rule.clone(), f.severity, f.message.clone()));
            }
            !about
        });
        row.flags.retain(|f| {
            let about = f.code.about_problem();
            if about {
                taken.push((f.code.as_str().to_string(), f.severity, f.message.clone()));
            }
            !about
        });
        let (problem, path) = (row.problem.clone(), row.path.clone());
        for (code, severity, message) in taken {
            self.observe(ProblemObservation {
                problem: problem.clone(),
                code,
                severity,
                message,
                kernels: vec![path.clone()],
            });
        }
    }

    /// Records an observation about a problem, merging it with the same one seen before.
    pub fn observe(&mut self, o: ProblemObservation) {
        match self
            .problem_observations
            .iter_mut()
            .find(|p| p.problem == o.problem && p.code == o.code && p.message == o.message)
        {
            Some(p) => {
                for k in o.kernels {
                    if !p.kernels.contains(&k) {
                        p.kernels.push(k);
                    }
                }
            }
            None => self.problem_observations.push(o),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunInfo {
    /// `owner/name`, used for links; empty for local runs.
    #[serde(default)]
    pub repo: String,
    #[serde(default)]
    pub pr_number: Option<u64>,
    #[serde(default)]
    pub base_sha: String,
    #[serde(default)]
    pub head_sha: String,
    /// RFC 3339 timestamps.
    #[serde(default)]
    pub started_at: String,
    #[serde(default)]
    pub finished_at: Option<String>,
    #[serde(default)]
    pub hardware: Hardware,
    /// Seed the harness derived its per-trial seeds from.
    #[serde(default)]
    pub seed: Option<u64>,
    /// How the candidates' child processes were confined, every distinct level once (JSON:
    /// `full`, `partial (...)`, `unavailable (...)`, `off`, joined with `; `).
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        with = "kernelgate_model::sandbox::joined"
    )]
    pub sandbox: Vec<SandboxLevel>,
    /// `(index, count)`, 1-based index, when this report is one shard of a plan.
    #[serde(default)]
    pub shard: Option<(u32, u32)>,
    /// False while the run is still going or when it was cut short.
    #[serde(default)]
    pub complete: bool,
    /// Link to the workflow run whose artifact holds the full report, if known.
    #[serde(default)]
    pub artifact_url: Option<String>,
    /// The published performance dashboard (`[history] dashboard_url`): problems link to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dashboard_url: Option<String>,
    /// Where the configuration that judged this run came from (never the pull request's head).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<ConfigSource>,
}

impl RunInfo {
    /// Records a job's sandbox level on the run: every distinct level once.
    pub fn add_sandbox_level(&mut self, level: SandboxLevel) {
        if !self.sandbox.contains(&level) {
            self.sandbox.push(level);
        }
    }

    /// True when every job's child was fully confined (and at least one ran).
    pub fn fully_sandboxed(&self) -> bool {
        !self.sandbox.is_empty() && self.sandbox.iter().all(SandboxLevel::is_full)
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hardware {
    #[serde(default)]
    pub gpu: String,
    #[serde(default)]
    pub driver: String,
    #[serde(default)]
    pub cuda: String,
    #[serde(default)]
    pub torch: String,
    #[serde(default)]
    pub python: String,
    #[serde(default)]
    pub cpu: String,
}

/// The policy in force, echoed so readers know why a verdict is what it is.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PolicyInfo {
    /// Outcome / flag codes that fail the check.
    #[serde(default)]
    pub fail_on: Vec<String>,
    /// Outcome / flag codes that only warn.
    #[serde(default)]
    pub warn_on: Vec<String>,
    /// Relative slowdown vs base beyond which a significant regression fails (0.05 = 5 %).
    #[serde(default)]
    pub regression_threshold: Option<f64>,
    /// Acknowledgements in force (e.g. a PR label) with their reason.
    #[serde(default)]
    pub acknowledged: Vec<String>,
}

/// How a kernel file changed in the PR.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Change {
    Added,
    Modified,
    Renamed {
        from: String,
    },
    Deleted,
    Unchanged,
    /// The kernel is unchanged but its reference problem changed.
    ProblemChanged,
    /// The kernel's `.py` is unchanged but a file it is built from changed
    /// ([`KernelRow::changed_sources`]).
    SourcesChanged,
}

impl Change {
    pub fn label(&self) -> String {
        match self {
            Change::Added => "added".into(),
            Change::Modified => "modified".into(),
            Change::Renamed { from } => format!("renamed from `{from}`"),
            Change::Deleted => "deleted".into(),
            Change::Unchanged => "unchanged".into(),
            Change::ProblemChanged => "problem changed".into(),
            Change::SourcesChanged => "sources changed".into(),
        }
    }
}

/// One candidate kernel's results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelRow {
    /// Repo-relative path of the candidate file.
    pub path: String,
    /// Problem key, e.g. `level1/19_ReLU.py`.
    pub problem: String,
    pub backend: Backend,
    pub precision: Precision,
    pub change: Change,
    #[serde(default)]
    pub findings: Vec<Finding>,
    pub outcome: OutcomeSummary,
    /// Candidate median time (ms).
    #[serde(default)]
    pub time_ms: Option<f64>,
    /// 95% confidence interval of the candidate's median (ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_ci_ms: Option<(f64, f64)>,
    /// Reference (eager PyTorch) median time (ms), timed in the same run.
    #[serde(default)]
    pub reference_ms: Option<f64>,
    /// 95% confidence interval of the reference's median (ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference_ci_ms: Option<(f64, f64)>,
    /// The device the row was timed on (`NVIDIA H200`, or the CPU model for host timings).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// Whether the times are a GPU's or the host's (`None`: not timed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timed_on: Option<TimedOn>,
    /// How close the candidate's median comes to the device's limit for the problem's work
    /// (bandwidth or the precision's peak); `None` on the CPU and wherever no floor is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub efficiency: Option<kernelgate_model::Efficiency>,
    /// The seed of this kernel's eval: `kernelgate eval --seed` reproduces its inputs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// torch.compile median time (ms).
    #[serde(default)]
    pub compiled_ms: Option<f64>,
    #[serde(default)]
    pub speedup_eager: Option<Interval>,
    #[serde(default)]
    pub speedup_compile: Option<Interval>,
    /// Candidate vs the base branch's version of the same kernel.
    #[serde(default)]
    pub vs_base: Option<ComparisonSummary>,
    /// Candidate vs the committed baseline file.
    #[serde(default)]
    pub vs_baseline: Option<ComparisonSummary>,
    #[serde(default)]
    pub flags: Vec<Flag>,
    pub verdict: Verdict,
    /// Why the verdict is what it is, one sentence each.
    #[serde(default)]
    pub reasons: Vec<String>,
    /// Line of `class ModelNew` (or its `forward`) where runtime failures are annotated.
    #[serde(default)]
    pub annotate_line: Option<u32>,
    /// The runtime op audit: custom share and the ops still run by PyTorch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audit: Option<kernelgate_model::OpAudit>,
    /// Peak GPU and host memory of the eval and the harness's memory budget.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<kernelgate_model::MemoryUse>,
    /// The precision audit against a float64 reference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub precision_audit: Option<kernelgate_model::PrecisionAudit>,
    /// The reference timed alone before the candidate's import, between its calls and after
    /// them: how far it moved, whatever the verdict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference_check: Option<kernelgate_model::ReferenceCheck>,
    /// The kernel's recorded history on the default branch, when the run had the store.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<HistoryContext>,
    /// Where this kernel's wall time went; `None` when it was not evaluated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_spent: Option<TimeSpent>,
    /// The changed files of the kernel's dependency set (a `.cu` it loads, a header those
    /// include) that brought it into the plan, besides its own `.py`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changed_sources: Vec<String>,
    /// Why the kernel's dependency set is incomplete (a source path not known statically): it
    /// is then re-evaluated on any change under its directory.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unresolved_sources: Vec<String>,
}

/// A row's kernel in the default branch's history (docs/history.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryContext {
    /// Median of the kernel's medians over its last `commits` recorded commits (ms).
    pub level_ms: f64,
    pub commits: u32,
    /// The base version's time in this run (ms), when the base was timed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_ms: Option<f64>,
    /// base / history level − 1, in percent (+: the base is already slower than its history).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_vs_history_pct: Option<f64>,
}

/// How far above its history a base may be before the comment says so (percent; the larger of
/// this and the regression threshold).
pub const HISTORY_NOTE_PCT: f64 = 5.0;

impl HistoryContext {
    /// The sentence for the comment when the base is already slower than its history.
    pub fn base_note(&self, threshold_pct: f64) -> Option<String> {
        let pct = self.base_vs_history_pct?;
        (pct > threshold_pct.max(HISTORY_NOTE_PCT)).then(|| {
            format!(
                "the base version is already {pct:.1}% slower than main's history ({:.4} ms, the \
                 median of its last {} recorded commits): that slowdown predates this pull request",
                self.level_ms, self.commits
            )
        })
    }
}

/// The anchor of a problem on the dashboard: `level1/19_ReLU.py` → `level1-19_ReLU`.
pub fn problem_anchor(problem: &str) -> String {
    let stem = problem.strip_suffix(".py").unwrap_or(problem);
    stem.chars()
        .map(|c| match c {
            '/' => '-',
            c if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' => c,
            _ => '_',
        })
        .collect()
}

/// Where one kernel's wall time went in a run (ms, measured by the CLI's clock).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TimeSpent {
    /// From the start of the evaluation stage to the start of this kernel's build (or of its
    /// eval when it was not built ahead).
    pub queued_ms: f64,
    /// The compile stage, on CPU cores ahead of the GPU (0: not built ahead).
    pub build_ms: f64,
    /// Built, waiting for a free device.
    pub wait_ms: f64,
    /// The eval on its device: the child process, correctness, timing and the audit.
    pub eval_ms: f64,
    /// From the start of the evaluation stage to the end of this kernel's eval.
    pub total_ms: f64,
    /// Automatic retries after an infrastructure failure (0 or 1).
    #[serde(default)]
    pub retries: u32,
    /// The harness's own phases of the eval (`compile`, `timing`, `audit`, ...), in order.
    #[serde(default)]
    pub phases: Vec<(String, f64)>,
    /// Where the kernel's extension build came from: the runner's build store or a compile
    /// in this run. `None`: nothing to build, or no build store.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build: Option<BuildSource>,
}

/// Where a kernel's extension build came from (the runner's build store, docs/runner.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BuildSource {
    /// Loaded from the build store: built earlier from the same files, flags and toolchain.
    Store,
    /// Compiled in this run and kept in the store.
    Built,
    /// Compiled in this run; the store's entry was damaged and was replaced.
    Rebuilt,
    /// Compiled in this run and not kept (the job's writes were not confined, or it failed).
    NotKept,
}

impl BuildSource {
    pub fn as_str(self) -> &'static str {
        match self {
            BuildSource::Store => "from store",
            BuildSource::Built => "compiled, kept",
            BuildSource::Rebuilt => "compiled again (damaged entry), kept",
            BuildSource::NotKept => "compiled, not kept",
        }
    }
}

/// How many of a run's kernels loaded their build from the store and how many compiled it:
/// the line that says whether the build store did its work.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BuildCounts {
    pub from_store: usize,
    /// Compiled in this run (kept, kept again after a damaged entry, or not kept).
    pub compiled: usize,
    /// Of those compiled, the ones not kept in the store.
    pub not_kept: usize,
}

impl BuildCounts {
    /// The counts of `report`'s evaluated kernels that had an extension to build.
    pub fn of(report: &Report) -> BuildCounts {
        let mut c = BuildCounts::default();
        for build in report
            .kernels
            .iter()
            .filter_map(|k| k.time_spent.as_ref()?.build)
        {
            match build {
                BuildSource::Store => c.from_store += 1,
                BuildSource::Built | BuildSource::Rebuilt => c.compiled += 1,
                BuildSource::NotKept => {
                    c.compiled += 1;
                    c.not_kept += 1;
                }
            }
        }
        c
    }

    pub fn any(&self) -> bool {
        self.from_store + self.compiled > 0
    }
}

impl std::fmt::Display for BuildCounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} from the build store, {} compiled",
            self.from_store, self.compiled
        )?;
        if self.not_kept > 0 {
            write!(f, " ({} not kept)", self.not_kept)?;
        }
        Ok(())
    }
}

/// Where a row's times were measured: the comment groups rows by it, and host timings carry
/// their noise.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TimedOn {
    Gpu,
    Cpu,
}

impl KernelRow {
    /// A row with only identity and outcome filled in; the rest is `None`/empty.
    pub fn new(
        path: impl Into<String>,
        problem: impl Into<String>,
        backend: Backend,
        precision: Precision,
        change: Change,
        outcome: OutcomeSummary,
    ) -> Self {
        KernelRow {
            path: path.into(),
            problem: problem.into(),
            backend,
            precision,
            change,
            findings: Vec::new(),
            outcome,
            time_ms: None,
            time_ci_ms: None,
            reference_ms: None,
            reference_ci_ms: None,
            device: None,
            timed_on: None,
            efficiency: None,
            seed: None,
            compiled_ms: None,
            speedup_eager: None,
            speedup_compile: None,
            vs_base: None,
            vs_baseline: None,
            flags: Vec::new(),
            verdict: Verdict::Pass,
            reasons: Vec::new(),
            annotate_line: None,
            audit: None,
            time_spent: None,
            memory: None,
            precision_audit: None,
            reference_check: None,
            history: None,
            changed_sources: Vec::new(),
            unresolved_sources: Vec::new(),
        }
    }

    /// The kernel ran and produced correct results.
    pub fn is_correct(&self) -> bool {
        self.outcome.kind == OutcomeKind::Correct
    }

    /// The kernel was actually evaluated (not skipped or deleted).
    pub fn is_evaluated(&self) -> bool {
        !matches!(
            self.outcome.kind,
            OutcomeKind::Skipped | OutcomeKind::NotRun
        ) && self.verdict != Verdict::Skipped
    }
}

/// What happened when the kernel ran. `kind` is the machine-readable part.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutcomeSummary {
    pub kind: OutcomeKind,
    /// One human line, e.g. "max abs diff 0.31 at [3, 17] (tol 1e-4)".
    #[serde(default)]
    pub message: String,
    /// Anything structured the harness reported (mismatch numbers, seeds, exit status, ...).
    #[serde(default)]
    pub details: serde_json::Value,
    /// Last lines of the compile or crash log.
    #[serde(default)]
    pub log_tail: Option<String>,
}

impl OutcomeSummary {
    pub fn new(kind: OutcomeKind, message: impl Into<String>) -> Self {
        OutcomeSummary {
            kind,
            message: message.into(),
            details: serde_json::Value::Null,
            log_tail: None,
        }
    }
}

/// Outcome kinds. Unknown kinds written by newer versions read back as `Other`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutcomeKind {
    Correct,
    Incorrect,
    CompileError,
    RuntimeError,
    Crash,
    Timeout,
    OutOfMemory,
    /// Work escaped the timed region (side streams, threads).
    EscapedWork,
    /// The harness caught a hack at run time (mutation, aliasing, lazy tensors, ...).
    Hack,
    /// Not run because lint errors block it or the kernel was deleted.
    Skipped,
    /// Not run yet (incremental report while the run is going).
    NotRun,
    /// The machine or kernelgate failed before the candidate's code ran (retried once):
    /// neutral, never the candidate's failure.
    Infrastructure,
    #[serde(other)]
    Other,
}

impl OutcomeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            OutcomeKind::Correct => "correct",
            OutcomeKind::Incorrect => "incorrect",
            OutcomeKind::CompileError => "compile_error",
            OutcomeKind::RuntimeError => "runtime_error",
            OutcomeKind::Crash => "crash",
            OutcomeKind::Timeout => "timeout",
            OutcomeKind::OutOfMemory => "out_of_memory",
            OutcomeKind::EscapedWork => "escaped_work",
            OutcomeKind::Hack => "hack",
            OutcomeKind::Skipped => "skipped",
            OutcomeKind::NotRun => "not_run",
            OutcomeKind::Infrastructure => "infrastructure",
            OutcomeKind::Other => "other",
        }
    }

    /// Short label for tables.
    pub fn label(self) -> &'static str {
        match self {
            OutcomeKind::Correct => "✅ correct",
            OutcomeKind::Incorrect => "❌ incorrect",
            OutcomeKind::CompileError => "❌ compile error",
            OutcomeKind::RuntimeError => "❌ runtime error",
            OutcomeKind::Crash => "💥 crash",
            OutcomeKind::Timeout => "⏱️ timeout",
            OutcomeKind::OutOfMemory => "❌ out of memory",
            OutcomeKind::EscapedWork => "🚩 escaped work",
            OutcomeKind::Hack => "🚩 hack detected",
            OutcomeKind::Skipped => "⏭️ skipped",
            OutcomeKind::NotRun => "… not run",
            OutcomeKind::Infrastructure => "⚙️ infrastructure",
            OutcomeKind::Other => "❔ other",
        }
    }
}

/// A ratio with its confidence interval (e.g. speedup = reference / candidate).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    pub value: f64,
    #[serde(default)]
    pub lo: Option<f64>,
    #[serde(default)]
    pub hi: Option<f64>,
}

impl Interval {
    pub fn point(value: f64) -> Self {
        Interval {
            value,
            lo: None,
            hi: None,
        }
    }
    pub fn new(value: f64, lo: f64, hi: f64) -> Self {
        Interval {
            value,
            lo: Some(lo),
            hi: Some(hi),
        }
    }
}

/// Candidate time / other time: `ratio < 1` is faster.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ComparisonSummary {
    /// `NaN` (written as JSON `null`) when no ratio could be computed (`invalid` comparisons).
    #[serde(deserialize_with = "nan_if_null")]
    pub ratio: f64,
    #[serde(default)]
    pub ci_lo: Option<f64>,
    #[serde(default)]
    pub ci_hi: Option<f64>,
    pub verdict: ComparisonVerdict,
    /// What a `vs_baseline` comparison was made against (absent for `vs_base` and in reports
    /// written before this field existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub against: Option<BaselineSource>,
}

fn nan_if_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

/// The committed timing a `vs_baseline` comparison used.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BaselineSource {
    pub kind: BaselineKind,
    /// One line: which entry, from which commit, under which hardware key.
    pub detail: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BaselineKind {
    /// The accepted timing of this kernel on main (`kernelgate baseline --kernels`).
    MainKernel,
    /// The committed time of the reference `Model` (kernelgate's keyed file or KernelBench's).
    Reference,
}

impl BaselineKind {
    pub fn label(self) -> &'static str {
        match self {
            BaselineKind::MainKernel => "vs main's kernel",
            BaselineKind::Reference => "vs committed reference",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ComparisonVerdict {
    Faster,
    Slower,
    /// Statistically indistinguishable.
    Same,
    /// The comparison cannot be trusted (e.g. the reference changed, baseline hardware differs).
    Invalid,
}

/// A runtime or plausibility observation (excessive speedup, below the work floor, ...).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Flag {
    /// The condition the policy judges it by (its snake_case name in JSON).
    pub code: kernelgate_model::Condition,
    pub severity: Severity,
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    #[default]
    Pass,
    Warn,
    Fail,
    Skipped,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Warn => "warn",
            Verdict::Fail => "fail",
            Verdict::Skipped => "skipped",
        }
    }
    pub fn emoji(self) -> &'static str {
        match self {
            Verdict::Pass => "✅",
            Verdict::Warn => "⚠️",
            Verdict::Fail => "❌",
            Verdict::Skipped => "⏭️",
        }
    }
}

/// Where the configuration that judged a run came from: a trusted file the workflow passed
/// (the default branch's `kernelgate.toml`), the base commit's, or the defaults when the base
/// has none. The pull request's head never judges itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "from", rename_all = "snake_case")]
pub enum ConfigSource {
    /// `--trusted-config`: a file outside the pull request's commits.
    Trusted { path: String },
    /// The config file as committed at the base commit.
    Base { commit: String, path: String },
    /// The base commit has no config file: every key's default.
    Defaults { commit: String, path: String },
}

impl std::fmt::Display for ConfigSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let short = |c: &str| c[..c.len().min(10)].to_string();
        match self {
            ConfigSource::Trusted { path } => write!(f, "the trusted config {path}"),
            ConfigSource::Base { commit, path } => {
                write!(f, "{path} of the base commit {}", short(commit))
            }
            ConfigSource::Defaults { commit, path } => write!(
                f,
                "the defaults (the base commit {} has no {path})",
                short(commit)
            ),
        }
    }
}

/// When a pull request's change to a `kernelgate.toml` setting takes effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConfigApplies {
    /// A judgment setting (sandbox, policy, thresholds, harness, ...): this run used the base's
    /// value; the head's applies once merged.
    AfterMerge,
    /// A layout setting (`[kernels]`): the head's value finds this run's kernels.
    ThisRun,
}

impl ConfigApplies {
    pub fn as_str(self) -> &'static str {
        match self {
            ConfigApplies::AfterMerge => "after merge",
            ConfigApplies::ThisRun => "in this run",
        }
    }
}

/// One `kernelgate.toml` setting the pull request changes (`section.key`), with the value of the
/// config that judged the run and the head's (JSON; `null` for an unset optional key).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConfigChange {
    pub key: String,
    pub base: serde_json::Value,
    pub head: serde_json::Value,
    pub applies: ConfigApplies,
}

/// A reference problem the PR edits, with a unified diff.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReferenceChange {
    pub problem: String,
    pub path: String,
    pub diff: String,
}

impl ReferenceChange {
    /// Build from old and new source text; the diff is unified with 3 lines of context.
    pub fn from_sources(
        problem: impl Into<String>,
        path: impl Into<String>,
        old: &str,
        new: &str,
    ) -> Self {
        let path = path.into();
        let diff = similar::TextDiff::from_lines(old, new)
            .unified_diff()
            .context_radius(3)
            .header(&format!("a/{path}"), &format!("b/{path}"))
            .to_string();
        ReferenceChange {
            problem: problem.into(),
            path,
            diff,
        }
    }
}

/// Totals over the rows. `fast_p`: share of evaluated kernels that are correct and faster than
/// p× the reference; geomean over correct kernels with a known speedup.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Summary {
    pub verdict: Verdict,
    pub fast_0: f64,
    pub fast_1: f64,
    pub fast_2: f64,
    pub geomean_speedup: Option<f64>,
    pub failed: u32,
    pub warned: u32,
    pub passed: u32,
    pub skipped: u32,
    pub total: u32,
}

impl Summary {
    pub fn compute(rows: &[KernelRow]) -> Summary {
        let evaluated: Vec<&KernelRow> = rows.iter().filter(|r| r.is_evaluated()).collect();
        let n = evaluated.len() as f64;
        let fast = |p: f64| -> f64 {
            if n == 0.0 {
                return 0.0;
            }
            let k = evaluated
                .iter()
                .filter(|r| r.is_correct())
                .filter(|r| p == 0.0 || r.speedup_eager.is_some_and(|s| s.value > p))
                .count() as f64;
            k / n
        };
        let speedups: Vec<f64> = evaluated
            .iter()
            .filter(|r| r.is_correct())
            .filter_map(|r| r.speedup_eager.map(|s| s.value))
            .filter(|s| s.is_finite() && *s > 0.0)
            .collect();
        let geomean_speedup = if speedups.is_empty() {
            None
        } else {
            Some((speedups.iter().map(|s| s.ln()).sum::<f64>() / speedups.len() as f64).exp())
        };
        let count = |v: Verdict| rows.iter().filter(|r| r.verdict == v).count() as u32;
        let (failed, warned, passed, skipped) = (
            count(Verdict::Fail),
            count(Verdict::Warn),
            count(Verdict::Pass),
            count(Verdict::Skipped),
        );
        // A kernel the machine could not judge leaves the run neutral, never green.
        let unjudged = rows
            .iter()
            .any(|r| r.outcome.kind == OutcomeKind::Infrastructure);
        let verdict = if failed > 0 {
            Verdict::Fail
        } else if warned > 0 || unjudged {
            Verdict::Warn
        } else {
            Verdict::Pass
        };
        Summary {
            verdict,
            fast_0: fast(0.0),
            fast_1: fast(1.0),
            fast_2: fast(2.0),
            geomean_speedup,
            failed,
            warned,
            passed,
            skipped,
            total: rows.len() as u32,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(path: &str, kind: OutcomeKind, speedup: Option<f64>, verdict: Verdict) -> KernelRow {
        let mut r = KernelRow::new(
            path,
            "level1/1_X.py",
            Backend::Cuda,
            Precision::Fp32,
            Change::Added,
            OutcomeSummary::new(kind, ""),
        );
        r.speedup_eager = speedup.map(Interval::point);
        r.verdict = verdict;
        r
    }

    #[test]
    fn the_run_records_each_distinct_sandbox_level_once() {
        let mut run = RunInfo::default();
        assert!(!run.fully_sandboxed(), "no job ran: nothing was confined");
        assert_eq!(serde_json::to_value(&run).unwrap().get("sandbox"), None);
        run.add_sandbox_level(SandboxLevel::Full);
        run.add_sandbox_level(SandboxLevel::Full);
        assert_eq!(run.sandbox, vec![SandboxLevel::Full]);
        assert!(run.fully_sandboxed());
        run.add_sandbox_level(SandboxLevel::Off);
        run.add_sandbox_level(SandboxLevel::Full);
        assert_eq!(run.sandbox, vec![SandboxLevel::Full, SandboxLevel::Off]);
        assert!(!run.fully_sandboxed());
        // JSON keeps the joined display form, and reads back.
        let json = serde_json::to_value(&run).unwrap();
        assert_eq!(json["sandbox"], "full; off");
        let back: RunInfo = serde_json::from_value(json).unwrap();
        assert_eq!(back.sandbox, run.sandbox);
    }

    #[test]
    fn summary_counts_fast_p_over_evaluated_and_geomean_over_correct() {
        let rows = vec![
            row("a", OutcomeKind::Correct, Some(0.5), Verdict::Pass),
            row("b", OutcomeKind::Correct, Some(1.5), Verdict::Pass),
            row("c", OutcomeKind::Correct, Some(8.0), Verdict::Warn),
            row("d", OutcomeKind::Incorrect, Some(100.0), Verdict::Fail),
            row("e", OutcomeKind::Skipped, None, Verdict::Skipped),
        ];
        let s = Summary::compute(&rows);
        assert_eq!(s.total, 5);
        assert_eq!((s.failed, s.warned, s.passed, s.skipped), (1, 1, 2, 1));
        assert_eq!(s.verdict, Verdict::Fail);
        assert!((s.fast_0 - 0.75).abs() < 1e-12, "{}", s.fast_0);
        assert!((s.fast_1 - 0.5).abs() < 1e-12);
        assert!((s.fast_2 - 0.25).abs() < 1e-12);
        let g = s.geomean_speedup.unwrap();
        assert!(
            (g - (0.5f64 * 1.5 * 8.0).powf(1.0 / 3.0)).abs() < 1e-12,
            "{g}"
        );
    }

    #[test]
    fn invalid_comparisons_round_trip_and_old_reports_still_read() {
        let c = ComparisonSummary {
            ratio: f64::NAN,
            ci_lo: None,
            ci_hi: None,
            verdict: ComparisonVerdict::Invalid,
            against: Some(BaselineSource {
                kind: BaselineKind::MainKernel,
                detail: "k.py on main".into(),
            }),
        };
        let v = serde_json::to_value(&c).unwrap();
        assert_eq!(v["ratio"], serde_json::Value::Null);
        assert_eq!(v["against"]["kind"], "main_kernel");
        let back: ComparisonSummary = serde_json::from_value(v).unwrap();
        assert!(back.ratio.is_nan() && back.against == c.against);
        // Written before `against` existed.
        let old: ComparisonSummary = serde_json::from_str(
            r#"{"ratio": 1.1, "ci_lo": null, "ci_hi": null, "verdict": "slower"}"#,
        )
        .unwrap();
        assert_eq!((old.ratio, old.against), (1.1, None));
    }

    #[test]
    fn empty_summary_passes_with_no_geomean() {
        let s = Summary::compute(&[]);
        assert_eq!(s.verdict, Verdict::Pass);
        assert_eq!(s.geomean_speedup, None);
        assert_eq!(s.fast_1, 0.0);
    }

    #[test]
    fn problem_observations_leave_the_rows_once_per_problem_and_merge_across_shards() {
        let observed = |path: &str, extra: &str| {
            let mut r = row(path, OutcomeKind::Correct, Some(2.0), Verdict::Pass);
            r.findings.push(Finding::runtime(
                path,
                "eval/trivial-output-passes",
                Severity::Warning,
                "an all-zeros output already passes",
            ));
            r.findings.push(Finding::runtime(
                path,
                extra,
                Severity::Warning,
                "about the kernel",
            ));
            r
        };
        let mut a = Report::new(RunInfo::default());
        a.kernels.push(observed("a.py", "eval/nondeterministic"));
        a.kernels.push(observed("b.py", "eval/shifted-inputs"));
        a.take_problem_observations(0);
        a.take_problem_observations(1);
        a.take_problem_observations(7); // no such row: nothing
        assert_eq!(a.problem_observations.len(), 1);
        assert_eq!(a.problem_observations[0].kernels, vec!["a.py", "b.py"]);
        for k in &a.kernels {
            assert_eq!(k.findings.len(), 1, "the kernel's own finding stays");
            assert!(!k.findings[0].is_about_problem());
        }
        // A runtime observation changes no verdict; a changed reference keeps the run at warn.
        a.finalize();
        assert_eq!(a.summary.verdict, Verdict::Pass);
        let mut b = Report::new(RunInfo::default());
        let mut c = row("c.py", OutcomeKind::Correct, Some(2.0), Verdict::Pass);
        c.flags.push(Flag {
            code: kernelgate_model::Condition::ReferenceChanged,
            severity: Severity::Warning,
            message: "this pull request edits the reference problem".into(),
        });
        c.findings.push(Finding::runtime(
            "c.py",
            "eval/trivial-output-passes",
            Severity::Warning,
            "an all-zeros output already passes",
        ));
        b.kernels.push(c);
        b.take_problem_observations(0);
        assert!(b.kernels[0].flags.is_empty());
        let merged = crate::merge(vec![a, b]).unwrap();
        let codes: Vec<(&str, Vec<String>)> = merged
            .problem_observations
            .iter()
            .map(|o| (o.code.as_str(), o.kernels.clone()))
            .collect();
        assert_eq!(
            codes,
            vec![
                (
                    "eval/trivial-output-passes",
                    vec!["a.py".into(), "b.py".into(), "c.py".into()]
                ),
                ("reference_changed", vec!["c.py".into()]),
            ]
        );
        assert_eq!(merged.summary.verdict, Verdict::Warn);
        // Written without the section, read back without it.
        let v = serde_json::to_value(Report::new(RunInfo::default())).unwrap();
        assert!(v.get("problem_observations").is_none());
    }

    #[test]
    fn changed_reference_never_passes_silently() {
        let mut r = Report::new(RunInfo::default());
        r.kernels
            .push(row("a", OutcomeKind::Correct, Some(2.0), Verdict::Pass));
        r.reference_changes.push(ReferenceChange::from_sources(
            "level1/1_X.py",
            "KernelBench/level1/1_X.py",
            "a\nb\n",
            "a\nc\n",
        ));
        r.finalize();
        assert_eq!(r.summary.verdict, Verdict::Warn);
        let d = &r.reference_changes[0].diff;
        assert!(
            d.contains("--- a/KernelBench/level1/1_X.py")
                && d.contains("-b\n")
                && d.contains("+c\n"),
            "{d}"
        );
    }

    #[test]
    fn renamed_change_round_trips_as_tagged_object() {
        let c = Change::Renamed {
            from: "kernels/old.py".into(),
        };
        let j = serde_json::to_value(&c).unwrap();
        assert_eq!(
            j,
            serde_json::json!({"kind": "renamed", "from": "kernels/old.py"})
        );
        assert_eq!(serde_json::from_value::<Change>(j).unwrap(), c);
    }

    #[test]
    fn efficiency_is_in_a_gpu_rows_json_and_absent_from_a_cpu_rows() {
        let mut gpu = row("k.py", OutcomeKind::Correct, Some(1.0), Verdict::Pass);
        gpu.efficiency = Some(kernelgate_model::Efficiency {
            pct: 77.0,
            bound: kernelgate_model::Bound::Memory,
            achieved: 3696.0,
            peak: 4800.0,
            precision: Precision::Fp32,
        });
        let j = serde_json::to_value(&gpu).unwrap();
        assert_eq!(
            j["efficiency"],
            serde_json::json!({"pct": 77.0, "bound": "memory", "achieved": 3696.0, "peak": 4800.0, "precision": "fp32"})
        );
        assert_eq!(serde_json::from_value::<KernelRow>(j).unwrap(), gpu);
        let cpu = row("c.py", OutcomeKind::Correct, Some(1.0), Verdict::Pass);
        let j = serde_json::to_value(&cpu).unwrap();
        assert!(j.get("efficiency").is_none(), "{j}");
        // Reports written before the field read without it.
        assert_eq!(
            serde_json::from_value::<KernelRow>(j).unwrap().efficiency,
            None
        );
    }

    #[test]
    fn unknown_outcome_kind_reads_as_other() {
        let k: OutcomeKind = serde_json::from_str("\"from_the_future\"").unwrap();
        assert_eq!(k, OutcomeKind::Other);
    }
}
