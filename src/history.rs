//! `kernelgate history` and `dashboard` over the history store (`kernelgate_history`): records
//! from a run's files at a git commit in, series, drift, exports and the dashboard out.

use anyhow::Context;
use kernelgate_history::{Commit, DriftRule, Filter, Record, Store};
use kernelgate_report::Report;
use kernelgate_timing::baseline::BaselineFile;
use std::path::{Path, PathBuf};

/// Where the run's numbers come from.
#[derive(Debug, Clone)]
pub enum Source {
    /// A `kernelgate pr` / `merge` report.json.
    Report(PathBuf),
    /// `kernelgate baseline` output: `kernelgate_baselines.json` and `kernelgate_kernels.json`
    /// files, or directories holding them (`results/timing/<HARDWARE>/`).
    Baselines(Vec<PathBuf>),
}

/// The commit `rev` of the repository at `repo`.
pub fn commit_at(repo: &Path, rev: &str) -> anyhow::Result<Commit> {
    let git = crate::pr::git::Git::open(repo)
        .with_context(|| format!("`{}` is not a git repository", repo.display()))?;
    Ok(git.commit(rev)?)
}

fn baseline_files(paths: &[PathBuf]) -> anyhow::Result<Vec<BaselineFile>> {
    let mut files = Vec::new();
    for p in paths {
        let list: Vec<PathBuf> = if p.is_dir() {
            ["kernelgate_baselines.json", "kernelgate_kernels.json"]
                .iter()
                .map(|f| p.join(f))
                .filter(|f| f.exists())
                .collect()
        } else {
            vec![p.clone()]
        };
        if list.is_empty() {
            anyhow::bail!(
                "`{}` holds no kernelgate_baselines.json or kernelgate_kernels.json\n\
                 help: pass the results/timing/<HARDWARE>/ directory `kernelgate baseline` wrote",
                p.display()
            );
        }
        for f in list {
            files.push(BaselineFile::load(&f)?);
        }
    }
    Ok(files)
}

/// The records of `source` at `commit`.
pub fn records_of(source: &Source, commit: &Commit) -> anyhow::Result<Vec<Record>> {
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

/// Appends the records of `source` at `commit` to `store`; returns them.
pub fn append(
    store: &Store,
    source: &Source,
    commit: &Commit,
    keep: usize,
) -> anyhow::Result<Vec<Record>> {
    let records = records_of(source, commit)?;
    if records.is_empty() {
        anyhow::bail!(
            "the run has no timed kernel or reference to record\n\
             help: pass the report.json of a run that evaluated kernels, or the baseline files"
        );
    }
    store.append(&records, keep)?;
    Ok(records)
}

/// The dashboard of `store` into `out`; returns the page and the data.
pub fn dashboard(
    store: &Store,
    out: &Path,
    repo_name: &str,
    rule: &DriftRule,
) -> anyhow::Result<(PathBuf, serde_json::Value)> {
    let records = store.query(&Filter::default())?;
    let data = kernelgate_history::dashboard::data(
        &records,
        repo_name,
        &crate::pr::run::now_rfc3339(),
        rule,
    );
    let page = kernelgate_history::dashboard::write(&data, out)
        .with_context(|| format!("cannot write the dashboard into `{}`", out.display()))?;
    Ok((page, data))
}
