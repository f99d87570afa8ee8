//! Functions and declarations: a function's model ([`Func`]), where a variable lives
//! ([`Storage`]), locals that alias tensors, `return`.

use super::*;

impl<'t> Analyzer<'t> {
    pub(in crate::cpp) fn function(&mut self, node: Node<'t>) {
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
            maybe_launches: HashSet::default(),
            value_refs: HashSet::default(),
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

    pub(in crate::cpp) fn declaration(&mut self, node: Node<'t>) {
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
    pub(in crate::cpp) fn storage_of(&mut self, node: Node<'t>) -> Storage {
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
    pub(in crate::cpp) fn remember_static_pointer(&mut self, d: Node<'t>) {
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
    pub(in crate::cpp) fn local_declaration(&mut self, ty: &str, d: Node<'t>) {
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

    pub(in crate::cpp) fn is_empty_alloc(&self, v: Node<'t>) -> bool {
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

    pub(in crate::cpp) fn ret(&mut self, node: Node<'t>) {
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
}
