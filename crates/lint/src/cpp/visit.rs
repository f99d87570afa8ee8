//! The walk over the tree: [`Analyzer::visit`] and [`Analyzer::enter`], which only dispatches,
//! and the statements it tracks as it goes (assignments, branches, templates, fields).

use super::*;

impl<'t> Analyzer<'t> {
    /// Walks the subtree at `root` in pre-order with one cursor (cheaper than a cursor reset and
    /// child count per node), calling [`Self::enter`] on every node.
    pub(in crate::cpp) fn visit(&mut self, root: Node<'t>) {
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
    pub(in crate::cpp) fn enter(&mut self, node: Node<'t>) -> bool {
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
    pub(in crate::cpp) fn assignment(&mut self, node: Node<'t>) {
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
    pub(in crate::cpp) fn update(&mut self, node: Node<'t>) {
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
    pub(in crate::cpp) fn branch(&mut self, node: Node<'t>) -> bool {
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
        // A test on the dtype the analysis cannot decide (`if (is_half(x))`, `if (a == kHalf ||
        // a == kBFloat16)`): neither branch is proven to run on an fp32 problem.
        let undecided = match node.field("condition") {
            Some(c) if self.precision == Precision::Fp32 && self.dtype_condition(c) => Some(c),
            _ => None,
        };
        if let Some(c) = undecided {
            self.visit(c);
            let test: String = self.t(c).split_whitespace().collect::<Vec<_>>().join(" ");
            let test = test
                .strip_prefix('(')
                .and_then(|t| t.strip_suffix(')'))
                .unwrap_or(&test)
                .to_string();
            self.dtype_tests.push(test);
            for field in ["consequence", "alternative"] {
                if let Some(b) = node.field(field) {
                    self.visit(b);
                }
            }
            self.dtype_tests.pop();
            return false;
        }
        true
    }

    /// A condition that looks at the dtype: its text (bool locals read through) names one, or
    /// it calls a function of the source whose body does (`is_half(x)`).
    pub(in crate::cpp) fn dtype_condition(&self, cond: Node<'t>) -> bool {
        let text = self.condition_text(cond, 0);
        if rules::precision::dtype_text(&text) {
            return true;
        }
        // `name(` in the condition: a helper defined earlier in the source.
        let bytes = text.as_bytes();
        let mut start = None;
        for (i, &b) in bytes.iter().enumerate() {
            let ident = b.is_ascii_alphanumeric() || b == b'_';
            match (ident, start) {
                (true, None) => start = Some(i),
                (false, Some(s)) => {
                    if b == b'(' {
                        let name = &text[s..i];
                        if self.funcs.iter().any(|f| {
                            f.name == name
                                && rules::precision::dtype_text(&self.text[f.range.clone()])
                        }) {
                            return true;
                        }
                    }
                    start = None;
                }
                _ => {}
            }
        }
        false
    }

    /// Which branches of an `if` on this condition fp32 inputs never take: (the consequence,
    /// the alternative). Bool locals are read through (`const bool h = x.scalar_type() ==
    /// at::kHalf; if (h && n % 2 == 0)`).
    pub(in crate::cpp) fn dtype_branches(&self, cond: Node<'t>) -> (bool, bool) {
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
    pub(in crate::cpp) fn condition_text(&self, n: Node<'t>, depth: u32) -> String {
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
    pub(in crate::cpp) fn case(&mut self, node: Node<'t>) -> bool {
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
    pub(in crate::cpp) fn template(&mut self, node: Node<'t>) -> bool {
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
    pub(in crate::cpp) fn field_declaration(&mut self, node: Node<'t>) {
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
}
