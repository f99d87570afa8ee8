//! Problems: `KernelBench/level{N}/{id}_{Name}.py` files (any number of levels), or rows of
//! a dataset export, each with its identity hashes.

use crate::hash;
use serde::Serialize;
use std::fmt;
use std::path::{Path, PathBuf};

/// One reference problem.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    pub level: u32,
    pub id: u32,
    /// Name without the id prefix: `ReLU` for `19_ReLU.py`.
    pub name: String,
    /// The file on disk; for dataset rows, `level{N}/{id}_{Name}.py` (no such file exists).
    pub path: PathBuf,
    /// `level1/19_ReLU`: unique in a problem set, used in mappings and reports.
    pub key: String,
    #[serde(skip)]
    pub source: String,
    /// sha-256 of the normalised source (see [`crate::hash::normalize`]).
    pub sha256: String,
    /// md5 of the same text: what KernelBench reports as the problem hash.
    pub md5: String,
}

impl Problem {
    pub fn new(level: u32, id: u32, name: &str, path: PathBuf, source: String) -> Problem {
        let (sha256, md5) = hash::hashes(&source);
        Problem {
            level,
            id,
            name: name.to_string(),
            path,
            key: format!("level{level}/{id}_{name}"),
            source,
            sha256,
            md5,
        }
    }

    /// `19_ReLU`
    pub fn stem(&self) -> String {
        format!("{}_{}", self.id, self.name)
    }

    /// `19_ReLU.py`: the key KernelBench's baseline JSON files use under `"level1"`.
    pub fn file_name(&self) -> String {
        format!("{}_{}.py", self.id, self.name)
    }

    /// `level1`
    pub fn level_key(&self) -> String {
        format!("level{}", self.level)
    }

    /// A file holding this problem's source: `path` when it holds it, else (dataset rows)
    /// `dir/level{N}/{id}_{Name}.py`, written now. The harness imports problems from files.
    pub fn materialize(&self, dir: &Path) -> std::io::Result<PathBuf> {
        // Same content only: a row's relative path may name an unrelated file in the cwd.
        if std::fs::read_to_string(&self.path).is_ok_and(|s| s == self.source) {
            return Ok(self.path.clone());
        }
        let dest = dir.join(self.level_key()).join(self.file_name());
        std::fs::create_dir_all(dest.parent().unwrap_or(dir))?;
        std::fs::write(&dest, &self.source)?;
        Ok(dest)
    }
}

impl Problem {
    /// What makes this file unusable as a KernelBench problem, found without running it: a
    /// syntax error, no top-level `class Model`, no `get_inputs()` or `get_init_inputs()`.
    /// Empty when it looks right (`kernelgate problems --check` imports it to be sure).
    pub fn structure_warnings(&self) -> Vec<String> {
        structure_warnings(&self.source)
    }
}

/// See [`Problem::structure_warnings`].
pub fn structure_warnings(source: &str) -> Vec<String> {
    use ruff_python_ast::Stmt;
    let parsed = match ruff_python_parser::parse_module(source) {
        Ok(p) => p,
        Err(e) => {
            let at = usize::from(e.location.start()).min(source.len());
            let line = source[..at].matches('\n').count() + 1;
            return vec![format!("syntax error at line {line}: {}", e.error)];
        }
    };
    let body = &parsed.syntax().body;
    let has_class = body
        .iter()
        .any(|s| matches!(s, Stmt::ClassDef(c) if c.name.as_str() == "Model"));
    // A name bound at the top level by any statement counts (`get_inputs = ...` too).
    let defines = |name: &str| {
        body.iter().any(|s| match s {
            Stmt::FunctionDef(f) => f.name.as_str() == name,
            Stmt::Assign(a) => a
                .targets
                .iter()
                .any(|t| matches!(t, ruff_python_ast::Expr::Name(n) if n.id.as_str() == name)),
            Stmt::ImportFrom(i) => i
                .names
                .iter()
                .any(|a| a.asname.as_ref().unwrap_or(&a.name).as_str() == name),
            _ => false,
        })
    };
    let mut out = Vec::new();
    if !has_class && !defines("Model") {
        out.push("no `class Model` at the top level".to_string());
    }
    for f in ["get_inputs", "get_init_inputs"] {
        if !defines(f) {
            out.push(format!("no `{f}()` at the top level"));
        }
    }
    out
}

/// Splits `19_ReLU.py` (or `19_ReLU`) into `(19, "ReLU")`.
pub fn parse_file_name(file_name: &str) -> Option<(u32, String)> {
    let stem = file_name.strip_suffix(".py").unwrap_or(file_name);
    let (id, name) = stem.split_once('_')?;
    if id.is_empty() || !id.chars().all(|c| c.is_ascii_digit()) || name.is_empty() {
        return None;
    }
    Some((id.parse().ok()?, name.to_string()))
}

/// Splits `level1/19_ReLU` (optionally ending in `.py`) into `(1, 19, "ReLU")`.
pub fn parse_key(key: &str) -> Option<(u32, u32, String)> {
    let (level, file) = key.split_once('/')?;
    Some((
        parse_level_dir(level)?,
        parse_file_name(file)?.0,
        parse_file_name(file)?.1,
    ))
}

/// `level3` → 3
pub fn parse_level_dir(dir: &str) -> Option<u32> {
    let n = dir.strip_prefix("level")?;
    if n.is_empty() || !n.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    n.parse().ok()
}

#[derive(Debug, thiserror::Error)]
pub enum ProblemError {
    #[error("problem directory {} does not exist\n  help: set `[dataset] root` in kernelgate.toml or pass --dataset", root.display())]
    NotFound { root: PathBuf },
    #[error("no problems found in {}: expected files like level1/1_Name.py\n  help: point `[dataset] root` at a KernelBench-format tree", root.display())]
    Empty { root: PathBuf },
    #[error("cannot read {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: problem id {id} of level {level} is also used by {}\n  help: give each problem of a level its own id", second.display(), first.display())]
    Duplicate {
        level: u32,
        id: u32,
        first: PathBuf,
        second: PathBuf,
    },
}

/// Why a lookup by key, stem or path found nothing usable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LookupError {
    #[error("unknown problem `{query}`{}", suggestion.as_ref().map(|s| format!(" (did you mean `{s}`?)")).unwrap_or_default())]
    Unknown {
        query: String,
        suggestion: Option<String>,
    },
    #[error("problem `{query}` is ambiguous: it matches {}; write the level too", candidates.join(", "))]
    Ambiguous {
        query: String,
        candidates: Vec<String>,
    },
}

/// All problems of a dataset, sorted by level then id.
#[derive(Debug, Clone, Default)]
pub struct ProblemSet {
    problems: Vec<Problem>,
    /// Where the problems came from (a directory, `hf:...`, a file), for messages.
    pub origin: String,
}

impl ProblemSet {
    /// Load every `level{N}/{id}_{Name}.py` below `root`. Files whose name does not start with
    /// an id (helpers, `__init__.py`) are skipped, as KernelBench does.
    pub fn load(root: &Path) -> Result<ProblemSet, ProblemError> {
        if !root.is_dir() {
            return Err(ProblemError::NotFound {
                root: root.to_path_buf(),
            });
        }
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| ProblemError::Io { path, source }
        };
        let mut problems = Vec::new();
        for entry in std::fs::read_dir(root).map_err(io(root))? {
            let entry = entry.map_err(io(root))?;
            let Some(level) = entry.file_name().to_str().and_then(parse_level_dir) else {
                continue;
            };
            if !entry.path().is_dir() {
                continue;
            }
            for file in std::fs::read_dir(entry.path()).map_err(io(&entry.path()))? {
                let file = file.map_err(io(&entry.path()))?;
                let path = file.path();
                let fname = file.file_name();
                let Some(fname) = fname.to_str() else {
                    continue;
                };
                if !fname.ends_with(".py") || !path.is_file() {
                    continue;
                }
                let Some((id, name)) = parse_file_name(fname) else {
                    continue;
                };
                let source = std::fs::read_to_string(&path).map_err(io(&path))?;
                problems.push(Problem::new(level, id, &name, path, source));
            }
        }
        if problems.is_empty() {
            return Err(ProblemError::Empty {
                root: root.to_path_buf(),
            });
        }
        ProblemSet::from_problems(problems, root.display().to_string())
    }

    /// Build a set from problems read elsewhere (dataset rows); rejects duplicate ids.
    pub fn from_problems(
        mut problems: Vec<Problem>,
        origin: String,
    ) -> Result<ProblemSet, ProblemError> {
        problems.sort_by(|a, b| (a.level, a.id, &a.path).cmp(&(b.level, b.id, &b.path)));
        for pair in problems.windows(2) {
            if pair[0].level == pair[1].level && pair[0].id == pair[1].id {
                return Err(ProblemError::Duplicate {
                    level: pair[0].level,
                    id: pair[0].id,
                    first: pair[0].path.clone(),
                    second: pair[1].path.clone(),
                });
            }
        }
        Ok(ProblemSet { problems, origin })
    }

    /// The problems whose files are `paths` (relative, as git lists them) below `root`, without
    /// reading them: for mapping kernels to keys at a commit that is not checked out. Sources
    /// and hashes are empty; of two files with one level and id the first is kept.
    pub fn index<'p>(root: &Path, paths: impl IntoIterator<Item = &'p str>) -> ProblemSet {
        let mut problems: Vec<Problem> = Vec::new();
        for path in paths {
            let Ok(rest) = Path::new(path).strip_prefix(root) else {
                continue;
            };
            let mut parts = rest.iter().filter_map(|p| p.to_str());
            let (Some(dir), Some(file), None) = (parts.next(), parts.next(), parts.next()) else {
                continue;
            };
            let (Some(level), Some((id, name))) = (parse_level_dir(dir), parse_file_name(file))
            else {
                continue;
            };
            if !file.ends_with(".py") || problems.iter().any(|p| (p.level, p.id) == (level, id)) {
                continue;
            }
            let mut problem = Problem::new(level, id, &name, PathBuf::from(path), String::new());
            problem.sha256.clear();
            problem.md5.clear();
            problems.push(problem);
        }
        problems.sort_by_key(|p| (p.level, p.id));
        ProblemSet {
            problems,
            origin: root.display().to_string(),
        }
    }

    pub fn problems(&self) -> &[Problem] {
        &self.problems
    }

    pub fn iter(&self) -> std::slice::Iter<'_, Problem> {
        self.problems.iter()
    }

    pub fn len(&self) -> usize {
        self.problems.len()
    }

    pub fn is_empty(&self) -> bool {
        self.problems.is_empty()
    }

    /// Exact key: `level1/19_ReLU`.
    pub fn get(&self, key: &str) -> Option<&Problem> {
        self.problems.iter().find(|p| p.key == key)
    }

    /// The problem stored at `path` (compared after canonicalisation where possible).
    pub fn by_path(&self, path: &Path) -> Option<&Problem> {
        let want = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        self.problems
            .iter()
            .find(|p| p.path == path || std::fs::canonicalize(&p.path).is_ok_and(|c| c == want))
    }

    /// Resolve what a user wrote: `level1/19_ReLU`, `level1/19_ReLU.py`, `19_ReLU` when only one
    /// level has it, or a path to the problem file.
    pub fn find(&self, query: &str) -> Result<&Problem, LookupError> {
        let q = query.trim().trim_start_matches("./");
        let q_noext = q.strip_suffix(".py").unwrap_or(q);
        if let Some(p) = self.get(q_noext) {
            return Ok(p);
        }
        // A path whose last two components are `level{N}/{file}`.
        let parts: Vec<&str> = q_noext.rsplitn(3, '/').collect();
        if parts.len() >= 2 {
            if let Some(p) = self.get(&format!("{}/{}", parts[1], parts[0])) {
                return Ok(p);
            }
        }
        if let Some(p) = self.by_path(Path::new(q)) {
            return Ok(p);
        }
        if !q_noext.contains('/') {
            let matches: Vec<&Problem> = self
                .problems
                .iter()
                .filter(|p| p.stem() == q_noext)
                .collect();
            match matches.len() {
                1 => return Ok(matches[0]),
                n if n > 1 => {
                    return Err(LookupError::Ambiguous {
                        query: query.to_string(),
                        candidates: matches.iter().map(|p| p.key.clone()).collect(),
                    })
                }
                _ => {}
            }
        }
        Err(LookupError::Unknown {
            query: query.to_string(),
            suggestion: self.closest_key(q_noext).map(str::to_string),
        })
    }

    /// The key most similar to `query`, when one is reasonably close.
    pub fn closest_key(&self, query: &str) -> Option<&str> {
        let q = query.to_ascii_lowercase();
        self.problems
            .iter()
            .map(|p| {
                let key = p.key.to_ascii_lowercase();
                let score = if q.contains('/') {
                    strsim::jaro_winkler(&q, &key)
                } else {
                    strsim::jaro_winkler(&q, &p.stem().to_ascii_lowercase())
                        .max(strsim::jaro_winkler(&q, &p.name.to_ascii_lowercase()))
                };
                (score, p.key.as_str())
            })
            .filter(|(s, _)| *s >= 0.75)
            .max_by(|a, b| a.0.total_cmp(&b.0))
            .map(|(_, k)| k)
    }
}

impl<'a> IntoIterator for &'a ProblemSet {
    type Item = &'a Problem;
    type IntoIter = std::slice::Iter<'a, Problem>;
    fn into_iter(self) -> Self::IntoIter {
        self.problems.iter()
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn structure_warnings_name_a_syntax_error_and_a_missing_model() {
        let ok = "class Model:\n    pass\n\ndef get_inputs():\n    return []\n\ndef get_init_inputs():\n    return []\n";
        assert!(structure_warnings(ok).is_empty());
        let w = structure_warnings("import torch\n\ndef get_inputs(:\n");
        assert_eq!(w.len(), 1);
        assert!(w[0].starts_with("syntax error at line 3"), "{w:?}");
        let w = structure_warnings("def get_inputs():\n    return []\n");
        assert_eq!(
            w,
            vec![
                "no `class Model` at the top level".to_string(),
                "no `get_init_inputs()` at the top level".to_string()
            ]
        );
    }

    fn tree() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (rel, body) in [
            ("level1/19_ReLU.py", "x = 1\n"),
            ("level1/3_Sigmoid.py", "x = 2\n"),
            ("level2/19_ReLU.py", "x = 3\n"),
            ("level2/1_Matmul_Add.py", "x = 4\n"),
            ("level10/7_Big.py", "x = 5\n"),
            ("level1/helpers.py", "x = 6\n"),
            ("level1/__init__.py", ""),
            ("level1/notes.txt", "hi"),
            ("other/1_X.py", "x = 7\n"),
        ] {
            let p = dir.path().join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, body).unwrap();
        }
        dir
    }

    #[test]
    fn loads_every_level_sorted_and_skips_non_problems() {
        let dir = tree();
        let set = ProblemSet::load(dir.path()).unwrap();
        let keys: Vec<_> = set.iter().map(|p| p.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "level1/3_Sigmoid",
                "level1/19_ReLU",
                "level2/1_Matmul_Add",
                "level2/19_ReLU",
                "level10/7_Big"
            ]
        );
        let p = set.get("level2/1_Matmul_Add").unwrap();
        assert_eq!((p.level, p.id, p.name.as_str()), (2, 1, "Matmul_Add"));
        assert_eq!(p.file_name(), "1_Matmul_Add.py");
        assert_eq!(p.source, "x = 4\n");
        assert_eq!(p.sha256, hash::hashes("x=4").0);
    }

    #[test]
    fn lookup_by_key_stem_and_path() {
        let dir = tree();
        let set = ProblemSet::load(dir.path()).unwrap();
        assert_eq!(set.find("level1/19_ReLU").unwrap().level, 1);
        assert_eq!(set.find("level1/19_ReLU.py").unwrap().level, 1);
        assert_eq!(set.find("3_Sigmoid").unwrap().key, "level1/3_Sigmoid");
        let path = dir.path().join("level2/19_ReLU.py");
        assert_eq!(
            set.find(path.to_str().unwrap()).unwrap().key,
            "level2/19_ReLU"
        );
        assert_eq!(
            set.find("KernelBench/level2/19_ReLU.py").unwrap().key,
            "level2/19_ReLU"
        );
        match set.find("19_ReLU").unwrap_err() {
            LookupError::Ambiguous { candidates, .. } => {
                assert_eq!(candidates, ["level1/19_ReLU", "level2/19_ReLU"])
            }
            e => panic!("{e}"),
        }
        let e = set.find("level1/3_Sigmiod").unwrap_err();
        assert_eq!(
            e,
            LookupError::Unknown {
                query: "level1/3_Sigmiod".into(),
                suggestion: Some("level1/3_Sigmoid".into())
            }
        );
        assert!(e.to_string().contains("did you mean `level1/3_Sigmoid`"));
        let e = set.find("zzzzzz").unwrap_err();
        assert_eq!(
            e,
            LookupError::Unknown {
                query: "zzzzzz".into(),
                suggestion: None
            }
        );
    }

    #[test]
    fn duplicate_ids_and_missing_roots_are_errors() {
        let dir = tree();
        std::fs::write(dir.path().join("level1/19_ReLU_v2.py"), "y = 1\n").unwrap();
        let e = ProblemSet::load(dir.path()).unwrap_err();
        assert!(
            matches!(
                e,
                ProblemError::Duplicate {
                    level: 1,
                    id: 19,
                    ..
                }
            ),
            "{e}"
        );
        let e = ProblemSet::load(&dir.path().join("missing")).unwrap_err();
        assert!(matches!(e, ProblemError::NotFound { .. }));
        let empty = tempfile::tempdir().unwrap();
        let e = ProblemSet::load(empty.path()).unwrap_err();
        assert!(matches!(e, ProblemError::Empty { .. }));
    }

    #[test]
    fn materialize_writes_rows_and_keeps_files() {
        let dir = tree();
        let set = ProblemSet::load(dir.path()).unwrap();
        let on_disk = set.get("level1/3_Sigmoid").unwrap();
        let out = tempfile::tempdir().unwrap();
        assert_eq!(on_disk.materialize(out.path()).unwrap(), on_disk.path);
        let row = Problem::new(
            4,
            2,
            "Row",
            PathBuf::from("level4/2_Row.py"),
            "z = 1\n".into(),
        );
        let written = row.materialize(out.path()).unwrap();
        assert_eq!(written, out.path().join("level4/2_Row.py"));
        assert_eq!(std::fs::read_to_string(written).unwrap(), "z = 1\n");
    }

    #[test]
    fn key_parsing() {
        assert_eq!(parse_key("level1/19_ReLU"), Some((1, 19, "ReLU".into())));
        assert_eq!(parse_key("level12/3_A_B.py"), Some((12, 3, "A_B".into())));
        assert_eq!(parse_key("level1/ReLU"), None);
        assert_eq!(parse_key("lvl1/19_ReLU"), None);
        assert_eq!(parse_key("19_ReLU"), None);
        assert_eq!(parse_file_name("19_.py"), None);
    }
}
