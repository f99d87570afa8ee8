//! `kernelgate history` (list, append, drift, export) and `kernelgate dashboard` as library
//! operations over the history store: each takes where the store is ([`StoreOptions`]) and its
//! options, and returns what the command prints ([`Listing`], [`Appended`], [`DriftRun`], an
//! export document, [`Dashboard`]).

use crate::history::{self, HistoryError, Source};
use kernelgate_github::CommentAction;
use kernelgate_history::{drift, Commit, Drift, DriftRule, Filter, Record, Store};
use std::fmt;
use std::path::{Path, PathBuf};

/// Which store: `dir` (`--store`, `$KERNELGATE_HISTORY`), else `[history] store` below the
/// repository (`.kernelgate/history`: the data branch's checkout, docs/history.md).
#[derive(Debug, Clone, Default)]
pub struct StoreOptions {
    pub dir: Option<PathBuf>,
    /// The config file instead of the repository's kernelgate.toml.
    pub config: Option<PathBuf>,
}

impl StoreOptions {
    /// The store; the config is read only when no directory is given.
    pub fn open(&self, repo: &Path) -> Result<Store, HistoryError> {
        Ok(Store::at(match &self.dir {
            Some(dir) => dir.clone(),
            None => {
                let cfg = kernelgate_model::Config::load(repo, self.config.as_deref())?;
                repo.join(cfg.history.store)
            }
        }))
    }
}

/// The drift rule's knobs (defaults: docs/history.md), checked when a rule is needed.
#[derive(Debug, Clone, Copy)]
pub struct RuleOptions {
    /// Commits the change-point test looks back over.
    pub window: usize,
    /// Commits needed on each side of a change.
    pub min_commits: usize,
    /// Smallest change of the median that is reported, in percent.
    pub min_change_pct: f64,
}

impl RuleOptions {
    pub fn rule(&self) -> Result<DriftRule, HistoryError> {
        if self.min_commits < 2 || self.window < 2 * self.min_commits {
            return Err(HistoryError::BadRule {
                window: self.window,
                min_commits: self.min_commits,
            });
        }
        Ok(DriftRule {
            window: self.window,
            min_segment: self.min_commits,
            min_change_pct: self.min_change_pct,
            ..DriftRule::default()
        })
    }
}

/// The records a filter matched (`kernelgate history`); its `Display` is the human listing.
#[derive(Debug)]
pub struct Listing {
    pub store: PathBuf,
    pub records: Vec<Record>,
}

pub fn list(repo: &Path, store: &StoreOptions, filter: &Filter) -> Result<Listing, HistoryError> {
    let store = store.open(repo)?;
    Ok(Listing {
        records: store.query(filter)?,
        store: store.dir().to_path_buf(),
    })
}

impl fmt::Display for Listing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.records.is_empty() {
            return writeln!(
                f,
                "no history in {} matches\nhelp: `kernelgate history append --report report.json` records a run",
                self.store.display()
            );
        }
        let (_, series) = kernelgate_history::series::group(&self.records);
        for s in &series {
            writeln!(
                f,
                "{} `{}` on {}",
                s.key.problem,
                s.key.name,
                s.key.hardware()
            )?;
            for r in &s.points {
                let time = match (r.median_ms, r.ci_ms) {
                    (Some(m), Some((lo, hi))) => format!("{m:.4} ms [{lo:.4}, {hi:.4}]"),
                    (Some(m), None) => format!("{m:.4} ms"),
                    (None, _) => "not timed".to_string(),
                };
                let verdict = r.verdict.map(|v| v.as_str()).unwrap_or("");
                let correct = if r.correct { "" } else { " incorrect" };
                writeln!(
                    f,
                    "  {}  {}  {time}{correct}  {verdict}",
                    drift::short(&r.commit),
                    r.date.get(..10).unwrap_or(&r.date)
                )?;
            }
        }
        Ok(())
    }
}

/// What `kernelgate history append` records.
#[derive(Debug, Clone)]
pub struct AppendOptions {
    pub source: Source,
    /// The commit the run measured (a revision of the repository).
    pub commit: String,
    /// Commits kept per hardware file; older ones are dropped.
    pub keep: usize,
}

/// The records appended; its `Display` is the line the command prints.
#[derive(Debug)]
pub struct Appended {
    pub records: Vec<Record>,
    pub commit: Commit,
    pub store: PathBuf,
}

/// Appends the records of `opts.source` at `opts.commit` to the store; returns them.
pub fn append(
    repo: &Path,
    store: &StoreOptions,
    opts: &AppendOptions,
) -> Result<Appended, HistoryError> {
    let commit = history::commit_at(repo, &opts.commit)?;
    let store = store.open(repo)?;
    let records = history::records_of(&opts.source, &commit)?;
    if records.is_empty() {
        return Err(HistoryError::NothingToRecord);
    }
    store.append(&records, opts.keep)?;
    Ok(Appended {
        records,
        commit,
        store: store.dir().to_path_buf(),
    })
}

impl fmt::Display for Appended {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "recorded {} series at {} into {}",
            self.records.len(),
            drift::short(&self.commit.sha),
            self.store.display()
        )
    }
}

/// What `kernelgate history drift` looks for, and whether it files issues.
#[derive(Debug, Clone)]
pub struct DriftOptions {
    pub filter: Filter,
    pub rule: RuleOptions,
    /// Open (or update) one GitHub issue per series that got slower.
    pub open_issues: bool,
    /// The published dashboard, linked from the issues.
    pub dashboard_url: Option<String>,
}

/// The drifts found among `series` series; its `Display` is the human report.
#[derive(Debug)]
pub struct DriftRun {
    pub series: usize,
    pub drifts: Vec<Drift>,
}

impl DriftRun {
    /// A kernel or reference got slower (the command exits 1).
    pub fn any_slower(&self) -> bool {
        self.drifts.iter().any(|d| d.slower())
    }
}

impl fmt::Display for DriftRun {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.drifts.is_empty() {
            return writeln!(f, "no drift in {} series", self.series);
        }
        for d in &self.drifts {
            writeln!(f, "{} {}", if d.slower() { "▲" } else { "▼" }, d.describe())?;
        }
        Ok(())
    }
}

/// A drift issue opened or updated on GitHub; its `Display` is the line said about it.
#[derive(Debug)]
pub struct IssueFiled<'a> {
    pub drift: &'a Drift,
    pub action: CommentAction,
}

impl fmt::Display for IssueFiled<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let done = match self.action {
            CommentAction::Created(n) => format!("opened #{n}"),
            CommentAction::Updated(n) => format!("updated #{n}"),
        };
        let d = self.drift;
        write!(
            f,
            "kernelgate: {done}: drift of `{}` on {}",
            d.key.name, d.hardware
        )
    }
}

/// The drifts of the store's series; with `open_issues`, one issue per slower series, each
/// told to `on_issue` as it is filed.
pub fn drift(
    repo: &Path,
    store: &StoreOptions,
    opts: &DriftOptions,
    on_issue: impl FnMut(&IssueFiled<'_>),
) -> Result<DriftRun, HistoryError> {
    let (_, series) = store.open(repo)?.series(&opts.filter)?;
    let drifts = drift::detect_all(&series, &opts.rule.rule()?);
    if opts.open_issues {
        let url = opts.dashboard_url.as_deref().filter(|u| !u.is_empty());
        open_drift_issues(&drifts, url, on_issue)?;
    }
    Ok(DriftRun {
        series: series.len(),
        drifts,
    })
}

/// One issue per slower series, opened or updated.
fn open_drift_issues(
    drifts: &[Drift],
    dashboard_url: Option<&str>,
    mut on_issue: impl FnMut(&IssueFiled<'_>),
) -> Result<(), HistoryError> {
    let ctx = kernelgate_github::GithubContext::from_env()?;
    let rt = crate::ops::publish::runtime()?;
    rt.block_on(async {
        let publisher = kernelgate_github::Publisher::new(&ctx)?;
        for d in drifts.iter().filter(|d| d.slower()) {
            let (marker, title, body) = history::drift_issue(d, dashboard_url);
            let action = publisher.upsert_issue(&marker, &title, &body).await?;
            on_issue(&IssueFiled { drift: d, action });
        }
        Ok(())
    })
}

/// The document `kernelgate history export` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportFormat {
    /// Bencher Metric Format (latency in nanoseconds).
    Bmf,
    /// github-action-benchmark's `customSmallerIsBetter` (milliseconds).
    BenchmarkAction,
}

/// Which run to export, and as what.
#[derive(Debug, Clone)]
pub struct ExportOptions {
    pub to: ExportFormat,
    /// The run's report.json (default: the store's newest commit).
    pub report: Option<PathBuf>,
    /// The commit of `report` (default: its head_sha, else HEAD).
    pub commit: Option<String>,
}

/// One run as `opts.to`'s JSON document.
pub fn export(
    repo: &Path,
    store: &StoreOptions,
    opts: &ExportOptions,
) -> Result<serde_json::Value, HistoryError> {
    let records = match &opts.report {
        Some(path) => {
            let rev = match &opts.commit {
                Some(c) => c.clone(),
                None => kernelgate_report::Report::read(path)?.run.head_sha,
            };
            let rev = if rev.is_empty() {
                "HEAD".to_string()
            } else {
                rev
            };
            let commit = history::commit_at(repo, &rev)?;
            history::records_of(&Source::Report(path.clone()), &commit)?
        }
        None => {
            let all = store.open(repo)?.query(&Filter::default())?;
            let newest = all
                .last()
                .map(|r| r.commit.clone())
                .ok_or(HistoryError::EmptyStore)?;
            all.into_iter().filter(|r| r.commit == newest).collect()
        }
    };
    Ok(match opts.to {
        ExportFormat::Bmf => kernelgate_history::export::to_bmf(&records),
        ExportFormat::BenchmarkAction => kernelgate_history::export::to_benchmark_action(&records),
    })
}

/// Where `kernelgate dashboard` writes, for which repository, with which drift rule.
#[derive(Debug, Clone)]
pub struct DashboardOptions {
    /// Directory for index.html, data.json and .nojekyll.
    pub out: PathBuf,
    /// `owner/name` shown in the header.
    pub name: String,
    /// The repository's web address for commit links (default: the `origin` remote's, when it
    /// is on github.com; none: no links).
    pub repo_url: Option<String>,
    pub rule: RuleOptions,
}

/// The dashboard written: its page and its data; its `Display` is the line the command prints.
#[derive(Debug)]
pub struct Dashboard {
    pub page: PathBuf,
    pub data: serde_json::Value,
}

/// The dashboard of the store into `opts.out`.
pub fn dashboard(
    repo: &Path,
    store: &StoreOptions,
    opts: &DashboardOptions,
) -> Result<Dashboard, HistoryError> {
    let rule = opts.rule.rule()?;
    // The band is the threshold `pr` judges regressions with: the config's, which
    // `Policy::from_config` turns into the policy's fraction.
    let threshold_pct = kernelgate_model::Config::load(repo, store.config.as_deref())?
        .timing
        .threshold_pct;
    let store = store.open(repo)?;
    let records = store.query(&Filter::default())?;
    let page = kernelgate_history::dashboard::PageInfo {
        repo: opts.name.clone(),
        repo_url: history::repo_web_url(repo, opts.repo_url.as_deref()),
        threshold_pct,
        generated_at: crate::time::now_rfc3339(),
    };
    let data = kernelgate_history::dashboard::data(&records, &page, &rule);
    let page = kernelgate_history::dashboard::write(&data, &opts.out).map_err(|source| {
        HistoryError::Dashboard {
            out: opts.out.clone(),
            source,
        }
    })?;
    Ok(Dashboard { page, data })
}

impl fmt::Display for Dashboard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "dashboard of {} problem(s) over {} commit(s): {}",
            self.data["problems"].as_array().map_or(0, |a| a.len()),
            self.data["commits"].as_array().map_or(0, |a| a.len()),
            self.page.display()
        )
    }
}
