//! Change detection: from a base and a head commit to the kernels a pull request asks us to
//! evaluate, plus everything else a reviewer must know (edited references, config, results).

use kernelgate_model::KernelMapper;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::layout::Layout;
use crate::git::{Git, GitError, RawChange};

/// Why a kernel is in the plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum KernelStatus {
    Added,
    Modified,
    Renamed,
    /// The kernel did not change but its reference problem did.
    ProblemChanged,
    /// Not changed; evaluated because of `--all`.
    Unchanged,
}

impl KernelStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            KernelStatus::Added => "added",
            KernelStatus::Modified => "modified",
            KernelStatus::Renamed => "renamed",
            KernelStatus::ProblemChanged => "problem changed",
            KernelStatus::Unchanged => "unchanged",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KernelChange {
    /// Path at head.
    pub path: String,
    /// `level1/19_ReLU`, when the kernel maps to a problem that exists at head.
    pub problem: Option<String>,
    pub status: KernelStatus,
    /// Path of the previous version at the merge base (modified and renamed kernels): the "A" of
    /// the A/B regression timing.
    pub base_path: Option<String>,
    /// The reference problem was edited by this PR: speedups are not comparable with main.
    pub problem_changed: bool,
    /// Why the kernel cannot be evaluated (unmapped or unknown problem), with the fix.
    pub mapping_error: Option<String>,
}

impl KernelChange {
    /// An added kernel at `path` mapped to its problem by the model's rules. Its backend is read
    /// with the file itself, when the plan puts it on disk.
    fn mapped(mapper: &KernelMapper<'_>, path: &str, source: &str) -> KernelChange {
        let (problem, mapping_error) = match mapper.problem_of(Path::new(path), source) {
            Ok((p, _)) => (Some(p.key.clone()), None),
            Err(e) => (None, Some(e.to_string())),
        };
        KernelChange {
            path: path.to_string(),
            problem,
            status: KernelStatus::Added,
            base_path: None,
            problem_changed: false,
            mapping_error,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FileStatus {
    Added,
    Modified,
    Deleted,
    Renamed,
}

/// A reference problem (`KernelBench/...`) the PR touched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReferenceChange {
    pub problem: String,
    pub path: String,
    pub status: FileStatus,
    /// Unified diff base → head (empty for added or deleted problems).
    pub diff: String,
}

/// Everything `kernelgate pr` learned from git.
#[derive(Debug, Clone, Serialize)]
pub struct ChangeSet {
    pub base: String,
    pub head: String,
    pub merge_base: String,
    /// Kernels to evaluate, sorted by path.
    pub kernels: Vec<KernelChange>,
    pub deleted_kernels: Vec<String>,
    pub references: Vec<ReferenceChange>,
    pub config_changed: bool,
    /// Changed files under the results root (committed baselines).
    pub results: Vec<String>,
}

impl ChangeSet {
    /// Problems whose committed baselines are invalid because the reference changed.
    pub fn invalid_baselines(&self) -> BTreeSet<&str> {
        self.references
            .iter()
            .filter(|r| r.status != FileStatus::Added)
            .map(|r| r.problem.as_str())
            .collect()
    }
}

/// Compares `head` with its merge base with `base`. With `all`, every kernel at head is in the plan.
pub fn detect(
    git: &Git,
    layout: &Layout,
    base: &str,
    head: &str,
    all: bool,
) -> Result<ChangeSet, GitError> {
    let base_sha = git.resolve(base)?;
    let head_sha = git.resolve(head)?;
    let merge_base = git.merge_base(&base_sha, &head_sha)?;
    let raw = git.diff(&merge_base, &head_sha)?;

    let head_files: BTreeSet<String> = git.ls_files(&head_sha)?.into_iter().collect();
    let mut kernels: BTreeMap<String, KernelChange> = BTreeMap::new();
    let mut deleted_kernels = Vec::new();
    let mut references = Vec::new();
    let mut config_changed = false;
    let mut results = Vec::new();

    let source_at_head = |path: &str| {
        String::from_utf8_lossy(&git.show(&head_sha, path).unwrap_or_default()).into_owned()
    };
    let problems = layout.problems(head_files.iter().map(String::as_str));
    let mapper = layout.mapper(&problems);
    let kernel = |path: &str, status: KernelStatus, base_path: Option<String>| {
        let mut k = KernelChange::mapped(&mapper, path, &source_at_head(path));
        k.status = status;
        k.base_path = base_path;
        k
    };

    for change in &raw {
        match change {
            RawChange::Added(p) | RawChange::Copied { to: p, .. } => {
                if layout.is_kernel(p) {
                    kernels.insert(p.clone(), kernel(p, KernelStatus::Added, None));
                }
            }
            RawChange::Modified(p) | RawChange::Other(p) => {
                if layout.is_kernel(p) {
                    kernels.insert(
                        p.clone(),
                        kernel(p, KernelStatus::Modified, Some(p.clone())),
                    );
                }
            }
            RawChange::Deleted(p) => {
                if layout.is_kernel(p) {
                    deleted_kernels.push(p.clone());
                }
            }
            RawChange::Renamed { from, to, .. } => {
                match (layout.is_kernel(from), layout.is_kernel(to)) {
                    (true, true) => {
                        kernels.insert(
                            to.clone(),
                            kernel(to, KernelStatus::Renamed, Some(from.clone())),
                        );
                    }
                    (false, true) => {
                        kernels.insert(to.clone(), kernel(to, KernelStatus::Added, None));
                    }
                    (true, false) => deleted_kernels.push(from.clone()),
                    (false, false) => {}
                }
            }
        }
        // References, config and results, whatever else the change is.
        for (path, status) in reference_paths(change) {
            if let Some(problem) = layout.problem_key(path) {
                let diff = if status == FileStatus::Modified {
                    reference_diff(git, &merge_base, &head_sha, path)?
                } else {
                    String::new()
                };
                references.push(ReferenceChange {
                    problem,
                    path: path.to_string(),
                    status,
                    diff,
                });
            }
            if layout.is_config(path) {
                config_changed = true;
            }
            if layout.is_results(path) {
                results.push(path.to_string());
            }
        }
    }

    // Kernels whose reference changed are re-evaluated even when the kernel itself did not change,
    // and `--all` takes every kernel at head.
    let changed_problems: BTreeSet<&str> = references
        .iter()
        .filter(|r| matches!(r.status, FileStatus::Modified | FileStatus::Added))
        .map(|r| r.problem.as_str())
        .collect();
    if all || !changed_problems.is_empty() {
        for path in head_files.iter().filter(|p| layout.is_kernel(p)) {
            if kernels.contains_key(path) {
                continue;
            }
            let k = kernel(path, KernelStatus::Unchanged, None);
            let hit = k
                .problem
                .as_deref()
                .is_some_and(|p| changed_problems.contains(p));
            if hit {
                kernels.insert(
                    path.clone(),
                    KernelChange {
                        status: KernelStatus::ProblemChanged,
                        ..k
                    },
                );
            } else if all {
                kernels.insert(path.clone(), k);
            }
        }
    }
    for k in kernels.values_mut() {
        k.problem_changed = k
            .problem
            .as_deref()
            .is_some_and(|p| changed_problems.contains(p));
    }

    deleted_kernels.sort();
    results.sort();
    references.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(ChangeSet {
        base: base_sha,
        head: head_sha,
        merge_base,
        kernels: kernels.into_values().collect(),
        deleted_kernels,
        references,
        config_changed,
        results,
    })
}

fn reference_paths(change: &RawChange) -> Vec<(&str, FileStatus)> {
    match change {
        RawChange::Added(p) | RawChange::Copied { to: p, .. } => vec![(p, FileStatus::Added)],
        RawChange::Modified(p) | RawChange::Other(p) => vec![(p, FileStatus::Modified)],
        RawChange::Deleted(p) => vec![(p, FileStatus::Deleted)],
        RawChange::Renamed { from, to, .. } => {
            vec![(from, FileStatus::Deleted), (to, FileStatus::Renamed)]
        }
    }
}

/// What the pull request changed in a reference problem, base → head.
fn reference_diff(git: &Git, base: &str, head: &str, path: &str) -> Result<String, GitError> {
    let old = String::from_utf8_lossy(&git.show(base, path)?).into_owned();
    let new = String::from_utf8_lossy(&git.show(head, path)?).into_owned();
    Ok(unified_diff(path, &old, &new))
}

/// A unified diff with git-style headers, via `similar`.
pub fn unified_diff(path: &str, old: &str, new: &str) -> String {
    similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(3)
        .header(&format!("a/{path}"), &format!("b/{path}"))
        .to_string()
}
