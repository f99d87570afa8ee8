//! The history store: a directory of JSON Lines files, one per hardware key
//! (`NVIDIA_H200-fp32.jsonl`), one record per line, oldest first. Lines diff well and merge by
//! appending; the workflow commits the directory to a data branch (docs/history.md).

use crate::record::Record;
use crate::series::{group, hardware_label, Series};
use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Commits kept per hardware file when nothing else is asked (`--keep`).
pub const DEFAULT_KEEP_COMMITS: usize = 2000;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot read the history store `{path}`: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot write the history store `{path}`: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "`{path}` line {line} is not a history record: {message}\n\
         help: the store is JSON Lines written by `kernelgate history append`; restore the line \
         from the data branch's git history or delete it"
    )]
    Parse {
        path: PathBuf,
        line: usize,
        message: String,
    },
}

/// Which records a query wants.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// Kernel path (exact) or a substring of it.
    pub kernel: Option<String>,
    /// Problem key or a substring (`19_ReLU`).
    pub problem: Option<String>,
    /// Only records whose commit date is at or after this (RFC 3339 or `YYYY-MM-DD`).
    pub since: Option<String>,
    /// Hardware label or a substring (`H200`).
    pub hardware: Option<String>,
}

impl Filter {
    pub fn matches(&self, r: &Record) -> bool {
        self.kernel
            .as_ref()
            .is_none_or(|k| r.name.contains(k.as_str()))
            && self
                .problem
                .as_ref()
                .is_none_or(|p| r.problem.contains(p.as_str()))
            && self
                .since
                .as_ref()
                .is_none_or(|s| r.date.as_str() >= s.as_str())
            && self
                .hardware
                .as_ref()
                .is_none_or(|h| hardware_label(&r.device, r.precision).contains(h.as_str()))
    }
}

/// A history store directory.
#[derive(Debug, Clone)]
pub struct Store {
    dir: PathBuf,
}

impl Store {
    pub fn at(dir: impl Into<PathBuf>) -> Store {
        Store { dir: dir.into() }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file of a hardware label: `NVIDIA_H200 fp32` → `NVIDIA_H200-fp32.jsonl`.
    pub fn file_of(&self, hardware: &str) -> PathBuf {
        self.dir
            .join(format!("{}.jsonl", hardware.replace(' ', "-")))
    }

    /// The store's files, sorted (none when the directory does not exist yet).
    pub fn files(&self) -> Result<Vec<PathBuf>, StoreError> {
        let read = match std::fs::read_dir(&self.dir) {
            Ok(r) => r,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => {
                return Err(StoreError::Read {
                    path: self.dir.clone(),
                    source,
                })
            }
        };
        let mut files: Vec<PathBuf> = read
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
            .collect();
        files.sort();
        Ok(files)
    }

    fn read_file(path: &Path) -> Result<Vec<Record>, StoreError> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => {
                return Err(StoreError::Read {
                    path: path.to_path_buf(),
                    source,
                })
            }
        };
        text.lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .map(|(i, l)| {
                serde_json::from_str(l).map_err(|e| StoreError::Parse {
                    path: path.to_path_buf(),
                    line: i + 1,
                    message: e.to_string(),
                })
            })
            .collect()
    }

    /// Every record, file by file, in store order.
    pub fn load(&self) -> Result<Vec<Record>, StoreError> {
        let mut out = Vec::new();
        for f in self.files()? {
            out.extend(Self::read_file(&f)?);
        }
        Ok(out)
    }

    /// The records `filter` wants, in store order.
    pub fn query(&self, filter: &Filter) -> Result<Vec<Record>, StoreError> {
        Ok(self
            .load()?
            .into_iter()
            .filter(|r| filter.matches(r))
            .collect())
    }

    /// Every series with its commit order (per hardware file, then merged by series key).
    pub fn series(&self, filter: &Filter) -> Result<(Vec<String>, Vec<Series>), StoreError> {
        Ok(group(&self.query(filter)?))
    }

    /// Appends `records`: a record for a slot the store already holds for that commit replaces
    /// it (a re-run of the same commit); only the newest `keep` commits of each file are kept.
    /// Returns how many records were written.
    pub fn append(&self, records: &[Record], keep: usize) -> Result<usize, StoreError> {
        let mut by_file: std::collections::BTreeMap<PathBuf, Vec<&Record>> = Default::default();
        for r in records {
            by_file
                .entry(self.file_of(&hardware_label(&r.device, r.precision)))
                .or_default()
                .push(r);
        }
        std::fs::create_dir_all(&self.dir).map_err(|source| StoreError::Write {
            path: self.dir.clone(),
            source,
        })?;
        for (path, new) in &by_file {
            let mut all = Self::read_file(path)?;
            // A re-run replaces its records where they stand: the file's order is the branch's.
            for n in new {
                match all.iter_mut().find(|old| old.slot() == n.slot()) {
                    Some(old) => *old = (*n).clone(),
                    None => all.push((*n).clone()),
                }
            }
            let mut commits: Vec<&str> = Vec::new();
            let mut seen = BTreeSet::new();
            for r in &all {
                if seen.insert(r.commit.as_str()) {
                    commits.push(&r.commit);
                }
            }
            let dropped: BTreeSet<String> = commits
                .iter()
                .take(commits.len().saturating_sub(keep.max(1)))
                .map(|c| c.to_string())
                .collect();
            all.retain(|r| !dropped.contains(&r.commit));
            let mut text = String::new();
            for r in &all {
                text.push_str(&serde_json::to_string(r).expect("a record serialises"));
                text.push('\n');
            }
            let tmp = path.with_extension("jsonl.tmp");
            let write = || -> std::io::Result<()> {
                let mut f = std::fs::File::create(&tmp)?;
                f.write_all(text.as_bytes())?;
                f.sync_all()?;
                std::fs::rename(&tmp, path)
            };
            write().map_err(|source| StoreError::Write {
                path: path.clone(),
                source,
            })?;
        }
        Ok(records.len())
    }
}
