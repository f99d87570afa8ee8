//! Rules for the C++/CUDA sources of an extension (KG6xx). The sources come from
//! [`crate::embedded::extract`]; they are parsed with tree-sitter-cuda, so comments and string
//! literals never trigger a rule, and every finding is mapped back into the `.py` file.

pub mod device_store;
pub mod macros;
pub mod names;
pub(crate) mod rules;

use crate::embedded::{EmbeddedSource, PLACEHOLDER};
use crate::python::ArgKind;
use crate::rule::{Context, RawFinding, Rule};
use kernelgate_model::Precision;
use macros::{expand, tokenize, Macro};
use names::*;
use rules::concurrency::StreamKind;
use rules::decoy::pure_device_call;
use rules::tampering::result_like;
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::cell::RefCell;
use std::ops::Range;
use tree_sitter::{Node, Parser, Tree, TreeCursor};

thread_local! {
    // One parser per thread: creating one costs more than parsing a small kernel.
    static PARSER: RefCell<Option<Parser>> = const { RefCell::new(None) };
}

/// Field names the rules ask for, in the order of [`Tables::fields`].
const FIELDS: [&str; 17] = [
    "argument",
    "arguments",
    "body",
    "declarator",
    "field",
    "function",
    "left",
    "name",
    "parameters",
    "path",
    "right",
    "scope",
    "type",
    "value",
    "operator",
    "condition",
    "alternative",
];

/// Node kind names by kind id and field ids by name, looked up once: `Node::kind` measures and
/// UTF-8-checks a C string on every call and `child_by_field_name` compares the name against
/// every field of the grammar, which together cost more than the rules themselves.
struct Tables {
    kinds: Vec<&'static str>,
    /// What [`Analyzer::enter`] does with a node, by kind id.
    classes: Vec<NodeClass>,
    fields: [u16; FIELDS.len()],
}

/// The node kinds [`Analyzer::enter`] acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NodeClass {
    Other,
    /// Comments and strings: words in them are not code.
    Skip,
    Include,
    Define,
    Function,
    Asm,
    Qualified,
    Identifier,
    TypeIdentifier,
    FieldIdentifier,
    Call,
    Declaration,
    Assignment,
    Update,
    Return,
    Using,
    NsAlias,
    If,
    PreprocIf,
    Binary,
    FieldDecl,
    Case,
    Template,
}

impl NodeClass {
    fn of(kind: &str) -> NodeClass {
        match kind {
            "comment"
            | "string_literal"
            | "raw_string_literal"
            | "char_literal"
            | "concatenated_string"
            | "system_lib_string" => NodeClass::Skip,
            "preproc_include" => NodeClass::Include,
            "preproc_def" | "preproc_function_def" => NodeClass::Define,
            "function_definition" => NodeClass::Function,
            "gnu_asm_expression" => NodeClass::Asm,
            "qualified_identifier" => NodeClass::Qualified,
            "identifier" => NodeClass::Identifier,
            "type_identifier" => NodeClass::TypeIdentifier,
            "field_identifier" => NodeClass::FieldIdentifier,
            "call_expression" => NodeClass::Call,
            "declaration" => NodeClass::Declaration,
            "assignment_expression" => NodeClass::Assignment,
            "update_expression" => NodeClass::Update,
            "return_statement" => NodeClass::Return,
            "using_declaration" => NodeClass::Using,
            "namespace_alias_definition" => NodeClass::NsAlias,
            "if_statement" => NodeClass::If,
            "preproc_if" => NodeClass::PreprocIf,
            "binary_expression" => NodeClass::Binary,
            "field_declaration" => NodeClass::FieldDecl,
            "case_statement" => NodeClass::Case,
            "template_declaration" => NodeClass::Template,
            _ => NodeClass::Other,
        }
    }
}

static TABLES: std::sync::LazyLock<Tables> = std::sync::LazyLock::new(|| {
    let lang: tree_sitter::Language = tree_sitter_cuda::LANGUAGE.into();
    let kinds: Vec<&'static str> = (0..lang.node_kind_count() as u16)
        .map(|id| lang.node_kind_for_id(id).unwrap_or(""))
        .collect();
    let classes = kinds.iter().map(|k| NodeClass::of(k)).collect();
    let fields = FIELDS.map(|f| lang.field_id_for_name(f).map_or(0, |id| id.get()));
    Tables {
        kinds,
        classes,
        fields,
    }
});

/// Fast `kind()` and `child_by_field_name()` through [`TABLES`].
trait NodeExt<'t> {
    fn kind_fast(&self) -> &'static str;
    fn field(&self, name: &str) -> Option<Node<'t>>;
}

impl<'t> NodeExt<'t> for Node<'t> {
    #[inline]
    fn kind_fast(&self) -> &'static str {
        TABLES
            .kinds
            .get(self.kind_id() as usize)
            .copied()
            .unwrap_or("")
    }

    #[inline]
    fn field(&self, name: &str) -> Option<Node<'t>> {
        match FIELDS.iter().position(|f| *f == name) {
            Some(i) if TABLES.fields[i] != 0 => self.child_by_field_id(TABLES.fields[i]),
            // A name outside the table: the slow path, still correct.
            _ => self.child_by_field_name(name),
        }
    }
}

/// Hands tree-sitter's C allocations to mimalloc: a parse allocates and frees a stack node or a
/// subtree per token, and glibc's malloc was a tenth of the linter's time. Runs once, before this
/// process's first parser exists (every parser is made in [`parse`]), so no tree-sitter memory
/// is ever freed by an allocator other than the one that allocated it.
fn use_mimalloc_for_tree_sitter() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: no tree-sitter object exists yet (see above), and the mimalloc functions have
        // the C signatures tree-sitter expects of malloc, calloc, realloc and free.
        unsafe {
            tree_sitter::set_allocator(
                Some(libmimalloc_sys::mi_malloc),
                Some(libmimalloc_sys::mi_calloc),
                Some(libmimalloc_sys::mi_realloc),
                Some(libmimalloc_sys::mi_free),
            )
        }
    });
}

/// Parses C++/CUDA text with tree-sitter-cuda (the C++ grammar does not know `<<<...>>>`).
pub fn parse(text: &str) -> Option<Tree> {
    use_mimalloc_for_tree_sitter();
    PARSER.with(|p| {
        let mut p = p.borrow_mut();
        if p.is_none() {
            let mut parser = Parser::new();
            parser
                .set_language(&tree_sitter_cuda::LANGUAGE.into())
                .ok()?;
            *p = Some(parser);
        }
        p.as_mut()?.parse(text, None)
    })
}

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
        };
    }
    let Some(tree) = parse(&src.text) else {
        return CppOutput {
            findings: raws,
            working_exports: Vec::new(),
        };
    };
    let mut a = Analyzer::new(&src.text, ctx.precision);
    a.backend = ctx.backend;
    a.py_args = py_args;
    a.created_streams = rules::concurrency::created_streams(tree.root_node(), &src.text);
    a.visit(tree.root_node());
    let working_exports = a.finish(src);
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
        let py = src.py_range(range.clone());
        // One finding per rule and line; text read from a file keeps its own lines.
        let loc = src.file_location(range.start);
        let file_line = loc
            .rsplit_once(':')
            .map_or(String::new(), |(l, _)| l.to_string());
        if !seen.insert((code, ctx.lines.line_of(py.start), file_line)) {
            continue;
        }
        if code == Rule::KG603 && joined.iter().any(|j| j.contains(&range.start)) {
            raws.push(
                RawFinding::new(code, py, format!("{msg}{loc}; it is joined back into the caller's stream with events (`cudaEventRecord` + `cudaStreamWaitEvent`), so a warning: the runtime leak check decides"))
                    .warning(),
            );
            continue;
        }
        let raw = RawFinding::new(code, py, format!("{msg}{loc}"));
        raws.push(if k >= soft_from { raw.warning() } else { raw });
    }
    CppOutput {
        findings: raws,
        working_exports,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FuncKind {
    Global,
    Device,
    Host,
}

#[derive(Debug)]
struct Param {
    name: String,
    is_tensor: bool,
}

#[derive(Debug)]
struct Func {
    name: String,
    name_range: Range<usize>,
    /// The whole definition.
    range: Range<usize>,
    kind: FuncKind,
    params: Vec<Param>,
    /// Simple names called or referenced through macros.
    calls: HashSet<String>,
    /// Kernel names launched (`<<<`, `cudaLaunchKernel`, macro expansions).
    launches: HashSet<String>,
    /// Base names written through (`p[i] = ...`, `*p = ...`, `atomicAdd(&p[i], ...)`).
    writes: HashSet<String>,
    returns_tensor: bool,
    returned_params: HashSet<String>,
    /// `return p;` of a tensor parameter `p`: the name and where, judged in `finish`.
    returned_sites: Vec<(String, Range<usize>)>,
    /// Per parameter: uses as a name, and uses that only store (`p[i] = v`), so a parameter
    /// with more uses than stores is read.
    param_uses: Vec<u32>,
    param_stores: Vec<u32>,
    /// `<<<` launches: kernel name and, per argument, the tensor parameter whose data pointer
    /// it passes (if any) with the argument's range.
    launch_args: Vec<LaunchArgs>,
    /// Calls of other functions (helpers, `cudaMemset`) given an input's data pointer.
    helper_calls: Vec<LaunchArgs>,
    /// Stores written in host code through a tensor parameter's data pointer
    /// (`float* a = x.data_ptr<float>(); a[i] = 0;`): the parameter and the store's range.
    host_writes: Vec<(String, Range<usize>)>,
    /// (callee, argument index, own parameter index): a parameter handed on as is.
    param_passes: Vec<(String, usize, usize)>,
    /// Inline assembly (may store anything).
    has_asm: bool,
    /// Kernels launched outside a branch only half/bf16 inputs take (see `half_depth`).
    full_launches: HashSet<String>,
    /// Host code stores into a tensor's data itself (CPU C++: `out_p[i] = ...`).
    stores_tensor_data: bool,
    /// The stream its returns give (`return at::cuda::getCurrentCUDAStream();`), merged over
    /// every `return`; `None` before the first.
    ret_stream: Option<StreamKind>,
    /// In-place methods on a tensor parameter (`x.zero_()`): the parameter, where, message.
    inplace_sites: Vec<(String, Range<usize>, String)>,
    /// Per parameter: its type names a half/bf16 type (`const at::Half* p`).
    half_params: Vec<bool>,
    /// `cudaStreamWaitEvent(<caller's stream>, ...)` / `event.block(<caller's stream>)`.
    joins_caller: bool,
    /// `cudaEventRecord(...)` / `event.record(...)`.
    records_event: bool,
}

type LaunchArgs = (String, Vec<(Option<String>, Range<usize>)>);

/// Per host function: outputs from `torch::empty*` and whether anything could write them.
#[derive(Debug, Default)]
struct FnState<'t> {
    // Names are slices of the source: a declaration costs no allocation.
    inits: HashMap<&'t str, Node<'t>>,
    /// name -> (range of the allocation call, written?, returned?)
    empties: HashMap<&'t str, (Range<usize>, bool, bool)>,
    /// `float* p = out.data_ptr<float>()`: uses of `p` are uses of `out`.
    ptr_aliases: HashMap<&'t str, &'t str>,
    /// Locals holding tensors (`torch::Tensor t`, `auto y = torch::empty(...)`).
    tensor_locals: HashSet<&'t str>,
    /// Locals declared as pointers or references: stores through them reach what they point at.
    ptr_locals: HashSet<&'t str>,
}

/// Where a declaration's variables live (`Analyzer::storage_of`).
#[derive(Debug, Default, Clone, Copy)]
struct Storage {
    is_static: bool,
    /// `const`, `constexpr`, `__constant__` or `extern`: not written here.
    is_const: bool,
    /// `__device__`, `__shared__`, `__constant__`, `__managed__`.
    device_mem: bool,
    /// At namespace level, outside any function.
    top: bool,
}

impl Storage {
    /// Host memory that outlives the call and can be written: where a cache can live.
    fn outlives_the_call(&self) -> bool {
        (self.is_static || self.top) && !self.is_const && !self.device_mem
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
            pybind_names: Vec::new(),
            py_args: &NO_ARGS,
            created_streams: HashSet::default(),
            pending_streams: Vec::new(),
            soft_findings: Vec::new(),
        }
    }

    /// A cursor from the spare ones (give it back with `self.cursors.push`).
    fn cursor(&mut self, node: Node<'t>) -> TreeCursor<'t> {
        match self.cursors.pop() {
            Some(mut c) => {
                c.reset(node);
                c
            }
            None => node.walk(),
        }
    }

    fn t(&self, n: Node) -> &'t str {
        &self.text[n.byte_range()]
    }

    fn flag(&mut self, code: Rule, range: Range<usize>, msg: String) {
        if code == Rule::KG610 && (self.precision != Precision::Fp32 || self.half_depth > 0) {
            return;
        }
        self.findings.push((code, range, msg));
    }

    /// Walks the subtree at `root` in pre-order with one cursor (cheaper than a cursor reset and
    /// child count per node), calling [`Self::enter`] on every node.
    fn visit(&mut self, root: Node<'t>) {
        let mut c = self.cursor(root);
        'walk: loop {
            if self.enter(c.node()) && c.goto_first_child() {
                continue;
            }
            while !c.goto_next_sibling() {
                if !c.goto_parent() {
                    break 'walk;
                }
            }
        }
        self.cursors.push(c);
    }

    /// The rules for one node; false when its children must not be walked (they were handled
    /// here, or are comments and strings). It only dispatches.
    fn enter(&mut self, node: Node<'t>) -> bool {
        let class = TABLES
            .classes
            .get(node.kind_id() as usize)
            .copied()
            .unwrap_or(NodeClass::Other);
        match class {
            NodeClass::Other => {}
            NodeClass::Skip => {
                if matches!(node.kind_fast(), "string_literal" | "concatenated_string") {
                    self.hook_string(node);
                }
                return false;
            }
            NodeClass::Include => {
                self.include(node);
                return false;
            }
            NodeClass::Define => {
                self.define(node);
                return false;
            }
            NodeClass::Function => {
                self.function(node);
                return false;
            }
            NodeClass::Asm => {
                self.asm(node);
                return false;
            }
            NodeClass::Qualified => {
                self.name(node, NameKind::Type);
                // Template arguments (`std::vector<torch::Tensor>`) hold names of their own.
                if self.t(node).contains('<') {
                    self.visit_template_args(node);
                }
                return false;
            }
            NodeClass::Identifier => self.name(node, NameKind::Value),
            NodeClass::TypeIdentifier => self.name(node, NameKind::Type),
            NodeClass::FieldIdentifier => self.name(node, NameKind::Field),
            NodeClass::Call => self.call(node),
            NodeClass::Declaration => self.declaration(node),
            NodeClass::Assignment => self.assignment(node),
            NodeClass::Update => self.update(node),
            NodeClass::Return => self.ret(node),
            NodeClass::Using => {
                let t = self.t(node);
                if t.contains("namespace torch") || t.contains("namespace at") {
                    self.using_torch = true;
                }
            }
            NodeClass::If | NodeClass::PreprocIf => return self.branch(node),
            NodeClass::Binary => self.binary(node),
            NodeClass::FieldDecl => self.field_declaration(node),
            NodeClass::Case => return self.case(node),
            NodeClass::Template => return self.template(node),
            NodeClass::NsAlias => {
                self.namespace_alias(node);
                return false;
            }
        }
        true
    }

    /// `a = b`, `a += b`, `p[i] = v`, `config.stream = s`.
    fn assignment(&mut self, node: Node<'t>) {
        let (Some(l), Some(r)) = (node.field("left"), node.field("right")) else {
            return;
        };
        if l.kind_fast() == "identifier" {
            let compound = node.field("operator").is_some_and(|o| self.t(o) != "=");
            if node.field("operator").is_some_and(|o| self.t(o) == "&=") {
                self.mantissa_truncation(node, l, r);
            }
            if compound && self.is_tensor_name(self.t(l)) {
                self.torch_op(node.byte_range(), format!("`{}` is tensor arithmetic: an ATen kernel does the work inside the extension", self.t(node)));
            }
            self.state.inits.insert(self.t(l), r);
        } else {
            let pure = node.field("operator").is_some_and(|o| self.t(o) == "=");
            if node.field("operator").is_some_and(|o| self.t(o) == "&=") {
                self.mantissa_truncation(node, l, r);
            }
            self.record_write(l, pure);
            // `config.stream = s` for `cudaLaunchKernelEx`.
            let field = (l.kind_fast() == "field_expression")
                .then(|| l.field("field"))
                .flatten()
                .map(|f| self.t(f));
            if matches!(field, Some("stream" | "hStream")) {
                self.launch_on(r, "the launch configuration is set to");
            }
        }
    }

    /// `p[i]++`, `calls++` on a static.
    fn update(&mut self, node: Node<'t>) {
        if let Some(a) = node.field("argument") {
            if a.kind_fast() != "identifier" {
                self.record_write(a, false);
            } else if self.cur.is_some() && self.static_ptrs.contains(self.t(a)) {
                self.static_cache(
                    node.byte_range(),
                    format!("`{}` counts calls in a static variable: behaviour that changes with the call count (phase detection) passes the checks and cheats the timing", self.t(node)),
                );
            }
        }
    }

    /// `if`/`#if`: a dead branch (`if (0)`, `#if 0`) is not walked; a branch only half/bf16
    /// inputs take is walked with `half_depth` raised. False when the branch was walked here.
    fn branch(&mut self, node: Node<'t>) -> bool {
        // `if (0)`, `if (false)`, `#if 0`: code that never runs launches nothing.
        let dead = node.field("condition").is_some_and(|c| {
            let t = self
                .t(c)
                .trim_matches(|ch: char| ch == '(' || ch == ')' || ch.is_whitespace());
            matches!(t, "0" | "false")
        });
        if dead {
            if let Some(a) = node.field("alternative") {
                self.visit(a);
            }
            return false;
        }
        // `if (x.scalar_type() == at::kHalf) {...}`, or the `else` of `== at::kFloat`, on an
        // fp32 problem: the branch is live code (its launches count) but fp32 inputs never
        // take it.
        let (cons_dead, alt_dead) = match node.field("condition") {
            Some(c) if self.precision == Precision::Fp32 => self.dtype_branches(c),
            _ => (false, false),
        };
        if cons_dead || alt_dead {
            if let Some(c) = node.field("condition") {
                self.visit(c);
            }
            for (field, dead) in [("consequence", cons_dead), ("alternative", alt_dead)] {
                if let Some(b) = node.field(field) {
                    self.half_depth += u32::from(dead);
                    self.visit(b);
                    self.half_depth -= u32::from(dead);
                }
            }
            return false;
        }
        true
    }

    /// Which branches of an `if` on this condition fp32 inputs never take: (the consequence,
    /// the alternative). Bool locals are read through (`const bool h = x.scalar_type() ==
    /// at::kHalf; if (h && n % 2 == 0)`).
    fn dtype_branches(&self, cond: Node<'t>) -> (bool, bool) {
        let text = self.condition_text(cond, 0);
        if rules::precision::half_only_test(&text) || rules::precision::not_float_test(&text) {
            (true, false)
        } else if rules::precision::float_only_test(&text) {
            (false, true)
        } else {
            (false, false)
        }
    }

    /// A condition's text with bool locals replaced by what they were initialised to.
    fn condition_text(&self, n: Node<'t>, depth: u32) -> String {
        if depth > 6 {
            return self.t(n).to_string();
        }
        match n.kind_fast() {
            "condition_clause" | "parenthesized_expression" => match n.named_child(0) {
                Some(x) if n.named_child_count() == 1 => {
                    format!("({})", self.condition_text(x, depth + 1))
                }
                _ => self.t(n).to_string(),
            },
            "identifier" => match self.state.inits.get(self.t(n)) {
                Some(v) => format!("({})", self.condition_text(*v, depth + 1)),
                None => self.t(n).to_string(),
            },
            "binary_expression" if n.field("operator").is_some_and(|o| self.t(o) == "&&") => {
                match (n.field("left"), n.field("right")) {
                    (Some(l), Some(r)) => format!(
                        "{}&&{}",
                        self.condition_text(l, depth + 1),
                        self.condition_text(r, depth + 1)
                    ),
                    _ => self.t(n).to_string(),
                }
            }
            _ => self.t(n).to_string(),
        }
    }

    /// `case at::kHalf:` in a switch on the dtype: fp32 inputs never run its statements.
    fn case(&mut self, node: Node<'t>) -> bool {
        let Some(v) = node.field("value") else {
            return true;
        };
        if self.precision != Precision::Fp32 || !rules::precision::half_dtype(self.t(v)) {
            return true;
        }
        self.half_depth += 1;
        let mut c = self.cursor(node);
        let kids: Vec<Node<'t>> = node.named_children(&mut c).collect();
        self.cursors.push(c);
        for k in kids {
            self.visit(k);
        }
        self.half_depth -= 1;
        false
    }

    /// `template <> struct Acc<at::Half> {...}`, `template <> float load<__half>(...)`: an
    /// explicit specialisation for a half type runs only for half instantiations.
    fn template(&mut self, node: Node<'t>) -> bool {
        let params = node.field("parameters").map_or("", |p| self.t(p));
        let explicit = params
            .chars()
            .all(|c| matches!(c, '<' | '>') || c.is_whitespace());
        if !explicit || self.precision != Precision::Fp32 {
            return true;
        }
        let after = node
            .field("parameters")
            .map_or(node.start_byte(), |p| p.end_byte());
        let rest = &self.text[after..node.end_byte()];
        let header = &rest[..rest.find(['{', '(', ';']).unwrap_or(rest.len())];
        if !header.contains('<') || !rules::precision::half_type_text(header) {
            return true;
        }
        self.half_depth += 1;
        let mut c = self.cursor(node);
        let kids: Vec<Node<'t>> = node.named_children(&mut c).collect();
        self.cursors.push(c);
        for k in kids {
            self.visit(k);
        }
        self.half_depth -= 1;
        false
    }

    /// A struct holding tensors: a static or global instance of it is a cache.
    fn field_declaration(&mut self, node: Node<'t>) {
        let ty = node.field("type").map(|t| self.t(t)).unwrap_or("");
        if ty.contains("Tensor") || ty.contains("Storage") || ty.contains("DataPtr") {
            let mut p = node.parent();
            while let Some(x) = p {
                if matches!(x.kind_fast(), "struct_specifier" | "class_specifier") {
                    if let Some(n) = x.field("name") {
                        self.tensor_structs.insert(self.t(n).to_string());
                    }
                    break;
                }
                p = x.parent();
            }
        }
    }

    /// `namespace F = torch::nn::functional;`: `F::gelu` is `torch::nn::functional::gelu`.
    fn namespace_alias(&mut self, node: Node<'t>) {
        let name = node.field("name").map(|n| self.t(n).to_string());
        let mut c = self.cursor(node);
        let target = node
            .named_children(&mut c)
            .filter(|ch| Some(self.t(*ch)) != name.as_deref())
            .last()
            .map(|t| self.t(t).split_whitespace().collect::<String>());
        self.cursors.push(c);
        if let (Some(n), Some(t)) = (name, target) {
            self.ns_aliases.insert(n, t);
        }
    }

    fn visit_template_args(&mut self, node: Node<'t>) {
        let mut c = self.cursor(node);
        for child in node.children(&mut c) {
            match child.kind_fast() {
                "template_argument_list" => self.visit(child),
                "qualified_identifier"
                | "template_type"
                | "template_function"
                | "template_method" => self.visit_template_args(child),
                _ => {}
            }
        }
        self.cursors.push(c);
    }

    /// The name of a callee or type without template arguments: `at::cuda::getStreamFromPool`.
    fn qualname(&self, n: Node<'t>) -> Option<String> {
        let q = self.qualname_raw(n)?;
        if self.ns_aliases.is_empty() {
            return Some(q);
        }
        let (head, rest) = q.split_once("::").unwrap_or((q.as_str(), ""));
        Some(match self.ns_aliases.get(head) {
            Some(full) if rest.is_empty() => full.clone(),
            Some(full) => format!("{full}::{rest}"),
            None => q,
        })
    }

    fn qualname_raw(&self, n: Node<'t>) -> Option<String> {
        match n.kind_fast() {
            "identifier"
            | "type_identifier"
            | "field_identifier"
            | "namespace_identifier"
            | "primitive_type" => Some(self.t(n).to_string()),
            // Written without spaces, comments or template arguments (`at::cuda::f`), the
            // name is its own text.
            "qualified_identifier"
                if self
                    .t(n)
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b':') =>
            {
                Some(self.t(n).to_string())
            }
            "qualified_identifier" => {
                let scope = n
                    .field("scope")
                    .and_then(|s| self.qualname(s))
                    .unwrap_or_default();
                let name = self.qualname(n.field("name")?)?;
                Some(if scope.is_empty() {
                    format!("::{name}")
                } else {
                    format!("{scope}::{name}")
                })
            }
            "template_function" | "template_type" | "template_method" => {
                self.qualname(n.field("name")?)
            }
            _ => None,
        }
    }

    fn name(&mut self, node: Node<'t>, kind: NameKind) {
        // Plain names are slices of the text; only qualified names are assembled.
        let owned;
        let q: &str = if node.kind_fast() == "qualified_identifier" {
            let Some(x) = self.qualname(node) else { return };
            owned = x;
            &owned
        } else {
            self.t(node)
        };
        if let Some((code, msg)) = classify(q, kind) {
            self.flag(code, node.byte_range(), msg);
        }
        if q.starts_with("cutlass::")
            && (q.contains("::gemm::device") || q.contains("::conv::device"))
            && self.library_ops_banned()
        {
            self.vendor_library(node.byte_range(), format!("`{q}` is CUTLASS's prebuilt device-level operator: the library's kernel does the work, not the candidate's own"));
        }
        if q.starts_with("TORCH_LIBRARY") {
            self.library_registration(node, q);
        }
        if node.kind_fast() == "identifier" {
            if let Some(i) = self.cur {
                let f = &mut self.funcs[i];
                if let Some(k) = f.params.iter().position(|p| p.name == q) {
                    f.param_uses[k] += 1;
                }
            }
            if self.macros.contains_key(q) {
                self.macro_use(node, q);
            }
            let id = self.t(node);
            if self.state.empties.contains_key(id) {
                self.empty_use(node, id);
            } else if let Some(orig) = self.state.ptr_aliases.get(id).copied() {
                self.empty_use(node, orig);
            }
        }
    }

    /// A use of an output allocated with `torch::empty*`: does it escape to something that may
    /// write it?
    fn empty_use(&mut self, node: Node<'t>, name: &'t str) {
        let parent = node.parent();
        let pk = parent.map(|p| p.kind_fast()).unwrap_or("");
        let mut written = true;
        let mut returned = false;
        if pk == "return_statement" {
            written = false;
            returned = true;
        } else if pk == "init_declarator"
            && parent.and_then(|p| p.field("declarator")) == Some(node)
        {
            written = false;
        } else if pk == "cast_expression"
            && parent
                .and_then(|p| p.field("type"))
                .is_some_and(|t| self.t(t).trim() == "void")
        {
            // `(void)p;` silences a warning; it writes nothing.
            written = false;
        } else if pk == "field_expression" {
            let field = parent.and_then(|p| p.field("field"));
            let m = field.and_then(|f| self.qualname(f)).unwrap_or_default();
            if METADATA_METHODS.contains(&m.as_str()) {
                written = false;
            }
            // `float* p = out.data_ptr<float>();`: the pointer is the output from here on.
            if matches!(m.as_str(), "data_ptr" | "data" | "mutable_data_ptr") {
                let call = parent.and_then(|p| p.parent());
                let decl = call.and_then(|c| c.parent());
                if let (Some(c), Some(d)) = (call, decl) {
                    if c.kind_fast() == "call_expression"
                        && d.kind_fast() == "init_declarator"
                        && d.field("value") == Some(c)
                    {
                        let mut n = d.field("declarator");
                        while let Some(x) = n.filter(|x| x.kind_fast() == "pointer_declarator") {
                            n = x.field("declarator");
                        }
                        if let Some(id) = n.filter(|x| x.kind_fast() == "identifier") {
                            let alias = self.t(id);
                            self.state.ptr_aliases.insert(alias, name);
                            written = false;
                        }
                    }
                }
            }
        } else if matches!(pk, "initializer_list" | "argument_list") {
            // `return {out, ...}` or `std::make_tuple(out, ...)` in a return: returned, not written.
            let mut p = parent;
            let mut in_return = false;
            let mut in_launch_or_call = false;
            while let Some(x) = p {
                match x.kind_fast() {
                    "return_statement" => {
                        in_return = true;
                        break;
                    }
                    "call_expression" => {
                        let f = x
                            .field("function")
                            .and_then(|f| self.qualname(f))
                            .unwrap_or_default();
                        if !f.ends_with("make_tuple")
                            && !f.ends_with("tuple")
                            && !f.ends_with("vector")
                            && f != "std::move"
                        {
                            in_launch_or_call = true;
                        }
                    }
                    "compound_statement" => break,
                    _ => {}
                }
                p = x.parent();
            }
            if in_return && !in_launch_or_call {
                written = false;
                returned = true;
            }
        }
        if let Some(e) = self.state.empties.get_mut(name) {
            e.1 |= written;
            e.2 |= returned;
        }
    }

    /// A macro used in code: everything it expands to counts as called/launched from here, and
    /// names built with `##` are judged like names written out.
    fn macro_use(&mut self, node: Node<'t>, name: &str) {
        let m = &self.macros[name];
        // For a function-like macro take the argument list that follows.
        let span = match (&m.params, node.parent()) {
            (Some(_), Some(p)) if p.kind_fast() == "call_expression" => p.byte_range(),
            _ => node.byte_range(),
        };
        let toks: Vec<_> = tokenize(&self.text[span.clone()])
            .into_iter()
            .map(|mut t| {
                t.range = t.range.start + span.start..t.range.end + span.start;
                t
            })
            .collect();
        let (expanded, pasted) = expand(&toks, &self.macros, 0);
        let pasted_names: HashSet<String> = pasted.iter().map(|p| p.text.clone()).collect();
        for p in &pasted {
            if api_like(&p.text) {
                self.token_pasting(
                    p.range.clone(),
                    format!("token pasting (`##`) in macro `{name}` builds the API name `{}`; write API calls out", p.text),
                );
            }
        }
        for t in expanded.iter().filter(|t| t.is_ident()) {
            if let Some(i) = self.cur {
                self.funcs[i]
                    .calls
                    .insert(last_segment(&t.text).to_string());
                self.funcs[i]
                    .launches
                    .insert(last_segment(&t.text).to_string());
            }
            if pasted_names.contains(&t.text) {
                if let Some((code, msg)) = classify(&t.text, NameKind::Type) {
                    self.flag(
                        code,
                        t.range.clone(),
                        format!("{msg} (built by macro `{name}`)"),
                    );
                }
            }
        }
    }

    fn include(&mut self, node: Node<'t>) {
        let Some(path) = node.field("path") else {
            return;
        };
        let p = self.t(path).trim_matches(['<', '>', '"']);
        let file = p.rsplit('/').next().unwrap_or(p);
        if p.starts_with("cutlass/") || p.starts_with("cute/") {
            self.uses_cutlass = true;
        }
        let vendor = [
            "cublas", "cudnn", "cufft", "cusparse", "cusolver", "cutensor",
        ]
        .iter()
        .any(|v| file.starts_with(v))
            || p.contains("cutlass/library/")
            || (p.contains("cutlass/gemm/device/") || p.contains("cutlass/conv/device/"))
                && self.library_ops_banned()
            || p.contains("ATen/cuda/CUDABlas")
            || p.contains("ATen/cudnn/");
        // A header alone calls nothing (templates copy boilerplate includes): what is used
        // from it is flagged where it is used (`cublasSgemm`, `wmma::fragment`).
        let _ = vendor;
    }

    fn define(&mut self, node: Node<'t>) {
        let Some(name) = node.field("name") else {
            return;
        };
        let name = self.t(name).to_string();
        if let Some((code, msg)) = classify(&name, NameKind::Value) {
            let r = node
                .field("name")
                .map_or(node.byte_range(), |n| n.byte_range());
            self.flag(code, r, format!("{msg} (defined as a macro)"));
        }
        let params = node.field("parameters").map(|p| {
            let mut c = p.walk();
            p.named_children(&mut c)
                .filter(|x| x.kind_fast() == "identifier")
                .map(|x| self.t(x).to_string())
                .collect::<Vec<_>>()
        });
        let (body, body_at) = node
            .field("value")
            .map_or((String::new(), node.end_byte()), |v| {
                (self.t(v).to_string(), v.start_byte())
            });
        // Names written in the body are judged where they are written.
        let toks: Vec<_> = tokenize(&body)
            .into_iter()
            .map(|mut t| {
                t.range = t.range.start + body_at..t.range.end + body_at;
                t
            })
            .collect();
        let params_set: Vec<String> = params.clone().unwrap_or_default();
        for t in toks
            .iter()
            .filter(|t| t.is_ident() && !params_set.contains(&t.text))
        {
            if let Some((code, msg)) = classify(&t.text, NameKind::Type) {
                self.flag(code, t.range.clone(), format!("{msg} (in macro `{name}`)"));
            }
        }
        // An object-like macro that pastes or uses other macros: expand it here.
        if params.is_none() {
            let (expanded, pasted) = expand(&toks, &self.macros, 0);
            let pasted_names: HashSet<String> = pasted.iter().map(|p| p.text.clone()).collect();
            for t in expanded.iter().filter(|t| pasted_names.contains(&t.text)) {
                if api_like(&t.text) {
                    self.token_pasting(t.range.clone(), format!("token pasting (`##`) in macro `{name}` builds the API name `{}`; write API calls out", t.text));
                }
                if let Some((code, msg)) = classify(&t.text, NameKind::Type) {
                    self.flag(
                        code,
                        t.range.clone(),
                        format!("{msg} (built by macro `{name}`)"),
                    );
                }
            }
        }
        self.macros.insert(
            name,
            Macro {
                params,
                body,
                body_at,
            },
        );
    }

    fn asm(&mut self, node: Node<'t>) {
        if let Some(i) = self.cur {
            self.funcs[i].has_asm = true;
        }
        let code = node.field("assembly_code").unwrap_or(node);
        let t = rules::precision::joined_literals(self.t(code), &self.macros);
        if t.contains("globaltimer") || t.contains("%clock") {
            self.timer_tampering(
                node.byte_range(),
                "inline PTX reads a clock register (`%globaltimer`, `%clock`): a kernel that reads the time can tell timed calls from checked ones".into(),
            );
        }
        self.asm_precision(node);
    }

    fn function(&mut self, node: Node<'t>) {
        let mut kind = FuncKind::Host;
        let (mut device, mut host) = (false, false);
        let mut c = self.cursor(node);
        for ch in node.children(&mut c) {
            match ch.kind_fast() {
                "__global__" => kind = FuncKind::Global,
                "__device__" => device = true,
                "__host__" => host = true,
                _ => {}
            }
        }
        self.cursors.push(c);
        if kind == FuncKind::Host && device && !host {
            kind = FuncKind::Device;
        }
        // Find the function_declarator under pointer/reference declarators.
        let mut d = node.field("declarator");
        while let Some(x) = d {
            if x.kind_fast() == "function_declarator" {
                break;
            }
            d = x.field("declarator");
        }
        let Some(decl) = d else {
            if let Some(b) = node.field("body") {
                self.visit(b);
            }
            return;
        };
        let name_node = decl.field("declarator");
        let name = name_node
            .and_then(|n| self.qualname(n))
            .map(|q| last_segment(&q).to_string())
            .unwrap_or_default();
        let name_range = name_node.map_or(decl.byte_range(), |n| n.byte_range());
        if name.starts_with("TORCH_LIBRARY") {
            if let Some(n) = name_node {
                self.library_registration(n, &name);
            }
        }
        let mut params = Vec::new();
        let mut half_params = Vec::new();
        if let Some(pl) = decl.field("parameters") {
            let mut c = pl.walk();
            for p in pl.named_children(&mut c) {
                let ty = p.field("type").map(|t| self.t(t)).unwrap_or("");
                let mut d = p.field("declarator");
                while let Some(x) = d {
                    if x.kind_fast() == "identifier" {
                        break;
                    }
                    d = x.field("declarator").or_else(|| x.named_child(0));
                }
                if let Some(id) = d {
                    params.push(Param {
                        name: self.t(id).to_string(),
                        is_tensor: ty.contains("Tensor"),
                    });
                    half_params.push(rules::precision::half_type_text(ty));
                }
            }
            self.visit_template_args(pl);
            // Parameter types are names too (e.g. `__half* x`).
            self.visit(pl);
        }
        if kind != FuncKind::Global && interposed_api(&name) {
            self.timer_tampering(
                name_range.clone(),
                format!("defining `{name}` interposes the CUDA/timing API the harness relies on"),
            );
        }
        let returns_tensor = node
            .field("type")
            .is_some_and(|t| self.t(t).contains("Tensor"));
        if let Some(t) = node.field("type") {
            self.visit(t);
        }
        let nparams = params.len();
        self.funcs.push(Func {
            name,
            name_range,
            kind,
            params,
            calls: HashSet::default(),
            launches: HashSet::default(),
            writes: HashSet::default(),
            returns_tensor,
            returned_params: HashSet::default(),
            returned_sites: Vec::new(),
            param_uses: vec![0; nparams],
            param_stores: vec![0; nparams],
            launch_args: Vec::new(),
            helper_calls: Vec::new(),
            host_writes: Vec::new(),
            param_passes: Vec::new(),
            has_asm: false,
            full_launches: HashSet::default(),
            stores_tensor_data: false,
            ret_stream: None,
            half_params,
            inplace_sites: Vec::new(),
            joins_caller: false,
            records_event: false,
            range: node.byte_range(),
        });
        let saved_cur = self.cur.replace(self.funcs.len() - 1);
        let saved_state = std::mem::take(&mut self.state);
        if let Some(b) = node.field("body") {
            self.visit(b);
        }
        let state = std::mem::replace(&mut self.state, saved_state);
        self.cur = saved_cur;
        for (var, (range, written, returned)) in state.empties {
            if returned && !written {
                self.unwritten_output(
                    range,
                    format!("`{var}` is allocated with `empty` and returned, but no kernel is given it to write: it returns whatever the allocator's memory held"),
                );
            }
        }
    }

    fn declaration(&mut self, node: Node<'t>) {
        let storage = self.storage_of(node);
        let ty = node.field("type").map(|t| self.t(t)).unwrap_or("");
        let mut c = self.cursor(node);
        for d in node.children_by_field_name("declarator", &mut c) {
            if d.kind_fast() != "function_declarator" && storage.outlives_the_call() {
                self.remember_static_pointer(d);
                self.static_declaration(storage, ty, d);
            }
            if d.kind_fast() == "init_declarator" {
                self.local_declaration(ty, d);
            }
        }
        self.cursors.push(c);
    }

    /// Where a declaration's variables live: static, global, constant, device memory.
    fn storage_of(&mut self, node: Node<'t>) -> Storage {
        let mut s = Storage::default();
        let mut c = self.cursor(node);
        for ch in node.children(&mut c) {
            match ch.kind_fast() {
                "storage_class_specifier" => {
                    let t = self.t(ch);
                    s.is_static |= t == "static" || t == "thread_local";
                    s.is_const |= t == "extern";
                }
                "type_qualifier" => {
                    s.is_const |= matches!(self.t(ch), "const" | "constexpr" | "__constant__")
                }
                "__device__" | "__shared__" | "__constant__" | "__managed__" => s.device_mem = true,
                _ => {}
            }
        }
        self.cursors.push(c);
        s.top = self.cur.is_none()
            && node.parent().is_some_and(|p| {
                matches!(
                    p.kind_fast(),
                    "translation_unit" | "declaration_list" | "linkage_specification"
                )
            });
        s
    }

    /// A pointer kept across calls (device memory); judged where it is handed out as a tensor
    /// (`from_blob`).
    fn remember_static_pointer(&mut self, d: Node<'t>) {
        let mut n = d;
        if n.kind_fast() == "init_declarator" {
            n = n.field("declarator").unwrap_or(n);
        }
        if n.kind_fast() == "pointer_declarator" {
            n = n.field("declarator").unwrap_or(n);
        }
        if n.kind_fast() == "identifier" {
            self.static_ptrs.insert(self.t(n).to_string());
        }
    }

    /// A local's initialiser, pointers and tensors, for the later stores and returns.
    fn local_declaration(&mut self, ty: &str, d: Node<'t>) {
        let (Some(mut n), Some(v)) = (d.field("declarator"), d.field("value")) else {
            return;
        };
        // `float* p = ...`, `auto& r = ...`: the name is under the declarator.
        let mut pointer = false;
        while matches!(n.kind_fast(), "pointer_declarator" | "reference_declarator") {
            pointer = true;
            match n.field("declarator").or_else(|| n.named_child(0)) {
                Some(x) => n = x,
                None => break,
            }
        }
        if n.kind_fast() != "identifier" {
            return;
        }
        let name = self.t(n);
        self.state.inits.insert(name, v);
        // `auto p = reinterpret_cast<float4*>(out);`, `auto row = out + off;`
        let auto_ptr = ty.trim() == "auto"
            && (matches!(
                v.kind_fast(),
                "cast_expression" | "binary_expression" | "identifier"
            ) || self.t(v).contains("_cast<"));
        if pointer || auto_ptr {
            self.state.ptr_locals.insert(name);
        }
        if self.cur.is_some() && (ty.contains("Tensor") || self.is_empty_alloc(v)) {
            self.state.tensor_locals.insert(name);
        }
        if self.cur.is_some() && self.is_empty_alloc(v) {
            self.state
                .empties
                .insert(name, (v.byte_range(), false, false));
        }
    }

    fn is_empty_alloc(&self, v: Node<'t>) -> bool {
        if v.kind_fast() != "call_expression" {
            return false;
        }
        let Some(f) = v.field("function") else {
            return false;
        };
        let q = match f.kind_fast() {
            "field_expression" => f.field("field").and_then(|x| self.qualname(x)),
            _ => self.qualname(f),
        }
        .unwrap_or_default();
        matches!(
            last_segment(&q),
            "empty" | "empty_like" | "empty_strided" | "new_empty"
        )
    }

    fn ret(&mut self, node: Node<'t>) {
        let Some(i) = self.cur else { return };
        if self.funcs[i].kind != FuncKind::Host {
            return;
        }
        let Some(e) = node.named_child(0) else { return };
        let k = self.stream_kind(e, 0);
        let f = &mut self.funcs[i];
        f.ret_stream = Some(match f.ret_stream.take() {
            Some(before) => before.merge(k),
            None => k,
        });
        if self.is_empty_alloc(e) {
            self.unwritten_output(
                e.byte_range(),
                "returns a fresh `empty` tensor that no kernel wrote: it returns whatever the allocator's memory held".into(),
            );
        }
        if e.kind_fast() == "identifier" {
            let n = self.t(e);
            if self.funcs[i]
                .params
                .iter()
                .any(|p| p.is_tensor && p.name == n)
            {
                self.funcs[i].returned_params.insert(n.to_string());
                self.funcs[i]
                    .returned_sites
                    .push((n.to_string(), e.byte_range()));
            }
        }
    }

    fn call(&mut self, node: Node<'t>) {
        let Some(func) = node.field("function") else {
            return;
        };
        let mut c = self.cursor(node);
        let launch = node
            .children(&mut c)
            .find(|ch| ch.kind_fast() == "kernel_call_syntax");
        self.cursors.push(c);
        match launch {
            Some(cfg) => self.kernel_launch(node, func, cfg),
            None if func.kind_fast() == "field_expression" => self.method_call(node, func),
            None => self.function_call(node, func),
        }
    }

    /// `kernel<<<grid, block, smem, stream>>>(args)`.
    fn kernel_launch(&mut self, node: Node<'t>, func: Node<'t>, cfg: Node<'t>) {
        let kernel = self
            .qualname(func)
            .map(|q| last_segment(&q).to_string())
            .unwrap_or_default();
        self.record_param_passes(&kernel, node);
        if let Some(i) = self.cur {
            self.funcs[i].launches.insert(kernel.clone());
            if self.half_depth == 0 {
                self.funcs[i].full_launches.insert(kernel.clone());
            }
            if let Some(al) = node.field("arguments") {
                let mut c = al.walk();
                let args: Vec<_> = al
                    .named_children(&mut c)
                    .filter(|n| n.kind_fast() != "comment")
                    .map(|a| (self.input_param_of(a, 0), a.byte_range()))
                    .collect();
                self.funcs[i].launch_args.push((kernel.clone(), args));
            }
        }
        let mut c = cfg.walk();
        let args: Vec<Node> = cfg
            .named_children(&mut c)
            .filter(|n| n.kind_fast() != "comment")
            .collect();
        self.empty_launch(&kernel, &args);
        self.launch_stream(&kernel, &args);
    }

    /// `recv.method(args)`: tensor methods, conversions, events, pybind11's `m.def`.
    fn method_call(&mut self, node: Node<'t>, func: Node<'t>) {
        let field = func.field("field");
        let m = field.and_then(|f| self.qualname(f)).unwrap_or_default();
        let recv = func.field("argument");
        let recv_t = recv.map(|r| self.t(r)).unwrap_or("");
        let at = field.map_or(func.byte_range(), |f| f.byte_range());
        self.tensor_method_call(&at, recv_t, &m);
        self.reduced_precision_method(node, &at, &m);
        self.inplace_on_input(&at, recv, recv_t, &m);
        self.op_registration(node, &m);
        if let Some(i) = self.cur {
            let arg0 = node.field("arguments").and_then(|a| a.named_child(0));
            match m.as_str() {
                "record" => self.funcs[i].records_event = true,
                "block" if arg0.is_some_and(|a| self.stream_ok(a, 0)) => {
                    self.funcs[i].joins_caller = true
                }
                _ => {}
            }
        }
        if m == "def" {
            // PYBIND11_MODULE: m.def("name", &func)
            let mut c = node.walk();
            if let Some(args) = node.field("arguments") {
                let py_name = args
                    .named_child(0)
                    .filter(|a| a.kind_fast() == "string_literal")
                    .map(|a| self.t(a).trim_matches('"').to_string());
                let target = args.named_child(1).map(|a| {
                    if a.kind_fast() == "pointer_expression" {
                        a.field("argument").unwrap_or(a)
                    } else {
                        a
                    }
                });
                if let (Some(py), Some(q)) = (py_name, target.and_then(|t| self.qualname(t))) {
                    self.pybind_names.push((py, last_segment(&q).to_string()));
                }
                for a in args.named_children(&mut c) {
                    let target = if a.kind_fast() == "pointer_expression" {
                        a.field("argument")
                    } else {
                        Some(a)
                    };
                    if let Some(q) = target.and_then(|t| self.qualname(t)) {
                        self.pybind_exports.push(last_segment(&q).to_string());
                    }
                }
            }
        }
    }

    /// `f(args)` / `ns::f(args)`: a plain (possibly qualified) function.
    fn function_call(&mut self, node: Node<'t>, func: Node<'t>) {
        let Some(q) = self.qualname(func) else { return };
        let q = q.trim_start_matches("::").to_string();
        let last = last_segment(&q).to_string();
        if let Some(i) = self.cur {
            self.funcs[i].calls.insert(last.clone());
            match last.as_str() {
                "cudaEventRecord" | "cudaEventRecordWithFlags" | "cuEventRecord" => {
                    self.funcs[i].records_event = true
                }
                "cudaStreamWaitEvent" | "cuStreamWaitEvent"
                    if node
                        .field("arguments")
                        .and_then(|a| a.named_child(0))
                        .is_some_and(|a| self.stream_ok(a, 0)) =>
                {
                    self.funcs[i].joins_caller = true;
                }
                _ => {}
            }
        }
        self.plain_call(node, &q, &last);
        if last.starts_with("atomic") {
            if let Some(a) = node.field("arguments").and_then(|a| a.named_child(0)) {
                self.record_write(a, false);
            }
        }
        let ns = q.split("::").next().unwrap_or("");
        let qualified = q.contains("::");
        if qualified
            && (matches!(ns, "at" | "torch") || q.contains("::native::"))
            && !torch_allowed(&last)
            && !q.contains("CachingAllocator")
            && rules::hooks::hook_name(&q, &last, false).is_none()
        {
            self.torch_op(
                func.byte_range(),
                format!("`{q}` runs a PyTorch/ATen op inside the extension; compute it in your own kernel"),
            );
        }
        if !qualified && self.using_torch && tensor_compute_method(&last) {
            self.unqualified_ops.push((last.clone(), func.byte_range()));
        }
        self.sandbox_call(node, func, &q, &last, qualified, ns);
        if last.starts_with("cudaLaunch")
            || last == "cuLaunchKernel"
            || last == "cuLaunchCooperativeKernel"
        {
            if let (Some(i), Some(args)) = (self.cur, node.field("arguments")) {
                let mut ids = Vec::new();
                collect_identifiers(args, self.text, &mut ids);
                self.funcs[i].launches.extend(ids);
            }
            let at = match last.as_str() {
                "cudaLaunchKernel" | "cudaLaunchCooperativeKernel" => Some(5),
                "cuLaunchKernel" | "cuLaunchCooperativeKernel" => Some(8),
                _ => None,
            };
            if let Some(s) = at.and_then(|k| node.field("arguments")?.named_child(k)) {
                self.launch_on(s, &format!("`{last}` launches on"));
            }
        }
    }

    /// A tensor-valued name in the current host function: a tensor parameter or local.
    fn is_tensor_name(&self, name: &str) -> bool {
        let Some(i) = self.cur else { return false };
        self.funcs[i].kind == FuncKind::Host
            && (self.state.tensor_locals.contains(name)
                || self.funcs[i]
                    .params
                    .iter()
                    .any(|p| p.is_tensor && p.name == name))
    }

    /// `a * b` on tensors runs ATen kernels; `std::cout << "correct: ..."` forges output.
    fn binary(&mut self, node: Node<'t>) {
        // `__float_as_uint(v) & 0xffffe000`: TF32 rounding by hand, in kernels or host code.
        if let (Some(l), Some(r), Some(op)) = (
            node.field("left"),
            node.field("right"),
            node.field("operator"),
        ) {
            if self.t(op) == "&"
                && (l.kind_fast() == "number_literal" || r.kind_fast() == "number_literal")
            {
                self.mantissa_truncation(node, l, r);
            }
        }
        // Only host code handles tensors and streams; kernels are most of the expressions.
        if !self
            .cur
            .is_some_and(|i| self.funcs[i].kind == FuncKind::Host)
        {
            return;
        }
        let (Some(l), Some(r), Some(op)) = (
            node.field("left"),
            node.field("right"),
            node.field("operator"),
        ) else {
            return;
        };
        let op_range = op.byte_range();
        let op = self.t(op);
        if matches!(op, "+" | "-" | "*" | "/" | "%") {
            let tensor = [l, r]
                .iter()
                .any(|x| x.kind_fast() == "identifier" && self.is_tensor_name(self.t(*x)));
            if tensor {
                // At the operator, so an op call inside an operand keeps its own finding.
                self.torch_op(
                    op_range,
                    format!("`{}` is tensor arithmetic: an ATen kernel does the work inside the extension; compute it in your own kernel", self.t(node)),
                );
            }
        } else if op == "<<"
            && matches!(
                r.kind_fast(),
                "string_literal" | "raw_string_literal" | "concatenated_string"
            )
            && (result_like(self.t(r))
                || result_like(&rules::precision::joined_literals(self.t(r), &self.macros)))
        {
            self.sandbox(
                node.byte_range(),
                "printing result-like text from inside the extension could forge the harness's verdict".into(),
            );
        }
    }

    /// Rules for a call of a plain (possibly qualified) function name.
    fn plain_call(&mut self, node: Node<'t>, q: &str, last: &str) {
        let args = node.field("arguments");
        let arg0 = args.and_then(|a| a.named_child(0));
        if last == "from_blob" && !self.static_ptrs.is_empty() {
            let held = arg0.filter(|a| {
                let mut ids = Vec::new();
                collect_identifiers(*a, self.text, &mut ids);
                ids.iter().any(|id| self.static_ptrs.contains(id))
            });
            if let Some(a) = held {
                self.static_cache(
                    a.byte_range(),
                    format!("`{q}` wraps `{}`, memory kept in a static or global pointer: the result outlives the call and can be returned again without computing", self.t(a)),
                );
            }
        }
        if clock_call(last) && !(last == "clock" && q.contains("::")) {
            self.timer_tampering(
                node.field("function").map_or(node.byte_range(), |f| f.byte_range()),
                format!("`{q}()` reads the clock: a kernel that times itself can behave differently when the harness times it"),
            );
        }
        if last == "exit" && arg0.is_some_and(|a| matches!(self.t(a), "0" | "EXIT_SUCCESS")) {
            self.sandbox(
                node.byte_range(),
                "`exit(0)` from inside the extension ends the process with success before the harness checks anything".into(),
            );
        }
        // Async copies, graph launches and host callbacks on another stream escape the timing.
        let stream_arg = match last {
            "cudaGraphLaunch" | "cuGraphLaunch" => Some(1),
            "cudaLaunchHostFunc" | "cuLaunchHostFunc" | "cudaStreamBeginCapture" => Some(0),
            "cudaMemsetAsync" => Some(3),
            "cudaMemcpyAsync" => Some(4),
            _ => None,
        };
        if let Some(s) = stream_arg.and_then(|k| args?.named_child(k)) {
            self.launch_on(s, &format!("`{last}` runs on"));
        }
        // `cublasSetMathMode(h, mode)` with anything but the full-precision modes.
        if last == "cublasSetMathMode" {
            if let Some(m) = args.and_then(|a| a.named_child(1)) {
                let mode = self.t(m);
                let full = ["CUBLAS_DEFAULT_MATH", "CUBLAS_PEDANTIC_MATH", "DISALLOW"]
                    .iter()
                    .any(|f| mode.contains(f));
                if !full {
                    self.precision_downgrade(
                        m.byte_range(),
                        format!("`cublasSetMathMode(..., {mode})` lets cuBLAS compute an fp32 problem in TF32 or on reduced-precision tensor cores"),
                    );
                }
            }
        }
        if matches!(last, "write" | "fwrite")
            && args
                .and_then(|a| a.named_child(if last == "write" { 0 } else { 3 }))
                .is_some_and(|a| {
                    matches!(
                        self.t(a),
                        "1" | "2" | "STDOUT_FILENO" | "STDERR_FILENO" | "stdout" | "stderr"
                    )
                })
        {
            self.sandbox(
                node.byte_range(),
                format!("`{last}` writes raw bytes to stdout/stderr from inside the extension: output can be forged this way"),
            );
        }
        if matches!(last, "printf" | "fprintf" | "puts" | "fputs" | "dprintf") {
            let text = args.map(|a| self.t(a)).unwrap_or("");
            if result_like(text)
                || result_like(&rules::precision::joined_literals(text, &self.macros))
            {
                self.sandbox(
                    node.byte_range(),
                    format!(
                        "`{last}` prints result-like text that could forge the harness's verdict"
                    ),
                );
            }
        }
        // A plain function given an input's data pointer may write it (a helper that launches
        // a kernel, `cudaMemset`); judged in `finish`.
        if (!q.contains("::") || q.starts_with("std::")) && !pure_device_call(last) {
            self.record_param_passes(last, node);
            let host = self
                .cur
                .filter(|&i| self.funcs[i].kind == FuncKind::Host && self.funcs[i].returns_tensor);
            if let (Some(i), Some(al)) = (host, args) {
                let mut c = al.walk();
                let list: Vec<_> = al
                    .named_children(&mut c)
                    .filter(|n| n.kind_fast() != "comment")
                    .map(|a| (self.input_param_of(a, 0), a.byte_range()))
                    .collect();
                if list.iter().any(|(p, _)| p.is_some()) {
                    self.funcs[i].helper_calls.push((last.to_string(), list));
                }
            }
        }
    }

    fn finish(&mut self, src: &EmbeddedSource) -> Vec<String> {
        self.judge_pending_streams();
        self.drop_half_only_precision();
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

fn collect_identifiers(n: Node, text: &str, out: &mut Vec<String>) {
    if n.kind_fast() == "identifier" {
        out.push(text[n.byte_range()].to_string());
        return;
    }
    let mut c = n.walk();
    for ch in n.children(&mut c) {
        collect_identifiers(ch, text, out);
    }
}

#[cfg(test)]
mod tests;
