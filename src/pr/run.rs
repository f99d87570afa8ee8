//! Orchestration: lint every planned kernel, then evaluate them on every device (one job at a
//! time per GPU, a worker thread each), judge each row by the policy, and rewrite `report.json`
//! after every kernel so a crash or a cancelled job still leaves a report.

use kernelgate_model::{Finding, Severity};
use kernelgate_report::{
    Change, ComparisonSummary, ComparisonVerdict, Flag, Interval, KernelRow, OutcomeKind,
    OutcomeSummary, Report, Verdict,
};
use std::collections::VecDeque;
use std::io::Write;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Mutex};

use super::changes::KernelStatus;
use super::plan::{Job, Plan};
use super::policy::{self, code, Acks, Policy};

/// Where a job runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Device {
    Cpu,
    Cuda(u32),
}

impl std::fmt::Display for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Device::Cpu => f.write_str("cpu"),
            Device::Cuda(i) => write!(f, "cuda:{i}"),
        }
    }
}

/// GPUs to use: `CUDA_VISIBLE_DEVICES` when set (its entries are renumbered 0..n by CUDA), else
/// `nvidia-smi -L`; no GPU means one CPU worker.
pub fn detect_devices(
    cuda_visible: Option<&str>,
    nvidia_smi_list: impl FnOnce() -> Option<String>,
) -> Vec<Device> {
    let count = match cuda_visible {
        Some(v) => v
            .split(',')
            .map(str::trim)
            .take_while(|s| !s.is_empty() && *s != "-1")
            .count(),
        None => nvidia_smi_list()
            .map(|out| out.lines().filter(|l| l.starts_with("GPU ")).count())
            .unwrap_or(0),
    };
    if count == 0 {
        vec![Device::Cpu]
    } else {
        (0..count as u32).map(Device::Cuda).collect()
    }
}

/// `nvidia-smi -L`, or `None` when there is no driver.
pub fn nvidia_smi_list() -> Option<String> {
    let out = std::process::Command::new("nvidia-smi")
        .arg("-L")
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// What the harness and timing tell us about one kernel.
#[derive(Debug, Clone)]
pub struct Evaluation {
    pub outcome: OutcomeSummary,
    /// Runtime findings (no span: `line == 0`).
    pub findings: Vec<Finding>,
    pub time_ms: Option<f64>,
    pub reference_ms: Option<f64>,
    pub compiled_ms: Option<f64>,
    pub speedup_eager: Option<Interval>,
    pub speedup_compile: Option<Interval>,
    /// Head vs base version (ratio = head / base time).
    pub vs_base: Option<ComparisonSummary>,
    pub flags: Vec<Flag>,
    pub seed: Option<u64>,
}

impl Evaluation {
    pub fn failed(kind: OutcomeKind, message: impl Into<String>) -> Evaluation {
        Evaluation {
            outcome: OutcomeSummary::new(kind, message),
            findings: Vec::new(),
            time_ms: None,
            reference_ms: None,
            compiled_ms: None,
            speedup_eager: None,
            speedup_compile: None,
            vs_base: None,
            flags: Vec::new(),
            seed: None,
        }
    }
}

/// Runs one kernel (correctness, timing, base-vs-head) on one device. Must not panic on a bad
/// kernel: every failure of the candidate is an outcome.
pub trait Evaluator: Send + Sync {
    fn evaluate(&self, job: &Job, device: Device) -> Evaluation;
}

/// Static checks of one kernel file.
pub trait Linter: Send + Sync {
    fn lint(&self, job: &Job) -> Result<Vec<Finding>, String>;
}

/// Committed baselines: the reference time recorded on main for this hardware, if any.
pub trait Baselines: Send + Sync {
    fn reference_ms(&self, problem: &str, job: &Job) -> Option<f64>;
}

/// No committed baselines.
pub struct NoBaselines;
impl Baselines for NoBaselines {
    fn reference_ms(&self, _: &str, _: &Job) -> Option<f64> {
        None
    }
}

/// Progress lines on stdout, folded into `::group::` blocks inside GitHub Actions.
pub struct Progress {
    pub actions: bool,
    pub quiet: bool,
}

pub struct Pipeline<'a> {
    pub linter: &'a dyn Linter,
    pub evaluator: &'a dyn Evaluator,
    pub baselines: &'a dyn Baselines,
    pub policy: &'a Policy,
    pub acks: Acks,
    pub devices: Vec<Device>,
    /// `report.json` rewritten after every kernel.
    pub report_path: PathBuf,
    pub progress: Progress,
}

impl Pipeline<'_> {
    /// Runs the plan and returns the final report (also written to `report_path`).
    pub fn run(
        &self,
        plan: &Plan,
        mut report: Report,
    ) -> Result<Report, kernelgate_report::ReportError> {
        let invalid = plan.changes.invalid_baselines();
        let jobs = &plan.jobs;
        report.kernels = jobs.iter().map(initial_row).collect();
        for path in &plan.changes.deleted_kernels {
            let mut row = KernelRow::new(
                path.clone(),
                "",
                kernelgate_model::Backend::Cuda,
                Default::default(),
                Change::Deleted,
                OutcomeSummary::new(OutcomeKind::Skipped, "deleted in this pull request"),
            );
            row.verdict = Verdict::Skipped;
            report.kernels.push(row);
        }

        // 1. Lint everything first: cheap, and lint errors skip the expensive part.
        let mut todo = VecDeque::new();
        for (i, job) in jobs.iter().enumerate() {
            let row = &mut report.kernels[i];
            if let Some(err) = &job.change.mapping_error {
                row.outcome = OutcomeSummary::new(OutcomeKind::Skipped, err.clone());
                policy::judge(row, self.policy, &self.acks, &job.source);
                continue;
            }
            match self.linter.lint(job) {
                Ok(findings) => row.findings = findings,
                Err(e) => row.findings.push(Finding {
                    file: job.path().to_string(),
                    line: 1,
                    column: 1,
                    end_line: 1,
                    end_column: 1,
                    rule: "KG000".into(),
                    severity: Severity::Error,
                    message: format!("lint could not check this file: {e}"),
                }),
            }
            if row.findings.iter().any(|f| {
                f.severity == Severity::Error
                    && self.policy.action(code::LINT_ERROR) == Verdict::Fail
            }) {
                row.outcome = OutcomeSummary::new(
                    OutcomeKind::Skipped,
                    "not run: lint errors block evaluation",
                );
                policy::judge(row, self.policy, &self.acks, &job.source);
            } else {
                todo.push_back(i);
            }
        }
        report.finalize();
        report.write_atomic(&self.report_path)?;

        // 2. Evaluate: one worker per device pulling from the queue.
        let total = jobs.len();
        let mut done = total - todo.len();
        for (i, row) in report.kernels.iter().enumerate().take(total) {
            if row.outcome.kind != OutcomeKind::NotRun {
                self.print(i, total, row, jobs[i].problem(), None);
            }
        }
        let queue = Mutex::new(todo);
        let (tx, rx) = mpsc::channel::<(usize, Device, Evaluation)>();
        std::thread::scope(|scope| -> Result<(), kernelgate_report::ReportError> {
            for &device in &self.devices {
                let tx = tx.clone();
                let queue = &queue;
                scope.spawn(move || loop {
                    let Some(i) = queue.lock().unwrap_or_else(|e| e.into_inner()).pop_front()
                    else {
                        break;
                    };
                    let job = &jobs[i];
                    let eval = std::panic::catch_unwind(AssertUnwindSafe(|| {
                        self.evaluator.evaluate(job, device)
                    }))
                    .unwrap_or_else(|panic| {
                        let msg = panic
                            .downcast_ref::<String>()
                            .cloned()
                            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                            .unwrap_or_default();
                        Evaluation::failed(
                            OutcomeKind::Other,
                            format!("internal error in kernelgate (please report): {msg}"),
                        )
                    });
                    if tx.send((i, device, eval)).is_err() {
                        break;
                    }
                });
            }
            drop(tx);
            for (i, device, eval) in rx {
                let job = &jobs[i];
                let row = &mut report.kernels[i];
                apply(
                    row,
                    eval,
                    job,
                    self.baselines,
                    invalid.contains(job.problem()),
                );
                policy::judge(row, self.policy, &self.acks, &job.source);
                if let Some(seed) = row.outcome.details.get("seed").and_then(|s| s.as_u64()) {
                    report.run.seed.get_or_insert(seed);
                }
                done += 1;
                self.print(
                    done - 1,
                    total,
                    &report.kernels[i],
                    job.problem(),
                    Some(device),
                );
                report.finalize();
                report.write_atomic(&self.report_path)?;
            }
            Ok(())
        })?;

        report.run.complete = true;
        report.run.finished_at = Some(now_rfc3339());
        report.finalize();
        report.write_atomic(&self.report_path)?;
        Ok(report)
    }

    fn print(
        &self,
        i: usize,
        total: usize,
        row: &KernelRow,
        problem: &str,
        device: Option<Device>,
    ) {
        if self.progress.quiet {
            return;
        }
        let mut line = format!(
            "[{}/{}] {} {} {}",
            i + 1,
            total,
            if problem.is_empty() { "?" } else { problem },
            row.path,
            row.outcome.kind.as_str()
        );
        if let Some(s) = row.speedup_eager {
            line.push_str(&format!(" {:.2}x", s.value));
        }
        line.push_str(&format!(" -> {}", row.verdict.as_str()));
        if let Some(d) = device {
            line.push_str(&format!(" ({d})"));
        }
        let mut out = std::io::stdout().lock();
        if self.progress.actions {
            let _ = writeln!(out, "::group::{line}");
            for r in &row.reasons {
                let _ = writeln!(out, "  {r}");
            }
            if !row.outcome.message.is_empty() {
                let _ = writeln!(out, "  {}", row.outcome.message);
            }
            if let Some(tail) = &row.outcome.log_tail {
                let _ = writeln!(out, "{tail}");
            }
            let _ = writeln!(out, "::endgroup::");
        } else {
            let _ = writeln!(out, "{line}");
            for r in &row.reasons {
                let _ = writeln!(out, "    {r}");
            }
        }
        let _ = out.flush();
    }
}

fn initial_row(job: &Job) -> KernelRow {
    let change = match job.change.status {
        KernelStatus::Added => Change::Added,
        KernelStatus::Modified => Change::Modified,
        KernelStatus::Renamed => Change::Renamed {
            from: job.change.base_path.clone().unwrap_or_default(),
        },
        KernelStatus::ProblemChanged => Change::ProblemChanged,
        KernelStatus::Unchanged => Change::Unchanged,
    };
    let mut row = KernelRow::new(
        job.path(),
        job.problem(),
        job.backend,
        job.precision,
        change,
        OutcomeSummary::new(OutcomeKind::NotRun, ""),
    );
    row.annotate_line = model_new_line(&job.source);
    row
}

/// Moves an evaluation onto its row, adding what only the pipeline knows (baselines, changed
/// references).
fn apply(
    row: &mut KernelRow,
    eval: Evaluation,
    job: &Job,
    baselines: &dyn Baselines,
    reference_changed: bool,
) {
    row.outcome = eval.outcome;
    if let Some(seed) = eval.seed {
        if row.outcome.details.is_null() {
            row.outcome.details = serde_json::json!({});
        }
        if let Some(obj) = row.outcome.details.as_object_mut() {
            obj.entry("seed").or_insert(seed.into());
        }
    }
    row.findings.extend(eval.findings);
    row.time_ms = eval.time_ms;
    row.reference_ms = eval.reference_ms;
    row.compiled_ms = eval.compiled_ms;
    row.speedup_eager = eval.speedup_eager;
    row.speedup_compile = eval.speedup_compile;
    row.vs_base = eval.vs_base;
    row.flags.extend(eval.flags);

    if reference_changed || job.change.problem_changed {
        row.vs_baseline = Some(ComparisonSummary {
            ratio: f64::NAN,
            ci_lo: None,
            ci_hi: None,
            verdict: ComparisonVerdict::Invalid,
        });
        row.flags.push(Flag {
            code: code::REFERENCE_CHANGED.into(),
            severity: Severity::Warning,
            message: format!(
                "this pull request edits the reference problem {}: speedups are not comparable with main and its committed baseline is invalid",
                job.problem()
            ),
        });
    } else if let (Some(base_ref), Some(time)) =
        (baselines.reference_ms(job.problem(), job), row.time_ms)
    {
        let ratio = time / base_ref;
        let verdict = if ratio < 0.98 {
            ComparisonVerdict::Faster
        } else if ratio > 1.02 {
            ComparisonVerdict::Slower
        } else {
            ComparisonVerdict::Same
        };
        row.vs_baseline = Some(ComparisonSummary {
            ratio,
            ci_lo: None,
            ci_hi: None,
            verdict,
        });
        if let Some(live) = row.reference_ms {
            let drift = live / base_ref - 1.0;
            if drift.abs() > 0.10 {
                row.flags.push(Flag {
                    code: code::BASELINE_MISMATCH.into(),
                    severity: Severity::Warning,
                    message: format!(
                        "the reference took {live:.4} ms here but {base_ref:.4} ms in the committed baseline ({:+.0}%): refresh the baseline or check the runner",
                        drift * 100.0
                    ),
                });
            }
        }
    }
}

/// Line of `class ModelNew`, where runtime failures are annotated.
fn model_new_line(source: &str) -> Option<u32> {
    source
        .lines()
        .position(|l| l.trim_start().starts_with("class ModelNew"))
        .map(|i| i as u32 + 1)
}

/// UTC now as RFC 3339, seconds precision.
pub fn now_rfc3339() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    rfc3339(secs)
}

fn rfc3339(secs: u64) -> String {
    // Civil-from-days (Howard Hinnant), valid for any date after 1970.
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// Writes nothing; used where a report path must exist for atomic writes.
pub fn ensure_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_from_env_or_nvidia_smi() {
        assert_eq!(
            detect_devices(Some("0,1"), || None),
            vec![Device::Cuda(0), Device::Cuda(1)]
        );
        assert_eq!(
            detect_devices(Some(""), || panic!("not consulted")),
            vec![Device::Cpu]
        );
        assert_eq!(detect_devices(Some("-1"), || None), vec![Device::Cpu]);
        let smi = "GPU 0: NVIDIA H200 (UUID: GPU-1)\nGPU 1: NVIDIA H200 (UUID: GPU-2)\nGPU 2: NVIDIA H200 (UUID: GPU-3)\n";
        assert_eq!(detect_devices(None, || Some(smi.into())).len(), 3);
        assert_eq!(detect_devices(None, || None), vec![Device::Cpu]);
    }

    #[test]
    fn rfc3339_known_dates() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_709_251_199), "2024-02-29T23:59:59Z");
    }
}
