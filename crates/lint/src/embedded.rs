//! C++/CUDA sources embedded in a candidate `.py`: the strings handed to
//! `torch.utils.cpp_extension.load_inline(...)` and the files named by `cpp_extension.load(...)`.
//!
//! Every byte of an extracted source keeps the byte offset in the `.py` it came from, so a
//! finding inside CUDA lands on the right line and column of the Python file: escapes map to
//! their backslash, f-string placeholders to their `{`, text pulled in through a module-level
//! name to where that text is written.

use crate::python::semantic::{qualname, ImportAliases};
use ruff_python_ast::visitor::{self, Visitor};
use ruff_python_ast::{self as ast, Expr, ModModule, Operator, Stmt};
use ruff_text_size::Ranged;
use rustc_hash::FxHashMap as HashMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// Stand-in for an f-string / `.format` placeholder whose value is not known statically. It is an
/// identifier, so it parses wherever C++ accepts a name, a type or a number.
pub const PLACEHOLDER: &str = "_kg_";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    Cpp,
    Cuda,
}

/// How the extension is built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Loader {
    /// `load_inline(cpp_sources=..., cuda_sources=...)`
    Inline,
    /// `load(sources=[files])`
    Files,
}

/// One source of an extension, as a range of [`EmbeddedSource::text`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    pub lang: Lang,
    pub range: Range<usize>,
    /// The file it was read from (`load(sources=...)`), relative to the `.py` as written.
    pub file: Option<PathBuf>,
    /// That file as findings name it (`kernels/level1/19_ReLU/relu.cu`, `csrc/relu.cu`): the
    /// `.py`'s shown directory joined with [`Part::file`].
    pub shown: Option<String>,
    /// A local header of the kernel's dependency set, included by its sources (not compiled
    /// on its own): it may hold kernels other kernels use, so it never decides that a kernel
    /// is a decoy or that the CUDA has none.
    pub header: bool,
}

/// Where the files an extension is built from are read: the kernel's directory on disk, inside
/// a root never left (the repository's), and how findings name them.
#[derive(Debug, Clone)]
pub struct FileSource {
    /// The kernel's directory on disk.
    pub dir: PathBuf,
    /// Files are read from inside this tree only (a path out of it, or a link, is not read).
    pub root: PathBuf,
    /// The kernel's directory as findings show it (`kernels/level1/19_ReLU`; `""`: none).
    pub shown_dir: String,
    /// The kernel file's name (its dependency set is resolved from it).
    pub kernel_name: String,
}

impl FileSource {
    /// A source tree rooted at the kernel's own directory, shown by bare names (tests, tools).
    pub fn beside(dir: &Path) -> FileSource {
        FileSource {
            dir: dir.to_path_buf(),
            root: dir.to_path_buf(),
            shown_dir: String::new(),
            kernel_name: "kernel.py".into(),
        }
    }

    /// The kernel's directory relative to the root (`/` separators), when it lies inside it.
    fn dir_in_root(&self) -> Option<String> {
        let rel = self.dir.strip_prefix(&self.root).ok()?;
        Some(rel.to_string_lossy().replace('\\', "/"))
    }

    /// The repository path of `rel` (relative to the kernel's directory), inside the root.
    fn in_root(&self, rel: &str) -> Option<String> {
        let dir = self.dir_in_root()?;
        kernelgate_model::deps::normalize(&if dir.is_empty() {
            rel.to_string()
        } else {
            format!("{dir}/{rel}")
        })
    }

    /// How findings name `rel`.
    fn shown(&self, rel: &str) -> String {
        fold(&if self.shown_dir.is_empty() {
            rel.to_string()
        } else {
            format!("{}/{rel}", self.shown_dir)
        })
    }

    /// The text of `rel` (relative to the kernel's directory), read inside the root.
    fn read(&self, rel: &str) -> Option<String> {
        let path = self.in_root(rel)?;
        let tree = kernelgate_model::DiskTree::new(&self.root);
        use kernelgate_model::SourceTree;
        String::from_utf8(tree.read(&path)?).ok()
    }

    /// The local headers of the kernel's dependency set (`kernelgate_model::deps`), relative to
    /// its directory, with their text: what its sources include, transitively.
    fn headers(&self, source: &str, loaded: &[String]) -> Vec<(String, String)> {
        let Some(dir) = self.dir_in_root() else {
            return Vec::new();
        };
        let kernel = if dir.is_empty() {
            self.kernel_name.clone()
        } else {
            format!("{dir}/{}", self.kernel_name)
        };
        let tree = kernelgate_model::DiskTree::new(&self.root);
        let deps = kernelgate_model::deps::resolve(&tree, &kernel, source);
        let loaded: Vec<String> = loaded.iter().filter_map(|l| self.in_root(l)).collect();
        deps.files
            .iter()
            .filter(|f| is_header(f) && !loaded.contains(f))
            .filter_map(|f| {
                use kernelgate_model::SourceTree;
                let text = String::from_utf8(tree.read(f)?).ok()?;
                Some((relative(&dir, f), text))
            })
            .collect()
    }
}

fn is_header(path: &str) -> bool {
    let ext = path.rsplit_once('.').map_or("", |(_, e)| e);
    matches!(
        ext.to_ascii_lowercase().as_str(),
        "h" | "hh" | "hpp" | "hxx" | "cuh" | "inl" | "inc" | "ipp" | "tcc"
    )
}

/// `a/./b/../c` → `a/c`, keeping leading `..` and a leading `/`.
fn fold(path: &str) -> String {
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
    let joined = parts.join("/");
    if path.starts_with('/') {
        format!("/{joined}")
    } else {
        joined
    }
}

/// Repository path `to` relative to repository directory `from`.
fn relative(from: &str, to: &str) -> String {
    let f: Vec<&str> = from.split('/').filter(|s| !s.is_empty()).collect();
    let t: Vec<&str> = to.split('/').filter(|s| !s.is_empty()).collect();
    let common = f.iter().zip(&t).take_while(|(a, b)| a == b).count();
    let mut parts: Vec<&str> = vec![".."; f.len() - common];
    parts.extend(&t[common..]);
    parts.join("/")
}

/// All the C++/CUDA sources of one extension build call, concatenated (each part ends with a
/// newline), with the byte-level map back into the `.py` file.
#[derive(Debug, Clone)]
pub struct EmbeddedSource {
    pub text: String,
    map: Vec<u32>,
    pub parts: Vec<Part>,
    /// Names listed in `functions=[...]`; `None` when absent or not statically known.
    pub functions: Option<Vec<String>>,
    /// The extension's name (`name=`, the first argument): torch's build directory for it is
    /// `<extensions dir>/<name>`. `None` when not statically known.
    pub name: Option<String>,
    /// Byte range of the build call in the `.py`.
    pub call: Range<usize>,
    pub loader: Loader,
    /// Files named in `sources=` that could not be read (relative to the `.py`).
    pub missing_files: Vec<(PathBuf, Range<usize>)>,
    /// `cpp_sources=`/`cuda_sources=` arguments (or list items) whose text is not statically
    /// known (read from a file, decoded at run time, ...): `.py` ranges of those expressions.
    pub unresolved: Vec<Range<usize>>,
    /// Compiler flags (`extra_cuda_cflags=["--default-stream", "per-thread"]`) that move every
    /// launch off the legacy default stream: `.py` ranges of those flags.
    pub per_thread_stream_flags: Vec<Range<usize>>,
}

impl EmbeddedSource {
    /// Byte offset in the `.py` of byte `text_offset` of [`Self::text`] (offsets at or past the
    /// end map to the last byte's position).
    pub fn py_offset(&self, text_offset: usize) -> usize {
        match self.map.get(text_offset) {
            Some(&o) => o as usize,
            None => self.map.last().map_or(self.call.start, |&o| o as usize),
        }
    }

    /// The `.py` range covering text range `r` (never empty).
    pub fn py_range(&self, r: Range<usize>) -> Range<usize> {
        let start = self.py_offset(r.start);
        let last = self.py_offset(r.end.saturating_sub(1).max(r.start));
        if last >= start {
            start..last + 1
        } else {
            start..start + 1
        }
    }

    /// True when any compiled part is CUDA (`cuda_sources=` or a `.cu` file; not a header).
    pub fn has_cuda(&self) -> bool {
        self.parts.iter().any(|p| p.lang == Lang::Cuda && !p.header)
    }

    /// True when text offset `offset` lies in a header of the dependency set.
    pub fn in_header(&self, offset: usize) -> bool {
        self.part_at(offset).is_some_and(|p| p.header)
    }

    /// Where text offset `offset` is when it was read from a file: the file as findings name it
    /// and the 1-based line and column in it; `None` for text written in the `.py`.
    pub fn file_position(&self, offset: usize) -> Option<(String, u32, u32)> {
        let part = self.part_at(offset)?;
        let shown = part.shown.clone()?;
        let before = &self.text[part.range.start..offset.min(part.range.end)];
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let col = before[line_start..].chars().count() + 1;
        Some((shown, line as u32, col as u32))
    }

    /// The part holding text offset `offset`.
    pub fn part_at(&self, offset: usize) -> Option<&Part> {
        self.parts.iter().find(|p| p.range.contains(&offset))
    }

    /// " (kernel.cu:12:5)" for text read from a file, "" for inline text: a finding inside a
    /// file can only point at the file name in the `.py`, so the message says where.
    pub fn file_location(&self, offset: usize) -> String {
        match self.part_at(offset) {
            Some(Part {
                file: Some(f),
                range,
                ..
            }) => {
                let before = &self.text[range.start..offset.min(range.end)];
                let line = before.matches('\n').count() + 1;
                let col = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
                format!(" ({}:{line}:{col})", f.display())
            }
            _ => String::new(),
        }
    }
}

#[cfg(test)]
impl EmbeddedSource {
    /// A CUDA source whose text is the whole "file" (offset i maps to i).
    pub(crate) fn from_cuda_text(text: &str) -> Self {
        EmbeddedSource {
            text: text.to_string(),
            map: (0..text.len() as u32).collect(),
            parts: vec![Part {
                lang: Lang::Cuda,
                range: 0..text.len(),
                file: None,
                shown: None,
                header: false,
            }],
            functions: None,
            name: None,
            call: 0..0,
            loader: Loader::Inline,
            missing_files: Vec::new(),
            unresolved: Vec::new(),
            per_thread_stream_flags: Vec::new(),
        }
    }
}

/// Extracts the extensions built by the module, without reading `load(sources=...)` files.
pub fn extract(module: &ModModule, source: &str) -> Vec<EmbeddedSource> {
    extract_in(module, source, None)
}

/// Like [`extract`], reading the files named in `load(sources=[...])` relative to `base_dir`
/// (the directory of the `.py`), inside it.
pub fn extract_in(
    module: &ModModule,
    source: &str,
    base_dir: Option<&Path>,
) -> Vec<EmbeddedSource> {
    let files = base_dir.map(FileSource::beside);
    extract_with(
        module,
        &ImportAliases::collect(&module.body),
        source,
        files.as_ref(),
    )
}

/// [`extract_in`] with the file's import table from its semantic model, and its files read as
/// `files` says. The paths `load(sources=...)` names are resolved by the kernel's dependency
/// analysis (`kernelgate_model::deps`): `_here`, `Path(__file__).parent / "k.cu"` and the other
/// forms it knows; the local headers those files include are appended to the first extension
/// that reads files (or the first extension) as header parts.
pub fn extract_with(
    module: &ModModule,
    aliases: &ImportAliases,
    source: &str,
    files: Option<&FileSource>,
) -> Vec<EmbeddedSource> {
    // Pass 1: the module-level names as they stand once the module has run; function bodies
    // run later and see these.
    let mut first = Walker::new(source, aliases, files, false);
    first.walk_module(&module.body);
    let final_env = first.env;
    let mut second = Walker::new(source, aliases, files, true);
    second.final_env = Some(Rc::new(final_env));
    second.loaded = kernelgate_model::deps::loaded_files(module, source);
    second.walk_module(&module.body);
    let mut out = second.out;
    if let Some(files) = files {
        let loaded: Vec<String> = out
            .iter()
            .flat_map(|e| e.parts.iter())
            .filter_map(|p| p.file.as_ref().map(|f| f.to_string_lossy().into_owned()))
            .collect();
        let headers = files.headers(source, &loaded);
        let target = out
            .iter()
            .position(|e| e.loader == Loader::Files)
            .or((!out.is_empty()).then_some(0));
        if let (Some(k), false) = (target, headers.is_empty()) {
            let es = &mut out[k];
            let at = es.call.start;
            let mut text = Text {
                s: std::mem::take(&mut es.text),
                map: std::mem::take(&mut es.map),
            };
            for (rel, content) in headers {
                let start = text.s.len();
                text.push_fixed(&content, at);
                text.push_fixed("\n", at);
                es.parts.push(Part {
                    lang: if rel.ends_with(".cuh") {
                        Lang::Cuda
                    } else {
                        Lang::Cpp
                    },
                    range: start..text.s.len(),
                    shown: Some(files.shown(&rel)),
                    file: Some(PathBuf::from(rel)),
                    header: true,
                });
            }
            es.text = text.s;
            es.map = text.map;
        }
    }
    out
}

/// The names of the extensions `source` builds through torch (`load_inline(name=...)`,
/// `load(name=...)`), sorted, when every one is known statically; `None` when the source does
/// not parse or a name is made at run time. A local eval grants the candidate's process the
/// build directories of these names only (docs/sandbox.md).
pub fn extension_names(source: &str) -> Option<Vec<String>> {
    let parsed = ruff_python_parser::parse_module(source).ok()?;
    let mut names = extract(parsed.syntax(), source)
        .into_iter()
        .map(|e| e.name)
        .collect::<Option<Vec<String>>>()?;
    names.sort();
    names.dedup();
    Some(names)
}

// ---------------------------------------------------------------------------------------------
// Values

/// Text with one `.py` offset per byte.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Text {
    pub s: String,
    pub map: Vec<u32>,
}

impl Text {
    fn push_char(&mut self, c: char, at: usize) {
        let mut buf = [0u8; 4];
        let enc = c.encode_utf8(&mut buf);
        self.s.push_str(enc);
        self.map.extend(std::iter::repeat_n(at as u32, enc.len()));
    }
    /// Pushes source text verbatim: byte i maps to `at + i`.
    fn push_verbatim(&mut self, s: &str, at: usize) {
        self.s.push_str(s);
        self.map.extend((0..s.len()).map(|i| (at + i) as u32));
    }
    fn push_fixed(&mut self, s: &str, at: usize) {
        self.s.push_str(s);
        self.map.extend(std::iter::repeat_n(at as u32, s.len()));
    }
    fn append(&mut self, other: &Text) {
        self.s.push_str(&other.s);
        self.map.extend_from_slice(&other.map);
    }
    fn slice(&self, r: Range<usize>) -> Text {
        Text {
            s: self.s[r.clone()].to_string(),
            map: self.map[r].to_vec(),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Value {
    Str(Text),
    List(Vec<Value>),
    Unknown,
}

/// Decodes the raw source of a string literal's contents (`raw` = between the quotes, starting
/// at `.py` offset `at`), processing Python escapes unless the literal is raw; in f-strings
/// `{{`/`}}` are single braces.
fn decode_into(out: &mut Text, raw: &str, at: usize, is_raw: bool, fstring: bool) {
    let b = raw.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if fstring && (c == b'{' || c == b'}') && b.get(i + 1) == Some(&c) {
            out.push_fixed(if c == b'{' { "{" } else { "}" }, at + i);
            i += 2;
            continue;
        }
        if c != b'\\' || is_raw {
            // Copy up to the next interesting byte in one go.
            let mut j = i + 1;
            while j < b.len() && b[j] != b'\\' && !(fstring && (b[j] == b'{' || b[j] == b'}')) {
                j += 1;
            }
            if is_raw && c == b'\\' {
                j = (i + 1).max(j);
            }
            out.push_verbatim(&raw[i..j], at + i);
            i = j;
            continue;
        }
        // An escape starting at i.
        let start = at + i;
        let Some(&e) = b.get(i + 1) else {
            out.push_fixed("\\", start);
            break;
        };
        let simple = match e {
            b'n' => Some('\n'),
            b't' => Some('\t'),
            b'r' => Some('\r'),
            b'\\' => Some('\\'),
            b'\'' => Some('\''),
            b'"' => Some('"'),
            b'a' => Some('\x07'),
            b'b' => Some('\x08'),
            b'f' => Some('\x0c'),
            b'v' => Some('\x0b'),
            _ => None,
        };
        if let Some(ch) = simple {
            out.push_char(ch, start);
            i += 2;
            continue;
        }
        match e {
            b'\n' => i += 2, // line continuation
            b'\r' => i += if b.get(i + 2) == Some(&b'\n') { 3 } else { 2 },
            b'0'..=b'7' => {
                let mut j = i + 1;
                let mut v = 0u32;
                while j < b.len() && j < i + 4 && (b'0'..=b'7').contains(&b[j]) {
                    v = v * 8 + (b[j] - b'0') as u32;
                    j += 1;
                }
                out.push_char(char::from_u32(v).unwrap_or('\u{fffd}'), start);
                i = j;
            }
            b'x' | b'u' | b'U' => {
                let n = match e {
                    b'x' => 2,
                    b'u' => 4,
                    _ => 8,
                };
                let hex = raw.get(i + 2..i + 2 + n).unwrap_or("");
                match u32::from_str_radix(hex, 16).ok().and_then(char::from_u32) {
                    Some(ch) if hex.len() == n => {
                        out.push_char(ch, start);
                        i += 2 + n;
                    }
                    _ => {
                        out.push_fixed("\\", start);
                        i += 1;
                    }
                }
            }
            b'N' if b.get(i + 2) == Some(&b'{') => {
                // Named character: we do not carry the Unicode name table; a neutral char keeps
                // offsets right.
                let end = raw[i..].find('}').map_or(b.len(), |k| i + k + 1);
                out.push_char('?', start);
                i = end;
            }
            _ => {
                // Unknown escape: Python keeps the backslash.
                out.push_fixed("\\", start);
                i += 1;
            }
        }
    }
}

fn string_literal_text(lit: &ast::StringLiteral, source: &str, out: &mut Text) {
    let r = lit.content_range();
    let raw = &source[r.start().to_usize()..r.end().to_usize()];
    decode_into(
        out,
        raw,
        r.start().to_usize(),
        lit.flags.prefix().is_raw(),
        false,
    );
}

// ---------------------------------------------------------------------------------------------
// Loaders

fn loader_of(call: &ast::ExprCall, aliases: &ImportAliases) -> Option<Loader> {
    let q = qualname(&call.func, aliases).unwrap_or_default();
    let last = q.rsplit('.').next().unwrap_or("");
    if last == "load_inline" {
        return Some(Loader::Inline);
    }
    if q.ends_with("cpp_extension.load") {
        return Some(Loader::Files);
    }
    // Wrapped or re-aliased loaders still take these keywords.
    let kw = |n: &str| call.arguments.find_keyword(n).is_some();
    if kw("cuda_sources") || kw("cpp_sources") {
        return Some(Loader::Inline);
    }
    None
}

// ---------------------------------------------------------------------------------------------
// The walker: module-level names in order, loader calls anywhere.

struct Walker<'s> {
    source: &'s str,
    aliases: &'s ImportAliases,
    files: Option<&'s FileSource>,
    /// The files every `load(sources=...)` names (`kernelgate_model::deps::loaded_files`).
    loaded: Vec<kernelgate_model::deps::LoadedFile>,
    collect: bool,
    /// Names bound in the scope being walked.
    env: HashMap<String, Value>,
    /// Enclosing scopes' names, innermost last: shared, not copied, per function and class body
    /// (a module's values hold whole C++ sources).
    outer: Vec<Rc<HashMap<String, Value>>>,
    final_env: Option<Rc<HashMap<String, Value>>>,
    out: Vec<EmbeddedSource>,
    depth: u32,
    /// Module-level functions whose body is one `return <expr>` (source templates):
    /// parameter names and the returned expression.
    templates: HashMap<String, (Vec<String>, Box<Expr>)>,
}

impl<'s> Walker<'s> {
    fn new(
        source: &'s str,
        aliases: &'s ImportAliases,
        files: Option<&'s FileSource>,
        collect: bool,
    ) -> Self {
        Walker {
            source,
            aliases,
            files,
            loaded: Vec::new(),
            collect,
            env: HashMap::default(),
            outer: Vec::new(),
            final_env: None,
            out: Vec::new(),
            depth: 0,
            templates: HashMap::default(),
        }
    }

    /// A name's value in the innermost scope that binds it.
    fn lookup(&self, name: &str) -> Option<&Value> {
        self.env
            .get(name)
            .or_else(|| self.outer.iter().rev().find_map(|m| m.get(name)))
    }

    fn walk_module(&mut self, body: &[Stmt]) {
        self.visit_body(body);
    }

    fn bind(&mut self, target: &Expr, value: Value) {
        match target {
            Expr::Name(n) => {
                self.env.insert(n.id.to_string(), value);
            }
            Expr::Tuple(ast::ExprTuple { elts, .. }) | Expr::List(ast::ExprList { elts, .. }) => {
                match value {
                    Value::List(vals) if vals.len() == elts.len() => {
                        for (t, v) in elts.iter().zip(vals) {
                            self.bind(t, v);
                        }
                    }
                    _ => {
                        for t in elts {
                            self.bind(t, Value::Unknown);
                        }
                    }
                }
            }
            _ => {}
        }
    }

    fn eval(&self, e: &Expr) -> Value {
        if self.depth > 64 {
            return Value::Unknown;
        }
        match e {
            Expr::StringLiteral(s) => {
                let mut t = Text::default();
                for lit in s.value.iter() {
                    string_literal_text(lit, self.source, &mut t);
                }
                Value::Str(t)
            }
            Expr::FString(f) => {
                let mut t = Text::default();
                for part in f.value.iter() {
                    match part {
                        ast::FStringPart::Literal(lit) => {
                            string_literal_text(lit, self.source, &mut t)
                        }
                        ast::FStringPart::FString(fs) => {
                            let is_raw = fs.flags.prefix().is_raw();
                            self.fstring_elements(&fs.elements, is_raw, &mut t);
                        }
                    }
                }
                Value::Str(t)
            }
            Expr::NumberLiteral(n) => {
                let mut t = Text::default();
                let r = n.range();
                t.push_verbatim(
                    &self.source[r.start().to_usize()..r.end().to_usize()],
                    r.start().to_usize(),
                );
                Value::Str(t)
            }
            Expr::Name(n) => self
                .lookup(n.id.as_str())
                .cloned()
                .unwrap_or(Value::Unknown),
            Expr::List(l) => Value::List(l.elts.iter().map(|x| self.eval(x)).collect()),
            Expr::Tuple(l) => Value::List(l.elts.iter().map(|x| self.eval(x)).collect()),
            Expr::BinOp(b) if b.op == Operator::Mod => match self.eval(&b.left) {
                Value::Str(t) => {
                    let values = match (b.right.as_ref(), self.eval(&b.right)) {
                        (Expr::Tuple(_), Value::List(items)) => items,
                        (_, v @ Value::Str(_)) => vec![v],
                        _ => Vec::new(),
                    };
                    Value::Str(percent_format(&t, &values))
                }
                _ => Value::Unknown,
            },
            Expr::BinOp(b) if b.op == Operator::Add => {
                match (self.eval(&b.left), self.eval(&b.right)) {
                    (Value::Str(mut a), Value::Str(c)) => {
                        a.append(&c);
                        Value::Str(a)
                    }
                    (Value::List(mut a), Value::List(c)) => {
                        a.extend(c);
                        Value::List(a)
                    }
                    _ => Value::Unknown,
                }
            }
            Expr::Call(c) => self.eval_call(c),
            _ => Value::Unknown,
        }
    }

    fn fstring_elements(
        &self,
        elems: &ast::InterpolatedStringElements,
        is_raw: bool,
        t: &mut Text,
    ) {
        for el in elems.iter() {
            match el {
                ast::InterpolatedStringElement::Literal(l) => {
                    let r = l.range();
                    let raw = &self.source[r.start().to_usize()..r.end().to_usize()];
                    decode_into(t, raw, r.start().to_usize(), is_raw, true);
                }
                ast::InterpolatedStringElement::Interpolation(i) => {
                    match self.eval(&i.expression) {
                        Value::Str(v) if i.format_spec.is_none() => t.append(&v),
                        _ => t.push_fixed(PLACEHOLDER, i.range().start().to_usize()),
                    }
                }
            }
        }
    }

    fn eval_call(&self, c: &ast::ExprCall) -> Value {
        let args = &c.arguments;
        if let Expr::Name(n) = c.func.as_ref() {
            if let Some((params, body)) = self.templates.get(n.id.as_str()) {
                // A source template: its returned expression with the arguments bound.
                let mut w = Walker::new(self.source, self.aliases, self.files, false);
                w.outer = match &self.final_env {
                    Some(f) => vec![f.clone()],
                    None => {
                        let mut o = self.outer.clone();
                        o.push(Rc::new(self.env.clone()));
                        o
                    }
                };
                w.templates = self.templates.clone();
                w.depth = self.depth + 8;
                for (k, p) in params.iter().enumerate() {
                    let arg = args
                        .args
                        .get(k)
                        .or_else(|| args.find_keyword(p).map(|kw| &kw.value));
                    let v = arg.map_or(Value::Unknown, |a| self.eval(a));
                    w.env.insert(p.clone(), v);
                }
                return w.eval(body);
            }
        }
        if let Expr::Attribute(a) = c.func.as_ref() {
            let method = a.attr.as_str();
            match method {
                "format" => {
                    if let Value::Str(base) = self.eval(&a.value) {
                        return Value::Str(self.format(&base, c));
                    }
                }
                "join" => {
                    if let (Value::Str(sep), Some(arg)) = (self.eval(&a.value), args.args.first()) {
                        if let Value::List(items) = self.eval(arg) {
                            let mut t = Text::default();
                            for (k, it) in items.iter().enumerate() {
                                if k > 0 {
                                    t.append(&sep);
                                }
                                if let Value::Str(s) = it {
                                    t.append(s);
                                }
                            }
                            return Value::Str(t);
                        }
                    }
                }
                "strip" | "lstrip" | "rstrip" if args.args.is_empty() => {
                    if let Value::Str(s) = self.eval(&a.value) {
                        let lead = if method == "rstrip" {
                            0
                        } else {
                            s.s.len() - s.s.trim_start().len()
                        };
                        let end = if method == "lstrip" {
                            s.s.len()
                        } else {
                            s.s.trim_end().len()
                        };
                        return Value::Str(s.slice(lead.min(end)..end));
                    }
                }
                "replace" if args.args.len() == 2 => {
                    if let (Value::Str(base), Value::Str(from), Value::Str(to)) = (
                        self.eval(&a.value),
                        self.eval(&args.args[0]),
                        self.eval(&args.args[1]),
                    ) {
                        return Value::Str(replace(&base, &from.s, &to));
                    }
                }
                _ => {}
            }
        }
        let q = qualname(&c.func, self.aliases).unwrap_or_default();
        let last = q.rsplit('.').next().unwrap_or("");
        match last {
            "dedent" | "str" | "cleandoc" => match args.args.first().map(|x| self.eval(x)) {
                Some(Value::Str(s)) if last == "dedent" || last == "cleandoc" => {
                    Value::Str(dedent(&s))
                }
                Some(v) => v,
                None => Value::Unknown,
            },
            "join" if q.ends_with("path.join") => {
                let parts: Vec<Text> = args
                    .args
                    .iter()
                    .filter_map(|x| match self.eval(x) {
                        Value::Str(s) => Some(s),
                        _ => None,
                    })
                    .collect();
                if parts.is_empty() {
                    return Value::Unknown;
                }
                let mut t = Text::default();
                for (k, p) in parts.iter().enumerate() {
                    if k > 0 {
                        let at = p.map.first().copied().unwrap_or(0) as usize;
                        t.push_fixed("/", at);
                    }
                    t.append(p);
                }
                Value::Str(t)
            }
            _ => Value::Unknown,
        }
    }

    /// The `.py` range a finding about a named file points at: a string literal's text
    /// (inside its quotes), else the expression.
    fn name_range(&self, expr: Range<usize>) -> Range<usize> {
        let written = &self.source[expr.clone()];
        let prefix = written
            .find(['"', '\''])
            .filter(|&q| written[..q].chars().all(|c| c.is_ascii_alphabetic()));
        match prefix {
            Some(q) => {
                let quote = &written[q..q + 1];
                let start = expr.start + q + 1;
                let end = written[q + 1..].find(quote).map_or(expr.end, |k| start + k);
                start..end.max(start + 1)
            }
            None => expr,
        }
    }

    /// `str.format`: `{{`/`}}` are braces; `{}`, `{0}`, `{name}` take the argument's text when it
    /// is known, else [`PLACEHOLDER`].
    fn format(&self, base: &Text, c: &ast::ExprCall) -> Text {
        let b = base.s.as_bytes();
        let mut t = Text::default();
        let mut auto = 0usize;
        let mut i = 0;
        while i < b.len() {
            let ch = b[i];
            if (ch == b'{' || ch == b'}') && b.get(i + 1) == Some(&ch) {
                t.push_fixed(if ch == b'{' { "{" } else { "}" }, base.map[i] as usize);
                i += 2;
                continue;
            }
            if ch == b'{' {
                let Some(close) = base.s[i..].find('}').map(|k| i + k) else {
                    t.append(&base.slice(i..b.len()));
                    break;
                };
                let field = &base.s[i + 1..close];
                let name_end = field
                    .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .unwrap_or(field.len());
                let name = &field[..name_end];
                let arg = if name.is_empty() {
                    auto += 1;
                    c.arguments.args.get(auto - 1)
                } else if let Ok(k) = name.parse::<usize>() {
                    c.arguments.args.get(k)
                } else {
                    c.arguments.find_keyword(name).map(|k| &k.value)
                };
                let plain = name_end == field.len();
                match arg.map(|a| self.eval(a)) {
                    Some(Value::Str(v)) if plain => t.append(&v),
                    _ => t.push_fixed(PLACEHOLDER, base.map[i] as usize),
                }
                i = close + 1;
                continue;
            }
            let next = base.s[i..]
                .find(['{', '}'])
                .map_or(b.len(), |k| i + k)
                .max(i + 1);
            t.append(&base.slice(i..next));
            i = next;
        }
        t
    }

    fn extract_call(&mut self, call: &ast::ExprCall, loader: Loader) {
        let args = &call.arguments;
        let mut es = EmbeddedSource {
            text: String::new(),
            map: Vec::new(),
            parts: Vec::new(),
            functions: None,
            name: None,
            call: call.range().start().to_usize()..call.range().end().to_usize(),
            loader,
            missing_files: Vec::new(),
            unresolved: Vec::new(),
            per_thread_stream_flags: Vec::new(),
        };
        let mut text = Text::default();
        let push_part = |text: &mut Text,
                         es: &mut EmbeddedSource,
                         t: &Text,
                         lang: Lang,
                         file: Option<PathBuf>,
                         shown: Option<String>| {
            let start = text.s.len();
            text.append(t);
            let nl_at = t.map.last().copied().unwrap_or(es.call.start as u32) as usize;
            text.push_fixed("\n", nl_at);
            es.parts.push(Part {
                lang,
                range: start..text.s.len(),
                file,
                shown,
                header: false,
            });
        };
        let strings = |v: Value| -> Vec<Text> {
            match v {
                Value::Str(s) => vec![s],
                Value::List(items) => items
                    .into_iter()
                    .filter_map(|i| match i {
                        Value::Str(s) => Some(s),
                        _ => None,
                    })
                    .collect(),
                Value::Unknown => vec![],
            }
        };
        for kw in ["extra_cuda_cflags", "extra_cflags"] {
            if let Some(e) = args.find_keyword(kw) {
                for t in strings(self.eval(&e.value)) {
                    if t.s.contains("per-thread") || t.s.contains("PER_THREAD_DEFAULT_STREAM") {
                        let at = t.map.first().copied().unwrap_or(es.call.start as u32) as usize;
                        let end = t.map.last().map_or(at, |&m| m as usize + 1);
                        es.per_thread_stream_flags.push(at..end.max(at + 1));
                    }
                }
            }
        }
        es.name = match args.find_argument_value("name", 0).map(|e| self.eval(e)) {
            Some(Value::Str(t)) => Some(t.s),
            _ => None,
        };
        match loader {
            Loader::Inline => {
                for (kw, pos, lang) in [
                    ("cpp_sources", 1, Lang::Cpp),
                    ("cuda_sources", 2, Lang::Cuda),
                ] {
                    if let Some(e) = args.find_argument_value(kw, pos) {
                        let v = self.eval(e);
                        let known = match &v {
                            Value::Unknown => false,
                            Value::List(items) => items.iter().all(|i| matches!(i, Value::Str(_))),
                            Value::Str(_) => true,
                        };
                        if !known && !matches!(e, Expr::NoneLiteral(_)) {
                            let r = e.range();
                            es.unresolved.push(r.start().to_usize()..r.end().to_usize());
                        }
                        for t in strings(v) {
                            push_part(&mut text, &mut es, &t, lang, None, None);
                        }
                    }
                }
                if let Some(e) = args.find_argument_value("functions", 3) {
                    es.functions = match self.eval(e) {
                        Value::Unknown => None,
                        v => Some(strings(v).into_iter().map(|t| t.s).collect()),
                    };
                }
            }
            Loader::Files => {
                // The paths as the dependency analysis resolves them (`_here`, `__file__`,
                // pathlib), read inside the repository only.
                let named: Vec<(String, Range<usize>)> = self
                    .loaded
                    .iter()
                    .filter(|l| l.call == es.call)
                    .filter_map(|l| Some((l.path.clone()?, self.name_range(l.expr.clone()))))
                    .collect();
                for (rel, name) in named {
                    let at = name.start;
                    let lang = match rel.rsplit_once('.').map(|(_, x)| x) {
                        Some("cu" | "cuh") => Lang::Cuda,
                        _ => Lang::Cpp,
                    };
                    match self
                        .files
                        .and_then(|f| Some((f.read(&rel)?, f.shown(&rel))))
                    {
                        Some((content, shown)) => {
                            let mut ft = Text::default();
                            ft.push_fixed(&content, at);
                            push_part(
                                &mut text,
                                &mut es,
                                &ft,
                                lang,
                                Some(PathBuf::from(&rel)),
                                Some(shown),
                            );
                        }
                        None => es.missing_files.push((PathBuf::from(&rel), name)),
                    }
                }
            }
        }
        es.text = text.s;
        es.map = text.map;
        self.out.push(es);
    }
}

impl<'a> Visitor<'a> for Walker<'_> {
    fn visit_stmt(&mut self, stmt: &'a Stmt) {
        match stmt {
            Stmt::FunctionDef(f) => {
                // `def make_source(op): return f"..."`: calls of it are evaluated.
                let body: Vec<&Stmt> = f
                    .body
                    .iter()
                    .filter(|s| !matches!(s, Stmt::Expr(e) if e.value.is_string_literal_expr()))
                    .collect();
                if let [Stmt::Return(ast::StmtReturn { value: Some(v), .. })] = body.as_slice() {
                    let params = f
                        .parameters
                        .args
                        .iter()
                        .map(|p| p.parameter.name.to_string())
                        .collect();
                    self.templates
                        .insert(f.name.to_string(), (params, v.clone()));
                }
                if !self.collect {
                    return;
                }
                for d in &f.decorator_list {
                    self.visit_expr(&d.expression);
                }
                // A body runs after the module: it sees the final module names, plus its own.
                let saved_env = std::mem::take(&mut self.env);
                let saved_outer =
                    std::mem::replace(&mut self.outer, self.final_env.iter().cloned().collect());
                self.depth += 1;
                self.visit_body(&f.body);
                self.depth -= 1;
                self.env = saved_env;
                self.outer = saved_outer;
            }
            Stmt::ClassDef(c) => {
                if !self.collect {
                    return;
                }
                // Class attributes do not outlive the class body.
                let enclosing = Rc::new(std::mem::take(&mut self.env));
                self.outer.push(enclosing);
                self.visit_body(&c.body);
                let enclosing = self.outer.pop().expect("pushed above");
                self.env = Rc::try_unwrap(enclosing).unwrap_or_else(|shared| (*shared).clone());
            }
            Stmt::Assign(a) => {
                self.visit_expr(&a.value);
                let v = self.eval(&a.value);
                for t in &a.targets {
                    self.bind(t, v.clone());
                }
            }
            Stmt::AnnAssign(a) => {
                if let Some(value) = &a.value {
                    self.visit_expr(value);
                    let v = self.eval(value);
                    self.bind(&a.target, v);
                }
            }
            Stmt::AugAssign(a) => {
                self.visit_expr(&a.value);
                if let Expr::Name(n) = a.target.as_ref() {
                    let cur = self
                        .lookup(n.id.as_str())
                        .cloned()
                        .unwrap_or(Value::Unknown);
                    let new = match (a.op, cur, self.eval(&a.value)) {
                        (Operator::Add, Value::Str(mut x), Value::Str(y)) => {
                            x.append(&y);
                            Value::Str(x)
                        }
                        (Operator::Add, Value::List(mut x), Value::List(y)) => {
                            x.extend(y);
                            Value::List(x)
                        }
                        _ => Value::Unknown,
                    };
                    self.env.insert(n.id.to_string(), new);
                }
            }
            _ => visitor::walk_stmt(self, stmt),
        }
    }

    fn visit_expr(&mut self, expr: &'a Expr) {
        if self.collect {
            if let Expr::Call(call) = expr {
                if let Some(loader) = loader_of(call, self.aliases) {
                    self.extract_call(call, loader);
                }
            }
        }
        visitor::walk_expr(self, expr);
    }
}

/// `str.replace` keeping the map: replacement text points at the start of what it replaced.
fn replace(base: &Text, from: &str, to: &Text) -> Text {
    if from.is_empty() {
        return base.clone();
    }
    let mut out = Text::default();
    let mut pos = 0;
    while let Some(k) = base.s[pos..].find(from) {
        let at = pos + k;
        out.append(&base.slice(pos..at));
        let origin = base.map[at] as usize;
        out.push_fixed(&to.s, origin);
        pos = at + from.len();
    }
    out.append(&base.slice(pos..base.s.len()));
    out
}

/// `"..." % args`: `%%` is `%`, every conversion (`%s`, `%d`, `%(name)s`, `%5.2f`) becomes
/// [`PLACEHOLDER`].
fn percent_format(base: &Text, values: &[Value]) -> Text {
    let mut next_value = values.iter();
    let b = base.s.as_bytes();
    let mut out = Text::default();
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'%' {
            let next = base.s[i..].find('%').map_or(b.len(), |k| i + k);
            out.append(&base.slice(i..next));
            i = next;
            continue;
        }
        if b.get(i + 1) == Some(&b'%') {
            out.push_fixed("%", base.map[i] as usize);
            i += 2;
            continue;
        }
        let mut j = i + 1;
        if b.get(j) == Some(&b'(') {
            j = base.s[j..].find(')').map_or(b.len(), |k| j + k + 1);
        }
        while j < b.len() && !b[j].is_ascii_alphabetic() {
            j += 1;
        }
        // `%s` of a known string is filled in (`%(name)s` and other conversions are not).
        let plain = b.get(i + 1) == Some(&b's');
        match next_value.next() {
            Some(Value::Str(v)) if plain => out.append(v),
            _ => out.push_fixed(PLACEHOLDER, base.map[i] as usize),
        }
        i = (j + 1).min(b.len());
    }
    out
}

/// `textwrap.dedent` keeping the map: drops the common leading whitespace of non-blank lines.
fn dedent(t: &Text) -> Text {
    let common =
        t.s.split('\n')
            .filter(|l| !l.trim().is_empty())
            .map(|l| l.len() - l.trim_start_matches([' ', '\t']).len())
            .min()
            .unwrap_or(0);
    let mut out = Text::default();
    let mut pos = 0;
    for line in t.s.split_inclusive('\n') {
        let ws = line.len() - line.trim_start_matches([' ', '\t']).len();
        let skip = if line.trim().is_empty() {
            ws.min(line.trim_end_matches('\n').len())
        } else {
            common.min(ws)
        };
        out.append(&t.slice(pos + skip..pos + line.len()));
        pos += line.len();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ext(src: &str) -> Vec<EmbeddedSource> {
        let parsed = ruff_python_parser::parse_module(src).expect("valid python");
        extract(parsed.syntax(), src)
    }

    /// The `.py` text at the position a text offset maps to.
    fn at(es: &EmbeddedSource, py: &str, needle: &str) -> String {
        let off = es
            .text
            .find(needle)
            .unwrap_or_else(|| panic!("{needle:?} not in {:?}", es.text));
        py[es.py_offset(off)..].chars().take(needle.len()).collect()
    }

    #[test]
    fn plain_literal_maps_every_byte() {
        let py = "from torch.utils.cpp_extension import load_inline\nsrc = \"\"\"\n__global__ void k(float* x) {}\n\"\"\"\nm = load_inline(name='m', cpp_sources='', cuda_sources=src, functions=['f'])\n";
        let e = ext(py);
        assert_eq!(e.len(), 1);
        assert!(e[0].text.contains("__global__ void k"));
        assert_eq!(at(&e[0], py, "__global__"), "__global__");
        assert_eq!(e[0].functions.as_deref(), Some(&["f".to_string()][..]));
        assert!(e[0].has_cuda());
    }

    #[test]
    fn escapes_map_to_their_backslash_and_following_text_stays_aligned() {
        let py = "import torch.utils.cpp_extension as ce\nm = ce.load_inline('m', cuda_sources='a\\tb\\n\\x41 cublasSgemm(x)')\n";
        let e = ext(py);
        assert_eq!(e[0].text, "a\tb\nA cublasSgemm(x)\n");
        let t = e[0].text.find('\t').unwrap();
        assert_eq!(&py[e[0].py_offset(t)..e[0].py_offset(t) + 2], "\\t");
        assert_eq!(at(&e[0], py, "cublasSgemm"), "cublasSgemm");
    }

    #[test]
    fn raw_strings_keep_backslashes() {
        let py = "from torch.utils.cpp_extension import load_inline as li\nm = li('m', cpp_sources=r'a\\n b')\n";
        let e = ext(py);
        assert_eq!(e[0].text, "a\\n b\n");
        assert_eq!(at(&e[0], py, "b"), "b");
    }

    #[test]
    fn concatenation_names_and_reassignment() {
        let py = "from torch.utils.cpp_extension import load_inline\nA = 'int a;'\nB = A + ' int b;'\nB += ' int c;'\nS = ('x' 'y')\ndef build():\n    return load_inline('m', cpp_sources=[B, S])\n";
        let e = ext(py);
        assert_eq!(e[0].text, "int a; int b; int c;\nxy\n");
        assert_eq!(at(&e[0], py, "int c"), "int c");
        assert_eq!(at(&e[0], py, "int a"), "int a");
        assert_eq!(e[0].parts.len(), 2);
    }

    #[test]
    fn fstrings_and_format_fill_known_values_and_placeholders() {
        let py = "from torch.utils.cpp_extension import load_inline\nBS = 256\nT = 'float'\nsrc = f'{T} x[{BS}]; {{ {unknown} }} y'\nsrc2 = '{{ {0} {n} }} z'.format(T, n=q)\nload_inline('m', cuda_sources=[src, src2])\n";
        let e = ext(py);
        assert_eq!(e[0].text, "float x[256]; { _kg_ } y\n{ float _kg_ } z\n");
        assert_eq!(at(&e[0], py, "y\n"), "y'");
        assert_eq!(at(&e[0], py, "z"), "z");
        let off = e[0].text.find("_kg_").unwrap();
        assert_eq!(
            &py[e[0].py_offset(off)..e[0].py_offset(off) + 9],
            "{unknown}"
        );
    }

    #[test]
    fn dedent_keeps_positions() {
        let py = "import textwrap\nfrom torch.utils.cpp_extension import load_inline\nsrc = textwrap.dedent('''\n    int a;\n      int b;\n''')\nload_inline('m', cpp_sources=src)\n";
        let e = ext(py);
        assert_eq!(e[0].text, "\nint a;\n  int b;\n\n");
        assert_eq!(at(&e[0], py, "int b"), "int b");
    }

    #[test]
    fn load_with_files_reads_relative_to_the_py() {
        let dir = std::env::temp_dir().join(format!("kg-emb-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("k.cu"), "__global__ void k() {}\n").unwrap();
        let py = "from torch.utils import cpp_extension\nm = cpp_extension.load(name='m', sources=['k.cu', 'gone.cpp'])\n";
        let parsed = ruff_python_parser::parse_module(py).unwrap();
        let e = extract_in(parsed.syntax(), py, Some(&dir));
        assert_eq!(e[0].loader, Loader::Files);
        assert!(e[0].text.starts_with("__global__ void k"));
        assert_eq!(e[0].parts[0].lang, Lang::Cuda);
        assert_eq!(&py[e[0].py_offset(5)..e[0].py_offset(5) + 4], "k.cu");
        assert_eq!(e[0].file_location(11), " (k.cu:1:12)");
        assert_eq!(e[0].missing_files.len(), 1);
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn replace_and_percent_formatting() {
        let py = "from torch.utils.cpp_extension import load_inline\nsrc = 'XX(h); int n = %d; %%'.replace('XX', 'cublas' + 'Create') % 4\nload_inline('m', cpp_sources='', cuda_sources=src)\n";
        let e = ext(py);
        assert_eq!(e[0].text, "\ncublasCreate(h); int n = _kg_; %\n");
        assert_eq!(at(&e[0], py, "(h)"), "(h)");
        assert!(e[0].unresolved.is_empty());
        assert_eq!(&py[e[0].py_offset(1)..e[0].py_offset(1) + 2], "XX");
    }

    #[test]
    fn sources_that_cannot_be_resolved_are_reported() {
        let py = "from torch.utils.cpp_extension import load_inline\nimport base64\nload_inline('m', cpp_sources=None, cuda_sources=[base64.b64decode(B).decode()])\n";
        let e = ext(py);
        assert_eq!(e[0].unresolved.len(), 1);
        assert_eq!(
            &py[e[0].unresolved[0].clone()],
            "[base64.b64decode(B).decode()]"
        );
    }

    #[test]
    fn unrelated_calls_are_ignored() {
        let py = "import torch\nx = torch.load('w.pt')\nprint('load_inline(cuda_sources=1)')\n";
        assert!(ext(py).is_empty());
    }

    #[test]
    fn extension_names_are_known_when_literal_or_resolved_and_none_otherwise() {
        let py = "from torch.utils.cpp_extension import load_inline, load\nNAME = 'b_ext'\nm = load_inline(name='a_ext', cpp_sources='')\nn = load_inline(NAME, cpp_sources='')\no = load(name='c_ext', sources=['k.cpp'])\n";
        assert_eq!(
            extension_names(py),
            Some(vec!["a_ext".into(), "b_ext".into(), "c_ext".into()])
        );
        assert_eq!(extension_names("import torch\nx = 1\n"), Some(vec![]));
        let computed = "from torch.utils.cpp_extension import load_inline\nimport os\nm = load_inline(name=os.environ['N'], cpp_sources='')\n";
        assert_eq!(extension_names(computed), None);
        assert_eq!(extension_names("def (:"), None);
    }
}
