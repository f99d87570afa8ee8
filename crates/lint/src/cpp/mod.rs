//! Rules for the C++/CUDA sources of an extension (KG6xx). The sources come from
//! [`crate::embedded::extract`]; they are parsed with tree-sitter-cuda, so comments and string
//! literals never trigger a rule, and every finding is mapped back into the `.py` file.
//!
//! One walk over the tree ([`Analyzer`]) records a model of the extension and raises findings:
//! `syntax` (the parser and fast node access) → `visit` (the walk, which only dispatches) →
//! `resolve` (names), `preproc` (`#include`, macros, `asm`), `decls` (functions, declarations),
//! `calls` (launches, methods, free functions) → `model` (what is recorded per function) →
//! `rules/*` (each rule family's judgement, many of them in [`Analyzer::finish`]).

mod calls;
mod decls;
pub mod device_store;
pub mod macros;
mod model;
pub mod names;
mod preproc;
mod resolve;
pub(crate) mod rules;
mod syntax;
mod visit;

use crate::embedded::{EmbeddedSource, PLACEHOLDER};
use crate::python::ArgKind;
use crate::rule::{Context, RawFinding, Rule};
use kernelgate_model::Precision;
use macros::{expand, tokenize, Macro};
use model::*;
use names::*;
use rules::concurrency::StreamKind;
use rules::decoy::pure_device_call;
use rules::tampering::result_like;
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::ops::Range;
pub use syntax::parse;
use syntax::*;
use tree_sitter::{Node, Tree, TreeCursor};

/// Runs every C++/CUDA rule on one extension.
pub fn check(src: &EmbeddedSource, ctx: &Context) -> Vec<RawFinding> {
    check_full(src, ctx, &HashMap::default()).findings
}

/// The C++/CUDA rules' findings and which exported functions do work of their own.
pub struct CppOutput {
    pub findings: Vec<RawFinding>,
    /// Python names of exported functions that launch a kernel that does work (not a decoy),
    /// or, in CPU C++, store into a tensor's data themselves.
    pub working_exports: Vec<String>,
    /// Python names of exported functions that may launch a working kernel through a path the
    /// analysis does not follow (the kernel handed on as a value), with why.
    pub maybe_working_exports: Vec<(String, String)>,
}

/// Which exported functions provably do work, and which may.
#[derive(Debug, Default)]
pub(in crate::cpp) struct Exports {
    pub(in crate::cpp) working: Vec<String>,
    pub(in crate::cpp) maybe: Vec<(String, String)>,
}

/// [`check`] knowing, per Python name of an exported function, what `forward` passes it
/// (from the Python call sites): a parameter that only ever receives the candidate's own
/// buffers (a workspace, partial sums) is not an input, and writing it is not KG608.
pub fn check_full(
    src: &EmbeddedSource,
    ctx: &Context,
    py_args: &HashMap<String, Vec<ArgKind>>,
) -> CppOutput {
    // Sources that could not be read, and build flags: judged without parsing.
    let mut raws: Vec<RawFinding> = rules::sources::unread_source_findings(src)
        .into_iter()
        .chain(rules::concurrency::per_thread_stream_findings(src))
        .map(|(code, range, message)| RawFinding::new(code, range, message))
        .collect();
    if src.text.trim().is_empty() {
        return CppOutput {
            findings: raws,
            working_exports: Vec::new(),
            maybe_working_exports: Vec::new(),
        };
    }
    let Some(tree) = parse(&src.text) else {
        return CppOutput {
            findings: raws,
            working_exports: Vec::new(),
            maybe_working_exports: Vec::new(),
        };
    };
    let mut a = Analyzer::new(&src.text, ctx.precision);
    a.backend = ctx.backend;
    a.py_args = py_args;
    a.created_streams = rules::concurrency::created_streams(tree.root_node(), &src.text);
    a.visit(tree.root_node());
    let exports = a.finish(src);
    // Side streams joined back into the caller's stream before the function returns: nothing
    // escapes the timer, so a warning (the runtime leak check decides).
    let joined: Vec<Range<usize>> = a
        .funcs
        .iter()
        .filter(|f| f.joins_caller && f.records_event)
        .map(|f| f.range.clone())
        .collect();
    a.findings
        .extend(device_store::check(tree.root_node(), &src.text));

    let mut seen: HashSet<(Rule, usize, String)> = HashSet::default();
    a.findings.sort_by_key(|f| f.1.start);
    // Errors first, so a warning on a line that has an error of the same rule is dropped.
    let soft_from = a.findings.len();
    a.soft_findings.sort_by_key(|f| f.1.start);
    a.findings.append(&mut a.soft_findings);
    for (k, (code, range, msg)) in a.findings.into_iter().enumerate() {
        if code == Rule::KG610 && ctx.precision != Precision::Fp32 {
            continue;
        }
        // A shared header may define kernels that other kernels launch: not this one's decoys.
        if matches!(code, Rule::KG611 | Rule::KG612) && src.in_header(range.start) {
            continue;
        }
        let py = src.py_range(range.clone());
        // One finding per rule and line; text read from a file keeps its own lines, and the
        // finding names that file and line.
        let at = src.file_position(range.start).map(|(file, line, column)| {
            let len = src
                .text
                .get(range.clone())
                .and_then(|t| t.lines().next())
                .map_or(1, |l| l.chars().count().max(1)) as u32;
            crate::rule::FileAt {
                file,
                line,
                column,
                end_column: column + len,
            }
        });
        let file_line = at
            .as_ref()
            .map_or(String::new(), |a| format!("{}:{}", a.file, a.line));
        if !seen.insert((code, ctx.lines.line_of(py.start), file_line)) {
            continue;
        }
        if code == Rule::KG603 && joined.iter().any(|j| j.contains(&range.start)) {
            raws.push(
                RawFinding::new(code, py, format!("{msg}; it is joined back into the caller's stream with events (`cudaEventRecord` + `cudaStreamWaitEvent`), so a warning: the runtime leak check decides"))
                    .warning()
                    .at(at),
            );
            continue;
        }
        let raw = RawFinding::new(code, py, msg).at(at);
        raws.push(if k >= soft_from { raw.warning() } else { raw });
    }
    CppOutput {
        findings: raws,
        working_exports: exports.working,
        maybe_working_exports: exports.maybe,
    }
}

struct Analyzer<'t> {
    text: &'t str,
    precision: Precision,
    findings: Vec<(Rule, Range<usize>, String)>,
    macros: HashMap<String, Macro>,
    funcs: Vec<Func>,
    cur: Option<usize>,
    state: FnState<'t>,
    using_torch: bool,
    pybind_exports: Vec<String>,
    unqualified_ops: Vec<(String, Range<usize>)>,
    /// `namespace F = torch::nn::functional;` aliases.
    ns_aliases: HashMap<String, String>,
    /// Structs and classes with a tensor member.
    tensor_structs: HashSet<String>,
    /// A CUTLASS or CuTe header is included: its kernels are the extension's own.
    uses_cutlass: bool,
    /// Static or namespace-level pointers: memory that outlives a call.
    static_ptrs: HashSet<String>,
    backend: Option<kernelgate_model::Backend>,
    /// Spare tree cursors: `Node::walk` allocates, and the walk needs one per level.
    cursors: Vec<TreeCursor<'t>>,
    /// Inside a branch only half/bf16 inputs take (`if (x.scalar_type() == at::kHalf)`) on an
    /// fp32 problem: reduced-precision code there never runs.
    half_depth: u32,
    /// The tests of the enclosing branches that look at the dtype but that the analysis cannot
    /// decide (`if (is_half(x))`, `if (a || b)`): code there is not proven to run on fp32.
    dtype_tests: Vec<String>,
    /// `m.def("py_name", &cpp_name)`: Python name -> C++ function.
    pybind_names: Vec<(String, String)>,
    /// What `forward` passes each exported function (by Python name).
    py_args: &'t HashMap<String, Vec<ArgKind>>,
    /// Stream variables created by address (`cudaStreamCreate(&s)`) anywhere in the source.
    created_streams: HashSet<String>,
    /// Launches on a stream not traced while walking: (stream's range, message start, the
    /// stream's text, the helper whose return decides), judged in `finish`.
    pending_streams: Vec<(Range<usize>, String, String, Option<String>)>,
    /// Findings the analysis reports as warnings (what it could not prove).
    soft_findings: Vec<(Rule, Range<usize>, String)>,
}

const METADATA_METHODS: [&str; 20] = [
    "size",
    "sizes",
    "numel",
    "dim",
    "stride",
    "strides",
    "options",
    "dtype",
    "scalar_type",
    "device",
    "is_contiguous",
    "is_cuda",
    "type",
    "get_device",
    "ndimension",
    "element_size",
    "nbytes",
    "defined",
    "itemsize",
    "layout",
];

impl<'t> Analyzer<'t> {
    fn new(text: &'t str, precision: Precision) -> Self {
        Analyzer {
            text,
            precision,
            findings: Vec::new(),
            macros: HashMap::default(),
            funcs: Vec::new(),
            cur: None,
            state: FnState::default(),
            using_torch: false,
            pybind_exports: Vec::new(),
            unqualified_ops: Vec::new(),
            ns_aliases: HashMap::default(),
            tensor_structs: HashSet::default(),
            uses_cutlass: false,
            static_ptrs: HashSet::default(),
            backend: None,
            cursors: Vec::new(),
            half_depth: 0,
            dtype_tests: Vec::new(),
            pybind_names: Vec::new(),
            py_args: &NO_ARGS,
            created_streams: HashSet::default(),
            pending_streams: Vec::new(),
            soft_findings: Vec::new(),
        }
    }

    /// A cursor from the spare ones (give it back with `self.cursors.push`).
    pub(in crate::cpp) fn cursor(&mut self, node: Node<'t>) -> TreeCursor<'t> {
        match self.cursors.pop() {
            Some(mut c) => {
                c.reset(node);
                c
            }
            None => node.walk(),
        }
    }

    pub(in crate::cpp) fn t(&self, n: Node) -> &'t str {
        &self.text[n.byte_range()]
    }

    pub(in crate::cpp) fn flag(&mut self, code: Rule, range: Range<usize>, msg: String) {
        if code == Rule::KG610 && (self.precision != Precision::Fp32 || self.half_depth > 0) {
            return;
        }
        if code == Rule::KG610 {
            if let Some(test) = self.dtype_tests.last() {
                let why = format!("it is on a branch of `{test}`, a dtype test the analysis cannot decide, so it is not proven to run on this fp32 problem");
                self.unproven(code, range, msg, &why);
                return;
            }
        }
        self.findings.push((code, range, msg));
    }

    /// A finding whose claim the analysis could not prove: reported as a warning, saying why.
    pub(in crate::cpp) fn unproven(
        &mut self,
        code: Rule,
        range: Range<usize>,
        msg: String,
        why: &str,
    ) {
        let msg = format!("{msg}{}", crate::rule::unproven_note(why));
        self.soft_findings.push((code, range, msg));
    }

    pub(in crate::cpp) fn finish(&mut self, src: &EmbeddedSource) -> Exports {
        self.judge_pending_streams();
        self.judge_precision_reach();
        self.drop_half_overloads();
        self.returned_inputs();
        self.input_writes();
        let defined: HashSet<String> = self.funcs.iter().map(|f| f.name.clone()).collect();
        for (name, range) in std::mem::take(&mut self.unqualified_ops) {
            if !defined.contains(&name) {
                self.torch_op(range, format!("`{name}(...)` (with `using namespace torch/at`) runs a PyTorch op inside the extension"));
            }
        }
        self.decoy_kernels(src)
    }
}

static NO_ARGS: std::sync::LazyLock<HashMap<String, Vec<ArgKind>>> =
    std::sync::LazyLock::new(HashMap::default);

#[cfg(test)]
mod tests;
