//! `kernelgate history` (append, list, drift, export) and `kernelgate dashboard`.

use kernelgate::history::{self, Source};
use kernelgate_history::{drift, DriftRule, Filter, Store};
use std::path::PathBuf;

use crate::cli::{Cli, Format};

/// The store every subcommand reads: `--store`, `$KERNELGATE_HISTORY`, else `[history] store`
/// below the repository (`.kernelgate/history`: the data branch's checkout, docs/history.md).
#[derive(Debug, Clone, clap::Args)]
pub struct StoreArg {
    /// History store directory (JSON Lines, one file per hardware key).
    #[arg(long, env = "KERNELGATE_HISTORY", value_name = "DIR")]
    pub store: Option<PathBuf>,
}

impl StoreArg {
    fn store(&self, cli: &Cli) -> anyhow::Result<Store> {
        Ok(Store::at(match &self.store {
            Some(dir) => dir.clone(),
            None => {
                let cfg = kernelgate_model::Config::load(&cli.repo, cli.config.as_deref())?;
                cli.repo.join(cfg.history.store)
            }
        }))
    }
}

#[derive(Debug, Clone, clap::Args)]
pub struct FilterArgs {
    /// Only this kernel (its path, or part of it).
    #[arg(long)]
    pub kernel: Option<String>,
    /// Only this problem (`19_ReLU`, `level1/19_ReLU.py`).
    #[arg(long)]
    pub problem: Option<String>,
    /// Only commits dated at or after this (`2026-11-01` or RFC 3339).
    #[arg(long)]
    pub since: Option<String>,
    /// Only this hardware (`H200`, `NVIDIA_H200 fp32`).
    #[arg(long)]
    pub hardware: Option<String>,
}

impl FilterArgs {
    fn filter(&self) -> Filter {
        Filter {
            kernel: self.kernel.clone(),
            problem: self.problem.clone(),
            since: self.since.clone(),
            hardware: self.hardware.clone(),
        }
    }
}

/// The drift rule's knobs (defaults: docs/history.md).
#[derive(Debug, Clone, clap::Args)]
pub struct RuleArgs {
    /// Commits the change-point test looks back over.
    #[arg(long, default_value_t = DriftRule::default().window)]
    pub window: usize,
    /// Smallest change of the median that is reported, in percent.
    #[arg(long, value_name = "PERCENT", default_value_t = DriftRule::default().min_change_pct)]
    pub min_change: f64,
    /// Commits needed on each side of a change.
    #[arg(long, default_value_t = DriftRule::default().min_segment)]
    pub min_commits: usize,
}

impl RuleArgs {
    fn rule(&self) -> anyhow::Result<DriftRule> {
        if self.min_commits < 2 || self.window < 2 * self.min_commits {
            anyhow::bail!(
                "--window {} must be at least twice --min-commits {} (and --min-commits at least 2)",
                self.window,
                self.min_commits
            );
        }
        Ok(DriftRule {
            window: self.window,
            min_segment: self.min_commits,
            min_change_pct: self.min_change,
            ..DriftRule::default()
        })
    }
}

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub command: Option<Sub>,
    #[command(flatten)]
    pub store: StoreArg,
    #[command(flatten)]
    pub filter: FilterArgs,
    #[arg(long, value_enum, default_value = "human")]
    pub format: Format,
}

#[derive(Debug, clap::Subcommand)]
pub enum Sub {
    /// Record a run of the default branch: one record per kernel and per reference.
    Append {
        /// The run's report.json (`kernelgate pr`, `merge`).
        #[arg(
            long,
            conflicts_with = "baselines",
            required_unless_present = "baselines"
        )]
        report: Option<PathBuf>,
        /// `kernelgate baseline` output: results/timing/<HARDWARE>/ directories or their files.
        #[arg(long, num_args = 1..)]
        baselines: Vec<PathBuf>,
        /// The commit the run measured (default: HEAD of --repo).
        #[arg(long, default_value = "HEAD")]
        commit: String,
        /// Commits kept per hardware file; older ones are dropped.
        #[arg(long, default_value_t = kernelgate_history::store::DEFAULT_KEEP_COMMITS)]
        keep: usize,
        #[command(flatten)]
        store: StoreArg,
    },
    /// Series whose time moved beyond the noise (exit 1 when a kernel or reference got slower).
    Drift {
        #[command(flatten)]
        rule: RuleArgs,
        #[command(flatten)]
        store: StoreArg,
        #[command(flatten)]
        filter: FilterArgs,
        #[arg(long, value_enum, default_value = "human")]
        format: Format,
        /// Open (or update) one GitHub issue per series that got slower, labelled
        /// `kernelgate-drift`; needs `GITHUB_TOKEN` with `issues: write` and `GITHUB_REPOSITORY`.
        #[arg(long)]
        open_issues: bool,
        /// The published dashboard, linked from the issues (`https://owner.github.io/repo/`).
        #[arg(long, env = "KERNELGATE_DASHBOARD_URL")]
        dashboard_url: Option<String>,
    },
    /// One run as Bencher's BMF JSON or github-action-benchmark's customSmallerIsBetter JSON.
    Export {
        #[arg(long, value_enum)]
        to: ExportFormat,
        /// The run's report.json (default: the store's newest commit).
        #[arg(long)]
        report: Option<PathBuf>,
        /// The commit of --report (default: its head_sha, else HEAD).
        #[arg(long)]
        commit: Option<String>,
        #[command(flatten)]
        store: StoreArg,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    /// Bencher Metric Format (latency in nanoseconds).
    Bmf,
    /// github-action-benchmark's `customSmallerIsBetter` (milliseconds).
    BenchmarkAction,
}

#[derive(Debug, clap::Args)]
pub struct DashboardArgs {
    /// Directory for index.html, data.json and .nojekyll.
    #[arg(long)]
    pub out: PathBuf,
    /// `owner/name` shown in the header (default: `$GITHUB_REPOSITORY`).
    #[arg(long, env = "GITHUB_REPOSITORY", default_value = "")]
    pub name: String,
    #[command(flatten)]
    pub rule: RuleArgs,
    #[command(flatten)]
    pub store: StoreArg,
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<i32> {
    match &args.command {
        None => list(cli, &args.store, &args.filter, args.format),
        Some(Sub::Append {
            report,
            baselines,
            commit,
            keep,
            store,
        }) => {
            let source = match report {
                Some(r) => Source::Report(r.clone()),
                None => Source::Baselines(baselines.clone()),
            };
            let commit = history::commit_at(&cli.repo, commit)?;
            let store = store.store(cli)?;
            let records = history::append(&store, &source, &commit, *keep)?;
            println!(
                "recorded {} series at {} into {}",
                records.len(),
                drift::short(&commit.sha),
                store.dir().display()
            );
            Ok(0)
        }
        Some(Sub::Drift {
            rule,
            store,
            filter,
            format,
            open_issues,
            dashboard_url,
        }) => {
            let (_, series) = store.store(cli)?.series(&filter.filter())?;
            let drifts = kernelgate_history::drift::detect_all(&series, &rule.rule()?);
            if *open_issues {
                open_drift_issues(&drifts, dashboard_url.as_deref().filter(|u| !u.is_empty()))?;
            }
            match format {
                Format::Json => println!("{}", serde_json::to_string_pretty(&drifts)?),
                Format::Human if drifts.is_empty() => {
                    println!("no drift in {} series", series.len())
                }
                Format::Human => {
                    for d in &drifts {
                        println!("{} {}", if d.slower() { "▲" } else { "▼" }, d.describe());
                    }
                }
            }
            Ok(if drifts.iter().any(|d| d.slower()) {
                1
            } else {
                0
            })
        }
        Some(Sub::Export {
            to,
            report,
            commit,
            store,
        }) => {
            let records = match report {
                Some(path) => {
                    let rev = match commit {
                        Some(c) => c.clone(),
                        None => kernelgate_report::Report::read(path)?.run.head_sha,
                    };
                    let rev = if rev.is_empty() {
                        "HEAD".to_string()
                    } else {
                        rev
                    };
                    let commit = history::commit_at(&cli.repo, &rev)?;
                    history::records_of(&Source::Report(path.clone()), &commit)?
                }
                None => {
                    let all = store.store(cli)?.query(&Filter::default())?;
                    let newest = all.last().map(|r| r.commit.clone()).ok_or_else(|| {
                        anyhow::anyhow!(
                            "the history store is empty\nhelp: pass --report, or run `kernelgate history append` first"
                        )
                    })?;
                    all.into_iter().filter(|r| r.commit == newest).collect()
                }
            };
            let doc = match to {
                ExportFormat::Bmf => kernelgate_history::export::to_bmf(&records),
                ExportFormat::BenchmarkAction => {
                    kernelgate_history::export::to_benchmark_action(&records)
                }
            };
            println!("{}", serde_json::to_string_pretty(&doc)?);
            Ok(0)
        }
    }
}

/// One issue per slower series, opened or updated.
fn open_drift_issues(
    drifts: &[kernelgate_history::Drift],
    dashboard_url: Option<&str>,
) -> anyhow::Result<()> {
    let ctx = kernelgate_github::GithubContext::from_env()?;
    let rt = kernelgate::ops::publish::runtime()?;
    rt.block_on(async {
        let publisher = kernelgate_github::Publisher::new(&ctx)?;
        for d in drifts.iter().filter(|d| d.slower()) {
            let (marker, title, body) = history::drift_issue(d, dashboard_url);
            let done = publisher.upsert_issue(&marker, &title, &body).await?;
            let done = match done {
                kernelgate_github::CommentAction::Created(n) => format!("opened #{n}"),
                kernelgate_github::CommentAction::Updated(n) => format!("updated #{n}"),
            };
            eprintln!(
                "kernelgate: {done}: drift of `{}` on {}",
                d.key.name, d.hardware
            );
        }
        Ok::<(), anyhow::Error>(())
    })
}

fn list(cli: &Cli, store: &StoreArg, filter: &FilterArgs, format: Format) -> anyhow::Result<i32> {
    let store = store.store(cli)?;
    let records = store.query(&filter.filter())?;
    match format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&records)?),
        Format::Human if records.is_empty() => println!(
            "no history in {} matches\nhelp: `kernelgate history append --report report.json` records a run",
            store.dir().display()
        ),
        Format::Human => {
            let (_, series) = kernelgate_history::series::group(&records);
            for s in &series {
                println!("{} `{}` on {}", s.key.problem, s.key.name, s.key.hardware());
                for r in &s.points {
                    let time = match (r.median_ms, r.ci_ms) {
                        (Some(m), Some((lo, hi))) => format!("{m:.4} ms [{lo:.4}, {hi:.4}]"),
                        (Some(m), None) => format!("{m:.4} ms"),
                        (None, _) => "not timed".to_string(),
                    };
                    let verdict = r.verdict.map(|v| v.as_str()).unwrap_or("");
                    let correct = if r.correct { "" } else { " incorrect" };
                    println!(
                        "  {}  {}  {time}{correct}  {verdict}",
                        drift::short(&r.commit),
                        r.date.get(..10).unwrap_or(&r.date)
                    );
                }
            }
        }
    }
    Ok(0)
}

pub fn dashboard(cli: &Cli, args: &DashboardArgs) -> anyhow::Result<i32> {
    let store = args.store.store(cli)?;
    let (page, data) = history::dashboard(&store, &args.out, &args.name, &args.rule.rule()?)?;
    println!(
        "dashboard of {} problem(s) over {} commit(s): {}",
        data["problems"].as_array().map_or(0, |a| a.len()),
        data["commits"].as_array().map_or(0, |a| a.len()),
        page.display()
    );
    Ok(0)
}
