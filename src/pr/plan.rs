//! The plan: which kernel files to evaluate, against which problem file and which base version,
//! as real files on disk (Triton reads its decorators' source, so nothing is `exec`'d from strings).

use kernelgate_model::{kernel_properties, Backend, Precision};
use std::path::{Path, PathBuf};

use super::changes::{ChangeSet, KernelChange};
use super::layout::Layout;
use super::shard::Shard;
use crate::git::{Git, GitError};

/// One kernel to evaluate.
#[derive(Debug, Clone)]
pub struct Job {
    pub change: KernelChange,
    /// Candidate file (head version).
    pub kernel_file: PathBuf,
    /// Reference problem file: the merge base's version where it has one (the judge runs the
    /// reference's code, so a pull request never chooses it; a change to it is reported, and
    /// judges after the merge), the head's for a problem the pull request adds. `None` when
    /// the kernel is unmapped.
    pub problem_file: Option<PathBuf>,
    /// Previous version of the kernel (merge base), for the A/B regression timing.
    pub base_file: Option<PathBuf>,
    pub backend: Backend,
    pub precision: Precision,
    /// Head source of the kernel (allow directives, annotations).
    pub source: String,
    /// The files of the kernel's dependency set besides the `.py` (`kernelgate_model::deps`),
    /// on disk beside [`Job::kernel_file`] as in the repository: its build reads them.
    pub sources: Vec<PathBuf>,
    /// The same for [`Job::base_file`], materialised at the merge base.
    pub base_sources: Vec<PathBuf>,
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
            let sources = change
                .sources
                .files
                .iter()
                .map(|f| head_file(f))
                .collect::<Result<Vec<_>, _>>()?;
            let bytes = std::fs::read(&kernel_file).unwrap_or_default();
            // `None`: unreadable or not UTF-8, the linter's KG000.
            let text = std::str::from_utf8(&bytes)
                .ok()
                .filter(|_| kernel_file.is_file());
            let source = String::from_utf8_lossy(&bytes).into_owned();
            let base_dir = files.path().join("base");
            let problem_file = match &change.problem {
                Some(p) => Some(trusted_problem(
                    git,
                    &changes.merge_base,
                    &layout.problem_path(p),
                    &base_dir,
                    head_file,
                )?),
                None => None,
            };
            let base_file = match &change.base_path {
                Some(bp) => Some(materialize(git, &changes.merge_base, bp, &base_dir)?),
                None => None,
            };
            // The base version builds from the files it had at the merge base.
            let base_sources = match (&base_file, &change.base_sources) {
                (Some(_), Some(deps)) => deps
                    .files
                    .iter()
                    .map(|f| materialize(git, &changes.merge_base, f, &base_dir))
                    .collect::<Result<Vec<_>, _>>()?,
                _ => Vec::new(),
            };
            let mut change = change;
            let (backend, precision) = properties(&mut change, text, layout);
            jobs.push(Job {
                change,
                kernel_file,
                problem_file,
                base_file,
                backend,
                precision,
                source,
                sources,
                base_sources,
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
    use kernelgate_model::Backend;

    #[test]
    fn gpu_backends_need_a_gpu_unless_the_source_is_cpu_only_cpp() {
        assert!(needs_gpu(
            Backend::Cuda,
            "load_inline(cpp_sources=a, cuda_sources=b)"
        ));
        assert!(needs_gpu(
            Backend::Triton,
            "import triton\n@triton.jit\ndef k(): pass"
        ));
        assert!(!needs_gpu(
            Backend::Cpp,
            "load_inline(name='x', cpp_sources=src)"
        ));
        assert!(!needs_gpu(
            Backend::Cuda,
            "load_inline(name='x', cpp_sources=src)"
        ));
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
/// The problem file a job is judged by: the merge base's version where the base has the file,
/// else (a problem new in this pull request) the head's.
fn trusted_problem(
    git: &Git,
    merge_base: &str,
    path: &str,
    dir: &Path,
    head_file: impl Fn(&str) -> Result<PathBuf, PlanError>,
) -> Result<PathBuf, PlanError> {
    match git.file_at(merge_base, path)? {
        Some(bytes) => write_file(&dir.join(path), &bytes),
        None => head_file(path),
    }
}

fn materialize(git: &Git, rev: &str, path: &str, dir: &Path) -> Result<PathBuf, PlanError> {
    write_file(&dir.join(path), &git.show(rev, path)?)
}

fn write_file(dest: &Path, bytes: &[u8]) -> Result<PathBuf, PlanError> {
    let dest = dest.to_path_buf();
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

/// Backend and precision by the model's rules (`kernelgate kernels`); a kernel they cannot
/// tell gets the model's error as its mapping error. An unreadable or non-UTF-8 file is left
/// to the linter, whose KG000 finding fails the row.
fn properties(
    change: &mut KernelChange,
    text: Option<&str>,
    layout: &Layout,
) -> (Backend, Precision) {
    let cfg = layout.config();
    // Shown only: such a row never runs.
    let unknown = (Backend::Cuda, cfg.defaults.precision);
    let Some(source) = text else {
        return unknown;
    };
    match kernel_properties(Path::new(&change.path), source, cfg) {
        Ok(properties) => properties,
        Err(e) => {
            change.mapping_error.get_or_insert_with(|| e.to_string());
            unknown
        }
    }
}

/// True when the kernel cannot run without a GPU, by [`kernelgate_model::classify`] of its
/// mapped backend (directive, source or `[defaults] backend`) and its source.
pub fn needs_gpu(backend: Backend, source: &str) -> bool {
    kernelgate_model::classify(Some(backend), source, None).needs_gpu()
}
