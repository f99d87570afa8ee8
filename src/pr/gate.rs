//! The gate for one pull request, end to end: the judging config, plan from git, lint, harness,
//! timing against baselines, verdicts, report, publish. `kernelgate pr` parses its flags into
//! [`Options`], asks [`judge`] for the [`Judgment`] (the config that judges the pull request,
//! never its head's: `super::judgment`), lays its own overrides over it, and calls [`plan`] (for
//! `--plan`) or [`gate`].

use kernelgate_github::GithubContext;
use kernelgate_report::{Report, RunInfo};
use std::path::{Path, PathBuf};

use super::adapters::{HarnessEvaluator, RepoLinter};
use super::changes::{self, FileStatus};
use super::evaluator::{self, Device};
use super::judgment::{self, Judgment, JudgmentError};
use super::layout::Layout;
use super::plan::{Plan, PlanError};
use super::policy::{self, Acks, Policy};
use super::progress::{Event, Observer};
use super::run::Pipeline;
use super::shard::Shard;
use crate::baseline::judge::Committed;
use crate::git::{Git, GitError};
use crate::ops::publish;

/// Why the gate could not run, with what to do. (A kernel that fails is a verdict, not this.)
#[derive(Debug, thiserror::Error)]
pub enum GateError {
    #[error(
        "no base to compare with in {}: pass --base REF (no origin/main or main here)",
        root.display()
    )]
    NoBase { root: PathBuf },
    #[error("cannot create the output directory {}", dir.display())]
    OutDir {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Git(#[from] GitError),
    #[error(transparent)]
    Judgment(#[from] JudgmentError),
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error(transparent)]
    Report(#[from] kernelgate_report::ReportError),
    /// The runner's build store could not be opened.
    #[error(transparent)]
    Store(#[from] kernelgate_eval::StoreError),
}

/// Where the report goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Publish {
    /// GitHub when a token and a pull request are known, else files.
    Auto,
    Github,
    Files,
    None,
}

/// What one gate run compares and how it runs.
#[derive(Debug, Clone)]
pub struct Options {
    /// Base and head commits or refs; `None`: the GitHub event's, else `origin/main`/`main` and
    /// `HEAD`.
    pub base: Option<String>,
    pub head: Option<String>,
    /// Every kernel, not only the changed ones.
    pub all: bool,
    pub shard: Option<Shard>,
    /// Output directory for report.json and its renderings.
    pub out: PathBuf,
    pub publish: Publish,
    /// Labels treated as present on the pull request, besides the event's.
    pub ack_labels: Vec<String>,
    /// `None`: `[defaults] device`.
    pub device: Option<kernelgate_model::Device>,
    pub seed: Option<u64>,
    pub no_timing: bool,
    /// `--config`: the config file's path inside the repository (read at the base commit, and
    /// the head's `[kernels]`); `None`: `kernelgate.toml`.
    pub config: Option<PathBuf>,
    /// `--trusted-config`: a config file outside the pull request's commits (the default
    /// branch's, checked out by the workflow) that judges it instead of the base commit's.
    pub trusted_config: Option<PathBuf>,
}

/// Base and head resolved (flags, then the GitHub event, then the usual branches) and the
/// configuration that judges them: `--trusted-config`, else the base commit's config file, else
/// the defaults; the head's `[kernels]` (docs/config.md).
pub fn judge(repo: &Path, gh: &GithubContext, opts: &Options) -> Result<Judgment, GateError> {
    let git = Git::open(repo)?;
    let base = match opts.base.clone().or_else(|| gh.base_sha.clone()) {
        Some(b) => b,
        None => ["origin/main", "main", "origin/master", "master"]
            .into_iter()
            .find(|r| git.has(r))
            .map(str::to_string)
            .ok_or_else(|| GateError::NoBase {
                root: git.root().to_path_buf(),
            })?,
    };
    let head = opts
        .head
        .clone()
        .or_else(|| gh.head_sha.clone())
        .unwrap_or_else(|| "HEAD".to_string());
    let file = judgment::config_file(git.root(), opts.config.as_deref())?;
    Ok(judgment::resolve(
        &git,
        &base,
        &head,
        &file,
        opts.trusted_config.as_deref(),
    )?)
}

/// The plan: the changed kernels (found by the judgment's layout) mapped by the model's rules,
/// files on disk.
pub fn plan(repo: &Path, judgment: &Judgment, opts: &Options) -> Result<Plan, GateError> {
    let layout = Layout::from_config(&judgment.config).with_config_file(&judgment.config_file);
    let git = Git::open(repo)?;
    let changes = changes::detect(&git, &layout, &judgment.base, &judgment.head, opts.all)?;
    Ok(Plan::build(&git, &layout, changes, opts.shard)?)
}

/// The plan as `kernelgate pr --plan` prints it, with where its judging config came from.
pub fn plan_json(plan: &Plan, judgment: &Judgment) -> serde_json::Value {
    let jobs: Vec<_> = plan
        .jobs
        .iter()
        .map(|j| {
            serde_json::json!({
                "path": j.path(), "problem": j.change.problem, "status": j.change.status,
                "base_path": j.change.base_path, "problem_changed": j.change.problem_changed,
                "mapping_error": j.change.mapping_error, "backend": j.backend, "precision": j.precision,
                "changed_sources": j.change.changed_sources, "sources": j.change.sources.files,
                "unresolved_sources": j.change.sources.reasons(),
            })
        })
        .collect();
    let c = &plan.changes;
    serde_json::json!({
        "base": c.base, "head": c.head, "merge_base": c.merge_base,
        "shard": plan.shard.map(|s| s.to_string()), "jobs": jobs,
        "deleted_kernels": c.deleted_kernels, "reference_changes": c.references,
        "config_changed": c.config_changed, "results_changed": c.results,
        "config": judgment.source, "config_changes": judgment.changes,
    })
}

/// Runs the gate and publishes its report, telling `observer` as it goes; the exit code (0 pass
/// or warn, 1 fail, 2 when publishing to GitHub failed).
pub fn gate(
    repo: &Path,
    judgment: &Judgment,
    gh: &GithubContext,
    opts: &Options,
    observer: &dyn Observer,
) -> Result<i32, GateError> {
    let cfg = &judgment.config;
    let plan = plan(repo, judgment, opts)?;
    let git = Git::open(repo)?;
    let mut labels = gh.labels.clone();
    labels.extend(opts.ack_labels.iter().cloned());
    let policy = Policy::from_config(cfg, &[]);
    let report = new_report(&plan, judgment, gh, opts, &policy, &labels);
    announce(&plan, judgment, opts, observer);

    // Publishing: a check run `in_progress` now, completed with the report at the end. Shards
    // publish files only: `kernelgate merge` and `kernelgate publish` post the joined report.
    let mode = match opts.publish {
        Publish::Auto if opts.shard.is_none() && gh.can_publish() && gh.pr_number.is_some() => {
            Publish::Github
        }
        Publish::Auto => Publish::Files,
        m => m,
    };
    let mut check_run_id = None;
    if mode == Publish::Github {
        match publish::start_check_run(gh, &plan.changes.head) {
            Ok(id) => check_run_id = Some(id),
            // The gate still runs; the check run is created when the report is published.
            Err(e) => observer.event(&Event::CheckRunNotOpened(e.to_string())),
        }
    }
    std::fs::create_dir_all(&opts.out).map_err(|source| GateError::OutDir {
        dir: opts.out.clone(),
        source,
    })?;
    let evaluated = evaluate(&plan, &git, cfg, opts, &policy, labels, report, observer);
    let mut report = match evaluated {
        Ok(report) => report,
        Err(e) => {
            // Never leave the check run `in_progress`.
            if let Some(id) = check_run_id {
                if let Some(warning) =
                    publish::abandon_check_run(gh, id, &format!("kernelgate failed: {e:#}"))
                {
                    observer.event(&Event::Published(warning));
                }
            }
            return Err(e);
        }
    };

    // The base against main's history (docs/history.md): a slowdown older than this PR is said.
    let store = kernelgate_history::Store::at(repo.join(&cfg.history.store));
    match crate::history::annotate(&mut report, &store) {
        Ok(0) => {}
        Ok(n) => observer.event(&Event::HistoryCompared {
            kernels: n,
            store: store.dir(),
        }),
        Err(e) => observer.event(&Event::HistoryUnusable(e.to_string())),
    }
    let builds = kernelgate_report::BuildCounts::of(&report);
    if builds.any() {
        observer.event(&Event::Builds(builds));
    }

    let published = match mode {
        Publish::None => Ok(Vec::new()),
        Publish::Files => {
            publish::publish_report(&report, &opts.out, gh, publish::Mode::Files, None)
        }
        Publish::Github | Publish::Auto => {
            publish::publish_report(&report, &opts.out, gh, publish::Mode::Github, check_run_id)
        }
    };
    if let Ok(lines) = &published {
        for line in lines {
            observer.event(&Event::Published(line.clone()));
        }
    }
    if let Err(e) = published {
        observer.event(&Event::PublishFailed(format!("{e:#}")));
        if mode == Publish::Github {
            // The report is on disk, but nothing reached the PR: never look green.
            return Ok(2);
        }
    }
    observer.event(&Event::Verdict {
        summary: &report.summary,
        report: opts.out.join("report.json"),
    });
    Ok(policy::exit_code(report.summary.verdict))
}

/// The report before any kernel ran: the run, the policy, and what else the pull request changed.
fn new_report(
    plan: &Plan,
    judgment: &Judgment,
    gh: &GithubContext,
    opts: &Options,
    policy: &Policy,
    labels: &[String],
) -> Report {
    let cfg = &judgment.config;
    let acknowledged: Vec<String> = labels
        .iter()
        .filter(|l| policy.ack_labels.contains(l))
        .map(|l| format!("PR label `{l}`"))
        .collect();
    let mut report = Report::new(RunInfo {
        repo: gh.repo.clone(),
        pr_number: gh.pr_number,
        base_sha: plan.changes.base.clone(),
        head_sha: plan.changes.head.clone(),
        started_at: crate::time::now_rfc3339(),
        seed: opts.seed,
        shard: opts.shard.map(|s| (s.index, s.count)),
        artifact_url: gh.run_url.clone(),
        dashboard_url: Some(cfg.history.dashboard_url.clone()).filter(|u| !u.is_empty()),
        config: Some(judgment.source.clone()),
        ..RunInfo::default()
    });
    report.policy = policy.info(&acknowledged);
    // The head's settings, each with the value that judged this run (docs/config.md).
    report.config_changes = judgment.changes.clone();
    let changes = &plan.changes;
    for r in &changes.references {
        if r.status == FileStatus::Modified {
            report
                .reference_changes
                .push(kernelgate_report::ReferenceChange {
                    problem: r.problem.clone(),
                    path: r.path.clone(),
                    diff: r.diff.clone(),
                });
        } else {
            report
                .other_changes
                .push(format!("reference problem {} {:?}", r.path, r.status).to_lowercase());
        }
    }
    if changes.config_changed && judgment.changes.is_empty() {
        report.other_changes.push(format!(
            "{} changed, but no setting differs from those that judged this run",
            judgment.config_file
        ));
    }
    for r in &changes.results {
        report
            .other_changes
            .push(format!("committed results changed: {r}"));
    }
    report
}

/// The plan's size, where its judging config came from, and a warning per edited reference
/// problem and per judgment setting the pull request changes.
fn announce(plan: &Plan, judgment: &Judgment, opts: &Options, observer: &dyn Observer) {
    observer.event(&Event::Planned {
        kernels: plan.jobs.len(),
        shard: opts.shard,
        merge_base: &plan.changes.merge_base,
        head: &plan.changes.head,
    });
    observer.event(&Event::JudgedWith(&judgment.source));
    for c in &judgment.changes {
        let message = format!(
            "this pull request changes {} in {} ({} -> {}): it applies {}",
            c.key,
            judgment.config_file,
            c.base,
            c.head,
            match c.applies {
                kernelgate_report::ConfigApplies::AfterMerge =>
                    "after merge, not to this run (judged with the base's value)",
                kernelgate_report::ConfigApplies::ThisRun => "in this run (layout)",
            }
        );
        observer.event(&Event::Changed {
            file: &judgment.config_file,
            message,
        });
    }
    for r in &plan.changes.references {
        let message = format!(
            "reference problem {} ({:?}) is changed by this pull request: speedups are not comparable with main",
            r.path, r.status
        );
        observer.event(&Event::Changed {
            file: &r.path,
            message,
        });
    }
}

/// Lint, harness and timing over every device, against the base branch's committed baselines.
#[allow(clippy::too_many_arguments)]
fn evaluate(
    plan: &Plan,
    git: &Git,
    cfg: &kernelgate_model::Config,
    opts: &Options,
    policy: &Policy,
    labels: Vec<String>,
    report: Report,
    observer: &dyn Observer,
) -> Result<Report, GateError> {
    let device = opts.device.unwrap_or(cfg.defaults.device);
    let devices = match device {
        kernelgate_model::Device::Cpu => vec![Device::Cpu],
        _ => evaluator::detect_devices(
            std::env::var("CUDA_VISIBLE_DEVICES").ok().as_deref(),
            evaluator::nvidia_smi_list,
        ),
    };
    // The runner's setting, never the pull request's configuration.
    let store = kernelgate_eval::BuildStore::for_runner()?;
    let gpus = devices
        .iter()
        .filter(|d| matches!(d, Device::Cuda(_)))
        .count();
    let cpu_kernels = plan
        .jobs
        .iter()
        .filter(|j| kernelgate_model::classify(Some(j.backend), &j.source, None).runs_on_cpu)
        .count();
    let allowed = kernelgate_eval::allowed_cpus().unwrap_or_else(|| {
        (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect()
    });
    let cores = cfg
        .harness
        .cpu_lanes
        .then(|| super::cores::plan(&allowed, gpus, cpu_kernels))
        .flatten();
    let build_cpus = cores.as_ref().map_or(allowed.len(), |c| c.gpu_side.len());
    if let Some(c) = &cores {
        observer.event(&Event::Lanes {
            lanes: c.lanes.len(),
            cpus_each: c.lanes[0].len(),
            cpu_kernels,
            gpu_side: c.gpu_side.len(),
        });
    }
    let evaluator = HarnessEvaluator {
        config: cfg.clone(),
        device,
        store,
        seed: opts.seed,
        no_timing: opts.no_timing,
        repo_root: Some(git.root().to_path_buf()),
        has_gpu: gpus > 0,
        prepared: Default::default(),
        bases_built: Default::default(),
        built_ahead: Default::default(),
        free_lanes: std::sync::Mutex::new(
            cores.as_ref().map(|c| c.lanes.clone()).unwrap_or_default(),
        ),
        cores,
    };
    let linter = RepoLinter::new(cfg);
    // Baselines as committed on the base branch, not as the pull request left them.
    let timing_dir = cfg.results_root(git.root()).join("timing");
    let mut baselines = match timing_dir.strip_prefix(git.root()) {
        Ok(rel) => Committed::load_git(git, &plan.changes.base, &rel.to_string_lossy()),
        Err(_) => Committed::load_dir(&timing_dir),
    };
    baselines.tolerance_pct = cfg.timing.baseline_tolerance_pct;
    let build_workers = match cfg.harness.build_workers {
        0 => super::schedule::auto_build_workers(
            build_cpus,
            gpus,
            super::schedule::available_memory(),
        ),
        n => n as usize,
    };
    let pipeline = Pipeline {
        build_workers,
        linter: &linter,
        evaluator: &evaluator,
        baselines: &baselines,
        policy,
        acks: Acks { labels },
        devices,
        out_dir: opts.out.clone(),
        observer,
        on_written: None,
    };
    Ok(pipeline.run(plan, report)?)
}
