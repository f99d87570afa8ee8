//! `kernelgate history` and `dashboard` over the history store (`kernelgate_history`): records
//! from a run's files at a git commit in, series, drift, exports and the dashboard out.

use kernelgate_history::{Commit, Filter, Record, Store, StoreError};
use kernelgate_report::{Report, ReportError};
use kernelgate_timing::baseline::{BaselineError, BaselineFile};
use std::path::{Path, PathBuf};

/// What went wrong reading a run or the store, said with what to do.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    #[error("`{}` is not a git repository", repo.display())]
    NotARepo {
        repo: PathBuf,
        #[source]
        source: crate::git::GitError,
    },
    #[error(transparent)]
    Git(#[from] crate::git::GitError),
    #[error("cannot read `{}`", path.display())]
    ReadDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "`{}` holds no kernelgate_baselines.json or kernelgate_kernels.json\n\
         help: pass results/timing/ or the results/timing/<HARDWARE>/ directory `kernelgate baseline` wrote",
        path.display()
    )]
    NoBaselines { path: PathBuf },
    #[error(
        "the run has no timed kernel or reference to record\n\
         help: pass the report.json of a run that evaluated kernels, or the baseline files"
    )]
    NothingToRecord,
    #[error(
        "the history store is empty\nhelp: pass --report, or run `kernelgate history append` first"
    )]
    EmptyStore,
    #[error(
        "--window {window} must be at least twice --min-commits {min_commits} (and --min-commits at least 2)"
    )]
    BadRule { window: usize, min_commits: usize },
    #[error("cannot write the dashboard into `{}`", out.display())]
    Dashboard {
        out: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Config(#[from] kernelgate_model::ConfigError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Report(#[from] ReportError),
    #[error(transparent)]
    Baseline(#[from] BaselineError),
    #[error(transparent)]
    Github(#[from] kernelgate_github::GithubError),
    #[error(transparent)]
    Runtime(#[from] crate::ops::publish::RuntimeError),
}

/// Where the run's numbers come from.
#[derive(Debug, Clone)]
pub enum Source {
    /// A `kernelgate pr` / `merge` report.json.
    Report(PathBuf),
    /// `kernelgate baseline` output: `kernelgate_baselines.json` and `kernelgate_kernels.json`
    /// files, directories holding them (`results/timing/<HARDWARE>/`), or `results/timing/`.
    Baselines(Vec<PathBuf>),
}

/// The commit `rev` of the repository at `repo`.
pub fn commit_at(repo: &Path, rev: &str) -> Result<Commit, HistoryError> {
    let git = crate::git::Git::open(repo).map_err(|source| HistoryError::NotARepo {
        repo: repo.to_path_buf(),
        source,
    })?;
    Ok(git.commit(rev)?)
}

fn baseline_files(paths: &[PathBuf]) -> Result<Vec<BaselineFile>, HistoryError> {
    let mut files = Vec::new();
    for p in paths {
        let in_dir = |d: &Path| -> Vec<PathBuf> {
            ["kernelgate_baselines.json", "kernelgate_kernels.json"]
                .iter()
                .map(|f| d.join(f))
                .filter(|f| f.exists())
                .collect()
        };
        let list: Vec<PathBuf> = if p.is_dir() {
            let mut here = in_dir(p);
            if here.is_empty() {
                // results/timing/: every hardware directory below it.
                let mut dirs: Vec<PathBuf> = std::fs::read_dir(p)
                    .map_err(|source| HistoryError::ReadDir {
                        path: p.clone(),
                        source,
                    })?
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|d| d.is_dir())
                    .collect();
                dirs.sort();
                here = dirs.iter().flat_map(|d| in_dir(d)).collect();
            }
            here
        } else {
            vec![p.clone()]
        };
        if list.is_empty() {
            return Err(HistoryError::NoBaselines { path: p.clone() });
        }
        for f in list {
            files.push(BaselineFile::load(&f)?);
        }
    }
    Ok(files)
}

/// The records of `source` at `commit`.
pub fn records_of(source: &Source, commit: &Commit) -> Result<Vec<Record>, HistoryError> {
    Ok(match source {
        Source::Report(path) => {
            let report = Report::read(path)?;
            kernelgate_history::from_report(&report, commit)
        }
        Source::Baselines(paths) => {
            kernelgate_history::from_baselines(&baseline_files(paths)?, commit)
        }
    })
}

/// The web address of a github.com remote (`https://github.com/owner/name`) from its fetch URL
/// in any of the forms git accepts (`https://`, `git@github.com:`, `ssh://`, with or without
/// credentials and `.git`); `None` for any other host.
pub fn github_web_url(remote: &str) -> Option<String> {
    let rest = remote.trim();
    let path = if let Some(p) = rest.strip_prefix("git@github.com:") {
        p
    } else {
        let (_, after_scheme) = rest.split_once("://")?;
        // Drop `user:token@` (never shown on a page) and the host.
        let after_user = after_scheme
            .rsplit_once('@')
            .map_or(after_scheme, |(_, h)| h);
        let (host, p) = after_user.split_once('/')?;
        if !host.eq_ignore_ascii_case("github.com") && !host.eq_ignore_ascii_case("www.github.com")
        {
            return None;
        }
        p
    };
    let path = path.trim_end_matches('/');
    let path = path.strip_suffix(".git").unwrap_or(path);
    let mut parts = path.split('/');
    let (owner, name) = (parts.next()?, parts.next()?);
    let ok = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    };
    (parts.next().is_none() && ok(owner) && ok(name))
        .then(|| format!("https://github.com/{owner}/{name}"))
}

/// The repository's web address for the dashboard's commit links: `explicit` (`--repo-url`),
/// else the `origin` remote's when it is on github.com; `None`: no links.
pub fn repo_web_url(repo: &Path, explicit: Option<&str>) -> Option<String> {
    if let Some(url) = explicit.map(str::trim).filter(|u| !u.is_empty()) {
        return Some(url.trim_end_matches('/').to_string());
    }
    let git = crate::git::Git::open(repo).ok()?;
    github_web_url(&git.remote_url("origin")?)
}

/// Commits of history a base is compared with.
pub const HISTORY_LEVEL_COMMITS: usize = 5;

/// Gives each kernel row of `report` its place in `store`'s history: the median of its last
/// recorded medians on the same device and precision, and how the base version timed in this
/// run compares with it. Returns how many rows got one; a missing store gives none.
pub fn annotate(report: &mut Report, store: &Store) -> Result<usize, StoreError> {
    if !store.dir().is_dir() {
        return Ok(0);
    }
    let (_, series) = store.series(&Filter::default())?;
    let hw = report.run.hardware.clone();
    let mut annotated = 0;
    for row in &mut report.kernels {
        let device = row.device.clone().unwrap_or_else(|| hw.gpu.clone());
        let Some(s) = series.iter().find(|s| {
            s.key.kind == kernelgate_history::SeriesKind::Kernel
                && s.key.name == row.path
                && s.key.problem == row.problem
                && s.key.device == device
                && s.key.precision == row.precision
        }) else {
            continue;
        };
        let recent: Vec<f64> = s
            .points
            .iter()
            .filter(|r| r.usable())
            .filter_map(|r| r.median_ms)
            .collect();
        let recent = &recent[recent.len().saturating_sub(HISTORY_LEVEL_COMMITS)..];
        if recent.is_empty() {
            continue;
        }
        let mut sorted = recent.to_vec();
        sorted.sort_by(f64::total_cmp);
        let level_ms = sorted[sorted.len() / 2];
        let base_ms = match (row.time_ms, &row.vs_base) {
            (Some(t), Some(c)) if c.ratio.is_finite() && c.ratio > 0.0 => Some(t / c.ratio),
            _ => None,
        };
        row.history = Some(kernelgate_report::HistoryContext {
            level_ms,
            commits: recent.len() as u32,
            base_ms,
            base_vs_history_pct: base_ms.map(|b| (b / level_ms - 1.0) * 100.0),
        });
        annotated += 1;
    }
    Ok(annotated)
}

/// The drift issue of one series: its marker (the first line of the body, one issue per
/// series), title and body. Names come from merged kernels: kept out of the marker's syntax.
pub fn drift_issue(
    d: &kernelgate_history::Drift,
    dashboard_url: Option<&str>,
) -> (String, String, String) {
    let inert = |s: &str| s.replace("--", "- -").replace(['<', '>'], "");
    let marker = format!(
        "<!-- kernelgate-drift: {} | {} | {} -->",
        inert(&d.key.problem),
        inert(&d.key.name),
        inert(&d.hardware)
    );
    let title = format!("Performance drift: {} on {}", d.key.name, d.hardware);
    let mut body = format!(
        "**{:+.1}%** since `{}` ({}): the median of `{}` ({}) moved from {:.4} ms over {} commits \
         to {:.4} ms over the {} commits since (change-point test, p = {:.4}).\n",
        d.change_pct,
        kernelgate_history::drift::short(&d.commit),
        d.date.get(..10).unwrap_or(&d.date),
        d.key.name,
        d.key.problem,
        d.before_ms,
        d.points_before,
        d.after_ms,
        d.points_after,
        d.p_value,
    );
    if let Some(env) = &d.environment {
        body.push_str(&format!(
            "\nThe runner's software changed at that commit: {env}.\n"
        ));
    }
    if let Some(url) = dashboard_url {
        body.push_str(&format!(
            "\n[The series on the dashboard]({})\n",
            kernelgate_history::dashboard::problem_url(url, &d.key.problem)
        ));
    }
    body.push_str(&format!(
        "\nReproduce: `kernelgate history drift --problem {} --kernel {}`. kernelgate updates this \
         issue while the drift lasts; close it once the change is understood.\n",
        d.key.problem, d.key.name
    ));
    (marker, title, body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kernelgate_history::{Drift, SeriesKey, SeriesKind};

    #[test]
    fn github_remotes_give_the_repositorys_web_address() {
        let web = Some("https://github.com/acme/kernels".to_string());
        for remote in [
            "https://github.com/acme/kernels.git",
            "https://github.com/acme/kernels",
            "https://github.com/acme/kernels/",
            "https://x-access-token:ghs_secret@github.com/acme/kernels.git",
            "git@github.com:acme/kernels.git",
            "ssh://git@github.com/acme/kernels.git",
        ] {
            assert_eq!(github_web_url(remote), web, "{remote}");
        }
        for remote in [
            "https://gitlab.com/acme/kernels.git",
            "/srv/git/kernels.git",
            "https://github.com/acme",
            "https://github.com/acme/kernels/tree/main",
            "https://github.com.evil.example/acme/kernels",
            "https://github.com/acme/ker\"nels",
        ] {
            assert_eq!(github_web_url(remote), None, "{remote}");
        }
    }

    #[test]
    fn a_drift_issue_marker_names_the_series_and_stays_a_comment() {
        let d = Drift {
            key: SeriesKey {
                problem: "level1/19_ReLU.py".into(),
                kind: SeriesKind::Kernel,
                name: "kernels/a-->b<x>.py".into(),
                device: "NVIDIA H200".into(),
                precision: kernelgate_model::Precision::Fp32,
            },
            hardware: "NVIDIA_H200 fp32".into(),
            commit: "0123456789abcdef".into(),
            date: "2026-10-16T10:00:00Z".into(),
            subject: String::new(),
            before_ms: 1.0,
            after_ms: 1.1,
            change_pct: 10.0,
            p_value: 0.0005,
            points_before: 20,
            points_after: 10,
            environment: Some("torch 2.11 → 2.12".into()),
        };
        let (marker, title, body) = drift_issue(&d, Some("https://acme.github.io/kernels/"));
        assert_eq!(
            marker,
            "<!-- kernelgate-drift: level1/19_ReLU.py | kernels/a- -bx.py | NVIDIA_H200 fp32 -->"
        );
        assert_eq!(marker.matches("-->").count(), 1);
        assert!(title.contains("NVIDIA_H200 fp32"));
        assert!(body.starts_with("**+10.0%** since `0123456`"), "{body}");
        assert!(body.contains("torch 2.11 → 2.12"));
        assert!(
            body.contains("https://acme.github.io/kernels/#level1-19_ReLU"),
            "{body}"
        );
    }
}
