//! tree-sitter-cuda, fast: one parser per thread, node kinds and fields looked up once
//! ([`Tables`]), tree-sitter's allocations in mimalloc.

use super::*;
use std::cell::RefCell;
use tree_sitter::Parser;

thread_local! {
    // One parser per thread: creating one costs more than parsing a small kernel.
    static PARSER: RefCell<Option<Parser>> = const { RefCell::new(None) };
}

/// Field names the rules ask for, in the order of [`Tables::fields`].
pub(in crate::cpp) const FIELDS: [&str; 17] = [
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
pub(in crate::cpp) struct Tables {
    pub(in crate::cpp) kinds: Vec<&'static str>,
    /// What [`Analyzer::enter`] does with a node, by kind id.
    pub(in crate::cpp) classes: Vec<NodeClass>,
    pub(in crate::cpp) fields: [u16; FIELDS.len()],
}

/// The node kinds [`Analyzer::enter`] acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::cpp) enum NodeClass {
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

pub(in crate::cpp) static TABLES: std::sync::LazyLock<Tables> = std::sync::LazyLock::new(|| {
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
pub(in crate::cpp) trait NodeExt<'t> {
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
pub(in crate::cpp) fn use_mimalloc_for_tree_sitter() {
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

pub(in crate::cpp) fn collect_identifiers(n: Node, text: &str, out: &mut Vec<String>) {
    if n.kind_fast() == "identifier" {
        out.push(text[n.byte_range()].to_string());
        return;
    }
    let mut c = n.walk();
    for ch in n.children(&mut c) {
        collect_identifiers(ch, text, out);
    }
}
