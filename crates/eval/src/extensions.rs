//! Where a job's torch extensions are built and found: per job, torch's own directory, or a
//! shared cache with one directory per kernel source.

use std::path::{Path, PathBuf};

/// Where a job's torch extension builds go.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ExtensionsDir {
    /// A fresh directory in the job's own temporary directory: nothing is kept or reused.
    #[default]
    PerJob,
    /// A shared root with one subdirectory per build key ([`extensions_subdir`]): `pr` and
    /// `baseline`, whose build stage and eval meet there; two kernels never share a build, and
    /// the base version of an edited kernel finds the build it had as a head.
    Keyed(PathBuf),
    /// torch's own build directory, as `python kernel.py` uses it: `$TORCH_EXTENSIONS_DIR` when
    /// set, else `py<ver>_<cuda>` under this root (the runner names it as torch does). A local
    /// `kernelgate eval` loads the contributor's build when sources, flags and torch match.
    Torch {
        root: PathBuf,
        /// The root is `$TORCH_EXTENSIONS_DIR` itself (no `py<ver>_<cuda>` below it).
        exact: bool,
    },
}

impl ExtensionsDir {
    /// torch's own build directory for this user ([`ExtensionsDir::Torch`]):
    /// `$TORCH_EXTENSIONS_DIR`, else `torch_extensions` in `$XDG_CACHE_HOME` or `~/.cache`.
    pub fn torch_default() -> Option<ExtensionsDir> {
        if let Some(dir) = std::env::var_os("TORCH_EXTENSIONS_DIR").filter(|d| !d.is_empty()) {
            return Some(ExtensionsDir::Torch {
                root: PathBuf::from(dir),
                exact: true,
            });
        }
        let cache = std::env::var_os("XDG_CACHE_HOME")
            .filter(|d| !d.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
        Some(ExtensionsDir::Torch {
            root: cache.join("torch_extensions"),
            exact: false,
        })
    }

    /// Kept across jobs (a build stage and its eval can meet there).
    pub fn is_shared(&self) -> bool {
        !matches!(self, ExtensionsDir::PerJob)
    }
}

/// Where the jobs of one run share compiled extensions (kernels sharing a source compile
/// once): `$TORCH_EXTENSIONS_DIR`, torch's own variable, kept across runs; else a temporary
/// folder that lives as long as the returned guard.
pub fn shared_extensions_dir() -> std::io::Result<(PathBuf, Option<tempfile::TempDir>)> {
    if let Some(dir) = std::env::var_os("TORCH_EXTENSIONS_DIR").filter(|d| !d.is_empty()) {
        return Ok((PathBuf::from(dir), None));
    }
    let scratch = tempfile::Builder::new()
        .prefix("kernelgate-ext-")
        .tempdir()?;
    Ok((scratch.path().to_path_buf(), Some(scratch)))
}

/// One job's build directories ([`ExtensionsDir::job_dirs`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct JobDirs {
    /// The candidate's.
    pub head: PathBuf,
    /// The base kernel's, when there is one: never the candidate's, so the two builds of one
    /// extension name never meet (torch would rename the second `<name>_v1` and rebuild it on
    /// every eval).
    pub base: Option<PathBuf>,
    /// The base's build is in the shared cache, made by a build job of its own: the eval's
    /// process may only read it.
    pub base_read_only: bool,
}

impl ExtensionsDir {
    /// The build directories of one job; `job_dir` is the job's own temporary directory,
    /// `kernel_key` and `base_key` the builds' keys (`kernelgate_model::deps::build_key`: the
    /// kernel's source, and the files of its dependency set when it has any), `base_prebuilt`
    /// says a build job built the base ahead ([`crate::JobSpec::base_prebuilt`]).
    pub(crate) fn job_dirs(
        &self,
        job_dir: &Path,
        kernel_key: &str,
        base_key: Option<&str>,
        base_prebuilt: bool,
    ) -> JobDirs {
        let head = match self {
            ExtensionsDir::Keyed(root) => extensions_subdir(root, kernel_key),
            ExtensionsDir::Torch { root, .. } => root.clone(),
            ExtensionsDir::PerJob => job_dir.join("torch_extensions"),
        };
        let base_read_only =
            base_key.is_some() && base_prebuilt && matches!(self, ExtensionsDir::Keyed(_));
        let base = base_key.map(|src| match self {
            // The directory it had as a head: the build stage's, or a cached one from an
            // earlier run. One the eval would build in itself stays the job's own: the
            // candidate's process could write there, and later jobs would load it.
            ExtensionsDir::Keyed(root) if base_read_only => extensions_subdir(root, src),
            ExtensionsDir::Keyed(_) | ExtensionsDir::PerJob => {
                job_dir.join("torch_extensions_base")
            }
            // torch's own directory holds the head's build under the same name.
            ExtensionsDir::Torch { root, .. } => {
                extensions_subdir(&root.join("kernelgate-base"), src)
            }
        });
        JobDirs {
            head,
            base,
            base_read_only,
        }
    }
}

/// The job's own torch extensions directory under the shared cache: one per build key
/// (`kernelgate_model::deps::build_key`: the kernel's source, plus the path and contents of
/// every file of its dependency set), so builds of different kernels never share sources or a
/// `.so` (a parallel build of one could otherwise replace another's library between its build
/// and its load), an edited `.cu` or header is a build of its own, the prebuild and the eval of
/// one kernel find the same build, and an edited kernel's base version (the files it had as a
/// head) finds its build. A kernel without dependencies is keyed by its source alone.
pub fn extensions_subdir(root: &Path, key: &str) -> PathBuf {
    use sha2::{Digest, Sha256};
    root.join(hex::encode(&Sha256::digest(key.as_bytes())[..8]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_directory_per_source_and_the_prebuilt_base_finds_its_head_build() {
        let root = Path::new("/cache");
        let keyed = ExtensionsDir::Keyed(root.to_path_buf());
        let job = Path::new("/job");
        let v1 = keyed.job_dirs(job, "v1", None, false);
        assert_eq!((v1.base, v1.base_read_only), (None, false));
        let edit = keyed.job_dirs(job, "v2", Some("v1"), true);
        // The edit's base is the add's head: the same directory, so its build is found, and
        // the eval may only read it.
        assert_eq!(edit.base.as_deref(), Some(v1.head.as_path()));
        assert!(edit.base_read_only);
        assert_ne!(v1.head, edit.head);
        assert!(v1.head.starts_with(root));
        // A base the eval builds itself builds in the job's own directory, never the cache.
        let unbuilt = keyed.job_dirs(job, "v2", Some("v1"), false);
        assert_eq!(unbuilt.base, Some(job.join("torch_extensions_base")));
        assert!(!unbuilt.base_read_only);
        // Apart from the candidate's where the directory is not keyed by the source; only a
        // keyed cache is ever read-only (torch's own directory is the contributor's).
        let torch = ExtensionsDir::Torch {
            root: root.to_path_buf(),
            exact: true,
        };
        for mode in [torch, ExtensionsDir::PerJob] {
            let dirs = mode.job_dirs(job, "same", Some("same"), true);
            assert_ne!(Some(dirs.head), dirs.base, "{mode:?}");
            assert!(!dirs.base_read_only, "{mode:?}");
        }
    }
}
