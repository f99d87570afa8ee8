//! A kernel's dependency set: every file its build reads, found without running it.
//!
//! The set is the kernel's `.py`, the files it loads or reads by path (`cpp_extension.load(
//! sources=[...])`, `open(...)` and `Path.read_text()` whose text feeds `load_inline`), the
//! directories of `extra_include_paths` (and `-I` flags), and the local headers those sources
//! `#include`, followed transitively inside the repository. Paths are resolved statically where
//! they are literals or built from `__file__` (`os.path.join(os.path.dirname(__file__), "k.cu")`,
//! `Path(__file__).parent / "k.cu"`, a module-level `_here`/`HERE`, f-strings of those); a
//! relative literal names a file beside the kernel. A path the analysis cannot resolve makes the
//! set [`Dependencies::unresolved`]: the kernel is then touched by any change under its
//! directory, and [`Unresolved::reason`] says why.
//!
//! This module is the one owner of the question "which files is this kernel built from?":
//! `pr`'s plan (which kernels a diff touches, which files the base needs), `kernels --changed`,
//! the linter (which sibling sources to check) and the extension cache key all ask it.

use ruff_python_ast::visitor::{self, Visitor};
use ruff_python_ast::{self as ast, Expr, Operator, Stmt};
use ruff_text_size::Ranged;
use serde::Serialize;
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::ops::Range;
use std::path::{Path, PathBuf};

/// Files at one commit or on disk, by repository-relative path with `/` separators.
pub trait SourceTree {
    /// True when `path` is a file of the tree.
    fn is_file(&self, path: &str) -> bool;
    /// The file's bytes; `None` when it is not a file of the tree.
    fn read(&self, path: &str) -> Option<Vec<u8>>;
    /// The files directly inside directory `dir` (`""`: the root), as full paths.
    fn list_dir(&self, dir: &str) -> Vec<String>;
}

/// A checkout on disk. Only regular files below the root count: a symbolic link, or a path
/// that leaves the root through one, is not part of the tree (a link could name any file of
/// the machine, and the set's files are granted to the sandboxed child).
#[derive(Debug, Clone)]
pub struct DiskTree {
    root: PathBuf,
    canonical: Option<PathBuf>,
}

impl DiskTree {
    pub fn new(root: &Path) -> DiskTree {
        DiskTree {
            root: root.to_path_buf(),
            canonical: std::fs::canonicalize(root).ok(),
        }
    }

    fn file(&self, path: &str) -> Option<PathBuf> {
        let full = self.root.join(path);
        let meta = std::fs::symlink_metadata(&full).ok()?;
        if !meta.is_file() {
            return None;
        }
        let real = std::fs::canonicalize(&full).ok()?;
        match &self.canonical {
            Some(root) if real.starts_with(root) => Some(full),
            _ => None,
        }
    }
}

impl SourceTree for DiskTree {
    fn is_file(&self, path: &str) -> bool {
        self.file(path).is_some()
    }

    fn read(&self, path: &str) -> Option<Vec<u8>> {
        std::fs::read(self.file(path)?).ok()
    }

    fn list_dir(&self, dir: &str) -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(self.root.join(dir)) else {
            return Vec::new();
        };
        let mut out: Vec<String> = entries
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().to_str()?.to_string();
                let path = join(dir, &name);
                self.is_file(&path).then_some(path)
            })
            .collect();
        out.sort();
        out
    }
}

/// A source path the analysis could not resolve.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unresolved {
    /// 1-based line in the kernel's `.py`.
    pub line: usize,
    /// Where the path was used: `load(sources=...)`, `open(...)`, `extra_include_paths`.
    pub what: String,
    /// The expression as written, shortened.
    pub expr: String,
}

impl Unresolved {
    /// The sentence a report shows: what could not be resolved, what the gate does instead,
    /// and how to let it resolve the path.
    pub fn reason(&self, kernel: &str) -> String {
        let dir = match parent(kernel) {
            "" => "the repository".to_string(),
            d => format!("`{d}/`"),
        };
        format!(
            "{kernel}:{}: the path in {} (`{}`) is not known statically, so any change under {dir} re-evaluates this kernel; help: build it from a literal or `__file__` (`os.path.join(os.path.dirname(__file__), \"k.cu\")`, `Path(__file__).parent / \"k.cu\"`)",
            self.line, self.what, self.expr
        )
    }
}

/// What [`resolve`] found for one kernel at one commit.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Dependencies {
    /// The kernel's own path.
    pub kernel: String,
    /// Every other file the kernel is built from, sorted: what it loads or reads by path and
    /// the local headers those include, transitively.
    pub files: Vec<String>,
    /// Paths it names (a source, a header of an include) that the tree lacks: a change that
    /// adds one touches the kernel.
    pub missing: Vec<String>,
    /// Include directories inside the repository (`extra_include_paths`, `-I`).
    pub include_dirs: Vec<String>,
    /// Paths that could not be resolved: the set is incomplete, and the kernel's directory
    /// stands in for it.
    pub unresolved: Vec<Unresolved>,
}

/// How a changed file touches a kernel's dependency set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Touch {
    /// The file is in the set (or named by it and absent).
    Listed,
    /// The set is incomplete and the file lies under the kernel's directory.
    Directory,
}

impl Dependencies {
    /// The directory that stands in for an incomplete set (`""`: the repository's root).
    pub fn dir(&self) -> &str {
        parent(&self.kernel)
    }

    /// Whether a change to `path` touches this kernel.
    pub fn touch(&self, path: &str) -> Option<Touch> {
        if path == self.kernel
            || self
                .files
                .binary_search_by(|f| f.as_str().cmp(path))
                .is_ok()
            || self.missing.iter().any(|m| m == path)
        {
            return Some(Touch::Listed);
        }
        let dir = self.dir();
        let under = dir.is_empty() || path.strip_prefix(dir).is_some_and(|r| r.starts_with('/'));
        (!self.unresolved.is_empty() && under).then_some(Touch::Directory)
    }

    /// Every path the kernel names was resolved and found: the set is every file its build
    /// reads from the repository (a build store key may be made of it).
    pub fn complete(&self) -> bool {
        self.unresolved.is_empty() && self.missing.is_empty()
    }

    /// The report's sentences for the paths that could not be resolved.
    pub fn reasons(&self) -> Vec<String> {
        self.unresolved
            .iter()
            .map(|u| u.reason(&self.kernel))
            .collect()
    }
}

/// At most this many files are followed from one kernel (a header cycle, a huge vendored tree).
const MAX_FILES: usize = 2000;
/// Files larger than this are listed but not scanned for `#include`.
const MAX_SCAN_BYTES: usize = 4 << 20;

/// The dependency set of the kernel at `kernel` (repository-relative) whose text is `source`,
/// with files read from `tree`.
pub fn resolve(tree: &dyn SourceTree, kernel: &str, source: &str) -> Dependencies {
    let mut deps = Dependencies {
        kernel: kernel.to_string(),
        ..Dependencies::default()
    };
    let parsed = match ruff_python_parser::parse_module(source) {
        Ok(p) => p,
        Err(e) => {
            let at = usize::from(e.location.start()).min(source.len());
            deps.unresolved.push(Unresolved {
                line: source[..at].matches('\n').count() + 1,
                what: "the kernel's source".into(),
                expr: format!("syntax error: {}", e.error),
            });
            return deps;
        }
    };
    let module = parsed.syntax();
    let mut uses = Uses::new(kernel, source, &module.body);
    uses.visit_body(&module.body);

    let mut files: BTreeSet<String> = BTreeSet::new();
    let mut missing: BTreeSet<String> = BTreeSet::new();
    let mut include_dirs: Vec<String> = Vec::new();
    for (value, line, what, expr) in uses.include_dirs {
        for v in flatten(value) {
            match v {
                Val::Path(p) => add_dir(&mut include_dirs, normalize(&p)),
                Val::Str(s) if !is_absolute(&s) => {
                    add_dir(&mut include_dirs, normalize(&join(parent(kernel), &s)))
                }
                Val::Unknown => deps.unresolved.push(Unresolved {
                    line,
                    what: what.clone(),
                    expr: expr.clone(),
                }),
                _ => {}
            }
        }
    }
    let mut queue: VecDeque<String> = VecDeque::new();
    for (value, line, what, expr) in uses.files {
        for v in flatten(value) {
            let path = match v {
                Val::Path(p) => normalize(&p),
                Val::Str(s) if !is_absolute(&s) => normalize(&join(parent(kernel), &s)),
                Val::Glob(pattern) => {
                    match glob_files(tree, &pattern) {
                        Some(found) => queue.extend(found),
                        None => deps.unresolved.push(Unresolved {
                            line,
                            what: what.clone(),
                            expr: expr.clone(),
                        }),
                    }
                    continue;
                }
                Val::Unknown => {
                    deps.unresolved.push(Unresolved {
                        line,
                        what: what.clone(),
                        expr: expr.clone(),
                    });
                    continue;
                }
                _ => continue,
            };
            if let Some(p) = path.filter(|p| p != kernel) {
                if tree.is_file(&p) {
                    queue.push_back(p);
                } else {
                    missing.insert(p);
                }
            }
        }
    }
    // Headers included by C++ written inline in the `.py`: found beside the kernel or on an
    // include path.
    for (quoted, name) in uses.inline_includes {
        let candidates = include_candidates(quoted, parent(kernel), &name, &include_dirs);
        match candidates.iter().find(|c| tree.is_file(c)) {
            Some(found) => queue.push_back(found.clone()),
            None if quoted => missing.extend(candidates),
            None => {}
        }
    }
    // Sources and their local headers, transitively.
    while let Some(file) = queue.pop_front() {
        if files.len() >= MAX_FILES || file == kernel || !files.insert(file.clone()) {
            continue;
        }
        if !is_c_source(&file) {
            continue;
        }
        let Some(bytes) = tree.read(&file) else {
            continue;
        };
        if bytes.len() > MAX_SCAN_BYTES {
            continue;
        }
        let text = String::from_utf8_lossy(&bytes);
        for (quoted, name) in c_includes(&text) {
            let candidates = include_candidates(quoted, parent(&file), &name, &include_dirs);
            match candidates.iter().find(|c| tree.is_file(c)) {
                Some(found) if !files.contains(found) => queue.push_back(found.clone()),
                Some(_) => {}
                None if quoted => missing.extend(candidates),
                None => {}
            }
        }
    }
    deps.files = files.into_iter().collect();
    missing.retain(|m| deps.files.binary_search(m).is_err());
    deps.missing = missing.into_iter().collect();
    deps.include_dirs = include_dirs;
    deps.unresolved
        .sort_by(|a, b| (a.line, &a.expr).cmp(&(b.line, &b.expr)));
    deps.unresolved.dedup();
    deps
}

/// The dependency files, as paths on disk, of the kernel file `kernel` in the checkout `repo`
/// (a kernel outside it: in its own directory's tree), for a command that runs it from disk
/// (`eval`, `baseline --kernels`). Unreadable: none.
pub fn sources_on_disk(repo: &Path, kernel: &Path) -> Vec<PathBuf> {
    disk_sources(repo, kernel).0
}

/// [`sources_on_disk`], and whether the set is complete ([`Dependencies::complete`]; false for
/// an unreadable kernel).
pub fn disk_sources(repo: &Path, kernel: &Path) -> (Vec<PathBuf>, bool) {
    let full = if kernel.is_absolute() {
        kernel.to_path_buf()
    } else {
        repo.join(kernel)
    };
    let rel = crate::kernel::relative_to_repo(repo, &full);
    let (root, rel) = if rel.is_relative() && !rel.starts_with("..") {
        (repo.to_path_buf(), rel)
    } else {
        match (full.parent(), full.file_name()) {
            (Some(dir), Some(name)) => (dir.to_path_buf(), PathBuf::from(name)),
            _ => return (Vec::new(), false),
        }
    };
    let Ok(source) = crate::read_source(&full) else {
        return (Vec::new(), false);
    };
    let rel = rel.to_string_lossy().replace('\\', "/");
    let deps = resolve(&DiskTree::new(&root), &rel, &source);
    let files = deps.files.iter().map(|f| root.join(f)).collect();
    (files, deps.complete())
}

/// The text a torch extension build is keyed by: the kernel's source, then each dependency's
/// path relative to the kernel's directory and the SHA-256 of its bytes. Two kernels share a
/// build only when everything their builds read is the same; an edited header moves the key. A
/// kernel without dependencies is keyed by its source alone. `sources` are paths on disk (an
/// unreadable one counts as empty).
pub fn build_key(kernel: &Path, kernel_src: &str, sources: &[PathBuf]) -> String {
    use sha2::{Digest, Sha256};
    if sources.is_empty() {
        return kernel_src.to_string();
    }
    let dir = kernel.parent().unwrap_or(Path::new(""));
    let mut entries: Vec<(String, String)> = sources
        .iter()
        .map(|s| {
            let bytes = std::fs::read(s).unwrap_or_default();
            (relative_path(dir, s), hex::encode(Sha256::digest(&bytes)))
        })
        .collect();
    entries.sort();
    entries.dedup();
    let mut key = kernel_src.to_string();
    key.push_str("\n\0kernelgate-sources\0");
    for (rel, digest) in entries {
        key.push_str(&rel);
        key.push('\0');
        key.push_str(&digest);
        key.push('\0');
    }
    key
}

/// `path` relative to directory `dir`, with `..` where it leaves it (`/` separators).
fn relative_path(dir: &Path, path: &Path) -> String {
    let d: Vec<_> = dir.components().collect();
    let p: Vec<_> = path.components().collect();
    let common = d.iter().zip(&p).take_while(|(a, b)| a == b).count();
    let mut parts: Vec<String> = vec!["..".to_string(); d.len() - common];
    parts.extend(
        p[common..]
            .iter()
            .map(|c| c.as_os_str().to_string_lossy().into_owned()),
    );
    parts.join("/")
}

/// One file a `cpp_extension.load(sources=...)` call names, for the linter, which checks its
/// C++/CUDA.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadedFile {
    /// Byte range of the `load(...)` call in the `.py`.
    pub call: Range<usize>,
    /// Byte range of the expression that names the file (a list item, or the whole argument).
    pub expr: Range<usize>,
    /// The path relative to the kernel's directory (`k.cu`, `../../csrc/k.cu`), or an absolute
    /// one as written; `None` when it is not known statically (or is a glob).
    pub path: Option<String>,
}

/// The files every `cpp_extension.load(sources=...)` of a parsed kernel names, by the same
/// evaluation as [`resolve`].
pub fn loaded_files(module: &ast::ModModule, source: &str) -> Vec<LoadedFile> {
    // The kernel's directory is the root of this evaluation: paths come out relative to it.
    let mut uses = Uses::new("kernel.py", source, &module.body);
    uses.visit_body(&module.body);
    let mut out = Vec::new();
    for (call, items) in uses.loads {
        for (v, expr) in items {
            let path = match v {
                Val::Path(p) => Some(lexical(&p)),
                Val::Str(s) if is_absolute(&s) => Some(s),
                Val::Str(s) => Some(lexical(&s)),
                _ => None,
            };
            out.push(LoadedFile {
                call: call.clone(),
                expr,
                path,
            });
        }
    }
    out
}

fn range(e: &impl Ranged) -> Range<usize> {
    e.range().start().to_usize()..e.range().end().to_usize()
}

/// `a/./b/../c` → `a/c`, keeping leading `..`.
fn lexical(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." if parts.last().is_some_and(|l| *l != "..") => {
                parts.pop();
            }
            other => parts.push(other),
        }
    }
    parts.join("/")
}

// ---------------------------------------------------------------------------------------------
// Paths

fn parent(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(d, _)| d)
}

fn join(dir: &str, rel: &str) -> String {
    if is_absolute(rel) || dir.is_empty() {
        rel.to_string()
    } else {
        format!("{dir}/{rel}")
    }
}

fn is_absolute(p: &str) -> bool {
    p.starts_with('/') || p.starts_with('~') || p.starts_with('\\') || p.get(1..3) == Some(":\\")
}

/// `a/./b/../c` → `a/c`; `None` when it leaves the repository, is absolute, or enters `.git`.
pub fn normalize(path: &str) -> Option<String> {
    if is_absolute(path) {
        return None;
    }
    let mut out: Vec<&str> = Vec::new();
    for part in path.split(['/', '\\']) {
        match part {
            "" | "." => {}
            ".." => {
                out.pop()?;
            }
            ".git" => return None,
            p => out.push(p),
        }
    }
    (!out.is_empty()).then(|| out.join("/"))
}

fn add_dir(dirs: &mut Vec<String>, dir: Option<String>) {
    if let Some(d) = dir.filter(|d| !dirs.contains(d)) {
        dirs.push(d);
    }
}

fn is_c_source(path: &str) -> bool {
    let ext = path.rsplit_once('.').map_or("", |(_, e)| e);
    matches!(
        ext.to_ascii_lowercase().as_str(),
        "c" | "cc"
            | "cpp"
            | "cxx"
            | "c++"
            | "cu"
            | "cuh"
            | "h"
            | "hh"
            | "hpp"
            | "hxx"
            | "inl"
            | "inc"
            | "ipp"
            | "tcc"
            | "cl"
            | "hip"
    )
}

fn include_candidates(quoted: bool, from_dir: &str, name: &str, dirs: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    if quoted {
        out.extend(normalize(&join(from_dir, name)));
    }
    for d in dirs {
        out.extend(normalize(&join(d, name)));
    }
    out.dedup();
    out
}

/// The `#include` directives of C/C++/CUDA text, comments removed: `(quoted, name)`.
pub fn c_includes(text: &str) -> Vec<(bool, String)> {
    let code = strip_c_comments(text);
    let mut out = Vec::new();
    for line in code.lines() {
        let Some(rest) = line.trim_start().strip_prefix('#') else {
            continue;
        };
        let Some(rest) = rest.trim_start().strip_prefix("include") else {
            continue;
        };
        let rest = rest.trim_start();
        let (quoted, close) = match rest.chars().next() {
            Some('"') => (true, '"'),
            Some('<') => (false, '>'),
            _ => continue,
        };
        if let Some(end) = rest[1..].find(close) {
            let name = rest[1..1 + end].trim();
            if !name.is_empty() {
                out.push((quoted, name.to_string()));
            }
        }
    }
    out
}

/// `//` and `/* */` comments blanked out (newlines kept); string literals are left alone.
fn strip_c_comments(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let mut start = 0;
    let mut in_str: Option<u8> = None;
    while i < b.len() {
        let c = b[i];
        if let Some(q) = in_str {
            if c == b'\\' {
                i += 2;
                continue;
            }
            if c == q || c == b'\n' {
                in_str = None;
            }
            i += 1;
            continue;
        }
        if c == b'"' || c == b'\'' {
            in_str = Some(c);
            i += 1;
            continue;
        }
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            out.push_str(&text[start..i]);
            let end = text[i..].find('\n').map_or(b.len(), |k| i + k);
            i = end;
            start = end;
            continue;
        }
        if c == b'/' && b.get(i + 1) == Some(&b'*') {
            out.push_str(&text[start..i]);
            let end = text[i + 2..].find("*/").map_or(b.len(), |k| i + 2 + k + 2);
            out.extend(text[i..end].chars().filter(|&ch| ch == '\n'));
            i = end;
            start = end;
            continue;
        }
        i += 1;
    }
    out.push_str(&text[start.min(text.len())..]);
    out
}

/// The files a glob pattern (`kernels/x/*.cu`) matches: its wildcards only in the last
/// component. `None` when the pattern crosses directories (`**`, a wildcard in a directory).
fn glob_files(tree: &dyn SourceTree, pattern: &str) -> Option<Vec<String>> {
    let pattern = normalize(pattern)?;
    let (dir, name) = match pattern.rsplit_once('/') {
        Some((d, n)) => (d, n),
        None => ("", pattern.as_str()),
    };
    if dir.contains(['*', '?', '[']) || name.contains("**") {
        return None;
    }
    let matcher = globset::Glob::new(name).ok()?.compile_matcher();
    Some(
        tree.list_dir(dir)
            .into_iter()
            .filter(|f| matcher.is_match(f.rsplit('/').next().unwrap_or(f)))
            .collect(),
    )
}

// ---------------------------------------------------------------------------------------------
// Python: path values and the uses of them

/// What an expression evaluates to, as far as paths go.
#[derive(Debug, Clone, PartialEq)]
enum Val {
    /// A path inside the repository, relative to its root (may hold `..`).
    Path(String),
    /// A string: a relative one names a file beside the kernel when used as a path.
    Str(String),
    List(Vec<Val>),
    /// A glob pattern (repository-relative).
    Glob(String),
    Unknown,
}

fn flatten(v: Val) -> Vec<Val> {
    match v {
        Val::List(items) => items.into_iter().flat_map(flatten).collect(),
        v => vec![v],
    }
}

/// A path value's text: a path stays a path, a string a string.
fn text(v: &Val) -> Option<&str> {
    match v {
        Val::Path(p) | Val::Str(p) => Some(p),
        _ => None,
    }
}

/// `os.path.join(a, b)` / `a / b`: the kind of `a`, an absolute `b` replaces it.
fn join_vals(a: Val, b: &Val) -> Val {
    let Some(tail) = text(b) else {
        return Val::Unknown;
    };
    match a {
        _ if is_absolute(tail) => Val::Str(tail.to_string()),
        Val::Path(p) => Val::Path(join(&p, tail)),
        Val::Str(s) => Val::Str(if s.is_empty() {
            tail.to_string()
        } else {
            format!("{}/{tail}", s.trim_end_matches('/'))
        }),
        _ => Val::Unknown,
    }
}

/// `os.path.dirname` / `.parent`.
fn dirname(v: Val) -> Val {
    match v {
        Val::Path(p) => {
            // Lexically: `.` and `x/..` fold, leading `..` stay (the root's parent is outside).
            let folded = lexical(&p);
            let mut parts: Vec<&str> = folded.split('/').filter(|s| !s.is_empty()).collect();
            match parts.last() {
                Some(&"..") | None => parts.push(".."),
                Some(_) => {
                    parts.pop();
                }
            }
            Val::Path(parts.join("/"))
        }
        Val::Str(s) => Val::Str(s.rsplit_once('/').map_or(String::new(), |(d, _)| d.into())),
        _ => Val::Unknown,
    }
}

/// Collects, in scope order, the names bound to path values and every use of a path.
struct Uses<'s> {
    /// The kernel's repository-relative path (`__file__`).
    kernel: String,
    source: &'s str,
    /// Local name → qualified name (`osp` → `os.path`, `join` → `os.path.join`).
    aliases: HashMap<String, String>,
    /// Scopes, innermost last; the first is the module's.
    scopes: Vec<HashMap<String, Val>>,
    /// (value, line, what, expression) of every file read by path.
    files: Vec<(Val, usize, String, String)>,
    include_dirs: Vec<(Val, usize, String, String)>,
    /// `#include` lines of strings written in the `.py` (inline C++).
    inline_includes: Vec<(bool, String)>,
    /// Every `cpp_extension.load(...)` call: its range and each named file's value and range.
    loads: Vec<Load>,
}

/// One `cpp_extension.load(...)` call: its range, and each named file's value and range.
type Load = (Range<usize>, Vec<(Val, Range<usize>)>);

impl<'s> Uses<'s> {
    fn new(kernel: &str, source: &'s str, body: &[Stmt]) -> Uses<'s> {
        let mut module = HashMap::new();
        module.insert("__file__".to_string(), Val::Path(kernel.to_string()));
        let mut uses = Uses {
            kernel: kernel.to_string(),
            source,
            aliases: aliases(body),
            scopes: vec![module],
            files: Vec::new(),
            include_dirs: Vec::new(),
            inline_includes: Vec::new(),
            loads: Vec::new(),
        };
        // Module-level names as they stand once the module has run: function bodies run later
        // and see them.
        let mut first = uses.scopes[0].clone();
        bind_module(&mut first, &uses, body);
        uses.scopes[0] = first;
        uses
    }

    fn lookup(&self, name: &str) -> Option<&Val> {
        self.scopes.iter().rev().find_map(|s| s.get(name))
    }

    fn qualname(&self, e: &Expr) -> Option<String> {
        match e {
            Expr::Name(n) => Some(
                self.aliases
                    .get(n.id.as_str())
                    .cloned()
                    .unwrap_or_else(|| n.id.to_string()),
            ),
            Expr::Attribute(a) => Some(format!("{}.{}", self.qualname(&a.value)?, a.attr)),
            _ => None,
        }
    }

    fn line(&self, e: &impl Ranged) -> usize {
        let at = e.range().start().to_usize().min(self.source.len());
        self.source[..at].matches('\n').count() + 1
    }

    fn snippet(&self, e: &impl Ranged) -> String {
        let r = e.range();
        let s = &self.source[r.start().to_usize()..r.end().to_usize()];
        let one: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
        if one.chars().count() > 80 {
            format!("{}...", one.chars().take(77).collect::<String>())
        } else {
            one
        }
    }

    fn eval(&self, e: &Expr) -> Val {
        match e {
            Expr::StringLiteral(s) => Val::Str(s.value.to_str().to_string()),
            Expr::FString(f) => {
                let mut out = String::new();
                let mut is_path = false;
                let mut first = true;
                for part in f.value.iter() {
                    match part {
                        ast::FStringPart::Literal(l) => out.push_str(&l.value),
                        ast::FStringPart::FString(fs) => {
                            for el in fs.elements.iter() {
                                match el {
                                    ast::InterpolatedStringElement::Literal(l) => {
                                        out.push_str(&l.value)
                                    }
                                    ast::InterpolatedStringElement::Interpolation(i) => {
                                        if i.format_spec.is_some() {
                                            return Val::Unknown;
                                        }
                                        match self.eval(&i.expression) {
                                            Val::Path(p) => {
                                                is_path |= first && out.is_empty();
                                                out.push_str(&p);
                                            }
                                            Val::Str(s) => out.push_str(&s),
                                            _ => return Val::Unknown,
                                        }
                                    }
                                }
                                first = false;
                            }
                        }
                    }
                    first = false;
                }
                if is_path {
                    Val::Path(out)
                } else {
                    Val::Str(out)
                }
            }
            Expr::Name(n) => self.lookup(n.id.as_str()).cloned().unwrap_or(Val::Unknown),
            Expr::List(l) => Val::List(l.elts.iter().map(|x| self.eval(x)).collect()),
            Expr::Tuple(t) => Val::List(t.elts.iter().map(|x| self.eval(x)).collect()),
            Expr::BinOp(b) => {
                let (l, r) = (self.eval(&b.left), self.eval(&b.right));
                match (b.op, l, r) {
                    (Operator::Div, l @ Val::Path(_), r) => join_vals(l, &r),
                    (Operator::Add, Val::Path(a), Val::Str(s)) => Val::Path(a + &s),
                    (Operator::Add, Val::Str(a), Val::Str(s)) => Val::Str(a + &s),
                    (
                        Operator::Add,
                        a @ (Val::List(_) | Val::Glob(_)),
                        c @ (Val::List(_) | Val::Glob(_)),
                    ) => {
                        let mut items = flatten(a);
                        items.extend(flatten(c));
                        Val::List(items)
                    }
                    _ => Val::Unknown,
                }
            }
            Expr::Attribute(a) => match a.attr.as_str() {
                "parent" => match self.eval(&a.value) {
                    v @ Val::Path(_) => dirname(v),
                    _ => Val::Unknown,
                },
                _ => Val::Unknown,
            },
            Expr::Subscript(s) => {
                // `os.path.split(p)[0]`: the directory.
                if let (Expr::Call(c), Expr::NumberLiteral(n)) =
                    (s.value.as_ref(), s.slice.as_ref())
                {
                    let q = self.qualname(&c.func).unwrap_or_default();
                    let zero = matches!(&n.value, ast::Number::Int(i) if i.as_u64() == Some(0));
                    if q == "os.path.split" && zero {
                        if let Some(arg) = c.arguments.args.first() {
                            return dirname(self.eval(arg));
                        }
                    }
                }
                Val::Unknown
            }
            Expr::Call(c) => self.eval_call(c),
            _ => Val::Unknown,
        }
    }

    fn eval_call(&self, c: &ast::ExprCall) -> Val {
        let args = &c.arguments;
        let arg0 = || args.args.first().map_or(Val::Unknown, |a| self.eval(a));
        if let Expr::Attribute(a) = c.func.as_ref() {
            // Methods of a path value.
            let receiver = || self.eval(&a.value);
            match a.attr.as_str() {
                "resolve" | "absolute" | "expanduser" | "as_posix" | "__fspath__" => {
                    if let v @ Val::Path(_) = receiver() {
                        return v;
                    }
                }
                "joinpath" => {
                    if let mut v @ Val::Path(_) = receiver() {
                        for x in &args.args {
                            v = join_vals(v, &self.eval(x));
                        }
                        return v;
                    }
                }
                "with_name" => {
                    if let (v @ Val::Path(_), Val::Str(n)) = (receiver(), arg0()) {
                        return join_vals(dirname(v), &Val::Str(n));
                    }
                }
                "with_suffix" => {
                    if let (Val::Path(p), Val::Str(s)) = (receiver(), arg0()) {
                        let name_start = p.rfind('/').map_or(0, |i| i + 1);
                        let stem_end = p[name_start..]
                            .rfind('.')
                            .filter(|&k| k > 0)
                            .map_or(p.len(), |k| name_start + k);
                        return Val::Path(format!("{}{s}", &p[..stem_end]));
                    }
                }
                "glob" => {
                    if let (Val::Path(p), Val::Str(s)) = (receiver(), arg0()) {
                        return Val::Glob(join(&p, &s));
                    }
                }
                _ => {}
            }
        }
        let q = self.qualname(&c.func).unwrap_or_default();
        match q.as_str() {
            "os.path.dirname" | "posixpath.dirname" => dirname(arg0()),
            "os.path.abspath" | "os.path.realpath" | "os.path.normpath" | "os.fspath" | "str"
            | "posixpath.abspath" | "posixpath.realpath" | "posixpath.normpath" => arg0(),
            "os.path.join" | "posixpath.join" => {
                let mut it = args.args.iter().map(|a| self.eval(a));
                let Some(mut v) = it.next() else {
                    return Val::Unknown;
                };
                for x in it {
                    v = join_vals(v, &x);
                }
                v
            }
            "pathlib.Path" | "pathlib.PurePath" | "pathlib.PosixPath" | "pathlib.PurePosixPath" => {
                let mut it = args.args.iter().map(|a| self.eval(a));
                let mut v = match it.next() {
                    Some(Val::Str(s)) if !is_absolute(&s) => Val::Str(s),
                    Some(v @ Val::Path(_)) => v,
                    Some(Val::Str(s)) => Val::Str(s),
                    _ => return Val::Unknown,
                };
                for x in it {
                    v = join_vals(v, &x);
                }
                v
            }
            "glob.glob" | "glob.iglob" => match arg0() {
                Val::Path(p) => Val::Glob(p),
                Val::Str(s) if !is_absolute(&s) => Val::Glob(join(parent(&self.kernel), &s)),
                Val::Str(s) => Val::Str(s),
                _ => Val::Unknown,
            },
            "sorted" | "list" | "tuple" => arg0(),
            _ => Val::Unknown,
        }
    }

    fn push_file(&mut self, value: Val, at: &Expr, what: &str) {
        let (line, expr) = (self.line(at), self.snippet(at));
        self.files.push((value, line, what.to_string(), expr));
    }

    fn call(&mut self, c: &ast::ExprCall) {
        let q = self.qualname(&c.func).unwrap_or_default();
        let last = q.rsplit('.').next().unwrap_or("");
        let args = &c.arguments;
        let is_load = q.ends_with("cpp_extension.load");
        let is_loader =
            is_load || last == "load_inline" || q.ends_with("cpp_extension.load_inline");
        if is_load {
            if let Some(e) = args.find_argument_value("sources", 1) {
                let v = self.eval(e);
                let items: Vec<(Val, Range<usize>)> = match e {
                    Expr::List(ast::ExprList { elts, .. })
                    | Expr::Tuple(ast::ExprTuple { elts, .. }) => elts
                        .iter()
                        .flat_map(|x| {
                            let r = range(x);
                            flatten(self.eval(x))
                                .into_iter()
                                .map(move |v| (v, r.clone()))
                        })
                        .collect(),
                    _ => flatten(v.clone())
                        .into_iter()
                        .map(|v| (v, range(e)))
                        .collect(),
                };
                self.loads.push((range(c), items));
                self.push_file(v, e, "`load(sources=...)`");
            }
        }
        if is_loader {
            if let Some(k) = args.find_keyword("extra_include_paths") {
                let v = self.eval(&k.value);
                let (line, expr) = (self.line(&k.value), self.snippet(&k.value));
                self.include_dirs
                    .push((v, line, "`extra_include_paths`".into(), expr));
            }
            for flags in ["extra_cflags", "extra_cuda_cflags"] {
                let Some(k) = args.find_keyword(flags) else {
                    continue;
                };
                for v in flatten(self.eval(&k.value)) {
                    if let Some(dir) = text(&v).and_then(|t| t.strip_prefix("-I")) {
                        let dir = match v {
                            Val::Path(_) => Val::Path(dir.to_string()),
                            _ => Val::Str(dir.to_string()),
                        };
                        let (line, expr) = (self.line(&k.value), self.snippet(&k.value));
                        self.include_dirs
                            .push((dir, line, format!("`{flags}`"), expr));
                    }
                }
            }
        }
        // `open(path)` for reading: its text may feed `load_inline`.
        if matches!(
            q.as_str(),
            "open" | "io.open" | "codecs.open" | "builtins.open"
        ) {
            if let Some(path) = args.find_argument_value("file", 0) {
                let mode = args.find_argument_value("mode", 1).map(|m| self.eval(m));
                let writes = matches!(&mode, Some(Val::Str(m)) if m.contains(['w', 'a', 'x', '+']));
                if !writes {
                    let v = self.eval(path);
                    self.push_file(v, path, "`open(...)`");
                }
            }
        }
        // `Path(...).read_text()`: a path's own reads.
        if let Expr::Attribute(a) = c.func.as_ref() {
            if matches!(a.attr.as_str(), "read_text" | "read_bytes" | "open") {
                let v = self.eval(&a.value);
                let pathish = matches!(v, Val::Path(_) | Val::Glob(_))
                    || (a.attr.as_str() != "open" && v == Val::Unknown);
                if pathish {
                    let what = format!("`.{}()`", a.attr);
                    self.push_file(v, &a.value, &what);
                }
            }
        }
    }
}

impl<'a> Visitor<'a> for Uses<'_> {
    fn visit_stmt(&mut self, stmt: &'a Stmt) {
        match stmt {
            Stmt::FunctionDef(f) => {
                for d in &f.decorator_list {
                    self.visit_expr(&d.expression);
                }
                // A body runs after the module: the module's final names, plus its own.
                self.scopes.push(HashMap::new());
                for p in f.parameters.iter_non_variadic_params() {
                    self.scopes
                        .last_mut()
                        .expect("pushed")
                        .insert(p.parameter.name.to_string(), Val::Unknown);
                }
                self.visit_body(&f.body);
                self.scopes.pop();
            }
            Stmt::Assign(a) => {
                self.visit_expr(&a.value);
                if self.scopes.len() > 1 {
                    let v = self.eval(&a.value);
                    for t in &a.targets {
                        bind(self.scopes.last_mut().expect("a scope"), t, v.clone());
                    }
                }
            }
            Stmt::AnnAssign(a) => {
                if let Some(value) = &a.value {
                    self.visit_expr(value);
                    if self.scopes.len() > 1 {
                        let v = self.eval(value);
                        bind(self.scopes.last_mut().expect("a scope"), &a.target, v);
                    }
                }
            }
            _ => visitor::walk_stmt(self, stmt),
        }
    }

    fn visit_expr(&mut self, expr: &'a Expr) {
        match expr {
            Expr::Call(c) => self.call(c),
            Expr::StringLiteral(s) => {
                let v = s.value.to_str();
                if v.contains("include") {
                    self.inline_includes.extend(c_includes(v));
                }
            }
            Expr::FString(f) => {
                for part in f.value.iter() {
                    let text: String = match part {
                        ast::FStringPart::Literal(l) => l.value.to_string(),
                        ast::FStringPart::FString(fs) => fs
                            .elements
                            .iter()
                            .filter_map(|e| match e {
                                ast::InterpolatedStringElement::Literal(l) => {
                                    Some(l.value.to_string())
                                }
                                _ => None,
                            })
                            .collect(),
                    };
                    if text.contains("include") {
                        self.inline_includes.extend(c_includes(&text));
                    }
                }
            }
            _ => {}
        }
        visitor::walk_expr(self, expr);
    }
}

/// The module's names in statement order, into `env` (top level, and the bodies of top-level
/// `if`/`try`/`with`, which run with the module).
fn bind_module(env: &mut HashMap<String, Val>, uses: &Uses<'_>, body: &[Stmt]) {
    for stmt in body {
        match stmt {
            Stmt::Assign(a) => {
                let v = eval_in(uses, env, &a.value);
                for t in &a.targets {
                    bind(env, t, v.clone());
                }
            }
            Stmt::AnnAssign(a) => {
                if let Some(value) = &a.value {
                    let v = eval_in(uses, env, value);
                    bind(env, &a.target, v);
                }
            }
            Stmt::If(i) => {
                bind_module(env, uses, &i.body);
                for c in &i.elif_else_clauses {
                    bind_module(env, uses, &c.body);
                }
            }
            Stmt::Try(t) => {
                bind_module(env, uses, &t.body);
                bind_module(env, uses, &t.orelse);
                bind_module(env, uses, &t.finalbody);
            }
            Stmt::With(w) => bind_module(env, uses, &w.body),
            _ => {}
        }
    }
}

/// [`Uses::eval`] with `env` as the module scope.
fn eval_in(uses: &Uses<'_>, env: &HashMap<String, Val>, e: &Expr) -> Val {
    let view = Uses {
        kernel: uses.kernel.clone(),
        source: uses.source,
        aliases: uses.aliases.clone(),
        scopes: vec![env.clone()],
        files: Vec::new(),
        include_dirs: Vec::new(),
        inline_includes: Vec::new(),
        loads: Vec::new(),
    };
    view.eval(e)
}

fn bind(env: &mut HashMap<String, Val>, target: &Expr, v: Val) {
    match target {
        Expr::Name(n) => {
            env.insert(n.id.to_string(), v);
        }
        Expr::Tuple(ast::ExprTuple { elts, .. }) | Expr::List(ast::ExprList { elts, .. }) => {
            match v {
                Val::List(vals) if vals.len() == elts.len() => {
                    for (t, v) in elts.iter().zip(vals) {
                        bind(env, t, v);
                    }
                }
                _ => {
                    for t in elts {
                        bind(env, t, Val::Unknown);
                    }
                }
            }
        }
        _ => {}
    }
}

/// Local name → qualified name, from every import of the module (`from os import path as p`
/// → `p` = `os.path`).
fn aliases(body: &[Stmt]) -> HashMap<String, String> {
    struct V(HashMap<String, String>);
    impl<'a> Visitor<'a> for V {
        fn visit_stmt(&mut self, stmt: &'a Stmt) {
            match stmt {
                Stmt::Import(imp) => {
                    for a in &imp.names {
                        let full = a.name.as_str();
                        match &a.asname {
                            Some(asn) => self.0.insert(asn.to_string(), full.to_string()),
                            None => {
                                let first = full.split('.').next().unwrap_or(full);
                                self.0.insert(first.to_string(), first.to_string())
                            }
                        };
                    }
                }
                Stmt::ImportFrom(imp) => {
                    let module = imp.module.as_ref().map_or("", |m| m.as_str());
                    for a in &imp.names {
                        let local = a.asname.as_ref().unwrap_or(&a.name).to_string();
                        self.0
                            .insert(local, format!("{module}.{}", a.name.as_str()));
                    }
                }
                _ => visitor::walk_stmt(self, stmt),
            }
        }
    }
    let mut v = V(HashMap::new());
    v.visit_body(body);
    v.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// A tree in memory.
    struct Mem(BTreeMap<String, String>);

    impl SourceTree for Mem {
        fn is_file(&self, path: &str) -> bool {
            self.0.contains_key(path)
        }
        fn read(&self, path: &str) -> Option<Vec<u8>> {
            self.0.get(path).map(|s| s.clone().into_bytes())
        }
        fn list_dir(&self, dir: &str) -> Vec<String> {
            self.0
                .keys()
                .filter(|k| parent(k) == dir)
                .cloned()
                .collect()
        }
    }

    fn tree(files: &[(&str, &str)]) -> Mem {
        Mem(files
            .iter()
            .map(|(p, t)| (p.to_string(), t.to_string()))
            .collect())
    }

    const K: &str = "kernels/level1/1_relu/sib.py";

    fn deps_of(files: &[(&str, &str)], py: &str) -> Dependencies {
        let mut all = files.to_vec();
        all.push((K, py));
        resolve(&tree(&all), K, py)
    }

    #[test]
    fn here_variable_join_and_transitive_headers() {
        let py = "import os\nfrom torch.utils.cpp_extension import load\n_here = os.path.dirname(os.path.abspath(__file__))\next = load(name='sib', sources=[os.path.join(_here, 'sib_relu.cpp'), os.path.join(_here, 'k.cu')])\n";
        let d = deps_of(
            &[
                (
                    "kernels/level1/1_relu/sib_relu.cpp",
                    "#include \"common.cuh\"\n#include <torch/extension.h>\n",
                ),
                (
                    "kernels/level1/1_relu/k.cu",
                    "// #include \"commented.cuh\"\n#include \"../../../csrc/shared.cuh\"\n",
                ),
                (
                    "kernels/level1/1_relu/common.cuh",
                    "#include \"nested.h\"\n",
                ),
                ("kernels/level1/1_relu/nested.h", ""),
                ("csrc/shared.cuh", "#include \"common.cuh\"\n"),
            ],
            py,
        );
        assert_eq!(
            d.files,
            [
                "csrc/shared.cuh",
                "kernels/level1/1_relu/common.cuh",
                "kernels/level1/1_relu/k.cu",
                "kernels/level1/1_relu/nested.h",
                "kernels/level1/1_relu/sib_relu.cpp",
            ]
        );
        assert!(d.unresolved.is_empty(), "{:?}", d.unresolved);
        // `csrc/common.cuh` does not exist: a change that adds it would shadow nothing today,
        // but it is what `csrc/shared.cuh` names first.
        assert!(
            d.missing.contains(&"csrc/common.cuh".to_string()),
            "{:?}",
            d.missing
        );
        assert!(!d.missing.iter().any(|m| m.contains("commented")));
        assert_eq!(d.touch("csrc/shared.cuh"), Some(Touch::Listed));
        assert_eq!(d.touch("kernels/level1/1_relu/other.cu"), None);
    }

    #[test]
    fn pathlib_fstrings_globs_include_paths_and_reads() {
        let py = r#"
from pathlib import Path
import glob, os
import torch.utils.cpp_extension as ce
HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent.parent
SRC = open(os.path.join(os.path.dirname(__file__), "inline.cu")).read()
TABLE = (HERE / "table.txt").read_text()
def build():
    files = sorted(glob.glob(f"{HERE}/*.cu"))
    return ce.load(name="x", sources=files + [str(ROOT / "csrc" / "main.cpp")],
                   extra_include_paths=[str(ROOT / "include")], extra_cflags=["-O3"])
m = ce.load_inline(name="y", cpp_sources="", cuda_sources=SRC + '#include "lib.cuh"\n')
"#;
        let d = deps_of(
            &[
                ("kernels/level1/1_relu/a.cu", "#include <ops.cuh>\n"),
                ("kernels/level1/1_relu/inline.cu", ""),
                ("kernels/level1/1_relu/table.txt", ""),
                ("kernels/level1/1_relu/notes.md", ""),
                ("csrc/main.cpp", ""),
                ("include/ops.cuh", ""),
                ("include/lib.cuh", ""),
            ],
            py,
        );
        assert_eq!(
            d.files,
            [
                "csrc/main.cpp",
                "include/lib.cuh",
                "include/ops.cuh",
                "kernels/level1/1_relu/a.cu",
                "kernels/level1/1_relu/inline.cu",
                "kernels/level1/1_relu/table.txt",
            ]
        );
        assert_eq!(d.include_dirs, ["include"]);
        assert!(d.unresolved.is_empty(), "{:?}", d.unresolved);
    }

    #[test]
    fn a_path_built_at_run_time_is_unresolved_and_the_directory_stands_in() {
        let py = "import os\nfrom torch.utils.cpp_extension import load\ndef find():\n    return os.environ['SRC']\next = load(name='x', sources=[find()])\n";
        let d = deps_of(&[], py);
        assert_eq!(d.unresolved.len(), 1);
        assert_eq!(d.unresolved[0].line, 5);
        assert_eq!(
            d.touch("kernels/level1/1_relu/any.cu"),
            Some(Touch::Directory)
        );
        assert_eq!(d.touch("kernels/level1/2_other/any.cu"), None);
        let why = &d.reasons()[0];
        assert!(
            why.contains("sib.py:5")
                && why.contains("`[find()]`")
                && why.contains("`kernels/level1/1_relu/`")
                && why.contains("help:"),
            "{why}"
        );
        // A parameter read in a helper is unknown too.
        let py = "def read(p):\n    return open(p).read()\n";
        assert_eq!(deps_of(&[], py).unresolved.len(), 1);
        // Writing a file is no dependency; an absolute path is outside the repository.
        let py = "open('/tmp/log', 'w')\nopen('out.txt', mode='a')\nopen('/etc/hosts')\n";
        let d = deps_of(&[], py);
        assert!(
            d.files.is_empty() && d.unresolved.is_empty() && d.missing.is_empty(),
            "{d:?}"
        );
    }

    #[test]
    fn paths_never_leave_the_repository_or_enter_git() {
        assert_eq!(normalize("a/./b/../c"), Some("a/c".into()));
        assert_eq!(normalize("a/../../x"), None);
        assert_eq!(normalize("/etc/passwd"), None);
        assert_eq!(normalize(".git/config"), None);
        let py = "from torch.utils.cpp_extension import load\nload(name='x', sources=['../../../../up.cu', '../../../.git/config'])\n";
        let d = deps_of(&[], py);
        assert!(d.files.is_empty() && d.missing.is_empty(), "{d:?}");
    }

    #[test]
    fn inline_includes_resolve_beside_the_kernel() {
        let py = "from torch.utils.cpp_extension import load_inline\nsrc = '''\n#include \"helpers.cuh\"\n#include <cuda_runtime.h>\n__global__ void k() {}\n'''\nload_inline(name='m', cpp_sources='', cuda_sources=src)\n";
        let d = deps_of(&[("kernels/level1/1_relu/helpers.cuh", "")], py);
        assert_eq!(d.files, ["kernels/level1/1_relu/helpers.cuh"]);
        let plain = deps_of(&[], "import torch\n");
        assert_eq!(
            plain,
            Dependencies {
                kernel: K.into(),
                ..Default::default()
            }
        );
    }

    #[test]
    fn loaded_files_are_relative_to_the_kernel() {
        let py = "import os\nfrom pathlib import Path\nfrom torch.utils.cpp_extension import load\n_here = os.path.dirname(os.path.abspath(__file__))\nROOT = Path(__file__).parent.parent\nSRCS = [os.path.join(_here, 'a.cu'), str(ROOT / 'csrc' / 'b.cu')]\nload(name='x', sources=SRCS)\nload(name='y', sources=['c.cpp', os.environ['X'], '/abs/d.cu'])\n";
        let parsed = ruff_python_parser::parse_module(py).unwrap();
        let got: Vec<(Option<String>, &str)> = loaded_files(parsed.syntax(), py)
            .into_iter()
            .map(|f| (f.path, &py[f.expr]))
            .collect();
        assert_eq!(
            got,
            [
                (Some("a.cu".into()), "SRCS"),
                (Some("../csrc/b.cu".into()), "SRCS"),
                (Some("c.cpp".into()), "'c.cpp'"),
                (None, "os.environ['X']"),
                (Some("/abs/d.cu".into()), "'/abs/d.cu'"),
            ]
        );
    }

    #[test]
    fn the_build_key_moves_with_a_dependency_and_not_with_its_location() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        for root in [&a, &b] {
            std::fs::create_dir_all(root.join("k")).unwrap();
            std::fs::create_dir_all(root.join("csrc")).unwrap();
            std::fs::write(root.join("csrc/x.cuh"), "v1").unwrap();
        }
        let key = |root: &Path| build_key(&root.join("k/k.py"), "py", &[root.join("csrc/x.cuh")]);
        assert_eq!(key(&a), key(&b), "a base copy elsewhere finds its build");
        assert!(key(&a).contains("../csrc/x.cuh"));
        std::fs::write(b.join("csrc/x.cuh"), "v2").unwrap();
        assert_ne!(key(&a), key(&b));
        assert_eq!(build_key(&a.join("k/k.py"), "py", &[]), "py");
    }

    #[test]
    fn disk_trees_refuse_links() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "s").unwrap();
        std::fs::write(dir.path().join("real.cu"), "r").unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), dir.path().join("link.cu"))
            .unwrap();
        let t = DiskTree::new(dir.path());
        assert!(t.is_file("real.cu"));
        assert!(!t.is_file("link.cu"));
        assert_eq!(t.read("link.cu"), None);
        assert_eq!(t.list_dir(""), ["real.cu"]);
    }
}
