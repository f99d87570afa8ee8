//! Candidate kernels and the problem each one answers.
//!
//! Mapping order: a directive comment in the first lines
//! (`# kernelgate: problem=level1/19_ReLU backend=cuda precision=fp32`), then
//! `[kernels.mapping]` globs, then the path convention (`kernels/level1/19_ReLU/<any>.py` or
//! `kernels/level1/19_ReLU.py`). The backend comes from the directive, else from the source,
//! else from `[defaults] backend` ([`crate::target::classify`]). The directive itself is read
//! by [`crate::directive`].

use crate::config::Config;
use crate::directive::{parse_directive, Directive, DirectiveError};
use crate::problem::{parse_file_name, parse_level_dir, LookupError, Problem, ProblemSet};
use crate::target::classify;
use crate::types::{Backend, Precision};
use globset::{Glob, GlobBuilder, GlobSet, GlobSetBuilder};
use serde::Serialize;
use std::fmt;
use std::path::{Component, Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum MappedBy {
    Directive,
    Config,
    Path,
}

impl MappedBy {
    pub fn as_str(self) -> &'static str {
        match self {
            MappedBy::Directive => "directive",
            MappedBy::Config => "config",
            MappedBy::Path => "path",
        }
    }
}

impl fmt::Display for MappedBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A candidate file mapped to its problem.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Kernel {
    /// Relative to the repository root when under it (forward slashes), else as given.
    pub path: PathBuf,
    /// `level1/19_ReLU`
    pub problem_key: String,
    pub backend: Backend,
    pub precision: Precision,
    pub mapped_by: MappedBy,
}

#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    /// Unreadable or not UTF-8 (`crate::source`): `lint` and `pr` make it a KG000 finding.
    #[error("{}: {message}", path.display())]
    Io { path: PathBuf, message: String },
    #[error("{}: not mapped to any problem\n  help: add `# kernelgate: problem=level<N>/<id>_<Name>` to its first lines, move it to kernels/level<N>/<id>_<Name>/, or add it to [kernels.mapping] in kernelgate.toml", path.display())]
    Unmapped { path: PathBuf },
    #[error("{}: [kernels.mapping] globs {} map it to different problems ({})\n  help: make the globs in kernelgate.toml disjoint, or put a `# kernelgate: problem=...` directive in the file", path.display(), globs.iter().map(|g| format!("`{g}`")).collect::<Vec<_>>().join(", "), keys.join(", "))]
    Ambiguous {
        path: PathBuf,
        globs: Vec<String>,
        keys: Vec<String>,
    },
    #[error("{}{}: {source} (mapped by {via})\n  help: {}", path.display(), line.map(|l| format!(":{l}")).unwrap_or_default(), problem_help(source))]
    UnknownProblem {
        path: PathBuf,
        line: Option<usize>,
        via: MappedBy,
        source: LookupError,
    },
    #[error("{}:{line}:{column}: bad kernelgate directive: {message}\n  help: write it as `# kernelgate: problem=level1/19_ReLU backend=cuda precision=fp32` (each key optional)", path.display())]
    BadDirective {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{}: cannot tell the kernel's backend from its source\n  help: add `backend=<{}>` to a `# kernelgate:` directive, or set `[defaults] backend` in kernelgate.toml", path.display(), Backend::ALL.map(|b| b.as_str()).join("|"))]
    UnknownBackend { path: PathBuf },
}

fn problem_help(e: &LookupError) -> String {
    match e {
        LookupError::Unknown {
            suggestion: Some(s),
            ..
        } => format!("use `{s}`, or add the problem to the dataset"),
        LookupError::Unknown { .. } => {
            "name an existing problem (`kernelgate problems` lists them)".into()
        }
        LookupError::Ambiguous { candidates, .. } => {
            format!("write the full key, one of {}", candidates.join(", "))
        }
    }
}

impl KernelError {
    pub fn path(&self) -> &Path {
        match self {
            KernelError::Io { path, .. }
            | KernelError::Unmapped { path }
            | KernelError::Ambiguous { path, .. }
            | KernelError::UnknownProblem { path, .. }
            | KernelError::BadDirective { path, .. }
            | KernelError::UnknownBackend { path } => path,
        }
    }

    /// 1-based line the error points at, when it points into the file.
    pub fn line(&self) -> Option<usize> {
        match self {
            KernelError::UnknownProblem { line, .. } => *line,
            KernelError::BadDirective { line, .. } => Some(*line),
            _ => None,
        }
    }
}

/// Problem key from the path convention: `.../level1/19_ReLU.py` or `.../level1/19_ReLU/x.py`.
pub fn key_from_path(path: &Path) -> Option<String> {
    let parts: Vec<&str> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(s) => s.to_str(),
            _ => None,
        })
        .collect();
    let n = parts.len();
    if n >= 2 && parse_level_dir(parts[n - 2]).is_some() && parts[n - 1].ends_with(".py") {
        if let Some((id, name)) = parse_file_name(parts[n - 1]) {
            return Some(format!("{}/{id}_{name}", parts[n - 2]));
        }
    }
    if n >= 3 && parse_level_dir(parts[n - 3]).is_some() {
        if let Some((id, name)) = parse_file_name(parts[n - 2]) {
            if !parts[n - 2].ends_with(".py") {
                return Some(format!("{}/{id}_{name}", parts[n - 3]));
            }
        }
    }
    None
}

/// The directive of `rel`'s source, as a [`KernelError`] when it is malformed.
fn read_directive(rel: &Path, source: &str) -> Result<Option<Directive>, KernelError> {
    parse_directive(source).map_err(|e: DirectiveError| KernelError::BadDirective {
        path: rel.to_path_buf(),
        line: e.line,
        column: e.column,
        message: e.message,
    })
}

/// Backend and precision of a kernel, by the same rules [`KernelMapper::map`] uses.
pub fn kernel_properties(
    rel: &Path,
    source: &str,
    cfg: &Config,
) -> Result<(Backend, Precision), KernelError> {
    let directive = read_directive(rel, source)?;
    let backend = classify(
        directive.as_ref().and_then(|d| d.backend),
        source,
        cfg.defaults.backend,
    )
    .backend
    .ok_or_else(|| KernelError::UnknownBackend {
        path: rel.to_path_buf(),
    })?;
    let precision = directive
        .and_then(|d| d.precision)
        .unwrap_or(cfg.defaults.precision);
    Ok((backend, precision))
}

/// Which files are candidate kernels: Python files that `[kernels] globs` match (`*` stays
/// within one path component), outside hidden directories, not helpers like `__init__.py`.
#[derive(Debug, Clone)]
pub struct KernelSelector {
    globs: GlobSet,
}

impl KernelSelector {
    pub fn new(cfg: &Config) -> KernelSelector {
        let mut builder = GlobSetBuilder::new();
        // Globs were validated when the config was loaded; skip any that still fail.
        for g in &cfg.kernels.globs {
            if let Some(glob) = glob(g) {
                builder.add(glob);
            }
        }
        KernelSelector {
            globs: builder.build().unwrap_or_else(|_| GlobSet::empty()),
        }
    }

    /// `rel` is relative to the repository root.
    pub fn selects(&self, rel: &Path) -> bool {
        let name = rel.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let hidden = rel.components().any(|c| match c {
            Component::Normal(s) => s.to_str().is_some_and(|s| s.starts_with('.')),
            _ => false,
        });
        name.ends_with(".py") && !name.starts_with("__") && !hidden && self.globs.is_match(rel)
    }
}

/// Mapping rules built once from the config: the directive, then `[kernels.mapping]`, then
/// the path convention (docs/config.md).
pub struct KernelMapper<'a> {
    cfg: &'a Config,
    problems: &'a ProblemSet,
    mapping: Vec<(GlobSet, &'a str, &'a str)>,
}

impl<'a> KernelMapper<'a> {
    pub fn new(cfg: &'a Config, problems: &'a ProblemSet) -> KernelMapper<'a> {
        let mapping = cfg
            .kernels
            .mapping
            .iter()
            .filter_map(|(g, k)| {
                let glob = glob(g)?;
                let set = GlobSetBuilder::new().add(glob).build().ok()?;
                Some((set, g.as_str(), k.as_str()))
            })
            .collect();
        KernelMapper {
            cfg,
            problems,
            mapping,
        }
    }

    /// Map the kernel at `rel` (relative to the repository root) whose text is `source`.
    pub fn map(&self, rel: &Path, source: &str) -> Result<Kernel, KernelError> {
        let (problem, mapped_by) = self.problem_of(rel, source)?;
        let (backend, precision) = kernel_properties(rel, source, self.cfg)?;
        Ok(Kernel {
            path: rel.to_path_buf(),
            problem_key: problem.key.clone(),
            backend,
            precision,
            mapped_by,
        })
    }

    /// The problem the kernel at `rel` answers, and by which rule; [`map`](Self::map) without
    /// the backend, for a caller that reads the kernel's text later (a commit's file list).
    pub fn problem_of(
        &self,
        rel: &Path,
        source: &str,
    ) -> Result<(&'a Problem, MappedBy), KernelError> {
        let path = rel.to_path_buf();
        let directive = read_directive(rel, source)?.unwrap_or_default();
        let (query, via, line) = if let Some(p) = &directive.problem {
            (p.clone(), MappedBy::Directive, Some(directive.line))
        } else if let Some(key) = self.config_key(rel)? {
            (key, MappedBy::Config, None)
        } else if let Some(key) = key_from_path(rel) {
            (key, MappedBy::Path, None)
        } else {
            return Err(KernelError::Unmapped { path });
        };
        let problem = self
            .problems
            .find(&query)
            .map_err(|source| KernelError::UnknownProblem {
                path,
                line,
                via,
                source,
            })?;
        Ok((problem, via))
    }

    fn config_key(&self, rel: &Path) -> Result<Option<String>, KernelError> {
        let hits: Vec<(&str, &str)> = self
            .mapping
            .iter()
            .filter(|(set, _, _)| set.is_match(rel))
            .map(|(_, g, k)| (*g, *k))
            .collect();
        let mut keys: Vec<String> = hits.iter().map(|(_, k)| k.to_string()).collect();
        keys.sort();
        keys.dedup();
        match keys.len() {
            0 => Ok(None),
            1 => Ok(keys.pop()),
            _ => Err(KernelError::Ambiguous {
                path: rel.to_path_buf(),
                globs: hits.iter().map(|(g, _)| g.to_string()).collect(),
                keys,
            }),
        }
    }
}

/// `path` relative to `repo` when it lies below it (the form mapping globs and reports use).
pub fn relative_to_repo(repo: &Path, path: &Path) -> PathBuf {
    if let Ok(rel) = path.strip_prefix(repo) {
        return rel.to_path_buf();
    }
    if let (Ok(r), Ok(p)) = (std::fs::canonicalize(repo), std::fs::canonicalize(path)) {
        if let Ok(rel) = p.strip_prefix(&r) {
            return rel.to_path_buf();
        }
    }
    path.strip_prefix("./").unwrap_or(path).to_path_buf()
}

impl Kernel {
    /// Map one file (absolute, or relative to `repo`) whether or not the globs select it.
    pub fn resolve_one(
        repo: &Path,
        path: &Path,
        cfg: &Config,
        problems: &ProblemSet,
    ) -> Result<Kernel, KernelError> {
        let full = if path.is_absolute() {
            path.to_path_buf()
        } else {
            repo.join(path)
        };
        let rel = relative_to_repo(repo, &full);
        let source = crate::read_source(&full).map_err(|e| KernelError::Io {
            path: rel.clone(),
            message: e.to_string(),
        })?;
        KernelMapper::new(cfg, problems).map(&rel, &source)
    }
}

/// Every file under `repo` selected by `[kernels] globs`, mapped; one file's error does not
/// drop the others. Both lists are sorted by path.
pub fn discover(
    repo: &Path,
    cfg: &Config,
    problems: &ProblemSet,
) -> (Vec<Kernel>, Vec<KernelError>) {
    let selector = KernelSelector::new(cfg);
    let mut files = Vec::new();
    // Walk only the literal prefix of each glob so a large `target/` is never visited.
    let mut bases: Vec<PathBuf> = cfg.kernels.globs.iter().map(|g| glob_base(g)).collect();
    bases.sort();
    bases.dedup();
    for base in &bases {
        if bases.iter().any(|b| b != base && base.starts_with(b)) {
            continue;
        }
        for entry in walkdir::WalkDir::new(repo.join(base))
            .follow_links(false)
            .into_iter()
            .filter_entry(|e| {
                e.depth() == 0 || !e.file_name().to_str().is_some_and(|n| n.starts_with('.'))
            })
            .flatten()
        {
            if !entry.file_type().is_file() {
                continue;
            }
            let rel = relative_to_repo(repo, entry.path());
            if selector.selects(&rel) {
                files.push(rel);
            }
        }
    }
    files.sort();
    files.dedup();
    let mapper = KernelMapper::new(cfg, problems);
    let mut kernels = Vec::new();
    let mut errors = Vec::new();
    for rel in files {
        let result = crate::read_source(&repo.join(&rel))
            .map_err(|e| KernelError::Io {
                path: rel.clone(),
                message: e.to_string(),
            })
            .and_then(|src| mapper.map(&rel, &src));
        match result {
            Ok(k) => kernels.push(k),
            Err(e) => errors.push(e),
        }
    }
    (kernels, errors)
}

/// `*` stays within one path component, as in shells; `**` crosses directories.
fn glob(pattern: &str) -> Option<Glob> {
    GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
        .ok()
}

/// Leading path components of a glob that contain no glob metacharacters.
fn glob_base(glob: &str) -> PathBuf {
    let mut base = PathBuf::new();
    let parts: Vec<&str> = glob.split('/').collect();
    for (i, part) in parts.iter().enumerate() {
        if i + 1 == parts.len() || part.contains(['*', '?', '[', '{']) {
            break;
        }
        base.push(part);
    }
    base
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_convention() {
        assert_eq!(
            key_from_path(Path::new("kernels/level1/19_ReLU/cuda.py")).as_deref(),
            Some("level1/19_ReLU")
        );
        assert_eq!(
            key_from_path(Path::new("kernels/level2/3_Fused_Op.py")).as_deref(),
            Some("level2/3_Fused_Op")
        );
        assert_eq!(key_from_path(Path::new("kernels/relu.py")), None);
        assert_eq!(key_from_path(Path::new("kernels/level1/relu.py")), None);
        assert_eq!(
            key_from_path(Path::new("kernels/level1/19_ReLU/x/y.py")),
            None
        );
    }

    fn repo() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let files = [
            ("KernelBench/level1/3_ReLU.py", "x = 1\n"),
            ("KernelBench/level1/5_Sigmoid.py", "x = 2\n"),
            (
                "kernels/level1/3_ReLU/cpp.py",
                "load_inline(name='m', cpp_sources=s)\n",
            ),
            ("kernels/level1/3_ReLU/.hidden/cuda.py", "__global__\n"),
            ("kernels/level1/3_ReLU/notes.md", "not python"),
            ("scratch/level1/5_Sigmoid.py", "__global__\n"),
        ];
        for (rel, text) in files {
            let p = dir.path().join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        dir
    }

    #[test]
    fn discover_selects_glob_matches_only() {
        let dir = repo();
        let problems = ProblemSet::load(&dir.path().join("KernelBench")).unwrap();
        let (kernels, errors) = discover(dir.path(), &Config::default(), &problems);
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(kernels.len(), 1);
        assert_eq!(
            kernels[0].path,
            PathBuf::from("kernels/level1/3_ReLU/cpp.py")
        );
        assert_eq!(kernels[0].backend, Backend::Cpp);
        assert_eq!(kernels[0].mapped_by, MappedBy::Path);
    }

    #[test]
    fn resolve_one_maps_any_file_relative_or_absolute() {
        let dir = repo();
        let problems = ProblemSet::load(&dir.path().join("KernelBench")).unwrap();
        let cfg = Config::default();
        let k = Kernel::resolve_one(
            dir.path(),
            Path::new("scratch/level1/5_Sigmoid.py"),
            &cfg,
            &problems,
        )
        .unwrap();
        assert_eq!(k.problem_key, "level1/5_Sigmoid");
        assert_eq!(k.backend, Backend::Cuda);
        assert_eq!(k.path, PathBuf::from("scratch/level1/5_Sigmoid.py"));
        let abs = dir.path().join("kernels/level1/3_ReLU/cpp.py");
        let k = Kernel::resolve_one(dir.path(), &abs, &cfg, &problems).unwrap();
        assert_eq!(k.path, PathBuf::from("kernels/level1/3_ReLU/cpp.py"));
        let e = Kernel::resolve_one(dir.path(), Path::new("kernels/none.py"), &cfg, &problems)
            .unwrap_err();
        assert!(matches!(e, KernelError::Io { .. }), "{e}");
        assert!(e.to_string().contains("kernels/none.py"), "{e}");
        // `[defaults] backend` covers sources that reveal none.
        std::fs::write(
            dir.path().join("scratch/level1/5_Sigmoid.py"),
            "import torch\n",
        )
        .unwrap();
        let e = Kernel::resolve_one(
            dir.path(),
            Path::new("scratch/level1/5_Sigmoid.py"),
            &cfg,
            &problems,
        )
        .unwrap_err();
        assert!(matches!(e, KernelError::UnknownBackend { .. }), "{e}");
        let mut cfg = Config::default();
        cfg.defaults.backend = Some(Backend::Hip);
        let k = Kernel::resolve_one(
            dir.path(),
            Path::new("scratch/level1/5_Sigmoid.py"),
            &cfg,
            &problems,
        )
        .unwrap();
        assert_eq!(k.backend, Backend::Hip);
    }

    #[test]
    fn mapping_globs_do_not_cross_directories_with_a_single_star() {
        let dir = repo();
        let problems = ProblemSet::load(&dir.path().join("KernelBench")).unwrap();
        let cfg = Config::parse(
            "[kernels]\nglobs = [\"scratch/**/*.py\"]\n[kernels.mapping]\n\"scratch/*.py\" = \"level1/3_ReLU\"\n",
            Path::new("kernelgate.toml"),
        )
        .unwrap();
        let (kernels, errors) = discover(dir.path(), &cfg, &problems);
        assert!(errors.is_empty(), "{errors:?}");
        // `scratch/*.py` does not reach scratch/level1/, so the path convention applies.
        assert_eq!(kernels[0].problem_key, "level1/5_Sigmoid");
        assert_eq!(kernels[0].mapped_by, MappedBy::Path);
    }

    #[test]
    fn glob_bases() {
        assert_eq!(glob_base("kernels/**/*.py"), PathBuf::from("kernels"));
        assert_eq!(glob_base("a/b/c.py"), PathBuf::from("a/b"));
        assert_eq!(glob_base("**/*.py"), PathBuf::from(""));
    }
}
