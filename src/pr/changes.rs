//! Change detection: from a base and a head commit to the kernels a pull request asks us to
//! evaluate, plus everything else a reviewer must know (edited references, config, results).

use kernelgate_model::deps::{self, Dependencies, Touch};
use kernelgate_model::KernelMapper;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::layout::Layout;
use crate::git::{Git, GitError, RawChange};

/// Why a kernel is in the plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum KernelStatus {
    Added,
    Modified,
    Renamed,
    /// The kernel's `.py` did not change but a file of its dependency set did (a `.cu` it
    /// loads, a header one of those includes): [`KernelChange::changed_sources`] says which.
    SourcesChanged,
    /// The kernel did not change but its reference problem did.
    ProblemChanged,
    /// Not changed; evaluated because of `--all`.
    #[default]
    Unchanged,
}

impl KernelStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            KernelStatus::Added => "added",
            KernelStatus::Modified => "modified",
            KernelStatus::Renamed => "renamed",
            KernelStatus::SourcesChanged => "sources changed",
            KernelStatus::ProblemChanged => "problem changed",
            KernelStatus::Unchanged => "unchanged",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
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
    /// Files of the kernel's dependency set, besides the `.py` itself, that the pull request
    /// changed (at head or at the base): what brought the kernel into the plan when its `.py`
    /// did not change.
    pub changed_sources: Vec<String>,
    /// The kernel's dependency set at head (`kernelgate_model::deps`).
    pub sources: Dependencies,
    /// The base version's dependency set at the merge base, when there is a base version.
    pub base_sources: Option<Dependencies>,
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
            mapping_error,
            ..KernelChange::default()
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
    /// Whether `kernelgate pr` has anything to judge: a kernel to evaluate (its `.py`, a file it
    /// is built from, or its problem changed), a deleted kernel, a reference problem, the
    /// config or the committed results. The workflow's "did a kernel change" asks this
    /// (`kernelgate kernels --changed`), so a `.cu` kept under `csrc/` starts the gate.
    pub fn needs_gate(&self) -> bool {
        !self.kernels.is_empty()
            || !self.deleted_kernels.is_empty()
            || !self.references.is_empty()
            || self.config_changed
            || !self.results.is_empty()
    }

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

    let head_tree = git.tree(&head_sha)?;
    let base_tree = git.tree(&merge_base)?;
    let text = |tree: &crate::git::GitTree<'_>, path: &str| {
        use kernelgate_model::SourceTree;
        String::from_utf8_lossy(&tree.read(path).unwrap_or_default()).into_owned()
    };
    let source_at_head = |path: &str| text(&head_tree, path);
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
    // Kernels whose dependency set (at head, or at the base) the diff touches: a `.cu` they
    // load, a header one of those includes, or, for a set that could not be resolved, any file
    // under the kernel's directory.
    let changed: BTreeSet<&str> = raw.iter().flat_map(changed_paths).collect();
    for path in head_files.iter().filter(|p| layout.is_kernel(p)) {
        let base_path = match kernels.get(path) {
            Some(k) => k.base_path.clone(),
            None => Some(path.clone()).filter(|p| base_tree_has(&base_tree, p)),
        };
        let head_deps = deps::resolve(&head_tree, path, &source_at_head(path));
        let base_deps = base_path
            .as_deref()
            .map(|bp| deps::resolve(&base_tree, bp, &text(&base_tree, bp)));
        let own = [Some(path.as_str()), base_path.as_deref()];
        let touched: Vec<String> = changed
            .iter()
            .filter(|c| !own.contains(&Some(**c)))
            .filter(|c| {
                head_deps.touch(c).is_some()
                    || base_deps
                        .as_ref()
                        .is_some_and(|b| b.touch(c) == Some(Touch::Listed))
            })
            .map(|c| c.to_string())
            .collect();
        if !touched.is_empty() && !kernels.contains_key(path) {
            let k = kernel(path, KernelStatus::SourcesChanged, base_path.clone());
            kernels.insert(path.clone(), k);
        }
        if let Some(k) = kernels.get_mut(path) {
            if !touched.is_empty()
                && matches!(
                    k.status,
                    KernelStatus::ProblemChanged | KernelStatus::Unchanged
                )
            {
                // Its code changed: timed against its base version too.
                k.status = KernelStatus::SourcesChanged;
                k.base_path = base_path;
            }
            k.changed_sources = touched;
            k.base_sources = match &k.base_path {
                Some(bp) if Some(bp) == base_deps.as_ref().map(|b| &b.kernel) => base_deps,
                Some(bp) => Some(deps::resolve(&base_tree, bp, &text(&base_tree, bp))),
                None => None,
            };
            k.sources = head_deps;
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

/// Whether `path` is a file of the merge base's tree.
fn base_tree_has(tree: &crate::git::GitTree<'_>, path: &str) -> bool {
    use kernelgate_model::SourceTree;
    tree.is_file(path)
}

/// Every path a change names: both sides of a rename or copy.
fn changed_paths(change: &RawChange) -> Vec<&str> {
    match change {
        RawChange::Added(p)
        | RawChange::Modified(p)
        | RawChange::Other(p)
        | RawChange::Deleted(p) => {
            vec![p]
        }
        RawChange::Renamed { from, to, .. } => vec![from, to],
        // A copy keeps its source as it was.
        RawChange::Copied { to, .. } => vec![to],
    }
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
