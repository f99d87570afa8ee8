//! Names: qualified names through `using` and namespace aliases, and what a bare name's use
//! means (an output read or written, an empty allocation used).

use super::*;

impl<'t> Analyzer<'t> {
    /// The name of a callee or type without template arguments: `at::cuda::getStreamFromPool`.
    pub(in crate::cpp) fn qualname(&self, n: Node<'t>) -> Option<String> {
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

    pub(in crate::cpp) fn qualname_raw(&self, n: Node<'t>) -> Option<String> {
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

    /// An argument of a call that configures or queries a kernel without launching it
    /// (`cudaFuncSetAttribute(k, ...)`, `cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, k,
    /// ...)`), through casts and `&`.
    pub(in crate::cpp) fn configuring_argument(&self, node: Node<'t>) -> bool {
        let mut n = node;
        while let Some(p) = n.parent() {
            match p.kind_fast() {
                "cast_expression" | "parenthesized_expression" | "pointer_expression" => n = p,
                "argument_list" => {
                    let callee = p
                        .parent()
                        .filter(|c| c.kind_fast() == "call_expression")
                        .and_then(|c| c.field("function"))
                        .map(|f| self.t(f))
                        .unwrap_or("");
                    let callee = callee.rsplit("::").next().unwrap_or(callee);
                    return ["cudaFunc", "cudaOccupancy", "cuFunc", "cuOccupancy"]
                        .iter()
                        .any(|c| callee.starts_with(c));
                }
                _ => return false,
            }
        }
        false
    }

    pub(in crate::cpp) fn name(&mut self, node: Node<'t>, kind: NameKind) {
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
            let configures = kind == NameKind::Value && self.configuring_argument(node);
            if let Some(i) = self.cur {
                let f = &mut self.funcs[i];
                if let Some(k) = f.params.iter().position(|p| p.name == q) {
                    f.param_uses[k] += 1;
                }
                if kind == NameKind::Value && !configures {
                    f.value_refs.insert(q.to_string());
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

    /// `namespace F = torch::nn::functional;`: `F::gelu` is `torch::nn::functional::gelu`.
    pub(in crate::cpp) fn namespace_alias(&mut self, node: Node<'t>) {
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

    pub(in crate::cpp) fn visit_template_args(&mut self, node: Node<'t>) {
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

    /// A use of an output allocated with `torch::empty*`: does it escape to something that may
    /// write it?
    pub(in crate::cpp) fn empty_use(&mut self, node: Node<'t>, name: &'t str) {
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
}
