//! The real lint, harness and timing behind the pipeline's traits.

use kernelgate_eval::{JobSpec, Outcome};
use kernelgate_lint::{LintOptions, SeverityOrOff};
use kernelgate_model::{Config, Finding, LintLevel};
use kernelgate_report::{
    ComparisonSummary, ComparisonVerdict, Flag, Interval, OutcomeKind, OutcomeSummary,
};
use std::path::PathBuf;
use std::time::Duration;

use super::plan::Job;
use super::policy::code;
use super::run::{Device, Evaluation, Evaluator, Linter};

/// `kernelgate_lint::lint_file` with the repository's severity overrides.
pub struct RepoLinter {
    overrides: std::collections::BTreeMap<String, SeverityOrOff>,
}

impl RepoLinter {
    pub fn new(cfg: &Config) -> RepoLinter {
        let overrides = cfg
            .lint
            .severity
            .iter()
            .map(|(rule, level)| {
                let s = match level {
                    LintLevel::Error => SeverityOrOff::Error,
                    LintLevel::Warning => SeverityOrOff::Warning,
                    LintLevel::Off => SeverityOrOff::Off,
                };
                (rule.clone(), s)
            })
            .collect();
        RepoLinter { overrides }
    }
}

impl Linter for RepoLinter {
    fn lint(&self, job: &Job) -> Result<Vec<Finding>, String> {
        let opts = LintOptions {
            precision: job.precision,
            backend: Some(job.backend),
            severity_overrides: self.overrides.clone(),
        };
        kernelgate_lint::lint_file(job.path(), &job.source, &opts).map_err(|e| e.to_string())
    }
}

/// `kernelgate_eval::run_job`: correctness, then timing of reference vs candidate and base vs head.
pub struct HarnessEvaluator {
    pub config: Config,
    pub python: Option<PathBuf>,
    /// Device preference (`auto`, `cuda`, `cpu`) from the command line or config.
    pub device: kernelgate_model::Device,
    /// Shared torch extensions cache across jobs (rebuilds of the same source are skipped).
    pub extensions_dir: Option<PathBuf>,
    pub seed: Option<u64>,
    /// Correctness only (no timing), for quick local runs.
    pub no_timing: bool,
}

impl Evaluator for HarnessEvaluator {
    fn evaluate(&self, job: &Job, device: Device) -> Evaluation {
        let Some(problem_file) = &job.problem_file else {
            return Evaluation::failed(OutcomeKind::Skipped, "no problem file");
        };
        let h = &self.config.harness;
        let mut spec = JobSpec::new(problem_file, &job.kernel_file);
        spec.base_kernel = job.base_file.clone();
        spec.problem_label = Some(job.problem().to_string());
        spec.kernel_label = Some(job.path().to_string());
        spec.device = self.device;
        spec.precision = job.precision;
        spec.trials = h.trials;
        spec.seed = self.seed;
        spec.compile_timeout = Duration::from_secs(h.compile_timeout_s);
        spec.run_timeout = Duration::from_secs(h.run_timeout_s);
        spec.memory_limit_mb = h.memory_limit_mb;
        spec.timing = (!self.no_timing).then(|| self.config.timing.clone());
        spec.gpu = match device {
            Device::Cuda(i) => Some(i),
            Device::Cpu => None,
        };
        spec.python = self.python.clone().or_else(|| h.python.clone());
        spec.extensions_dir = self.extensions_dir.clone();
        let result = kernelgate_eval::run_job(&spec);
        convert(result)
    }
}

/// Maps the harness's result onto the report's vocabulary.
pub fn convert(result: kernelgate_eval::EvalResult) -> Evaluation {
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
    };
    let mut outcome = OutcomeSummary::new(kind, result.outcome.summary());
    let mut details = serde_json::to_value(&result.outcome).unwrap_or_default();
    if let Some(obj) = details.as_object_mut() {
        obj.insert("outcome".into(), result.outcome.kind().into());
        obj.insert("seed".into(), result.seed.into());
        obj.insert("seed_random".into(), result.seed_random.into());
        if let Some(d) = &result.device {
            obj.insert("device".into(), d.clone().into());
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
    let mut findings = Vec::new();
    for f in result.findings {
        let flag_code = match f.rule.as_str() {
            kernelgate_timing::sample::RULE_ESCAPED => Some(code::ESCAPED_WORK),
            kernelgate_timing::plausibility::RULE_BELOW_FLOOR => Some(code::IMPLAUSIBLE_TIME),
            kernelgate_timing::plausibility::RULE_EXCESSIVE_SPEEDUP => {
                Some(code::EXCESSIVE_SPEEDUP)
            }
            _ => None,
        };
        match flag_code {
            Some(c) => flags.push(Flag {
                code: c.to_string(),
                severity: f.severity,
                message: f.message,
            }),
            None => findings.push(f),
        }
    }
    if outcome.kind == OutcomeKind::Correct && flags.iter().any(|f| f.code == code::ESCAPED_WORK) {
        // Correct numbers, but the timing cannot be trusted.
        outcome.kind = OutcomeKind::EscapedWork;
        outcome.message = "correct, but work escaped the timed region".into();
        flags.retain(|f| f.code != code::ESCAPED_WORK);
    }

    let mut eval = Evaluation::failed(outcome.kind, "");
    eval.outcome = outcome;
    eval.findings = findings;
    eval.flags = flags;
    eval.seed = Some(result.seed);
    if let Some(t) = &result.timing {
        if let Some(c) = &t.vs_reference {
            let (s, (lo, hi)) = c.speedup();
            eval.speedup_eager = Some(Interval::new(s, lo, hi));
            eval.reference_ms = Some(c.base.median);
            eval.time_ms = Some(c.head.median);
        }
        if let Some(c) = &t.vs_base {
            eval.vs_base = Some(ComparisonSummary {
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
            eval.time_ms.get_or_insert(c.head.median);
        }
    }
    eval
}

/// KernelBench-format baselines committed under `<results>/timing/<HARDWARE>/baseline_time_torch.json`
/// of the head commit, for the GPU the harness ran on. CPU runs have no committed baselines.
pub struct CommittedBaselines {
    /// `<repo>/<results root>/timing`.
    pub timing_dir: PathBuf,
}

impl super::run::Baselines for CommittedBaselines {
    fn reference_ms(&self, problem: &str, device: &str) -> Option<f64> {
        // `cuda:0 (NVIDIA H200)` -> `NVIDIA H200`.
        let gpu = device.split_once('(')?.1.trim_end_matches(')').trim();
        let file = self
            .timing_dir
            .join(kernelgate_timing::hardware_dir_name(gpu))
            .join("baseline_time_torch.json");
        let kb = kernelgate_timing::KbFile::load(&file).ok()?;
        let (level, name) = problem.split_once('/')?;
        kb.get(level, &format!("{name}.py"))
            .map(|e| e.mean)
            .filter(|m| *m > 0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pr::run::Baselines;

    #[test]
    fn committed_baselines_are_read_for_the_gpu_that_ran() {
        let dir = tempfile::tempdir().unwrap();
        let h200 = dir.path().join("NVIDIA_H200");
        std::fs::create_dir_all(&h200).unwrap();
        std::fs::write(
            h200.join("baseline_time_torch.json"),
            r#"{"level1": {"3_ReLU.py": {"mean": 2.66, "std": 0.02, "min": 2.65, "max": 2.86,
                "num_trials": 100, "hardware": "NVIDIA H200", "device": "cuda:0"}}}"#,
        )
        .unwrap();
        let b = CommittedBaselines {
            timing_dir: dir.path().to_path_buf(),
        };
        assert_eq!(
            b.reference_ms("level1/3_ReLU", "cuda:0 (NVIDIA H200)"),
            Some(2.66)
        );
        assert_eq!(
            b.reference_ms("level1/4_GELU", "cuda:0 (NVIDIA H200)"),
            None
        );
        assert_eq!(
            b.reference_ms("level1/3_ReLU", "cuda:0 (NVIDIA H100 80GB HBM3)"),
            None
        );
        assert_eq!(b.reference_ms("level1/3_ReLU", "cpu"), None);
    }
}
