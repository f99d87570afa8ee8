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
    /// The runner's build store (`pr`, `baseline`; [`crate::store`]): a job whose build is in
    /// the store loads it read-only; one whose build is not builds in a staging directory of
    /// its own, which kernelgate publishes into the store once the build succeeded. No job's
    /// process ever writes the store.
    Store(crate::store::BuildStore),
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

/// torch's own build directory as a local eval's child may use it: the folder torch builds in
/// and the extensions of the kernel's source, the only entries of it the child may write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TorchBuilds {
    /// `$TORCH_EXTENSIONS_DIR`, or `py<ver>_<cuda>` under torch's default root.
    pub dir: PathBuf,
    /// The names the kernel builds (`load_inline(name=...)`): `dir/<name>` each.
    pub names: Vec<String>,
}

impl TorchBuilds {
    /// The builds of a kernel in torch's directory `root` (`exact`: the folder itself, else
    /// `py<ver>_<cuda>` under it, as torch names it for `python`), when every name it builds
    /// is known and a plain name; `None` otherwise (the job then builds in its own directory).
    pub(crate) fn new(
        root: &Path,
        exact: bool,
        python: &Path,
        names: Option<&[String]>,
    ) -> Option<TorchBuilds> {
        let names = names?;
        if !names.iter().all(|n| is_plain_name(n)) {
            return None;
        }
        let dir = if exact {
            root.to_path_buf()
        } else {
            root.join(torch_build_folder(python)?)
        };
        Some(TorchBuilds {
            dir,
            names: names.to_vec(),
        })
    }

    /// The directories the child may write: one per name.
    pub(crate) fn writable(&self) -> Vec<PathBuf> {
        self.names.iter().map(|n| self.dir.join(n)).collect()
    }
}

/// A name torch can build under (a Python identifier): never a path.
pub(crate) fn is_plain_name(name: &str) -> bool {
    let mut chars = name.chars();
    name.len() <= 128
        && chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// torch's build folder under its default root, `py<ver><abiflags>_<cu<ver>|cpu>`, as
/// `torch.utils.cpp_extension._get_build_directory` names it, without importing torch: the
/// interpreter says its version and where torch lies ([`crate::interpreter`]), torch's
/// `version.py` its CUDA.
fn torch_build_folder(python: &Path) -> Option<String> {
    let facts = crate::interpreter::interpreter_facts(python)?;
    let version = std::fs::read_to_string(facts.torch_dir?.join("version.py")).ok()?;
    Some(format!("{}_{}", facts.build_tag, cuda_tag(&version)?))
}

/// `cu132` for a torch built with CUDA 13.2, `cpu` for one without, from its `version.py`
/// (`cuda: Optional[str] = '13.2'`); `None` for a ROCm build (its folder's name has more
/// parts: such a job builds in its own directory).
fn cuda_tag(version_py: &str) -> Option<String> {
    let value = |key: &str| -> Option<String> {
        let line = version_py.lines().find(|l| {
            l.strip_prefix(key)
                .is_some_and(|r| r.starts_with([' ', ':', '=']))
        })?;
        Some(line.split_once('=')?.1.trim().to_string())
    };
    if value("hip").is_some_and(|h| h != "None") {
        return None;
    }
    let cuda = value("cuda")?;
    if cuda == "None" {
        return Some("cpu".into());
    }
    let v = cuda.trim_matches(|c| c == '\'' || c == '"');
    (!v.is_empty() && v.chars().all(|c| c.is_ascii_digit() || c == '.'))
        .then(|| format!("cu{}", v.replace('.', "")))
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
            // The staging directory; a store hit is the launcher's to put in its place.
            ExtensionsDir::Store(_) => job_dir.join("torch_extensions"),
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
            ExtensionsDir::Keyed(_) | ExtensionsDir::PerJob | ExtensionsDir::Store(_) => {
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

    #[test]
    fn sandbox_torch_builds_grant_plain_names_only_in_the_folder_torch_uses() {
        assert_eq!(
            cuda_tag("__version__ = '2.15.0+cu132'\ncuda: Optional[str] = '13.2'\n"),
            Some("cu132".into())
        );
        assert_eq!(cuda_tag("cuda: Optional[str] = None\n"), Some("cpu".into()));
        assert_eq!(
            cuda_tag("cuda = '12.4'\nhip = None\n"),
            Some("cu124".into())
        );
        assert_eq!(
            cuda_tag("cuda = None\nhip: Optional[str] = '6.2.1'\n"),
            None
        );
        let python = Path::new("python3");
        let names = vec!["kg_relu".to_string(), "_x2".to_string()];
        let b = TorchBuilds::new(Path::new("/t"), true, python, Some(&names)).unwrap();
        assert_eq!(
            b.writable(),
            vec![PathBuf::from("/t/kg_relu"), PathBuf::from("/t/_x2")]
        );
        // A name that is a path, or names not all known: no grant in torch's directory.
        for bad in ["../victim", "a/b", "", "1x", "x y"] {
            let names = vec![bad.to_string()];
            assert_eq!(
                TorchBuilds::new(Path::new("/t"), true, python, Some(&names)),
                None,
                "{bad:?}"
            );
        }
        assert_eq!(TorchBuilds::new(Path::new("/t"), true, python, None), None);
    }
}
