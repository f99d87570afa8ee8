//! Orchestration: lint every planned kernel, then evaluate them on every device (one job at a
//! time per GPU, a worker thread each), judge each row by the policy, and rewrite `report.json`
//! after every kernel so a crash or a cancelled job still leaves a report.

use kernelgate_model::{Condition, Finding, Severity};
use kernelgate_report::{
    Change, ComparisonSummary, ComparisonVerdict, Flag, KernelRow, OutcomeKind, OutcomeSummary,
    Report, Verdict,
};
use kernelgate_timing::Series;
use std::collections::VecDeque;
use std::path::PathBuf;

use super::adapters::convert;
use super::changes::KernelStatus;
use super::evaluator::{Device, Evaluated, Evaluator, Linter};
use super::plan::{Job, Plan};
use super::policy::{self, Acks, Policy};
use super::progress::{Event as Progress, Finished, Observer};
use super::schedule::Event;
use crate::baseline::judge::{Committed, Live};

pub struct Pipeline<'a> {
    /// Builds at once in the compile stage ahead of the GPUs.
    pub build_workers: usize,
    pub linter: &'a dyn Linter,
    pub evaluator: &'a dyn Evaluator,
    /// Timings committed on main (`Committed::default()`: none).
    pub baselines: &'a Committed,
    pub policy: &'a Policy,
    pub acks: Acks,
    pub devices: Vec<Device>,
    /// `report.json`, `comment.md`, `summary.md`, `results.sarif`, rewritten after every kernel.
    pub out_dir: PathBuf,
    /// Hears each kernel's build, eval and result as they happen.
    pub observer: &'a dyn Observer,
    /// Called with the report each time `out_dir` has been written (what a crash then leaves
    /// behind): how a test sees the writes without polling the files. `None` in the gate.
    pub on_written: Option<&'a (dyn Fn(&Report) + Sync)>,
}

impl Pipeline<'_> {
    /// Runs the plan and returns the final report (also written to `out_dir`).
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
                    && self.policy.action(Condition::LintError) == Verdict::Fail
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
        self.write(&report)?;

        // 2. Evaluate: builds ahead on CPU cores, one kernel at a time per device.
        let total = jobs.len();
        let mut done = 0;
        for (i, row) in report.kernels.iter().enumerate().take(total) {
            if row.outcome.kind != OutcomeKind::NotRun {
                done += 1;
                self.finished(done, total, row, jobs[i].problem(), None);
            }
        }
        let building = std::cell::Cell::new(0usize);
        super::schedule::run(
            self.evaluator,
            jobs,
            todo.into_iter().collect(),
            &self.devices,
            self.build_workers,
            |event| -> Result<(), kernelgate_report::ReportError> {
                match event {
                    Event::BuildStarted(i) => {
                        building.set(building.get() + 1);
                        self.observer.event(&Progress::Building {
                            path: jobs[i].path(),
                            problem: jobs[i].problem(),
                        });
                    }
                    Event::Built(i, built) => {
                        building.set(building.get().saturating_sub(1));
                        if let Err(e) = built {
                            self.observer.event(&Progress::BuildNotAhead {
                                path: jobs[i].path(),
                                error: one_line(&e),
                            });
                        }
                    }
                    Event::EvalStarted(i, device) => {
                        self.observer.event(&Progress::Evaluating {
                            path: jobs[i].path(),
                            device,
                        });
                    }
                    Event::Evaluated(i, device, eval, spent) => {
                        let job = &jobs[i];
                        self.absorb(&mut report, i, job, *eval, &invalid);
                        report.kernels[i].time_spent = Some(spent);
                        done += 1;
                        self.finished(done, total, &report.kernels[i], job.problem(), Some(device));
                        report.finalize();
                        self.write(&report)?;
                    }
                }
                Ok(())
            },
        )?;

        report.run.complete = true;
        report.run.finished_at = Some(crate::time::now_rfc3339());
        report.finalize();
        self.write(&report)?;
        Ok(report)
    }

    /// Takes one kernel's evaluation into its row and the run's hardware facts, and judges it.
    fn absorb(
        &self,
        report: &mut Report,
        i: usize,
        job: &Job,
        eval: Evaluated,
        invalid: &std::collections::BTreeSet<&str>,
    ) {
        let run = &mut report.run;
        if let Evaluated::Ran { result, .. } = &eval {
            let hw = &mut run.hardware;
            // The first GPU job names the hardware; a CPU job only until one arrives.
            if let Some(d) = &result.device {
                let known = kernelgate_model::RanOn::parse(&hw.gpu);
                if hw.gpu.is_empty() || (known.is_cpu() && !d.is_cpu()) {
                    hw.gpu = d.to_string();
                }
            }
            if let (true, Some(t)) = (hw.torch.is_empty(), &result.torch) {
                hw.torch = t.clone();
            }
            run.seed.get_or_insert(result.seed);
            if let Some(level) = &result.sandbox {
                run.add_sandbox_level(level.clone());
            }
        }
        // Driver and CUDA of the first GPU job (CPU jobs say `none`).
        if let Some(k) = eval.run_key().filter(|k| k.key.cuda != "none") {
            let hw = &mut run.hardware;
            if hw.driver.is_empty() {
                hw.driver = k.key.driver.clone();
            }
            if hw.cuda.is_empty() {
                hw.cuda = k.key.cuda.clone();
            }
        }
        apply(
            &mut report.kernels[i],
            eval,
            job,
            self.baselines,
            invalid.contains(job.problem()),
            self.policy.regression_threshold * 100.0,
        );
        // What the run observed about the problem is reported once, for the problem.
        report.take_problem_observations(i);
        policy::judge(&mut report.kernels[i], self.policy, &self.acks, &job.source);
    }

    /// Writes the report's files to `out_dir` and tells the observer.
    fn write(&self, report: &Report) -> Result<(), kernelgate_report::ReportError> {
        kernelgate_report::render_all(report, &self.out_dir)?;
        if let Some(observe) = self.on_written {
            observe(report);
        }
        Ok(())
    }

    /// `n`: how many kernels are finished, this one included.
    fn finished(
        &self,
        n: usize,
        total: usize,
        row: &KernelRow,
        problem: &str,
        device: Option<Device>,
    ) {
        self.observer.event(&Progress::Finished(Finished {
            n,
            total,
            row,
            problem,
            device,
        }));
    }
}

fn one_line(s: &str) -> String {
    let first = s.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    first.chars().take(200).collect()
}

fn initial_row(job: &Job) -> KernelRow {
    let change = match job.change.status {
        KernelStatus::Added => Change::Added,
        KernelStatus::Modified => Change::Modified,
        KernelStatus::Renamed => Change::Renamed {
            from: job.change.base_path.clone().unwrap_or_default(),
        },
        KernelStatus::SourcesChanged => Change::SourcesChanged,
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
    row.changed_sources = job.change.changed_sources.clone();
    row.unresolved_sources = job.change.sources.reasons();
    row
}

/// Moves an evaluation onto its row (the harness's result through [`convert`]), adding what only
/// the pipeline knows (the device's key, baselines, changed references).
fn apply(
    row: &mut KernelRow,
    eval: Evaluated,
    job: &Job,
    baselines: &Committed,
    reference_changed: bool,
    threshold_pct: f64,
) {
    // The event times the committed baselines compare (none without timing).
    let (run_key, candidate_ms, reference_ms) = match eval {
        Evaluated::Ran { result, run_key } => {
            let series = |s: Series| result.timing.as_ref().map(|t| t.event_ms(s));
            let (candidate_ms, reference_ms) =
                (series(Series::Candidate), series(Series::Reference));
            convert(*result, row);
            (
                run_key,
                candidate_ms.unwrap_or_default(),
                reference_ms.unwrap_or_default(),
            )
        }
        Evaluated::Skipped { reason, run_key } => {
            row.outcome = OutcomeSummary::new(OutcomeKind::Skipped, reason);
            (run_key, Vec::new(), Vec::new())
        }
        Evaluated::Error(why) => {
            row.outcome = OutcomeSummary::new(OutcomeKind::Other, why);
            (None, Vec::new(), Vec::new())
        }
    };
    row.device = run_key.as_ref().map(|k| k.key.gpu.clone());
    row.timed_on = run_key.as_ref().map(|k| {
        if k.key.is_gpu() {
            kernelgate_report::TimedOn::Gpu
        } else {
            kernelgate_report::TimedOn::Cpu
        }
    });

    if reference_changed || job.change.problem_changed {
        if row.outcome.kind == OutcomeKind::Infrastructure {
            // The pull request's own edit of the reference is the likely cause: neutral here
            // would let a PR break its problem file to turn every check on it grey.
            row.outcome.kind = OutcomeKind::Other;
            row.outcome.message = format!(
                "the reference problem this pull request edits could not be run: {}",
                row.outcome.message
            );
        }
        row.vs_baseline = Some(ComparisonSummary {
            ratio: f64::NAN,
            ci_lo: None,
            ci_hi: None,
            verdict: ComparisonVerdict::Invalid,
            against: None,
        });
        row.flags.push(Flag {
            code: Condition::ReferenceChanged,
            severity: Severity::Warning,
            message: format!(
                "this pull request edits the reference problem {}: speedups are not comparable with main and its committed baseline is invalid",
                job.problem()
            ),
        });
        return;
    }
    let (Some(run), Some(problem_file)) = (&run_key, &job.problem_file) else {
        return;
    };
    let Ok(problem_source) = std::fs::read_to_string(problem_file) else {
        return;
    };
    let problem_sha256 = kernelgate_model::hash::hashes(&problem_source).0;
    let mut kernel_paths = vec![job.path()];
    if let Some(from) = job.change.base_path.as_deref().filter(|b| *b != job.path()) {
        kernel_paths.push(from);
    }
    let judged = baselines.judge(
        &Live {
            problem: job.problem(),
            problem_sha256: &problem_sha256,
            kernel_paths,
            run,
            candidate_ms: &candidate_ms,
            reference_ms: &reference_ms,
        },
        threshold_pct,
    );
    row.vs_baseline = judged.vs_baseline;
    row.flags.extend(judged.flags);
}

/// Line of `class ModelNew`, where runtime failures are annotated.
fn model_new_line(source: &str) -> Option<u32> {
    source
        .lines()
        .position(|l| l.trim_start().starts_with("class ModelNew"))
        .map(|i| i as u32 + 1)
}

#[cfg(test)]
mod pipeline_tests {
    use super::*;
    use crate::baseline::judge::RunKey;
    use crate::pr::changes::{ChangeSet, KernelChange};
    use kernelgate_eval::{EvalResult, Outcome, TimingResult};
    use kernelgate_model::{Backend, Precision};
    use std::collections::HashMap;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;
    use std::time::Duration;

    fn job(path: &str, status: KernelStatus, source: &str) -> Job {
        Job {
            change: KernelChange {
                path: path.to_string(),
                problem: Some("level1/3_ReLU".into()),
                status,
                base_path: (status == KernelStatus::Modified).then(|| path.to_string()),
                ..KernelChange::default()
            },
            kernel_file: PathBuf::from(path),
            problem_file: Some(PathBuf::from("KernelBench/level1/3_ReLU.py")),
            base_file: None,
            backend: Backend::Cpp,
            precision: Precision::Fp32,
            source: format!("import torch\n{source}\nclass ModelNew:\n    pass\n"),
            sources: Vec::new(),
            base_sources: Vec::new(),
        }
    }

    fn changes() -> ChangeSet {
        ChangeSet {
            base: "b".into(),
            head: "h".into(),
            merge_base: "b".into(),
            kernels: vec![],
            deleted_kernels: vec!["kernels/gone.py".into()],
            references: vec![],
            config_changed: false,
            results: vec![],
        }
    }

    /// A correct run `speedup` times faster than a 1 ms reference (seed 1234).
    fn correct(speedup: f64) -> Evaluated {
        Evaluated::ran(timed_result(1.0 / speedup, 1.0))
    }

    /// A correct result (seed 1234) whose event times lie around `candidate_ms` and
    /// `reference_ms`, compared as the harness compares them.
    fn timed_result(candidate_ms: f64, reference_ms: f64) -> EvalResult {
        let (candidate, reference) = (around(candidate_ms), around(reference_ms));
        let mut r = EvalResult::new("level1/3_ReLU".into(), "k.py".into(), 1234, false);
        r.outcome = Outcome::Passed { trials: 5 };
        r.timing = Some(TimingResult {
            samples: [
                (Series::Candidate, samples(&candidate)),
                (Series::Reference, samples(&reference)),
            ]
            .into_iter()
            .collect(),
            vs_reference: Some(kernelgate_timing::compare(&reference, &candidate, 2.0).unwrap()),
            ..TimingResult::default()
        });
        r
    }

    fn samples(ms: &[f64]) -> Vec<kernelgate_timing::Sample> {
        ms.iter()
            .copied()
            .map(kernelgate_timing::Sample::event)
            .collect()
    }

    /// The harness's result inside a fake's evaluation.
    fn result(e: &mut Evaluated) -> &mut EvalResult {
        match e {
            Evaluated::Ran { result, .. } => result.as_mut(),
            other => panic!("not a run: {other:?}"),
        }
    }

    /// `e` against its base version, `ratio` times its time (head / base), as the harness
    /// compares them.
    fn against_base(mut e: Evaluated, ratio: f64) -> Evaluated {
        let timing = result(&mut e).timing.as_mut().unwrap();
        let head = timing.event_ms(Series::Candidate);
        let base: Vec<f64> = head.iter().map(|ms| ms / ratio).collect();
        timing.vs_base = Some(kernelgate_timing::compare(&base, &head, 2.0).unwrap());
        e
    }

    /// Returns canned evaluations by path; records which device ran what and how many ran at once.
    struct Fake {
        by_path: HashMap<String, Evaluated>,
        ran: Mutex<Vec<(String, Device)>>,
        active: Mutex<HashMap<String, usize>>,
        max_per_device: AtomicUsize,
        active_total: AtomicUsize,
        max_total: AtomicUsize,
        out_dir: Option<PathBuf>,
        seen_done: Mutex<Vec<usize>>,
        /// Finished kernels in the last report the pipeline wrote ([`Fake::observe`]).
        written: Mutex<usize>,
        wrote: std::sync::Condvar,
        /// The first evals wait until this many run at once (0: none waits), so a test sees
        /// whether the devices work in parallel without timing anything.
        meet: usize,
        met: Mutex<bool>,
        arrived: std::sync::Condvar,
    }

    impl Fake {
        fn new(by_path: Vec<(&str, Evaluated)>) -> Fake {
            Fake {
                by_path: by_path
                    .into_iter()
                    .map(|(p, e)| (p.to_string(), e))
                    .collect(),
                ran: Mutex::new(vec![]),
                active: Mutex::new(HashMap::new()),
                max_per_device: AtomicUsize::new(0),
                active_total: AtomicUsize::new(0),
                max_total: AtomicUsize::new(0),
                out_dir: None,
                seen_done: Mutex::new(vec![]),
                written: Mutex::new(0),
                wrote: std::sync::Condvar::new(),
                meet: 0,
                met: Mutex::new(false),
                arrived: std::sync::Condvar::new(),
            }
        }
    }

    impl Fake {
        /// The pipeline's `on_written`: counts the finished kernels it wrote.
        fn observe(&self, report: &Report) {
            *self.written.lock().unwrap() = report
                .kernels
                .iter()
                .filter(|k| k.outcome.kind == OutcomeKind::Correct)
                .count();
            self.wrote.notify_all();
        }
    }

    impl Evaluator for Fake {
        fn evaluate(&self, job: &Job, device: Device) -> Evaluated {
            if let Some(dir) = &self.out_dir {
                // What a crash right now would leave behind: every finished kernel. The main
                // thread writes the previous result while this worker starts: wait for that write
                // (`observe`), then read the files themselves.
                let want = self.ran.lock().unwrap().len();
                let written = self.written.lock().unwrap();
                let (written, wait) = self
                    .wrote
                    .wait_timeout_while(written, Duration::from_secs(30), |n| *n < want)
                    .unwrap();
                drop(written);
                assert!(
                    !wait.timed_out(),
                    "the report of {want} kernel(s) was never written"
                );
                let r = Report::read(&dir.join("report.json")).unwrap();
                assert!(!r.run.complete);
                let done = r
                    .kernels
                    .iter()
                    .filter(|k| k.outcome.kind == OutcomeKind::Correct)
                    .count();
                self.seen_done.lock().unwrap().push(done);
            }
            let key = device.to_string();
            let n = {
                let mut a = self.active.lock().unwrap();
                let n = a.entry(key.clone()).or_insert(0);
                *n += 1;
                *n
            };
            self.max_per_device.fetch_max(n, Ordering::SeqCst);
            let t = self.active_total.fetch_add(1, Ordering::SeqCst) + 1;
            self.max_total.fetch_max(t, Ordering::SeqCst);
            if self.meet > 0 {
                let met = self.met.lock().unwrap();
                // A deadlock guard: a scheduler that never runs `meet` evals at once leaves
                // `max_total` below it, which the test reports.
                let (mut met, _) = self
                    .arrived
                    .wait_timeout_while(met, Duration::from_secs(10), |met| {
                        !*met && self.active_total.load(Ordering::SeqCst) < self.meet
                    })
                    .unwrap();
                *met = true;
                self.arrived.notify_all();
            }
            self.active_total.fetch_sub(1, Ordering::SeqCst);
            *self.active.lock().unwrap().get_mut(&key).unwrap() -= 1;
            self.ran
                .lock()
                .unwrap()
                .push((job.path().to_string(), device));
            if job.path().contains("panics") {
                panic!("evaluator bug");
            }
            self.by_path
                .get(job.path())
                .cloned()
                .unwrap_or_else(|| correct(2.0))
        }
    }

    struct Lint;
    impl Linter for Lint {
        fn lint(&self, job: &Job) -> Result<Vec<Finding>, String> {
            Ok(job
                .source
                .lines()
                .enumerate()
                .filter(|(_, l)| l.contains("torch.relu"))
                .map(|(i, _)| Finding {
                    file: job.path().into(),
                    line: i as u32 + 1,
                    column: 1,
                    end_line: i as u32 + 1,
                    end_column: 5,
                    rule: "KG101".into(),
                    severity: Severity::Error,
                    message: "torch fallback".into(),
                })
                .collect())
        }
    }

    static NO_BASELINES: std::sync::LazyLock<Committed> =
        std::sync::LazyLock::new(Committed::default);

    fn pipeline<'a>(
        fake: &'a Fake,
        policy: &'a Policy,
        labels: &[&str],
        devices: Vec<Device>,
        out: &std::path::Path,
    ) -> Pipeline<'a> {
        Pipeline {
            build_workers: 1,
            linter: &Lint,
            evaluator: fake,
            baselines: &NO_BASELINES,
            policy,
            acks: Acks {
                labels: labels.iter().map(|s| s.to_string()).collect(),
            },
            devices,
            out_dir: out.to_path_buf(),
            observer: &crate::pr::progress::Silent,
            on_written: None,
        }
    }

    fn row<'r>(r: &'r Report, path: &str) -> &'r KernelRow {
        r.kernels.iter().find(|k| k.path == path).unwrap()
    }

    #[test]
    fn verdicts_follow_the_policy_and_a_broken_kernel_fails_only_its_row() {
        let incorrect = Evaluated::ended(Outcome::Incorrect {
            message: "max abs diff 0.3".into(),
            trials: Vec::new(),
            passed_trials: 0,
            total_trials: 5,
            phase: None,
        });
        let mut regressed = against_base(correct(1.5), 1.20);
        let reached = kernelgate_model::Efficiency {
            pct: 77.0,
            bound: kernelgate_model::Bound::Memory,
            achieved: 3696.0,
            peak: 4800.0,
            precision: kernelgate_model::Precision::Fp32,
        };
        result(&mut regressed).timing.as_mut().unwrap().efficiency = Some(reached);
        let small_change = against_base(correct(1.5), 1.01);
        let fake = Fake::new(vec![
            ("k/incorrect.py", incorrect),
            ("k/regressed.py", regressed),
            ("k/same.py", small_change),
            ("k/fast.py", correct(50.0)),
            ("k/fast_allowed.py", correct(50.0)),
            ("k/fast_no_reason.py", correct(50.0)),
        ]);
        let mut unmapped = job("k/unmapped.py", KernelStatus::Added, "");
        unmapped.change.problem = None;
        unmapped.change.mapping_error = Some("k/unmapped.py: cannot tell which problem".into());
        let jobs = vec![
            job("k/good.py", KernelStatus::Added, ""),
            job("k/incorrect.py", KernelStatus::Added, ""),
            job("k/hack.py", KernelStatus::Added, "y = torch.relu(x)"),
            job("k/regressed.py", KernelStatus::Modified, ""),
            job("k/same.py", KernelStatus::Modified, ""),
            job("k/fast.py", KernelStatus::Added, ""),
            job(
                "k/fast_allowed.py",
                KernelStatus::Added,
                "# kernelgate: allow=excessive_speedup reason=\"fused 3 passes\"",
            ),
            job(
                "k/fast_no_reason.py",
                KernelStatus::Added,
                "# kernelgate: allow=excessive_speedup",
            ),
            job("k/panics.py", KernelStatus::Added, ""),
            unmapped,
        ];
        let plan = Plan::from_jobs(changes(), jobs).unwrap();
        let policy = Policy::default();
        let out = tempfile::tempdir().unwrap();
        let report = pipeline(&fake, &policy, &[], vec![Device::Cpu], out.path())
            .run(&plan, Report::new(Default::default()))
            .unwrap();

        let v = |p: &str| row(&report, p).verdict;
        assert_eq!(v("k/good.py"), Verdict::Pass);
        assert_eq!(v("k/incorrect.py"), Verdict::Fail);
        // The eval's efficiency reaches its row as is; a row without one has none.
        assert_eq!(row(&report, "k/regressed.py").efficiency, Some(reached));
        assert_eq!(row(&report, "k/incorrect.py").efficiency, None);
        assert_eq!(v("k/hack.py"), Verdict::Fail);
        assert_eq!(
            row(&report, "k/hack.py").outcome.kind,
            OutcomeKind::Skipped,
            "lint errors skip evaluation"
        );
        assert_eq!(v("k/regressed.py"), Verdict::Fail);
        assert!(
            row(&report, "k/regressed.py")
                .reasons
                .iter()
                .any(|r| r.contains("20.0% slower")),
            "{:?}",
            row(&report, "k/regressed.py").reasons
        );
        assert_eq!(v("k/same.py"), Verdict::Pass);
        assert_eq!(v("k/fast.py"), Verdict::Warn);
        assert!(row(&report, "k/fast.py")
            .flags
            .iter()
            .any(|f| f.code == Condition::ExcessiveSpeedup));
        assert_eq!(v("k/fast_allowed.py"), Verdict::Pass);
        assert!(row(&report, "k/fast_allowed.py")
            .reasons
            .iter()
            .any(|r| r.contains("fused 3 passes")));
        assert_eq!(v("k/fast_no_reason.py"), Verdict::Warn);
        assert!(row(&report, "k/fast_no_reason.py")
            .reasons
            .iter()
            .any(|r| r.contains("no reason")));
        assert_eq!(v("k/panics.py"), Verdict::Fail);
        assert!(row(&report, "k/panics.py")
            .outcome
            .message
            .contains("internal error"));
        assert_eq!(v("k/unmapped.py"), Verdict::Fail);
        assert_eq!(v("kernels/gone.py"), Verdict::Skipped);
        assert_eq!(row(&report, "k/good.py").annotate_line, Some(3));

        let ran: Vec<String> = fake
            .ran
            .lock()
            .unwrap()
            .iter()
            .map(|(p, _)| p.clone())
            .collect();
        assert!(
            !ran.contains(&"k/hack.py".to_string()) && !ran.contains(&"k/unmapped.py".to_string())
        );
        assert_eq!(ran.len(), 8);

        assert_eq!(report.summary.verdict, Verdict::Fail);
        assert_eq!(policy::exit_code(report.summary.verdict), 1);
        assert_eq!(report.run.seed, Some(1234));
        let on_disk = Report::read(&out.path().join("report.json")).unwrap();
        assert!(on_disk.run.complete);
        assert_eq!(on_disk.kernels.len(), 11);
        assert!(
            out.path().join("comment.md").is_file() && out.path().join("results.sarif").is_file()
        );
    }

    #[test]
    fn an_ack_label_acknowledges_an_excessive_speedup() {
        let fake = Fake::new(vec![("k/fast.py", correct(50.0))]);
        let plan =
            Plan::from_jobs(changes(), vec![job("k/fast.py", KernelStatus::Added, "")]).unwrap();
        let policy = Policy::default();
        let out = tempfile::tempdir().unwrap();
        let report = pipeline(
            &fake,
            &policy,
            &["kernelgate:ack-speedup"],
            vec![Device::Cpu],
            out.path(),
        )
        .run(&plan, Report::new(Default::default()))
        .unwrap();
        let r = row(&report, "k/fast.py");
        assert_eq!(r.verdict, Verdict::Pass, "{:?}", r.reasons);
        assert!(r
            .reasons
            .iter()
            .any(|s| s.contains("kernelgate:ack-speedup")));
        assert_eq!(policy::exit_code(report.summary.verdict), 0);
    }

    #[test]
    fn an_infrastructure_failure_is_neutral_never_the_candidates_failure() {
        let infra = Evaluated::ended(Outcome::Infrastructure {
            message: "the child process ended before the harness started".into(),
            traceback: String::new(),
        });
        let fake = Fake::new(vec![("k/infra.py", infra), ("k/ok.py", correct(1.5))]);
        let plan = Plan::from_jobs(
            changes(),
            vec![
                job("k/infra.py", KernelStatus::Added, ""),
                job("k/ok.py", KernelStatus::Added, ""),
            ],
        )
        .unwrap();
        let policy = Policy::default();
        let out = tempfile::tempdir().unwrap();
        let report = pipeline(&fake, &policy, &[], vec![Device::Cpu], out.path())
            .run(&plan, Report::new(Default::default()))
            .unwrap();
        let r = row(&report, "k/infra.py");
        assert_eq!(r.verdict, Verdict::Skipped, "{:?}", r.reasons);
        assert!(
            r.reasons.iter().any(|s| s.starts_with("neutral:")),
            "{:?}",
            r.reasons
        );
        assert_eq!(r.time_spent.as_ref().unwrap().retries, 1);
        assert_eq!(row(&report, "k/ok.py").verdict, Verdict::Pass);
        // Neutral, not green: the kernel was never judged.
        assert_eq!(report.summary.verdict, Verdict::Warn);
        assert_eq!(kernelgate_report::check_run::conclusion(&report), "neutral");
    }

    #[test]
    fn one_job_at_a_time_per_gpu_and_every_gpu_used() {
        let mut fake = Fake::new(vec![]);
        fake.meet = 3;
        let jobs: Vec<Job> = (0..9)
            .map(|i| job(&format!("k/{i}.py"), KernelStatus::Added, ""))
            .collect();
        let plan = Plan::from_jobs(changes(), jobs).unwrap();
        let policy = Policy::default();
        let out = tempfile::tempdir().unwrap();
        let devices = vec![Device::Cuda(0), Device::Cuda(1), Device::Cuda(2)];
        let report = pipeline(&fake, &policy, &[], devices, out.path())
            .run(&plan, Report::new(Default::default()))
            .unwrap();
        let ran = fake.ran.lock().unwrap().clone();
        let mut paths: Vec<&str> = ran.iter().map(|(p, _)| p.as_str()).collect();
        paths.sort();
        paths.dedup();
        assert_eq!(paths.len(), 9, "each job ran exactly once");
        assert_eq!(ran.len(), 9);
        assert_eq!(
            fake.max_per_device.load(Ordering::SeqCst),
            1,
            "never two jobs on one GPU"
        );
        assert_eq!(
            fake.max_total.load(Ordering::SeqCst),
            3,
            "the three GPUs work in parallel"
        );
        let mut used: Vec<String> = ran.iter().map(|(_, d)| d.to_string()).collect();
        used.sort();
        used.dedup();
        assert_eq!(used.len(), 3);
        assert!(report
            .kernels
            .iter()
            .filter(|k| k.path.starts_with("k/"))
            .all(|k| k.verdict == Verdict::Pass));
    }

    #[test]
    fn the_observer_hears_each_kernel_start_and_finish_in_order() {
        use crate::pr::progress::Event as Progress;
        let fake = Fake::new(vec![("k/a.py", correct(1.5)), ("k/b.py", correct(2.0))]);
        let jobs = ["k/a.py", "k/b.py"]
            .iter()
            .map(|p| job(p, KernelStatus::Added, ""))
            .collect();
        let plan = Plan::from_jobs(changes(), jobs).unwrap();
        let policy = Policy::default();
        let out = tempfile::tempdir().unwrap();
        let heard = Mutex::new(Vec::new());
        let observe = |e: &Progress<'_>| {
            let said = match e {
                Progress::Evaluating { path, .. } => format!("start {path}"),
                Progress::Finished(f) => format!("[{}/{}] {}", f.n, f.total, f.row.path),
                _ => return,
            };
            heard.lock().unwrap().push(said);
        };
        let mut p = pipeline(&fake, &policy, &[], vec![Device::Cpu], out.path());
        p.observer = &observe;
        p.run(&plan, Report::new(Default::default())).unwrap();
        // One device: each kernel finishes before the next starts; the deleted one is no job.
        assert_eq!(
            heard.into_inner().unwrap(),
            [
                "start k/a.py",
                "[1/2] k/a.py",
                "start k/b.py",
                "[2/2] k/b.py"
            ]
        );
    }

    #[test]
    fn the_report_on_disk_grows_after_every_kernel() {
        let mut fake = Fake::new(vec![]);
        let out = tempfile::tempdir().unwrap();
        fake.out_dir = Some(out.path().to_path_buf());
        let jobs: Vec<Job> = (0..4)
            .map(|i| job(&format!("k/{i}.py"), KernelStatus::Added, ""))
            .collect();
        let plan = Plan::from_jobs(changes(), jobs).unwrap();
        let policy = Policy::default();
        let observe = |r: &Report| fake.observe(r);
        let mut p = pipeline(&fake, &policy, &[], vec![Device::Cpu], out.path());
        p.on_written = Some(&observe);
        p.run(&plan, Report::new(Default::default())).unwrap();
        assert_eq!(*fake.seen_done.lock().unwrap(), vec![0, 1, 2, 3]);
    }

    /// A problem file on disk and committed baseline files for it under a temp `timing/` dir:
    /// the reference at 1.0 ms and main's `k/a.py` at 0.5 ms (40 samples each, +-0.2%).
    fn committed(dir: &std::path::Path, key: &kernelgate_timing::HardwareKey) -> PathBuf {
        use kernelgate_timing::baseline::{BaselineEntry, BaselineFile, Variant};
        let problem = dir.join("3_ReLU.py");
        std::fs::write(&problem, "import torch\nclass Model: pass\n").unwrap();
        let sha = kernelgate_model::hash::hashes(&std::fs::read_to_string(&problem).unwrap()).0;
        let entry = |variant, kernel: Option<&str>, ms: f64| {
            let samples = around(ms);
            BaselineEntry {
                problem: "level1/3_ReLU".into(),
                problem_sha256: sha.clone(),
                variant,
                kernel: kernel.map(str::to_string),
                kernel_sha256: kernel.map(|_| "f".repeat(64)),
                hardware: key.clone(),
                l2: kernelgate_model::L2Mode::Cold,
                stats: kernelgate_timing::SeriesStats::from_samples(&samples).unwrap(),
                samples_ms: samples,
                commit: Some("c0ffee".into()),
                recorded_at: 0,
                work: None,
            }
        };
        let hw = dir.join("timing").join("NVIDIA_H200");
        let mut refs = BaselineFile::default();
        refs.upsert(entry(Variant::Eager, None, 1.0));
        refs.save(&hw.join("kernelgate_baselines.json")).unwrap();
        let mut kernels = BaselineFile::default();
        kernels.upsert(entry(Variant::Kernel, Some("k/a.py"), 0.5));
        kernels.save(&hw.join("kernelgate_kernels.json")).unwrap();
        problem
    }

    fn around(ms: f64) -> Vec<f64> {
        (0..40)
            .map(|i| ms * (1.0 + ((i % 5) as f64 - 2.0) * 0.001))
            .collect()
    }

    fn h200() -> kernelgate_timing::HardwareKey {
        kernelgate_timing::HardwareKey {
            gpu: "NVIDIA H200".into(),
            driver: "580.159.04".into(),
            cuda: "13.0".into(),
            torch: "2.11.0+cu130".into(),
            precision: Precision::Fp32,
        }
    }

    /// A correct run on the H200 of [`h200`] (cold L2), its event times around `candidate_ms`
    /// and `reference_ms`.
    fn timed(candidate_ms: f64, reference_ms: f64) -> Evaluated {
        Evaluated::Ran {
            result: Box::new(timed_result(candidate_ms, reference_ms)),
            run_key: Some(RunKey {
                key: h200(),
                l2: kernelgate_model::L2Mode::Cold,
            }),
        }
    }

    #[test]
    fn main_kernel_timing_gives_vs_baseline_and_a_regression_without_a_base_run() {
        let dir = tempfile::tempdir().unwrap();
        let problem = committed(dir.path(), &h200());
        let baselines = Committed::load_dir(&dir.path().join("timing"));
        assert!(baselines.errors.is_empty(), "{:?}", baselines.errors);
        // k/a.py: 12% slower than main's 0.5 ms, never re-run against its base version.
        let fake = Fake::new(vec![
            ("k/a.py", timed(0.56, 1.0)),
            ("k/b.py", timed(0.5, 1.0)),
        ]);
        let mut jobs = vec![
            job("k/a.py", KernelStatus::Modified, ""),
            job("k/b.py", KernelStatus::Added, ""),
        ];
        for j in &mut jobs {
            j.problem_file = Some(problem.clone());
        }
        let plan = Plan::from_jobs(changes(), jobs).unwrap();
        let policy = Policy::default();
        let out = tempfile::tempdir().unwrap();
        let mut p = pipeline(&fake, &policy, &[], vec![Device::Cuda(0)], out.path());
        p.baselines = &baselines;
        let report = p.run(&plan, Report::new(Default::default())).unwrap();

        let a = row(&report, "k/a.py");
        let vs = a.vs_baseline.as_ref().unwrap();
        assert_eq!(vs.verdict, ComparisonVerdict::Slower, "{vs:?}");
        assert!((vs.ratio - 1.12).abs() < 1e-9, "{vs:?}");
        let against = vs.against.as_ref().unwrap();
        assert_eq!(against.kind, kernelgate_report::BaselineKind::MainKernel);
        assert!(
            against.detail.contains("`k/a.py` on main (commit c0ffee"),
            "{against:?}"
        );
        assert_eq!(a.verdict, Verdict::Fail, "{:?}", a.reasons);
        assert!(
            a.reasons
                .iter()
                .any(|r| r.contains("12.0% slower than main")),
            "{:?}",
            a.reasons
        );
        assert!(
            a.flags.is_empty(),
            "fresh baseline, same key: {:?}",
            a.flags
        );

        // k/b.py has no accepted timing on main: compared with the stored reference instead.
        let b = row(&report, "k/b.py");
        let vs = b.vs_baseline.as_ref().unwrap();
        assert_eq!(
            vs.against.as_ref().unwrap().kind,
            kernelgate_report::BaselineKind::Reference
        );
        assert_eq!(vs.verdict, ComparisonVerdict::Faster);
        assert!((vs.ratio - 0.5).abs() < 1e-9);
        assert_eq!(b.verdict, Verdict::Pass, "{:?}", b.reasons);
        let hw = &report.run.hardware;
        assert_eq!(
            (hw.driver.as_str(), hw.cuda.as_str()),
            ("580.159.04", "13.0")
        );
    }

    #[test]
    fn a_changed_reference_warns_the_run_once_and_invalidates_the_baseline() {
        let fake = Fake::new(vec![]);
        let mut j = job("k/a.py", KernelStatus::ProblemChanged, "");
        j.change.problem_changed = true;
        let plan = Plan::from_jobs(changes(), vec![j]).unwrap();
        let policy = Policy::default();
        let out = tempfile::tempdir().unwrap();
        let report = pipeline(&fake, &policy, &[], vec![Device::Cpu], out.path())
            .run(&plan, Report::new(Default::default()))
            .unwrap();
        let r = row(&report, "k/a.py");
        assert_eq!(
            r.vs_baseline.as_ref().unwrap().verdict,
            ComparisonVerdict::Invalid
        );
        // The edit is the problem's, reported once for it: the run warns, the row does not.
        assert!(r
            .flags
            .iter()
            .all(|f| f.code != Condition::ReferenceChanged));
        assert_ne!(r.verdict, Verdict::Warn, "{:?}", r.reasons);
        let o = &report.problem_observations;
        assert_eq!(o.len(), 1, "{o:?}");
        assert_eq!(o[0].code, "reference_changed");
        assert_eq!(o[0].kernels, vec!["k/a.py".to_string()]);
        assert_eq!(report.summary.verdict, Verdict::Warn);
    }

    #[test]
    fn what_the_runs_observe_about_their_problem_is_reported_once_and_warns_no_row() {
        let trivial = |path: &str| {
            let mut e = correct(2.0);
            result(&mut e).findings.push(Finding::runtime(
                path,
                "eval/trivial-output-passes",
                Severity::Warning,
                "an all-zeros output already passes this problem's tolerance (0.0001): correctness here proves little",
            ));
            e
        };
        let mut kernel_warning = trivial("k/c.py");
        result(&mut kernel_warning).findings.push(Finding::runtime(
            "k/c.py",
            "eval/nondeterministic",
            Severity::Warning,
            "two calls on the same inputs gave different (within-tolerance) results",
        ));
        let fake = Fake::new(vec![
            ("k/a.py", trivial("k/a.py")),
            ("k/b.py", trivial("k/b.py")),
            ("k/c.py", kernel_warning),
        ]);
        let jobs = ["k/a.py", "k/b.py", "k/c.py"]
            .iter()
            .map(|p| job(p, KernelStatus::Added, ""))
            .collect();
        let plan = Plan::from_jobs(changes(), jobs).unwrap();
        let policy = Policy::default();
        let out = tempfile::tempdir().unwrap();
        let report = pipeline(&fake, &policy, &[], vec![Device::Cpu], out.path())
            .run(&plan, Report::new(Default::default()))
            .unwrap();
        // Nothing in a kernel can change the problem's inputs: no row warns for them.
        for p in ["k/a.py", "k/b.py"] {
            let r = row(&report, p);
            assert_eq!(r.verdict, Verdict::Pass, "{p}: {:?}", r.reasons);
            assert!(r.findings.iter().all(|f| !f.is_about_problem()), "{p}");
        }
        // What is about the kernel still is its verdict.
        let c = row(&report, "k/c.py");
        assert_eq!(c.verdict, Verdict::Warn);
        assert!(
            c.reasons.iter().all(|r| !r.contains("trivial-output")),
            "{:?}",
            c.reasons
        );
        // Once, for the problem, with every kernel that saw it.
        let o = &report.problem_observations;
        assert_eq!(o.len(), 1, "{o:?}");
        assert_eq!(
            (o[0].problem.as_str(), o[0].code.as_str()),
            ("level1/3_ReLU", "eval/trivial-output-passes")
        );
        assert_eq!(o[0].kernels, vec!["k/a.py", "k/b.py", "k/c.py"]);
        assert_eq!(report.summary.verdict, Verdict::Warn, "k/c.py warns");
        // The files written say so too.
        let written = Report::read(&out.path().join("report.json")).unwrap();
        assert_eq!(written.problem_observations, report.problem_observations);
        let comment = std::fs::read_to_string(out.path().join("comment.md")).unwrap();
        assert_eq!(comment.matches("all-zeros output").count(), 1, "{comment}");
    }

    #[test]
    fn a_reference_the_pr_breaks_fails_instead_of_going_neutral() {
        let infra = Evaluated::ended(Outcome::Infrastructure {
            message: "the problem file failed to load".into(),
            traceback: String::new(),
        });
        let fake = Fake::new(vec![("k/a.py", infra)]);
        let mut j = job("k/a.py", KernelStatus::ProblemChanged, "");
        j.change.problem_changed = true;
        let plan = Plan::from_jobs(changes(), vec![j]).unwrap();
        let policy = Policy::default();
        let out = tempfile::tempdir().unwrap();
        let report = pipeline(&fake, &policy, &[], vec![Device::Cpu], out.path())
            .run(&plan, Report::new(Default::default()))
            .unwrap();
        let r = row(&report, "k/a.py");
        assert_eq!(r.verdict, Verdict::Fail, "{:?}", r.reasons);
        assert!(
            r.outcome.message.contains("this pull request edits"),
            "{}",
            r.outcome.message
        );
        assert_eq!(report.summary.verdict, Verdict::Fail);
    }

    #[test]
    fn a_skip_and_an_error_of_ours_are_outcomes_of_their_own_never_a_measurement() {
        // torch found no CUDA on a runner without a GPU: skipped, on the CPU the child reached.
        let cpu = RunKey {
            key: kernelgate_timing::HardwareKey {
                gpu: "AMD EPYC 9654".into(),
                driver: "none".into(),
                cuda: "none".into(),
                torch: "2.5.1+cpu".into(),
                precision: Precision::Fp32,
            },
            l2: kernelgate_model::L2Mode::Cold,
        };
        let fake = Fake::new(vec![
            (
                "k/skipped.py",
                Evaluated::Skipped {
                    reason: "skipped — needs a GPU".into(),
                    run_key: Some(cpu),
                },
            ),
            ("k/error.py", Evaluated::Error("no job for it".into())),
        ]);
        let jobs = ["k/skipped.py", "k/error.py"]
            .iter()
            .map(|p| job(p, KernelStatus::Added, ""))
            .collect();
        let plan = Plan::from_jobs(changes(), jobs).unwrap();
        let policy = Policy::default();
        let out = tempfile::tempdir().unwrap();
        let report = pipeline(&fake, &policy, &[], vec![Device::Cpu], out.path())
            .run(&plan, Report::new(Default::default()))
            .unwrap();
        let skipped = row(&report, "k/skipped.py");
        assert_eq!(skipped.outcome.kind, OutcomeKind::Skipped);
        assert_eq!(skipped.outcome.message, "skipped — needs a GPU");
        assert_eq!(skipped.verdict, Verdict::Skipped, "{:?}", skipped.reasons);
        assert_eq!(skipped.device.as_deref(), Some("AMD EPYC 9654"));
        assert_eq!(skipped.timed_on, Some(kernelgate_report::TimedOn::Cpu));
        assert_eq!((skipped.seed, skipped.time_ms), (None, None));
        let error = row(&report, "k/error.py");
        assert_eq!(error.outcome.kind, OutcomeKind::Other);
        assert_eq!(error.verdict, Verdict::Fail, "{:?}", error.reasons);
        assert_eq!((error.device.as_deref(), error.timed_on), (None, None));
        // No harness result: the run learned no seed, torch or device from either.
        assert_eq!(report.run.seed, None);
        assert!(report.run.hardware.gpu.is_empty() && report.run.hardware.torch.is_empty());
    }
}
