//! KG101 `torch-op-fallback`, KG102 `nn-layer-fallback`, KG103 `matmul-operator`, KG104
//! `tensor-method-fallback`: PyTorch doing the work on the forward path. Whether they block or
//! warn is `lint_file`'s (partial replacement next to working custom code warns).

use super::*;
use crate::rule::RuleMeta;
use kernelgate_model::Severity::Error;

impl<'a, 'c> Checker<'a, 'c> {
    pub(super) fn torch_op(&mut self, r: std::ops::Range<usize>, msg: impl Into<String>) {
        self.push(Rule::KG101, r, msg);
    }

    pub(super) fn nn_layer_call(&mut self, r: std::ops::Range<usize>, msg: impl Into<String>) {
        self.push(Rule::KG102, r, msg);
    }

    pub(super) fn matmul_operator(&mut self, r: std::ops::Range<usize>, msg: impl Into<String>) {
        self.push(Rule::KG103, r, msg);
    }

    pub(super) fn tensor_method(&mut self, r: std::ops::Range<usize>, msg: impl Into<String>) {
        self.push(Rule::KG104, r, msg);
    }

    /// `self.act = torch.relu` / `OPS = {"act": F.gelu}` / `partial(F.gelu)`: a PyTorch op
    /// stored to be called later under a name the call site cannot resolve.
    pub(super) fn stored_torch_ops(&mut self, v: &Expr) {
        match v {
            Expr::List(l) => l.elts.iter().for_each(|e| self.stored_torch_ops(e)),
            Expr::Tuple(l) => l.elts.iter().for_each(|e| self.stored_torch_ops(e)),
            Expr::Dict(d) => d.iter_values().for_each(|e| self.stored_torch_ops(e)),
            Expr::Attribute(_) | Expr::Name(_) => {
                if let Some(q) = self.model.names.qualify(v) {
                    if torch_compute(&q) {
                        self.torch_op(range(v), format!("stores the PyTorch compute op `{q}` to call it later instead of your kernel"));
                    }
                }
            }
            // `partial(F.leaky_relu, ...)`, `staticmethod(F.relu)`: the op is still what runs.
            Expr::Call(c) => {
                let wrapper = match self.model.names.qualify(&c.func) {
                    Some(q) => q == "functools.partial",
                    None => {
                        matches!(c.func.as_ref(), Expr::Name(n) if matches!(n.id.as_str(), "staticmethod" | "classmethod"))
                    }
                };
                if wrapper {
                    if let Some(a) = c.arguments.args.first() {
                        self.stored_torch_ops(a);
                    }
                }
            }
            _ => {}
        }
    }

    /// `lambda t: torch.relu(t)` outside live code: it runs on the forward path through
    /// `self.act(x)`.
    pub(super) fn lambda_fallback(&mut self, l: &ruff_python_ast::ExprLambda) {
        let mut calls = Vec::new();
        collect_calls(&l.body, &mut calls);
        let params: HashSet<&str> = l
            .parameters
            .as_deref()
            .map(|p| p.iter().map(|p| p.name().as_str()).collect())
            .unwrap_or_default();
        for call in calls {
            if let Some(q) = self.model.names.qualify(&call.func) {
                if torch_compute(&q) {
                    self.torch_op(
                        range(call.func.as_ref()),
                        format!(
                            "a lambda calls the PyTorch compute op `{q}` instead of your kernel"
                        ),
                    );
                }
            } else if let Expr::Attribute(a) = call.func.as_ref() {
                // `lambda t: t.sigmoid()`: a tensor method on the lambda's argument.
                let m = a.attr.as_str();
                let on_param =
                    matches!(a.value.as_ref(), Expr::Name(n) if params.contains(n.id.as_str()));
                if on_param && tensor_compute_method(m) && !self.ext_functions.contains(m) {
                    self.tensor_method(range(&a.attr), format!("a lambda calls the tensor compute method `.{m}()` instead of your kernel"));
                }
            }
        }
    }

    /// `operator.methodcaller("sigmoid")`: a tensor compute method packaged to be called later.
    pub(super) fn methodcaller(&mut self, call: &ExprCall) {
        if let Some(m) = call
            .arguments
            .args
            .first()
            .and_then(|a| self.model.names.fold_str(a))
        {
            if tensor_compute_method(&m) && !self.ext_functions.contains(&m) {
                self.tensor_method(
                    range(call.func.as_ref()),
                    format!("`operator.methodcaller(\"{m}\")` packages a tensor compute method to call instead of your kernel"),
                );
            }
        }
    }

    /// `class ModelNew(nn.Linear)`: the layer's forward runs when ModelNew has none or calls
    /// `super().forward(...)`.
    pub(super) fn check_layer_base(&mut self, class: &'a ruff_python_ast::StmtClassDef) {
        let Some(layer) = self.layer_base(class, 0) else {
            return;
        };
        struct S {
            hits: Vec<std::ops::Range<usize>>,
        }
        impl<'v> Visitor<'v> for S {
            fn visit_expr(&mut self, expr: &'v Expr) {
                if let Expr::Call(c) = expr {
                    if let Expr::Attribute(a) = c.func.as_ref() {
                        let sup = matches!(a.value.as_ref(), Expr::Call(s) if matches!(s.func.as_ref(), Expr::Name(n) if n.id.as_str() == "super"));
                        if sup && matches!(a.attr.as_str(), "forward" | "__call__" | "_call_impl") {
                            self.hits.push(range(c.func.as_ref()));
                        }
                    }
                }
                visitor::walk_expr(self, expr);
            }
        }
        let mut v = S { hits: Vec::new() };
        for s in &class.body {
            v.visit_stmt(s);
        }
        let own_forward = class
            .body
            .iter()
            .any(|s| matches!(s, Stmt::FunctionDef(f) if f.name.as_str() == "forward"));
        if !own_forward {
            let at = class
                .bases()
                .first()
                .map(range)
                .unwrap_or(range(&class.name));
            self.nn_layer_call(at, format!("`ModelNew` inherits `forward` from the PyTorch layer `{layer}`: PyTorch computes it"));
        }
        for r in v.hits {
            self.nn_layer_call(r, format!("`super()` runs the forward of the PyTorch layer `{layer}`: pass its weights to your kernel instead"));
        }
    }
}

impl<'a> LiveVisitor<'_, 'a, '_> {
    pub(super) fn operator_finding(&mut self, r: std::ops::Range<usize>, op: &str) {
        self.c.tensor_method(
            r,
            format!("`{op}` on a tensor runs a PyTorch kernel on the forward path instead of your kernel"),
        );
    }

    /// The source position of the operator between two operands.
    pub(super) fn op_range(
        &self,
        left: &Expr,
        right: &Expr,
        whole: &Expr,
    ) -> std::ops::Range<usize> {
        let (l, r) = (usize::from(left.end()), usize::from(right.start()));
        let between = &self.c.ctx.source[l..r];
        match between.find(|c: char| !c.is_whitespace() && c != ')' && c != '(') {
            Some(i) => {
                let len = between[i..]
                    .find(|c: char| c.is_whitespace() || c == '(' || c.is_alphanumeric())
                    .unwrap_or(1)
                    .max(1);
                l + i..l + i + len
            }
            None => range(whole),
        }
    }

    pub(super) fn layer_target(&self, e: &Expr) -> Option<String> {
        match e {
            Expr::Subscript(s) => self.layer_target(&s.value),
            Expr::Attribute(a)
                if matches!(
                    a.attr.as_str(),
                    "forward" | "__call__" | "_call_impl" | "_wrapped_call_impl"
                ) =>
            {
                self.layer_target(&a.value)
            }
            Expr::Call(c) => self.c.layer_kind(c),
            Expr::Name(n) if self.local_layers.contains(n.id.as_str()) => Some(n.id.to_string()),
            other => key_of(other).and_then(|k| self.c.layers.get(&k).cloned()),
        }
    }

    /// A PyTorch op or tensor compute method referred to as a value on the forward path
    /// (`(getattr(ext, "relu", None) or torch.relu)(x)`, `f = x.sigmoid; f()`): it is there
    /// to be called. Returns true when reported.
    pub(super) fn value_ref(&mut self, expr: &'a Expr) -> bool {
        if self.handled.contains(&usize::from(expr.start())) {
            return false;
        }
        if let Some(q) = self.c.model.names.qualify(expr) {
            if torch_compute(&q) {
                self.c.torch_op(range(expr), format!("refers to the PyTorch compute op `{q}` on the forward path, to call it instead of your kernel"));
                return true;
            }
            return false;
        }
        if let Expr::Attribute(a) = expr {
            let m = a.attr.as_str();
            if tensor_compute_method(m) && self.is_tensor(&a.value) {
                self.c.tensor_method(range(&a.attr), format!("takes the tensor compute method `.{m}` on the forward path, to call it instead of your kernel"));
                return true;
            }
        }
        false
    }

    /// `a @ b` on the forward path.
    pub(super) fn matmul_binop(&mut self, b: &ruff_python_ast::ExprBinOp, expr: &Expr) {
        let (l, r) = (usize::from(b.left.end()), usize::from(b.right.start()));
        let at = self.c.ctx.source[l..r]
            .find('@')
            .map(|i| l + i..l + i + 1)
            .unwrap_or_else(|| range(expr));
        self.c.matmul_operator(
            at,
            "`@` multiplies tensors with PyTorch's matmul instead of your kernel",
        );
    }

    /// `y @= w`, `y *= 2` on a tensor.
    pub(super) fn augmented_operator(&mut self, stmt: &Stmt, a: &ruff_python_ast::StmtAugAssign) {
        if a.op == Operator::MatMult {
            self.c
                .matmul_operator(range(stmt), "`@=` multiplies tensors with PyTorch's matmul");
        } else if self.is_tensor(&a.target) {
            let r = self.op_range(&a.target, &a.value, &a.target);
            let op = format!("{}=", a.op.as_str());
            self.operator_finding(r, &op);
        }
    }

    /// `x > 0`, `y == z` on tensors (identity and membership tests are not kernels).
    pub(super) fn tensor_comparison(&mut self, c: &ruff_python_ast::ExprCompare, expr: &Expr) {
        let ordering = c.ops.iter().any(|o| {
            !matches!(
                o,
                ruff_python_ast::CmpOp::Is
                    | ruff_python_ast::CmpOp::IsNot
                    | ruff_python_ast::CmpOp::In
                    | ruff_python_ast::CmpOp::NotIn
            )
        });
        if ordering && (self.is_tensor(&c.left) || c.comparators.iter().any(|x| self.is_tensor(x)))
        {
            let first = c
                .comparators
                .first()
                .map(|r| self.op_range(&c.left, r, expr));
            let op = c.ops.first().map(|o| o.as_str()).unwrap_or("==");
            self.operator_finding(first.unwrap_or_else(|| range(expr)), op);
        }
    }

    /// `getattr(x, "sig" + "moid")()`: a tensor method under a built name.
    pub(super) fn getattr_tensor_method(&mut self, call: &ExprCall) {
        let obj = &call.arguments.args[0];
        if self.c.model.names.qualify(obj).is_none() {
            if let Some(m) = self.c.model.names.fold_str(&call.arguments.args[1]) {
                if tensor_compute_method(&m) && !self.c.is_ext_call_target(obj, &m) {
                    self.c.tensor_method(range(call), format!("`getattr(..., \"{m}\")` fetches a tensor compute method on the forward path"));
                }
            }
        }
    }

    /// `operator.add(y, b)` and friends on tensors.
    pub(super) fn operator_function(&mut self, call: &ExprCall, q: &str, op: &str) {
        let arith = matches!(
            op.trim_matches('_'),
            "add"
                | "iadd"
                | "sub"
                | "isub"
                | "mul"
                | "imul"
                | "truediv"
                | "itruediv"
                | "floordiv"
                | "pow"
                | "ipow"
                | "neg"
                | "abs"
                | "mod"
                | "lt"
                | "le"
                | "gt"
                | "ge"
                | "eq"
                | "ne"
        );
        if arith && call.arguments.args.iter().any(|a| self.tensor_operand(a)) {
            self.operator_finding(range(call.func.as_ref()), q);
        }
    }

    /// A PyTorch compute function called: `torch.softmax(x)`, `Fn.relu(x)` (shown as spelled).
    pub(super) fn torch_function_call(&mut self, call: &ExprCall, q: &str) {
        let spelled = self.c.text(call.func.as_ref());
        let shown = if spelled == q {
            format!("`{q}`")
        } else {
            format!("`{spelled}` (`{q}`)")
        };
        self.c.torch_op(
            range(call.func.as_ref()),
            format!("{shown} runs a PyTorch compute op on the forward path instead of your kernel"),
        );
    }

    /// `sum(parts)`, `abs(y)`: Python builtins on tensors dispatch to PyTorch's kernels.
    pub(super) fn builtin_on_tensors(&mut self, call: &ExprCall, q: Option<&str>) {
        let Expr::Name(n) = call.func.as_ref() else {
            return;
        };
        let builtin = q.is_none()
            && matches!(
                n.id.as_str(),
                "sum" | "abs" | "pow" | "round" | "max" | "min"
            )
            && !self
                .c
                .module
                .body
                .iter()
                .any(|s| matches!(s, Stmt::FunctionDef(d) if d.name.as_str() == n.id.as_str()));
        let on_tensors = call.arguments.args.iter().any(|a| {
            self.is_tensor(a)
                || matches!(a, Expr::Name(m) if self.tensor_lists.contains(m.id.as_str()))
        });
        if builtin && on_tensors {
            let name = n.id.to_string();
            self.operator_finding(range(call.func.as_ref()), &format!("{name}()"));
        }
    }

    /// `.numpy()`/`.tolist()`: the host computes.
    pub(super) fn host_conversion(&mut self, call: &ExprCall) {
        let Expr::Attribute(a) = call.func.as_ref() else {
            return;
        };
        if matches!(a.attr.as_str(), "numpy" | "tolist")
            && call.arguments.is_empty()
            && self.c.model.names.qualify(&a.value).is_none()
        {
            self.c.tensor_method(
                range(&a.attr),
                format!("`.{}()` moves the tensor to the host on the forward path: the host computes, not your kernel", a.attr),
            );
        }
    }

    /// `self.fc(x)`, `layer.forward(x)`: a PyTorch layer called.
    pub(super) fn layer_call(&mut self, call: &ExprCall, q: Option<&str>) {
        if let Some(layer) = self.layer_target(&call.func) {
            if q.is_none_or(|q| !nn_layer(q)) {
                let msg = format!("calls the PyTorch layer `{}` ({layer}) on the forward path: PyTorch computes it, pass its weights to your kernel instead", self.c.text(call.func.as_ref()));
                self.c.nn_layer_call(range(call.func.as_ref()), msg);
            }
        }
    }

    /// `y.sigmoid()` on something that is not a module, `self`, or a literal.
    pub(super) fn compute_method_call(&mut self, call: &ExprCall) {
        let Expr::Attribute(a) = call.func.as_ref() else {
            return;
        };
        let m = a.attr.as_str();
        let recv = a.value.as_ref();
        let plain_receiver = self.c.model.names.qualify(recv).is_none()
            && !matches!(recv, Expr::Name(n) if n.id.as_str() == "self" || n.id.as_str() == "cls")
            && !matches!(
                recv,
                Expr::StringLiteral(_)
                    | Expr::List(_)
                    | Expr::Dict(_)
                    | Expr::Tuple(_)
                    | Expr::NumberLiteral(_)
            );
        let args_ok = m != "log" || call.arguments.is_empty();
        if plain_receiver
            && args_ok
            && tensor_compute_method(m)
            && !self.c.is_ext_call_target(recv, m)
        {
            self.c.tensor_method(
                range(&a.attr),
                format!(
                    "`.{m}()` runs a PyTorch kernel on the forward path instead of your kernel"
                ),
            );
        }
    }

    /// `map(torch.sigmoid, xs)`, `apply(F.relu, x)`: compute functions passed as values.
    pub(super) fn torch_ops_as_arguments(&mut self, call: &ExprCall, q: Option<&str>) {
        for arg in call
            .arguments
            .args
            .iter()
            .chain(call.arguments.keywords.iter().map(|k| &k.value))
        {
            if matches!(arg, Expr::Attribute(_) | Expr::Name(_)) {
                if let Some(aq) = self.c.model.names.qualify(arg) {
                    if torch_compute(&aq) && !matches!(q, Some("builtins.isinstance")) {
                        self.c.torch_op(range(arg), format!("passes the PyTorch compute op `{aq}` to be called on the forward path"));
                    }
                }
            }
        }
    }
}

/// CuPy's array functions call its own (cuBLAS, cuDNN, CUB) kernels; `RawKernel`,
/// `RawModule`, `ElementwiseKernel`, `ReductionKernel` and conversions are how a candidate
/// writes its own.
pub(super) fn cupy_compute(q: &str) -> bool {
    let Some(f) = q.strip_prefix("cupy.") else {
        return false;
    };
    let head = f.split('.').next().unwrap_or(f);
    !matches!(
        head,
        "RawKernel"
            | "RawModule"
            | "ElementwiseKernel"
            | "ReductionKernel"
            | "asarray"
            | "array"
            | "from_dlpack"
            | "fromDlpack"
            | "empty"
            | "empty_like"
            | "zeros"
            | "zeros_like"
            | "ones"
            | "full"
            | "cuda"
            | "dtype"
            | "float32"
            | "float16"
            | "int32"
            | "int64"
            | "ndarray"
            | "get_array_module"
    )
}

// ---------------------------------------------------------------- registry entries

pub(crate) const KG101: RuleMeta = RuleMeta {
    code: "KG101",
    name: "torch-op-fallback",
    severity: Error,
    summary: "A PyTorch compute op runs in ModelNew's code path",
    error_when: "`forward` provably runs no custom code: every call on the forward path resolved and none reaches an extension function that launches a working kernel (its result used) or a working Triton kernel; or the op is one the runtime audit cannot judge (`torch.compile`, host work such as `.numpy()`), whatever runs next to it",
    warn_when: "custom code provably runs next to it (partial replacement), or it is not proven that none does: a call on the forward path did not resolve (a factory's result, a container, a wrapper, a callback, an alias, a `torch.ops` op registered outside Python) while the file has custom code, or an extension function `forward` calls hands its kernel on as a value; the runtime op audit decides",
    doc: "Code reachable from `ModelNew.forward` calls a PyTorch compute function (`torch.matmul`, `torch.nn.functional.softmax`, `torch.compile`, `torch.ops.aten.*`, `torch._VF.*`, `torch.__dict__[\"...\"]`, ...), under any alias, through a constant-foldable `getattr`, stored in a class attribute, a container or a `functools.partial`, or in a decorator (`@torch.compile`), or taken as a value to call later (`getattr(ext, \"gelu\", None) or F.gelu`, `operator.attrgetter(\"sigmoid\")(torch)`); CuPy's and nvmath's library functions (`cupy.matmul`) count too. The work is then done by PyTorch's kernels, not the candidate's, and the measured speedup is PyTorch's. Allocation and metadata (`torch.empty`, `empty_like`, `zeros`, `view`, `reshape`, `cat`, `F.pad`, ...) are allowed, and so are branches the problem never takes (`if self.bias is not None:` when `get_init_inputs()` gives no bias, `if not x.is_cuda:`, a half-precision path on an fp32 problem). Move the computation into your kernel. Next to custom code that provably runs (an extension function that launches a working kernel and whose result `forward` uses, or a working Triton kernel launched from `forward`'s path) this is partial replacement, which KernelBench allows: a warning, and the runtime op audit measures how much PyTorch still does. With no such code (KG702, or only a decoy) it is an error. `torch.compile` and host work (`.numpy()`, `.apply_()`) stay errors: the audit would count the compiler's kernels as the candidate's and cannot see the host's work.",
    bad: "import torch.nn.functional as Fn\n\ndef forward(self, x):\n    return Fn.softmax(x, dim=1)",
    good: "def forward(self, x):\n    out = torch.empty_like(x)\n    softmax_ext.softmax(x, out)\n    return out",
};

pub(crate) const KG102: RuleMeta = RuleMeta {
    code: "KG102",
    name: "nn-layer-fallback",
    severity: Error,
    summary: "A torch.nn compute layer is called in ModelNew's code path",
    error_when: "`forward` provably runs no custom code: every call on the forward path resolved and none reaches an extension function that launches a working kernel (its result used) or a working Triton kernel",
    warn_when: "custom code provably runs next to it (partial replacement), or it is not proven that none does: a call on the forward path did not resolve while the file has custom code, or an extension function `forward` calls hands its kernel on as a value; the runtime op audit decides",
    doc: "A `torch.nn` compute layer (`nn.Linear`, `nn.Conv2d`, `nn.ReLU`, ..., or a class derived from one) is invoked from code reachable from `ModelNew.forward` (also as `layer.forward(x)`, `layer._call_impl(x)`, or `super().forward(x)` in a `ModelNew` that subclasses the layer), so PyTorch does the work. Creating the layer only to hold parameters with the reference's initialisation is fine: pass `self.linear.weight` to your kernel instead of calling `self.linear(x)`. Next to custom code that provably runs (an extension function that launches a working kernel and whose result `forward` uses, or a working Triton kernel launched from `forward`'s path) this is partial replacement, which KernelBench allows: a warning, and the runtime op audit measures how much PyTorch still does. With no such code (KG702, or only a decoy) it is an error.",
    bad: "def __init__(self):\n    self.fc = nn.Linear(128, 64)\n\ndef forward(self, x):\n    return self.fc(x)",
    good: "def forward(self, x):\n    return gemm_ext.linear(x, self.fc.weight, self.fc.bias)",
};

pub(crate) const KG103: RuleMeta = RuleMeta {
    code: "KG103",
    name: "matmul-operator",
    severity: Error,
    summary: "The `@` operator multiplies tensors with PyTorch",
    error_when: "whenever `@` multiplies tensors on the forward path",
    warn_when: "never from its own analysis (`[lint] severity` can lower it per repository)",
    doc: "`a @ b` (and `a @= b`) on tensors dispatches to PyTorch's matmul. In code reachable from `ModelNew.forward` this replaces the custom kernel with cuBLAS. Call your kernel instead.",
    bad: "def forward(self, a, b):\n    return a @ b",
    good: "def forward(self, a, b):\n    return matmul_ext.matmul(a, b)",
};

pub(crate) const KG104: RuleMeta = RuleMeta {
    code: "KG104",
    name: "tensor-method-fallback",
    severity: Error,
    summary: "A tensor compute method or operator runs in ModelNew's code path",
    error_when: "`forward` provably runs no custom code (every call on the forward path resolved, none reaches working custom code), or the method is host work the runtime audit cannot see (`.numpy()`, `.apply_()`, `.tolist()`)",
    warn_when: "custom code provably runs next to it (partial replacement), or it is not proven that none does (an unresolved call on the forward path while the file has custom code, or a kernel handed on as a value in C++); the runtime op audit decides",
    doc: "A tensor method that computes (`x.sigmoid()`, `x.matmul(w)`, `x.sum(dim=1)`, `x.relu_()`, `y.add_(b)`, `y.__mul__(2)`, ...) is called from code reachable from `ModelNew.forward`, or an arithmetic or comparison operator is applied to a tensor `forward` holds (an input, a kernel's result, a view of either: `y * scale`, `-x`, `y *= 2`, `x > 0`, `operator.add(y, b)`, `sum(parts)`), or the tensor is handed to NumPy (`.numpy()`). It runs a PyTorch kernel (or the host) instead of yours. Metadata and layout methods (`size`, `view`, `reshape`, `contiguous`, `data_ptr`, `to(device)`, `clone`, `t`, ...) are allowed; calls on the extension module returned by `load_inline` are not tensor methods. Next to custom code that provably runs (an extension function that launches a working kernel and whose result `forward` uses, or a working Triton kernel launched from `forward`'s path) this is partial replacement, which KernelBench allows: a warning, and the runtime op audit measures how much PyTorch still does. With no such code (KG702, or only a decoy) it is an error.",
    bad: "def forward(self, x):\n    return x.sigmoid()",
    good: "def forward(self, x):\n    return sigmoid_ext.sigmoid(x.contiguous())",
};
