//! `kernelgate pr`: the gate for one pull request.

use anyhow::Context;
use kernelgate::pr::adapters::{HarnessEvaluator, RepoLinter};
use kernelgate::pr::baselines::Committed;
use kernelgate::pr::changes::{self, FileStatus};
use kernelgate::pr::git::Git;
use kernelgate::pr::layout::Layout;
use kernelgate::pr::plan::Plan;
use kernelgate::pr::policy::{self, Acks, Policy};
use kernelgate::pr::run::{self, Pipeline, Progress};
use kernelgate::pr::shard::Shard;
use kernelgate_model::Config;
use kernelgate_report::{Report, RunInfo};
use std::path::PathBuf;

use crate::cli::Cli;
use crate::cmd::publish;
use kernelgate_github::GithubContext;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Publish {
    /// GitHub when a token and a pull request are known, else files.
    Auto,
    Github,
    Files,
    None,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DeviceArg {
    Auto,
    Cuda,
    Cpu,
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Base commit or ref. Default: the pull request's base from the GitHub event, else
    /// `origin/main`, else `main`.
    #[arg(long)]
    pub base: Option<String>,
    /// Head commit or ref. Default: the pull request's head from the GitHub event, else `HEAD`.
    #[arg(long)]
    pub head: Option<String>,
    /// Evaluate every kernel, not only the changed ones.
    #[arg(long)]
    pub all: bool,
    /// Evaluate only shard i of n of the plan (workflow matrix); `kernelgate merge` joins them.
    #[arg(long, value_name = "I/N")]
    pub shard: Option<Shard>,
    /// Output directory for report.json and its renderings.
    #[arg(long, default_value = "kg-out")]
    pub out: PathBuf,
    #[arg(long, value_enum, default_value = "auto")]
    pub publish: Publish,
    /// Treat this label as present on the PR (e.g. `kernelgate:ack-speedup` acknowledges an
    /// excessive speedup). Repeatable; adds to the labels of the GitHub event.
    #[arg(long = "ack-label", value_name = "LABEL")]
    pub ack_labels: Vec<String>,
    /// Where kernels run: auto (CUDA when present), cuda or cpu. Default: `[defaults] device`.
    #[arg(long, value_enum)]
    pub device: Option<DeviceArg>,
    /// Fixed seed (KernelBench uses 42); default: secret and random, printed in the report.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Check correctness only; skip timing.
    #[arg(long)]
    pub no_timing: bool,
    /// Print the plan as JSON and exit without running anything.
    #[arg(long)]
    pub plan: bool,
    /// No progress lines.
    #[arg(long, short)]
    pub quiet: bool,
    #[command(flatten)]
    pub eval: crate::cli::EvalOptions,
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<i32> {
    let gh = GithubContext::from_env()?;
    let mut cfg = Config::load(&cli.repo, cli.config.as_deref())?;
    args.eval.apply(&mut cfg)?;
    let layout = Layout::from_config(&cfg);
    let git = Git::open(&cli.repo)?;

    let base = match args.base.clone().or_else(|| gh.base_sha.clone()) {
        Some(b) => b,
        None => ["origin/main", "main", "origin/master", "master"]
            .into_iter()
            .find(|r| git.has(r))
            .map(str::to_string)
            .with_context(|| {
                format!(
                    "no base to compare with in {}: pass --base REF (no origin/main or main here)",
                    git.root().display()
                )
            })?,
    };
    let head = args
        .head
        .clone()
        .or_else(|| gh.head_sha.clone())
        .unwrap_or_else(|| "HEAD".to_string());
    let changes = changes::detect(&git, &layout, &base, &head, args.all)?;
    let plan = Plan::build(&git, &layout, changes, args.shard)?;

    if args.plan {
        let jobs: Vec<_> = plan
            .jobs
            .iter()
            .map(|j| {
                serde_json::json!({
                    "path": j.path(), "problem": j.change.problem, "status": j.change.status,
                    "base_path": j.change.base_path, "problem_changed": j.change.problem_changed,
                    "mapping_error": j.change.mapping_error, "backend": j.backend, "precision": j.precision,
                })
            })
            .collect();
        let out = serde_json::json!({
            "base": plan.changes.base, "head": plan.changes.head, "merge_base": plan.changes.merge_base,
            "shard": args.shard.map(|s| s.to_string()), "jobs": jobs,
            "deleted_kernels": plan.changes.deleted_kernels, "reference_changes": plan.changes.references,
            "config_changed": plan.changes.config_changed, "results_changed": plan.changes.results,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(0);
    }

    let mut labels = gh.labels.clone();
    labels.extend(args.ack_labels.iter().cloned());
    let policy = Policy::from_config(&cfg, &[]);
    let acks = Acks {
        labels: labels.clone(),
    };
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
        started_at: run::now_rfc3339(),
        seed: args.seed,
        shard: args.shard.map(|s| (s.index, s.count)),
        artifact_url: gh.run_url.clone(),
        ..RunInfo::default()
    });
    report.policy = policy.info(&acknowledged);
    report.reference_changes = plan
        .changes
        .references
        .iter()
        .filter(|r| r.status == FileStatus::Modified)
        .map(|r| kernelgate_report::ReferenceChange {
            problem: r.problem.clone(),
            path: r.path.clone(),
            diff: r.diff.clone(),
        })
        .collect();
    for r in plan
        .changes
        .references
        .iter()
        .filter(|r| r.status != FileStatus::Modified)
    {
        report
            .other_changes
            .push(format!("reference problem {} {:?}", r.path, r.status).to_lowercase());
    }
    if plan.changes.config_changed {
        report.other_changes.push(format!(
            "{} changed: policy and thresholds may differ from main",
            layout.config_file
        ));
    }
    for r in &plan.changes.results {
        report
            .other_changes
            .push(format!("committed results changed: {r}"));
    }

    let say = |s: String| {
        if !args.quiet {
            println!("{s}");
        }
    };
    say(format!(
        "kernelgate pr: {} kernel(s) to evaluate{} ({}..{})",
        plan.jobs.len(),
        args.shard
            .map(|s| format!(" in shard {s}"))
            .unwrap_or_default(),
        short(&plan.changes.merge_base),
        short(&plan.changes.head)
    ));
    for r in &plan.changes.references {
        let line = format!(
            "reference problem {} ({:?}) is changed by this pull request: speedups are not comparable with main",
            r.path, r.status
        );
        if gh.actions {
            println!("::warning file={}::{line}", r.path);
        } else {
            say(format!("warning: {line}"));
        }
    }

    // Publishing: a check run `in_progress` now, completed with the report at the end. Shards
    // publish files only: `kernelgate merge` and `kernelgate publish` post the joined report.
    let mode = match args.publish {
        Publish::Auto if args.shard.is_none() && gh.can_publish() && gh.pr_number.is_some() => {
            Publish::Github
        }
        Publish::Auto => Publish::Files,
        m => m,
    };
    let mut check_run_id = None;
    if mode == Publish::Github {
        match publish::start_check_run(&gh, &plan.changes.head) {
            Ok(id) => check_run_id = Some(id),
            // The gate still runs; the check run is created when the report is published.
            Err(e) => eprintln!("warning: cannot open the check run: {e}"),
        }
    }

    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create the output directory {}", args.out.display()))?;
    let device_pref = match args.device {
        Some(DeviceArg::Auto) => kernelgate_model::Device::Auto,
        Some(DeviceArg::Cuda) => kernelgate_model::Device::Cuda,
        Some(DeviceArg::Cpu) => kernelgate_model::Device::Cpu,
        None => cfg.defaults.device,
    };
    let devices = match device_pref {
        kernelgate_model::Device::Cpu => vec![run::Device::Cpu],
        _ => run::detect_devices(
            std::env::var("CUDA_VISIBLE_DEVICES").ok().as_deref(),
            run::nvidia_smi_list,
        ),
    };
    // Compiled kernels are shared between jobs; TORCH_EXTENSIONS_DIR (torch's own variable) keeps
    // them across runs, else they live for this run only.
    let scratch = tempfile::Builder::new()
        .prefix("kernelgate-ext-")
        .tempdir()?;
    let extensions = std::env::var_os("TORCH_EXTENSIONS_DIR")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| scratch.path().to_path_buf());
    let evaluator = HarnessEvaluator {
        config: cfg.clone(),
        device: device_pref,
        extensions_dir: Some(extensions),
        seed: args.seed,
        no_timing: args.no_timing,
        repo_root: Some(git.root().to_path_buf()),
        has_gpu: devices.iter().any(|d| matches!(d, run::Device::Cuda(_))),
        prepared: Default::default(),
    };
    let linter = RepoLinter::new(&cfg);
    // Baselines as committed on the base branch, not as the pull request left them.
    let timing_dir = cfg.results_root(git.root()).join("timing");
    let mut baselines = match timing_dir.strip_prefix(git.root()) {
        Ok(rel) => Committed::load_git(&git, &plan.changes.base, &rel.to_string_lossy()),
        Err(_) => Committed::load_dir(&timing_dir),
    };
    baselines.tolerance_pct = cfg.timing.baseline_tolerance_pct;
    let build_workers = match cfg.harness.build_workers {
        0 => kernelgate::pr::schedule::auto_build_workers(
            std::thread::available_parallelism().map_or(1, |n| n.get()),
            devices.len(),
        ),
        n => n as usize,
    };
    let pipeline = Pipeline {
        build_workers,
        linter: &linter,
        evaluator: &evaluator,
        baselines: &baselines,
        policy: &policy,
        acks,
        devices,
        out_dir: args.out.clone(),
        progress: Progress {
            actions: gh.actions,
            quiet: args.quiet,
        },
    };
    let report = match pipeline.run(&plan, report) {
        Ok(report) => report,
        Err(e) => {
            // Never leave the check run `in_progress`.
            if let Some(id) = check_run_id {
                publish::abandon_check_run(&gh, id, &format!("kernelgate failed: {e:#}"));
            }
            return Err(e.into());
        }
    };

    let published = match mode {
        Publish::None => Ok(()),
        Publish::Files => {
            publish::publish_report(&report, &args.out, &gh, publish::Mode::Files, None)
        }
        Publish::Github | Publish::Auto => {
            publish::publish_report(&report, &args.out, &gh, publish::Mode::Github, check_run_id)
        }
    };
    if let Err(e) = published {
        eprintln!("error: publishing the report failed: {e:#}");
        if mode == Publish::Github {
            // The report is on disk, but nothing reached the PR: never look green.
            return Ok(2);
        }
    }

    let s = &report.summary;
    say(format!(
        "verdict: {} ({} passed, {} warned, {} failed, {} skipped); report in {}",
        s.verdict.as_str(),
        s.passed,
        s.warned,
        s.failed,
        s.skipped,
        args.out.join("report.json").display()
    ));
    Ok(policy::exit_code(s.verdict))
}

fn short(sha: &str) -> &str {
    &sha[..sha.len().min(10)]
}
