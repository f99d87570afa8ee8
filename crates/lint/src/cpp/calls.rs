//! Calls and operators: kernel launches, tensor methods, free functions and their rules.

use super::*;

impl<'t> Analyzer<'t> {
    pub(in crate::cpp) fn call(&mut self, node: Node<'t>) {
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
    pub(in crate::cpp) fn kernel_launch(&mut self, node: Node<'t>, func: Node<'t>, cfg: Node<'t>) {
        let kernel = self
            .qualname(func)
            .map(|q| last_segment(&q).to_string())
            .unwrap_or_default();
        self.record_param_passes(&kernel, node);
        if let Some(i) = self.cur {
            self.funcs[i].launches.insert(kernel.clone());
            if self.half_depth == 0 && self.dtype_tests.is_empty() {
                self.funcs[i].full_launches.insert(kernel.clone());
            } else if self.half_depth == 0 {
                self.funcs[i].maybe_launches.insert(kernel.clone());
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
    pub(in crate::cpp) fn method_call(&mut self, node: Node<'t>, func: Node<'t>) {
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
    pub(in crate::cpp) fn function_call(&mut self, node: Node<'t>, func: Node<'t>) {
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
    pub(in crate::cpp) fn is_tensor_name(&self, name: &str) -> bool {
        let Some(i) = self.cur else { return false };
        self.funcs[i].kind == FuncKind::Host
            && (self.state.tensor_locals.contains(name)
                || self.funcs[i]
                    .params
                    .iter()
                    .any(|p| p.is_tensor && p.name == name))
    }

    /// `a * b` on tensors runs ATen kernels; `std::cout << "correct: ..."` forges output.
    pub(in crate::cpp) fn binary(&mut self, node: Node<'t>) {
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
    pub(in crate::cpp) fn plain_call(&mut self, node: Node<'t>, q: &str, last: &str) {
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
}
