//! Recording: `kernelgate baseline` times the references (and with `--kernels` the accepted
//! kernels) and writes `results/timing/<HARDWARE>/`.
//!
//! Only the repository's own problem files run in the reference child (no candidate code): one
//! process of the runner's Python importing the harness extension's `kg_timing.baseline`,
//! started by the eval crate's launcher like every other child. Kernels go through the
//! isolated harness (`kernelgate_eval::run_job`), correctness first.

use anyhow::{bail, Context};
use kernelgate_eval::protocol::JobTiming;
use kernelgate_eval::{JobRequest, JobSpec, Script, ScriptEnd};
use kernelgate_model::{Config, Device, Kernel, KernelError, L2Mode, Problem, ProblemSet};
use kernelgate_timing::baseline::{BASELINES_FILE, KB_COMPILE_FILE, KB_EAGER_FILE, KERNELS_FILE};
use kernelgate_timing::{
    hardware_dir_name, stale_check, BaselineEntry, BaselineFile, HardwareKey, KbEntry, KbFile,
    Lookup, Query, Sample, SeriesStats, Staleness, Variant, Work,
};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// What one `kernelgate baseline` run times.
#[derive(Debug, Clone, Default)]
pub struct Request {
    /// Only problems of this level.
    pub level: Option<u32>,
    /// Only these problems (keys, stems or paths); empty: all.
    pub problems: Vec<String>,
    /// Also `torch.compile` of each reference; `compile_only`: only that.
    pub compile: bool,
    pub compile_only: bool,
    /// `None`: `[defaults] device`.
    pub device: Option<Device>,
    /// Folder under results/timing/ (default: from the device name).
    pub hardware: Option<String>,
    /// Also the accepted kernels of this checkout.
    pub kernels: bool,
    /// Whole-run limit of the reference child (default: 60 s per problem and variant + 120 s).
    pub timeout: Option<Duration>,
}

/// The problems of `set` a run times: those named by `queries` (keys, stems or paths), else
/// all; either way only those of `level` when it is given.
pub fn select_problems<'a>(
    set: &'a ProblemSet,
    level: Option<u32>,
    queries: &[String],
) -> anyhow::Result<Vec<&'a Problem>> {
    let mut problems: Vec<&Problem> = Vec::new();
    if queries.is_empty() {
        problems.extend(set.iter().filter(|p| level.is_none_or(|l| p.level == l)));
    } else {
        for q in queries {
            let p = set
                .find(q)
                .map_err(|e| anyhow::anyhow!("--problem {q}: {e}"))?;
            if level.is_none_or(|l| p.level == l) && !problems.iter().any(|x| x.key == p.key) {
                problems.push(p);
            }
        }
    }
    if problems.is_empty() {
        bail!(
            "no problems selected from {}: check --level / --problem (`kernelgate problems` lists them)",
            set.origin
        );
    }
    Ok(problems)
}

/// The accepted kernels `--kernels` times: every kernel `kernelgate kernels` maps to one of
/// `problems`, by the same rules; and the files that cannot be mapped.
pub fn kernel_plan(
    repo: &Path,
    cfg: &Config,
    set: &ProblemSet,
    problems: &[&Problem],
) -> (Vec<Kernel>, Vec<KernelError>) {
    let (mut kernels, errors) = kernelgate_model::discover(repo, cfg, set);
    kernels.retain(|k| problems.iter().any(|p| p.key == k.problem_key));
    (kernels, errors)
}

/// What a run would time (`kernelgate baseline --plan`): the problems and, with `--kernels`,
/// each kernel as `kernelgate kernels` maps it, and the files that map to nothing.
#[derive(Debug, Serialize)]
pub struct Plan {
    pub problems: Vec<String>,
    pub kernels: Vec<PlannedKernel>,
    pub errors: Vec<PlanError>,
}

#[derive(Debug, Serialize)]
pub struct PlannedKernel {
    pub path: PathBuf,
    pub problem: String,
    pub backend: kernelgate_model::Backend,
    pub precision: kernelgate_model::Precision,
    pub mapped_by: kernelgate_model::MappedBy,
}

#[derive(Debug, Serialize)]
pub struct PlanError {
    pub path: PathBuf,
    pub line: Option<usize>,
    pub message: String,
}

/// The plan of `req` without running anything.
pub fn plan(repo: &Path, cfg: &Config, set: &ProblemSet, req: &Request) -> anyhow::Result<Plan> {
    let problems = select_problems(set, req.level, &req.problems)?;
    let (kernels, errors) = if req.kernels {
        kernel_plan(repo, cfg, set, &problems)
    } else {
        Default::default()
    };
    Ok(Plan {
        problems: problems.iter().map(|p| p.key.clone()).collect(),
        kernels: kernels
            .into_iter()
            .map(|k| PlannedKernel {
                path: k.path,
                problem: k.problem_key,
                backend: k.backend,
                precision: k.precision,
                mapped_by: k.mapped_by,
            })
            .collect(),
        errors: errors
            .iter()
            .map(|e| PlanError {
                path: e.path().to_path_buf(),
                line: e.line(),
                message: e.to_string(),
            })
            .collect(),
    })
}

/// Hears a run's rows as they are timed (kernels stream, one harness run each).
pub trait Observer {
    fn event(&self, event: &Event<'_>);
}

impl<F: Fn(&Event<'_>)> Observer for F {
    fn event(&self, event: &Event<'_>) {
        self(event)
    }
}

/// One thing a run says while it times; `Display` is its line as a terminal shows it.
#[derive(Debug)]
pub enum Event<'a> {
    /// The reference child starts.
    Timing {
        references: usize,
        variants: &'a [&'a str],
        device: Device,
        python: &'a Path,
    },
    /// The child ran past its limit; what it finished is kept.
    TimedOut { limit: Duration },
    /// The table's header, before the first row.
    Header,
    /// One timed series: median, its 95% CI, samples and CV, and a note.
    Row {
        name: &'a str,
        variant: &'a str,
        stats: &'a SeriesStats,
        note: &'a str,
    },
    /// A reference the child could not time, as a table row.
    ReferenceFailed {
        problem: &'a str,
        variant: &'a str,
        error: &'a str,
    },
    /// The Python traceback of a failed reference.
    Traceback {
        path: &'a Path,
        variant: &'a str,
        traceback: &'a str,
    },
    /// A series without statistics, or a kernel that failed its checks.
    Failed {
        name: &'a str,
        variant: &'a str,
        error: String,
    },
    /// A kernel file `--kernels` cannot map to a problem.
    Unmapped(&'a KernelError),
    /// A kernel of another precision than this run times.
    OtherPrecision {
        kernel: &'a str,
        precision: kernelgate_model::Precision,
        timed: kernelgate_model::Precision,
    },
}

impl fmt::Display for Event<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Event::Timing {
                references,
                variants,
                device,
                python,
            } => write!(
                f,
                "timing {references} reference(s) x {} on {} with {} ...",
                variants.join("+"),
                device.as_str(),
                python.display()
            ),
            Event::TimedOut { limit } => write!(
                f,
                "timing the references took longer than {} s: stopped; keeping the problems finished so far \
                 (raise --timeout or select fewer problems)",
                limit.as_secs()
            ),
            Event::Header => write!(
                f,
                "{:<32} {:<8} {:>11} {:>21} {:>5} {:>9}  NOTE",
                "PROBLEM", "VARIANT", "MEDIAN ms", "95% CI of median", "N", "CV %"
            ),
            Event::Row {
                name,
                variant,
                stats,
                note,
            } => write!(
                f,
                "{name:<32} {variant:<8} {:>11.4} {:>21} {:>5} {:>9.3}  {note}",
                stats.median,
                format!("{:.4}..{:.4}", stats.ci95_median.0, stats.ci95_median.1),
                stats.n,
                stats.cv_pct()
            ),
            Event::ReferenceFailed {
                problem,
                variant,
                error,
            } => write!(
                f,
                "{problem:<32} {variant:<8} {:>11} {:>21} {:>5} {:>9}  FAILED: {error}",
                "-", "-", "-", "-"
            ),
            Event::Traceback {
                path,
                variant,
                traceback,
            } => write!(f, "{}: {variant} traceback:\n{traceback}", path.display()),
            Event::Failed {
                name,
                variant,
                error,
            } => write!(f, "{name:<32} {variant:<8} FAILED: {error}"),
            Event::Unmapped(e) => write!(f, "warning: {e}"),
            Event::OtherPrecision {
                kernel,
                precision,
                timed,
            } => write!(
                f,
                "{kernel:<32} {:<8} skipped: a {precision} kernel; this run times {timed} (pass --precision {precision})",
                "kernel"
            ),
        }
    }
}

/// What a run wrote and what it did not; `Display` gives its closing lines.
#[derive(Debug)]
pub struct Recorded {
    /// The hardware folder, relative to the repository when inside it.
    pub dir: PathBuf,
    pub key: HardwareKey,
    /// Some series was written (the folder is unchanged otherwise).
    pub wrote: bool,
    /// References or kernels that failed to time.
    pub failed: usize,
    /// Series too noisy to be a baseline (their previous baselines are kept).
    pub noisy: usize,
    /// `[timing] baseline_max_cv_pct`, what `noisy` exceeded.
    pub max_cv_pct: f64,
    /// The reference child ran past its limit.
    pub timed_out: bool,
    /// Problem/variant pairs the child never reached.
    pub missing: usize,
    pub bandwidth_gbs: Option<f64>,
    pub idle_sync_ms: Option<f64>,
}

impl Recorded {
    /// Series not written: failed, too noisy or never reached.
    pub fn not_written(&self) -> usize {
        self.failed + self.noisy + self.missing
    }

    /// 0 when everything was timed and written, 1 when anything was not (its previous
    /// baseline, if any, is kept).
    pub fn exit_code(&self) -> i32 {
        i32::from(self.not_written() > 0)
    }
}

impl fmt::Display for Recorded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(bw) = self.bandwidth_gbs {
            writeln!(f, "measured device copy bandwidth: {bw:.0} GB/s")?;
        }
        if let Some(s) = self.idle_sync_ms {
            writeln!(f, "idle context synchronise: {:.1} us", s * 1e3)?;
        }
        let shown = self.dir.display();
        if self.wrote {
            write!(f, "wrote {shown} ({})", self.key)?;
        } else {
            write!(
                f,
                "wrote nothing: no sample was both timed and quiet enough; {shown} is unchanged"
            )?;
        }
        if self.noisy > 0 {
            write!(
                f,
                "\nwarning: {} sample(s) too noisy to be a baseline (robust coefficient of variation, \
                 0.74 x IQR / median, above [timing] baseline_max_cv_pct = {}%): not written. Re-run on an idle runner \
                 (no other jobs, fixed clocks), or raise baseline_max_cv_pct in kernelgate.toml",
                self.noisy, self.max_cv_pct
            )?;
        }
        if self.timed_out || self.missing > 0 {
            write!(
                f,
                "\n{} problem/variant pair(s) not timed before the limit",
                self.missing
            )?;
        }
        if self.not_written() > 0 {
            write!(
                f,
                "\n{} reference(s) or kernel(s) failed to time or were too noisy; their previous baselines, if any, are kept",
                self.not_written()
            )?;
        }
        Ok(())
    }
}

/// Counts of one run, for its summary and exit code.
#[derive(Debug, Default)]
struct Tally {
    failed: usize,
    noisy: usize,
    wrote: bool,
}

/// Where and when this run records.
struct Target<'a> {
    repo: &'a Path,
    cfg: &'a Config,
    key: HardwareKey,
    /// The references ran on a GPU (kernels are timed there too, CPU-only C++ aside).
    gpu: bool,
    l2: L2Mode,
    dir: PathBuf,
    commit: Option<String>,
    now: u64,
}

/// Times the selected references (and kernels) and writes their baselines, telling `observer`
/// each row as it is timed; what was written and what was not ([`Recorded::exit_code`]).
pub fn record(
    repo: &Path,
    cfg: &Config,
    set: &ProblemSet,
    req: &Request,
    observer: &dyn Observer,
) -> anyhow::Result<Recorded> {
    let problems = select_problems(set, req.level, &req.problems)?;
    let variants: Vec<&str> = if req.compile_only {
        vec!["compile"]
    } else if req.compile || cfg.timing.compile_baseline {
        vec!["eager", "compile"]
    } else {
        vec!["eager"]
    };
    let device = req.device.unwrap_or(cfg.defaults.device);
    let (out, timed_out) = time_references(
        repo,
        cfg,
        &problems,
        &variants,
        device,
        req.timeout,
        observer,
    )?;
    let key = kernelgate_eval::hardware_key(&out.machine, cfg.defaults.precision);
    let hw_dir = req
        .hardware
        .clone()
        .unwrap_or_else(|| hardware_dir_name(&key.gpu));
    let target = Target {
        repo,
        cfg,
        dir: cfg.results_root(repo).join("timing").join(&hw_dir),
        key,
        gpu: out.machine.is_gpu(),
        l2: out.l2,
        commit: git_head(repo),
        now: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
    };
    let mut tally = write_references(&target, &out, &problems, observer)?;
    if req.kernels {
        let k = time_kernels(&target, set, &problems, observer)?;
        tally.failed += k.failed;
        tally.noisy += k.noisy;
        tally.wrote |= k.wrote;
    }
    let expected = problems.len() * variants.len();
    Ok(Recorded {
        dir: target
            .dir
            .strip_prefix(repo)
            .unwrap_or(&target.dir)
            .to_path_buf(),
        key: target.key,
        wrote: tally.wrote,
        failed: tally.failed,
        noisy: tally.noisy,
        max_cv_pct: cfg.timing.baseline_max_cv_pct,
        timed_out,
        missing: expected.saturating_sub(out.results.len()),
        bandwidth_gbs: out.bandwidth_gbs,
        idle_sync_ms: out.idle_sync_ms,
    })
}

/// What the reference child writes (kg_timing.baseline).
#[derive(Deserialize)]
struct ChildOut {
    machine: kernelgate_eval::Machine,
    device: String,
    l2: L2Mode,
    #[serde(default)]
    bandwidth_gbs: Option<f64>,
    #[serde(default)]
    idle_sync_ms: Option<f64>,
    results: Vec<ChildResult>,
}

#[derive(Deserialize)]
struct ChildResult {
    problem: String,
    variant: String,
    #[serde(default)]
    samples: Vec<Sample>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    traceback: Option<String>,
    #[serde(default)]
    input_bytes: Option<u64>,
    #[serde(default)]
    output_bytes: Option<u64>,
    #[serde(default)]
    flops: Option<u64>,
}

/// The reference child's job (`kg_timing.baseline`): the repository's own references, timed in
/// one trusted process; never a candidate's job (that is [`kernelgate_eval::JobSpec`]).
#[derive(Serialize)]
struct ReferenceJob<'a> {
    problems: Vec<ReferenceProblem>,
    variants: &'a [&'a str],
    device: Device,
    precision: kernelgate_model::Precision,
    seed: u64,
    input_sets: u32,
    timing: JobTiming,
}

#[derive(Serialize)]
struct ReferenceProblem {
    key: String,
    path: std::path::PathBuf,
}

/// Runs the reference child; `true` with the result when the limit stopped it (the child
/// writes its result after every problem, so what it finished is kept).
fn time_references(
    repo: &Path,
    cfg: &Config,
    problems: &[&Problem],
    variants: &[&str],
    device: Device,
    timeout: Option<Duration>,
    observer: &dyn Observer,
) -> anyhow::Result<(ChildOut, bool)> {
    let python = kernelgate_eval::runner_python(cfg, repo);
    let harness = kernelgate_eval::find_harness()?;
    let harness = std::fs::canonicalize(&harness).unwrap_or(harness);
    let work = tempfile::tempdir().context("creating a temporary directory")?;
    let t = &cfg.timing;
    let job = ReferenceJob {
        problems: problems
            .iter()
            .map(|p| ReferenceProblem {
                key: p.key.clone(),
                path: std::fs::canonicalize(&p.path).unwrap_or(p.path.clone()),
            })
            .collect(),
        variants,
        device,
        precision: cfg.defaults.precision,
        seed: 42,
        input_sets: 3,
        timing: JobTiming {
            // KernelBench warms references up 5 times.
            warmup: t.warmup.max(5),
            min_samples: t.min_samples.max(30),
            max_samples: t.max_samples.max(100),
            budget_s: t.budget_s,
            ci_target_pct: t.ci_target_pct,
            l2: t.l2,
            input_sets: 3,
        },
    };
    let job_path = work.path().join("job.json");
    let out_path = work.path().join("result.json");
    std::fs::write(&job_path, serde_json::to_string(&job)?)?;
    let limit = timeout.unwrap_or(Duration::from_secs(
        120 + 60 * (problems.len() * variants.len()) as u64 + t.budget_s as u64,
    ));
    observer.event(&Event::Timing {
        references: problems.len(),
        variants,
        device,
        python: &python,
    });
    let ended = kernelgate_eval::run_script(Script {
        python: &python,
        harness: Some(&harness),
        code: "import sys, kernelgate_harness as h\n\
               h.timing_module().baseline(open(sys.argv[1]).read(), sys.argv[2])\n",
        args: vec![job_path.into(), out_path.clone().into()],
        dir: work.path(),
        limit,
        memory_limit_bytes: cfg.harness.memory_limit_mb.saturating_mul(1 << 20),
        // CUDA needs a huge address space: watch the resident memory instead.
        rlimit_as: device == Device::Cpu,
        env: Vec::new(),
    })
    .with_context(|| {
        format!(
            "starting {} (set KERNELGATE_PYTHON or [harness] python to a Python with torch)",
            python.display()
        )
    })?;
    let timed_out = match ended {
        ScriptEnd::Exited { status, .. } if status.success() => false,
        ScriptEnd::Exited {
            status,
            stdout_tail,
        } => bail!(
            "the baseline child ({}) exited with {status}; its output:\n{stdout_tail}",
            python.display()
        ),
        ScriptEnd::MemoryKilled { rss_bytes } => bail!(
            "the baseline child used {} MiB, above [harness] memory_limit_mb = {}: stopped \
             (raise memory_limit_mb in kernelgate.toml or select fewer problems)",
            rss_bytes >> 20,
            cfg.harness.memory_limit_mb
        ),
        ScriptEnd::TimedOut => {
            observer.event(&Event::TimedOut { limit });
            true
        }
    };
    let text = std::fs::read_to_string(&out_path).with_context(|| {
        format!(
            "the baseline child wrote no result to {} before it was stopped",
            out_path.display()
        )
    })?;
    let out = serde_json::from_str(&text).context("parsing the baseline child's result")?;
    Ok((out, timed_out))
}

fn too_noisy_note(stats: &SeriesStats, max_cv: f64) -> Option<String> {
    (stats.robust_cv_pct() > max_cv).then(|| {
        format!(
            "NOT WRITTEN: too noisy (robust CV {:.1}% > {max_cv}%)",
            stats.robust_cv_pct()
        )
    })
}

/// The reference series of the child's result, written in both formats.
fn write_references(
    t: &Target<'_>,
    out: &ChildOut,
    problems: &[&Problem],
    observer: &dyn Observer,
) -> anyhow::Result<Tally> {
    let kb_device = if out.device.starts_with("cuda") {
        "cuda:0".to_string()
    } else {
        out.device.clone()
    };
    let ours_path = t.dir.join(BASELINES_FILE);
    let mut ours = BaselineFile::load_or_default(&ours_path)?;
    let mut kb_eager = KbFile::load_or_default(&t.dir.join(KB_EAGER_FILE))?;
    let mut kb_compile = KbFile::load_or_default(&t.dir.join(KB_COMPILE_FILE))?;
    observer.event(&Event::Header);
    let mut tally = Tally::default();
    let (mut wrote_eager, mut wrote_compile) = (false, false);
    for r in &out.results {
        let Some(p) = problems.iter().find(|p| p.key == r.problem) else {
            continue;
        };
        let variant = if r.variant == "compile" {
            Variant::Compile
        } else {
            Variant::Eager
        };
        if let Some(e) = &r.error {
            tally.failed += 1;
            observer.event(&Event::ReferenceFailed {
                problem: &p.key,
                variant: &r.variant,
                error: e,
            });
            if let Some(tb) = &r.traceback {
                observer.event(&Event::Traceback {
                    path: &p.path,
                    variant: &r.variant,
                    traceback: tb,
                });
            }
            continue;
        }
        let ms: Vec<f64> = r.samples.iter().map(|s| s.ms).collect();
        let stats = match SeriesStats::from_samples(&ms) {
            Ok(s) => s,
            Err(e) => {
                tally.failed += 1;
                observer.event(&Event::Failed {
                    name: &p.key,
                    variant: &r.variant,
                    error: e.to_string(),
                });
                continue;
            }
        };
        if let Some(note) = too_noisy_note(&stats, t.cfg.timing.baseline_max_cv_pct) {
            // Too wide a spread to compare pull requests against: keep what is stored.
            tally.noisy += 1;
            observer.event(&Event::Row {
                name: &p.key,
                variant: &r.variant,
                stats: &stats,
                note: &note,
            });
            continue;
        }
        let q = Query {
            problem: &p.key,
            problem_sha256: &p.sha256,
            variant,
            kernel: None,
            hardware: &t.key,
            l2: t.l2,
        };
        observer.event(&Event::Row {
            name: &p.key,
            variant: &r.variant,
            stats: &stats,
            note: &stale_note(ours.lookup(&q), &ms, t),
        });
        let level = format!("level{}", p.level);
        let kb = KbEntry::from_stats(&stats, &t.key.gpu, &kb_device);
        if variant == Variant::Compile {
            kb_compile.insert(&level, &p.file_name(), kb);
            wrote_compile = true;
        } else {
            kb_eager.insert(&level, &p.file_name(), kb);
            wrote_eager = true;
        }
        ours.upsert(BaselineEntry {
            problem: p.key.clone(),
            problem_sha256: p.sha256.clone(),
            variant,
            kernel: None,
            kernel_sha256: None,
            hardware: t.key.clone(),
            l2: t.l2,
            stats,
            samples_ms: ms,
            commit: t.commit.clone(),
            recorded_at: t.now,
            work: match (r.input_bytes, r.output_bytes) {
                (Some(i), Some(o)) => Some(Work {
                    input_bytes: i,
                    output_bytes: o,
                    flops: r.flops.unwrap_or(0),
                }),
                _ => None,
            },
        });
    }
    if wrote_eager {
        kb_eager.save(&t.dir.join(KB_EAGER_FILE))?;
    }
    if wrote_compile {
        kb_compile.save(&t.dir.join(KB_COMPILE_FILE))?;
    }
    tally.wrote = wrote_eager || wrote_compile;
    if tally.wrote {
        ours.save(&ours_path)?;
    }
    Ok(tally)
}

/// How a new reference series compares with the stored one.
fn stale_note(lookup: Lookup<'_>, ms: &[f64], t: &Target<'_>) -> String {
    match lookup {
        Lookup::Match(prev) => match stale_check(ms, prev, t.cfg.timing.threshold_pct) {
            Ok(Staleness::Stale { ratio, .. }) => {
                format!("replaces a baseline {:+.1}% away", (ratio - 1.0) * 100.0)
            }
            Ok(Staleness::Fresh { ratio }) => format!(
                "agrees with the stored baseline ({:+.1}%)",
                (ratio - 1.0) * 100.0
            ),
            Err(_) => String::new(),
        },
        Lookup::ProblemChanged { .. } => "problem changed since the stored baseline".to_string(),
        Lookup::KeyMismatch { .. } | Lookup::Missing => "new".to_string(),
    }
}

/// Times every accepted kernel of the selected problems through the isolated harness (full
/// correctness checks first) and records the candidate series under the reference's hardware
/// key (or the CPU's, for CPU-only C++ kernels, as `kernelgate pr` looks them up).
fn time_kernels(
    t: &Target<'_>,
    set: &ProblemSet,
    problems: &[&Problem],
    observer: &dyn Observer,
) -> anyhow::Result<Tally> {
    let (kernels, errors) = kernel_plan(t.repo, t.cfg, set, problems);
    for e in &errors {
        observer.event(&Event::Unmapped(e));
    }
    let path = t.dir.join(KERNELS_FILE);
    let mut file = BaselineFile::load_or_default(&path)?;
    // The runner's build store: main's baseline fills it for the pull requests after.
    let store = kernelgate_eval::BuildStore::for_runner()?;
    let mut tally = Tally::default();
    for k in &kernels {
        let Some(p) = problems.iter().find(|p| p.key == k.problem_key) else {
            continue;
        };
        let name = k.path.display().to_string();
        if k.precision != t.key.precision {
            observer.event(&Event::OtherPrecision {
                kernel: &name,
                precision: k.precision,
                timed: t.key.precision,
            });
            continue;
        }
        let Some((entry, stats)) = time_kernel(t, k, p, store.as_ref(), observer)? else {
            tally.failed += 1;
            continue;
        };
        let noisy = too_noisy_note(&stats, t.cfg.timing.baseline_max_cv_pct);
        observer.event(&Event::Row {
            name: &name,
            variant: "kernel",
            stats: &stats,
            note: noisy.as_deref().unwrap_or(&p.key),
        });
        if noisy.is_some() {
            tally.noisy += 1;
            continue;
        }
        file.upsert(entry);
        tally.wrote = true;
    }
    if tally.wrote {
        file.save(&path)?;
    }
    Ok(tally)
}

/// One kernel through the harness: its baseline entry, or `None` (told to `observer`) when it
/// failed its checks or gave no timing.
fn time_kernel(
    t: &Target<'_>,
    k: &Kernel,
    p: &Problem,
    store: Option<&kernelgate_eval::BuildStore>,
    observer: &dyn Observer,
) -> anyhow::Result<Option<(BaselineEntry, SeriesStats)>> {
    let kpath = t.repo.join(&k.path); // an absolute path stays as it is
    let source =
        std::fs::read_to_string(&kpath).with_context(|| format!("reading {}", kpath.display()))?;
    let (sources, sources_known) = kernelgate_model::deps::disk_sources(t.repo, &kpath);
    let request = JobRequest {
        problem_label: Some(p.key.clone()),
        kernel_label: Some(k.path.display().to_string()),
        sources,
        sources_known,
        precision: Some(k.precision),
        seed: Some(42),
        extensions_dir: store
            .cloned()
            .map(kernelgate_eval::ExtensionsDir::Store)
            .unwrap_or_default(),
        device: Some(if t.gpu { Device::Cuda } else { Device::Cpu }),
        ..JobRequest::default()
    };
    let spec = JobSpec::build(t.cfg, t.repo, &p.path, &kpath, &request)?;
    let r = kernelgate_eval::run_job(&spec);
    // CPU-only C++ kernels run on the CPU even on a GPU runner: record them under the key of
    // where they ran, as `kernelgate pr` looks them up.
    let hardware = match &r.machine {
        Some(machine) => kernelgate_eval::hardware_key(machine, k.precision),
        None => t.key.clone(),
    };
    let ms: Vec<f64> = r
        .timing
        .as_ref()
        .and_then(|t| t.samples.get(&kernelgate_timing::Series::Candidate))
        .map(|s| s.iter().map(|x| x.ms).collect())
        .unwrap_or_default();
    let stats = match (r.passed(), SeriesStats::from_samples(&ms)) {
        (true, Ok(st)) => st,
        _ => {
            observer.event(&Event::Failed {
                name: &k.path.display().to_string(),
                variant: "kernel",
                error: r.outcome.summary(),
            });
            return Ok(None);
        }
    };
    let entry = BaselineEntry {
        problem: p.key.clone(),
        problem_sha256: p.sha256.clone(),
        variant: Variant::Kernel,
        kernel: Some(k.path.display().to_string()),
        kernel_sha256: Some(kernelgate_model::hash::hashes(&source).0),
        hardware,
        l2: t.l2,
        stats,
        samples_ms: ms,
        commit: t.commit.clone(),
        recorded_at: t.now,
        work: None,
    };
    Ok(Some((entry, stats)))
}

/// The checked-out commit, when `repo` is a git repository (through the one git owner).
fn git_head(repo: &Path) -> Option<String> {
    crate::git::Git::open(repo).ok()?.resolve("HEAD").ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recorded() -> Recorded {
        Recorded {
            dir: PathBuf::from("results/timing/NVIDIA_H200"),
            key: HardwareKey {
                gpu: "NVIDIA H200".into(),
                driver: "580.159.04".into(),
                cuda: "13.0".into(),
                torch: "2.11.0+cu130".into(),
                precision: kernelgate_model::Precision::Fp32,
            },
            wrote: true,
            failed: 0,
            noisy: 0,
            max_cv_pct: 5.0,
            timed_out: false,
            missing: 0,
            bandwidth_gbs: None,
            idle_sync_ms: None,
        }
    }

    #[test]
    fn a_clean_run_closes_with_what_it_wrote_and_exits_0() {
        let r = recorded();
        assert_eq!(r.exit_code(), 0);
        assert_eq!(
            r.to_string(),
            format!("wrote results/timing/NVIDIA_H200 ({})", r.key)
        );
    }

    #[test]
    fn what_was_not_written_is_counted_said_last_and_exits_1() {
        let r = Recorded {
            wrote: false,
            failed: 1,
            noisy: 2,
            timed_out: true,
            missing: 3,
            bandwidth_gbs: Some(3012.4),
            idle_sync_ms: Some(0.0123),
            ..recorded()
        };
        assert_eq!(r.exit_code(), 1);
        let text = r.to_string();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 6, "{text}");
        assert_eq!(lines[0], "measured device copy bandwidth: 3012 GB/s");
        assert_eq!(lines[1], "idle context synchronise: 12.3 us");
        assert!(lines[2].starts_with("wrote nothing: "), "{text}");
        assert!(
            lines[3].starts_with("warning: 2 sample(s) too noisy")
                && lines[3].contains("baseline_max_cv_pct = 5%"),
            "{text}"
        );
        assert_eq!(
            lines[4],
            "3 problem/variant pair(s) not timed before the limit"
        );
        assert!(lines[5].starts_with("6 reference(s) or kernel(s) failed"));
    }

    #[test]
    fn rows_line_up_under_the_header() {
        let stats = SeriesStats::from_samples(&[1.0, 1.0, 1.0, 1.0]).unwrap();
        let header = Event::Header.to_string();
        let row = Event::Row {
            name: "level1/3_ReLU",
            variant: "eager",
            stats: &stats,
            note: "new",
        }
        .to_string();
        let failed = Event::ReferenceFailed {
            problem: "level1/3_ReLU",
            variant: "eager",
            error: "boom",
        }
        .to_string();
        // NOTE, the note and FAILED start in one column.
        let col = header.find("NOTE").unwrap();
        assert_eq!(row.find("new"), Some(col), "{header}\n{row}");
        assert_eq!(failed.find("FAILED"), Some(col), "{header}\n{failed}");
    }
}
