//! The plan: which kernel files to evaluate, against which problem file and which base version,
//! as real files on disk (Triton reads its decorators' source, so nothing is `exec`'d from strings).

use kernelgate_model::{Backend, Precision};
use std::path::{Path, PathBuf};

use super::changes::{ChangeSet, KernelChange};
use super::git::{Git, GitError};
use super::layout::{directives, Layout};
use super::shard::Shard;

/// One kernel to evaluate.
#[derive(Debug, Clone)]
pub struct Job {
    pub change: KernelChange,
    /// Candidate file (head version).
    pub kernel_file: PathBuf,
    /// Reference problem file (head version); `None` when the kernel is unmapped.
    pub problem_file: Option<PathBuf>,
    /// Previous version of the kernel (merge base), for the A/B regression timing.
    pub base_file: Option<PathBuf>,
    pub backend: Backend,
    pub precision: Precision,
    /// Head source of the kernel (allow directives, annotations).
    pub source: String,
}

impl Job {
    pub fn problem(&self) -> &str {
        self.change.problem.as_deref().unwrap_or("")
    }
    pub fn path(&self) -> &str {
        &self.change.path
    }
}

pub struct Plan {
    pub changes: ChangeSet,
    pub jobs: Vec<Job>,
    pub shard: Option<Shard>,
    /// Holds materialised base (and non-checked-out head) files for the plan's lifetime.
    _files: tempfile::TempDir,
}

impl Plan {
    /// Materialises the files each job needs. Head files come from the worktree when `head` is
    /// the checked-out commit (what the workflow checks out), otherwise from git.
    pub fn build(
        git: &Git,
        layout: &Layout,
        changes: ChangeSet,
        shard: Option<Shard>,
        default_precision: Precision,
    ) -> Result<Plan, PlanError> {
        let files = tempfile::Builder::new()
            .prefix("kernelgate-pr-")
            .tempdir()
            .map_err(PlanError::Temp)?;
        let head_is_worktree = git.resolve("HEAD").is_ok_and(|h| h == changes.head);
        let kernels = match shard {
            Some(s) => s.select(changes.kernels.clone(), |k| k.path.as_str()),
            None => changes.kernels.clone(),
        };
        let mut jobs = Vec::new();
        for change in kernels {
            let head_file = |path: &str| -> Result<PathBuf, PlanError> {
                if head_is_worktree {
                    Ok(git.root().join(path))
                } else {
                    materialize(git, &changes.head, path, &files.path().join("head"))
                }
            };
            let kernel_file = head_file(&change.path)?;
            // Unreadable or not UTF-8: the linter gives the row its KG000 finding; the rest of
            // the plan proceeds.
            let source = std::fs::read(&kernel_file)
                .map(|b| String::from_utf8_lossy(&b).into_owned())
                .unwrap_or_default();
            let problem_file = match &change.problem {
                Some(p) => Some(head_file(&layout.problem_path(p))?),
                None => None,
            };
            let base_file = match &change.base_path {
                Some(bp) => Some(materialize(
                    git,
                    &changes.merge_base,
                    bp,
                    &files.path().join("base"),
                )?),
                None => None,
            };
            let (backend, precision) = kernel_properties(&source, default_precision);
            jobs.push(Job {
                change,
                kernel_file,
                problem_file,
                base_file,
                backend,
                precision,
                source,
            });
        }
        Ok(Plan {
            changes,
            jobs,
            shard,
            _files: files,
        })
    }

    /// A plan from ready-made jobs (files already on disk), for callers that do their own planning.
    pub fn from_jobs(changes: ChangeSet, jobs: Vec<Job>) -> Result<Plan, PlanError> {
        let files = tempfile::Builder::new()
            .prefix("kernelgate-pr-")
            .tempdir()
            .map_err(PlanError::Temp)?;
        Ok(Plan {
            changes,
            jobs,
            shard: None,
            _files: files,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::needs_gpu;

    #[test]
    fn cuda_triton_and_declared_backends_need_a_gpu_cpu_cpp_and_unmarked_files_do_not() {
        assert!(needs_gpu("load_inline(cpp_sources=a, cuda_sources=b)"));
        assert!(needs_gpu("import triton\n@triton.jit\ndef k(): pass"));
        assert!(needs_gpu("# kernelgate: backend=cuda\nimport torch\n"));
        assert!(!needs_gpu("load_inline(name='x', cpp_sources=src)"));
        assert!(!needs_gpu("# kernelgate: backend=cpp\nimport torch\n"));
        assert!(!needs_gpu("import torch\nclass ModelNew: pass\n"));
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error("cannot create a temporary directory for base versions: {0}")]
    Temp(std::io::Error),
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Git(#[from] GitError),
}

/// Writes `rev:path` to `dir/path` (same file name, so imports and Triton see a normal file).
fn materialize(git: &Git, rev: &str, path: &str, dir: &Path) -> Result<PathBuf, PlanError> {
    let bytes = git.show(rev, path)?;
    let dest = dir.join(path);
    if let Some(parent) = dest.parent() {
        std::fs::create_dir_all(parent).map_err(|e| PlanError::Write {
            path: parent.to_path_buf(),
            source: e,
        })?;
    }
    std::fs::write(&dest, bytes).map_err(|e| PlanError::Write {
        path: dest.clone(),
        source: e,
    })?;
    Ok(dest)
}

/// Backend and precision: the directive in the first lines wins, else inferred from the source.
pub fn kernel_properties(source: &str, default_precision: Precision) -> (Backend, Precision) {
    let head: Vec<_> = directives(source)
        .into_iter()
        .filter(|d| d.line <= 10)
        .collect();
    let backend = head
        .iter()
        .find_map(|d| d.get("backend"))
        .and_then(|b| b.parse().ok())
        .unwrap_or_else(|| infer_backend(source));
    let precision = head
        .iter()
        .find_map(|d| d.get("precision"))
        .and_then(|p| p.parse().ok())
        .unwrap_or(default_precision);
    (backend, precision)
}

fn infer_backend(source: &str) -> Backend {
    marked_backend(source).unwrap_or(Backend::Cuda)
}

/// The backend the source's own markers show (`@triton.jit`, `cuda_sources`, ...), if any.
fn marked_backend(source: &str) -> Option<Backend> {
    if source.contains("@triton.jit") || source.contains("@triton.autotune") {
        Some(Backend::Triton)
    } else if source.contains("tilelang") {
        Some(Backend::Tilelang)
    } else if source.contains("cuda_sources") || source.contains("__global__") {
        Some(Backend::Cuda)
    } else if source.contains("cpp_sources") {
        Some(Backend::Cpp)
    } else {
        None
    }
}

/// True when the kernel cannot run without a GPU: its directive declares a GPU backend, or its
/// source shows one (CUDA sources, Triton, TileLang), and it is not CPU-only C++. A file with no
/// marker at all is not decided here: the harness runs it, and a "no CUDA" failure of torch
/// still becomes a skip (`adapters::needs_gpu_failure`).
pub fn needs_gpu(source: &str) -> bool {
    let declared = directives(source)
        .into_iter()
        .filter(|d| d.line <= 10)
        .find_map(|d| d.get("backend").and_then(|b| b.parse::<Backend>().ok()));
    match declared.or_else(|| marked_backend(source)) {
        None | Some(Backend::Cpp) => false,
        Some(_) => !kernelgate_eval::is_cpu_kernel(source),
    }
}
