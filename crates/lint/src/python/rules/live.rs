//! The live pass: the code reachable from `ModelNew.forward`, walked over the branches the
//! problem takes. `LiveVisitor` tracks what the rules need to know about values (which locals
//! hold tensors, which alias an input, which are fresh allocations, what extension functions
//! receive) and dispatches every statement and call to the rule families.

use super::*;

impl<'a, 'c> Checker<'a, 'c> {
    /// The live pass: every function reachable from `ModelNew.forward`, callers before
    /// callees, each walked over its live branches only.
    pub(super) fn live_pass(&mut self) {
        let module = self.module;
        let model = self.model;
        let functions: Vec<(&'a StmtFunctionDef, bool, bool, bool)> = model
            .reach
            .functions
            .iter()
            .map(|(f, owner)| {
                let entry = matches!(f.name.as_str(), "forward" | "__call__")
                    && owner.is_some_and(|o| o.name.as_str() == "ModelNew");
                let model_method = crate::python::consts::is_model_method(*owner, module);
                (*f, entry, owner.is_some(), model_method)
            })
            .collect();
        // Which arguments of a helper got a tensor at a live call site (`self._post(y)`): the
        // helper's parameters at those places hold tensors too. Callers come before callees.
        let mut tensor_args: HashMap<String, (HashSet<usize>, HashSet<String>)> =
            HashMap::default();
        let mut counters: Vec<(String, std::ops::Range<usize>)> = Vec::new();
        let mut tests: Vec<(String, std::ops::Range<usize>)> = Vec::new();
        for (f, entry, is_method, model_method) in functions {
            if self.gpu_dsl(f) {
                continue;
            }
            self.memoised(f);
            let tensors = if entry {
                tensor_params(f)
            } else {
                helper_tensor_params(f, is_method, tensor_args.get(f.name.as_str()))
            };
            let inputs = if entry {
                tensor_params(f)
                    .into_iter()
                    .map(|p| (p.clone(), p))
                    .collect()
            } else {
                HashMap::default()
            };
            let mut v = LiveVisitor {
                c: self,
                local_layers: HashSet::default(),
                globals: global_names(f),
                counters: Vec::new(),
                tests: Vec::new(),
                tensors,
                tensor_lists: HashSet::default(),
                tensor_args: std::mem::take(&mut tensor_args),
                inputs,
                entry,
                body: &f.body,
                handled: HashSet::default(),
                model_method,
                discarded: HashSet::default(),
                allocs: HashSet::default(),
            };
            for d in &f.decorator_list {
                // `@torch.compile` on a live function runs Inductor's kernels.
                v.visit_expr(&d.expression);
            }
            let scope = crate::python::consts::Scope {
                facts: &model.facts,
                self_is_model: model_method,
            };
            crate::python::reach::walk_live_in(&mut v, &f.body, scope);
            tensor_args = std::mem::take(&mut v.tensor_args);
            // A helper that bumps a counter is a counter itself: `if _tick() > 3:`.
            if let Some((_, r)) = v.counters.first() {
                let r = r.clone();
                counters.push((f.name.to_string(), r.clone()));
                counters.push((format!("self.{}", f.name), r));
            }
            counters.extend(v.counters);
            tests.extend(v.tests);
        }
        counters.extend(closure_counters(self.module));
        self.phase_branches(tests, counters);
    }
}

pub(super) struct LiveVisitor<'x, 'a, 'c> {
    pub(super) c: &'x mut Checker<'a, 'c>,
    pub(super) local_layers: HashSet<String>,
    /// Names declared `global`/`nonlocal`: state that outlives the call.
    pub(super) globals: HashSet<String>,
    /// Call counters incremented here: (key, range of the increment).
    pub(super) counters: Vec<(String, std::ops::Range<usize>)>,
    /// Names and `self.<attr>`s tested in conditions: (key, range of the test).
    pub(super) tests: Vec<(String, std::ops::Range<usize>)>,
    /// Local names known to hold tensors: `forward`'s inputs, extension results, allocations
    /// and views of those.
    pub(super) tensors: HashSet<String>,
    /// Local names holding lists of such tensors (`parts = [ext.run(c) for c in ...]`).
    pub(super) tensor_lists: HashSet<String>,
    /// Function name -> positions and keywords that received a tensor at a live call.
    pub(super) tensor_args: HashMap<String, (HashSet<usize>, HashSet<String>)>,
    /// `forward`'s input tensors and local views of them (same storage).
    pub(super) inputs: HashMap<String, String>,
    /// Start offsets of call targets and arguments already judged by `check_live_call`.
    pub(super) handled: HashSet<usize>,
    /// Visiting `ModelNew.forward` itself.
    pub(super) entry: bool,
    /// The body of the function being visited.
    pub(super) body: &'a [Stmt],
    /// A method of `ModelNew`: `self` is the instance the problem's facts describe.
    pub(super) model_method: bool,
    /// Start offsets of calls whose result is thrown away (`ext.run(x)` as a statement).
    pub(super) discarded: HashSet<usize>,
    /// Locals bound to a fresh allocation (`ws = torch.empty(...)`).
    pub(super) allocs: HashSet<String>,
}

/// Methods that return a tensor sharing storage with the receiver.
pub(super) const SAME_STORAGE: &[&str] = &[
    "view",
    "view_as",
    "reshape",
    "reshape_as",
    "contiguous",
    "flatten",
    "permute",
    "transpose",
    "t",
    "detach",
    "squeeze",
    "unsqueeze",
    "expand",
    "expand_as",
    "narrow",
    "select",
    "as_strided",
    "unflatten",
    "movedim",
];

/// The parameters of a helper that received tensors at live call sites (minus `self`).
pub(super) fn helper_tensor_params(
    f: &StmtFunctionDef,
    is_method: bool,
    seen: Option<&(HashSet<usize>, HashSet<String>)>,
) -> HashSet<String> {
    let Some((pos, kw)) = seen else {
        return HashSet::default();
    };
    let scalar = |p: &ruff_python_ast::Parameter| {
        p.annotation.as_deref().is_some_and(|a| {
            matches!(a, Expr::Name(n) if matches!(n.id.as_str(), "int" | "float" | "bool" | "str"))
        })
    };
    f.parameters
        .posonlyargs
        .iter()
        .chain(f.parameters.args.iter())
        .skip(is_method as usize)
        .enumerate()
        .filter(|(i, p)| {
            (pos.contains(i) || kw.contains(p.parameter.name.as_str())) && !scalar(&p.parameter)
        })
        .map(|(_, p)| p.parameter.name.to_string())
        .collect()
}

/// `forward`'s parameters that carry tensors: not `self`, not annotated as a Python scalar,
/// without a non-`None` default (`_memo={}`, `dim=1`).
pub(super) fn tensor_params(f: &StmtFunctionDef) -> HashSet<String> {
    f.parameters
        .iter_non_variadic_params()
        .filter(|p| p.parameter.name.as_str() != "self")
        .filter(|p| p.default.as_deref().is_none_or(|d| d.is_none_literal_expr()))
        .filter(|p| {
            !p.parameter.annotation.as_deref().is_some_and(|a| {
                matches!(a, Expr::Name(n) if matches!(n.id.as_str(), "int" | "float" | "bool" | "str"))
            })
        })
        .map(|p| p.parameter.name.to_string())
        .collect()
}

/// Tensor methods that return a view or a copy of the same values (the result is a tensor).
pub(super) const TENSOR_LAYOUT: &[&str] = &[
    "view",
    "view_as",
    "reshape",
    "reshape_as",
    "contiguous",
    "flatten",
    "permute",
    "transpose",
    "t",
    "clone",
    "detach",
    "to",
    "float",
    "squeeze",
    "unsqueeze",
    "expand",
    "expand_as",
    "narrow",
    "select",
    "cuda",
];

impl<'a> LiveVisitor<'_, 'a, '_> {
    /// Does this expression evaluate to a tensor we know of?
    pub(super) fn is_tensor(&self, e: &Expr) -> bool {
        match e {
            Expr::Name(n) => self.tensors.contains(n.id.as_str()),
            Expr::Subscript(s) => self.is_tensor(&s.value),
            Expr::BinOp(b) => self.tensor_operand(&b.left) || self.tensor_operand(&b.right),
            Expr::UnaryOp(u) => self.is_tensor(&u.operand),
            Expr::Call(c) => match c.func.as_ref() {
                Expr::Attribute(a) => {
                    if let Some(q) = self.c.model.names.qualify(&c.func) {
                        let f = q.strip_prefix("torch.").unwrap_or("");
                        under(&q, "torch")
                            && (f.starts_with("empty")
                                || f.starts_with("zeros")
                                || f.starts_with("ones")
                                || f.starts_with("full"))
                    } else if self.c.is_ext_call_target(&a.value, a.attr.as_str()) {
                        true
                    } else {
                        TENSOR_LAYOUT.contains(&a.attr.as_str()) && self.is_tensor(&a.value)
                    }
                }
                _ => false,
            },
            _ => false,
        }
    }

    /// Is `offset` inside an `if` that tests for an empty input (`if x.numel() == 0:`)? An
    /// empty output is then the right answer, not an unwritten one.
    pub(super) fn under_empty_input_guard(&self, offset: usize) -> bool {
        struct G<'s> {
            src: &'s str,
            offset: usize,
            found: bool,
        }
        impl<'v> Visitor<'v> for G<'_> {
            fn visit_stmt(&mut self, stmt: &'v Stmt) {
                if let Stmt::If(i) = stmt {
                    let in_body = i.body.first().zip(i.body.last()).is_some_and(|(a, b)| {
                        (usize::from(a.start())..usize::from(b.end())).contains(&self.offset)
                    });
                    if in_body {
                        let t = &self.src[range(i.test.as_ref())];
                        let t: String = t.chars().filter(|c| !c.is_whitespace()).collect();
                        if t.contains("==0") || t.contains("<=0") || t.contains("<1") {
                            self.found = true;
                        }
                    }
                }
                visitor::walk_stmt(self, stmt);
            }
        }
        let mut g = G {
            src: self.c.ctx.source,
            offset,
            found: false,
        };
        for s in self.body {
            g.visit_stmt(s);
        }
        g.found
    }

    /// The input an expression's storage belongs to (`x`, `x[0]`, `x.view(-1)`, `x.data`).
    pub(super) fn input_root(&self, e: &Expr) -> Option<String> {
        match e {
            Expr::Name(n) => self.inputs.get(n.id.as_str()).cloned(),
            Expr::Subscript(s) => self.input_root(&s.value),
            Expr::Attribute(a) if matches!(a.attr.as_str(), "data" | "T" | "mT") => {
                self.input_root(&a.value)
            }
            Expr::Call(c) => match c.func.as_ref() {
                Expr::Attribute(a) if SAME_STORAGE.contains(&a.attr.as_str()) => {
                    self.input_root(&a.value)
                }
                _ => None,
            },
            _ => None,
        }
    }

    /// An operand that makes an operator a PyTorch kernel: a known tensor, a comparison or
    /// negation of one.
    pub(super) fn tensor_operand(&self, e: &Expr) -> bool {
        match e {
            Expr::Compare(c) => {
                self.is_tensor(&c.left) || c.comparators.iter().any(|x| self.is_tensor(x))
            }
            Expr::UnaryOp(u) => self.is_tensor(&u.operand),
            other => self.is_tensor(other),
        }
    }

    /// A fresh allocation: `torch.empty(...)`, `torch.zeros_like(x)`, `x.new_empty(...)`.
    pub(super) fn is_alloc(&self, e: &Expr) -> bool {
        let Expr::Call(c) = e else { return false };
        if let Some(q) = self.c.model.names.qualify(&c.func) {
            return matches!(
                q.as_str(),
                "torch.empty"
                    | "torch.empty_like"
                    | "torch.empty_strided"
                    | "torch.zeros"
                    | "torch.zeros_like"
                    | "torch.ones"
                    | "torch.ones_like"
                    | "torch.full"
                    | "torch.full_like"
            );
        }
        matches!(c.func.as_ref(), Expr::Attribute(a) if matches!(a.attr.as_str(), "new_empty" | "new_zeros" | "new_ones" | "new_full"))
    }

    /// What an argument of an extension call is (see [`crate::python::ArgKind`]).
    pub(super) fn arg_kind(&self, e: &Expr) -> crate::python::ArgKind {
        use crate::python::ArgKind;
        if self.input_root(e).is_some() {
            return ArgKind::Input;
        }
        match e {
            Expr::NumberLiteral(_) | Expr::BooleanLiteral(_) | Expr::NoneLiteral(_) => {
                ArgKind::Owned
            }
            Expr::Attribute(a) if matches!(a.value.as_ref(), Expr::Name(n) if n.id.as_str() == "self") => {
                ArgKind::Owned
            }
            Expr::Name(n) if self.allocs.contains(n.id.as_str()) => ArgKind::Owned,
            Expr::Call(c) => match c.func.as_ref() {
                _ if self.is_alloc(e) => ArgKind::Owned,
                // `self.ws.view(-1)`, `out.contiguous()`: the receiver decides.
                Expr::Attribute(a) if SAME_STORAGE.contains(&a.attr.as_str()) => {
                    self.arg_kind(&a.value)
                }
                _ => ArgKind::Unknown,
            },
            _ => ArgKind::Unknown,
        }
    }

    /// `x[...] = v`, `y = x.view(...)`, `self.calls = self.calls + 1`: what an assignment
    /// writes and what its target holds afterwards.
    fn assign(&mut self, stmt: &'a Stmt, a: &'a ruff_python_ast::StmtAssign) {
        for t in &a.targets {
            self.target_mutation(t, "an assignment");
            // `self._pending = x` / `self.saved.append(x)` keep an input beyond the call.
            self.input_kept_in_self(stmt, t, &a.value);
        }
        if let [Expr::Name(n)] = a.targets.as_slice() {
            if let Some(origin) = self.input_root(&a.value) {
                self.inputs.insert(n.id.to_string(), origin);
            } else {
                self.inputs.remove(n.id.as_str());
            }
            let id = n.id.to_string();
            let list = match a.value.as_ref() {
                Expr::ListComp(l) => self.is_tensor(&l.elt),
                Expr::List(l) => !l.elts.is_empty() && l.elts.iter().all(|e| self.is_tensor(e)),
                _ => false,
            };
            if self.is_tensor(&a.value) {
                self.tensors.insert(id.clone());
            } else {
                self.tensors.remove(&id);
            }
            if list {
                self.tensor_lists.insert(id);
            }
        }
        // self.calls = self.calls + 1
        if let (Some(t), Expr::BinOp(b)) = (a.targets.first(), a.value.as_ref()) {
            let left = key_of(&b.left).or_else(|| self.getattr_self_key(&b.left));
            if let (Some(k), Some(k2)) = (self.counter_key(t), left) {
                if k == k2 {
                    self.counters.push((k, range(stmt)));
                }
            }
        }
        if let (Some(Expr::Name(n)), Expr::Call(c)) = (a.targets.first(), a.value.as_ref()) {
            if self.c.layer_kind(c).is_some() {
                self.local_layers.insert(n.id.to_string());
            }
        }
    }

    /// What `forward` passes an extension function, and which helpers get tensors.
    fn record_call(&mut self, call: &'a ExprCall, q: Option<&str>) {
        if let Expr::Attribute(a) = call.func.as_ref() {
            // On an extension object, or an exported name on something that is not a known
            // module (`torch.relu` is not the extension's `relu`).
            let on_ext = key_of(&a.value).is_some_and(|k| self.c.ext_objects.contains(&k))
                || (q.is_none() && self.c.ext_functions.contains(a.attr.as_str()));
            // A replaced `forward`'s own body is not evidence that custom code runs.
            if on_ext && !(self.entry && self.c.model.reach.forward_replaced) {
                let args = call
                    .arguments
                    .args
                    .iter()
                    .map(|x| self.arg_kind(x))
                    .collect();
                self.c.ext_calls.push(crate::python::ExtCall {
                    name: a.attr.to_string(),
                    result_used: !self.discarded.contains(&usize::from(call.start())),
                    args,
                });
            }
        }
        for a in call
            .arguments
            .args
            .iter()
            .chain(call.arguments.keywords.iter().map(|k| &k.value))
        {
            if matches!(a, Expr::Attribute(_) | Expr::Name(_)) {
                self.handled.insert(usize::from(a.start()));
            }
        }
        let callee = match call.func.as_ref() {
            Expr::Name(n) if q.is_none() => Some(n.id.to_string()),
            Expr::Attribute(a) if matches!(a.value.as_ref(), Expr::Name(n) if n.id.as_str() == "self") => {
                Some(a.attr.to_string())
            }
            _ => None,
        };
        if let Some(callee) = callee {
            for (i, a) in call.arguments.args.iter().enumerate() {
                if self.is_tensor(a) {
                    self.tensor_args
                        .entry(callee.clone())
                        .or_default()
                        .0
                        .insert(i);
                }
            }
            for k in call.arguments.keywords.iter() {
                if let Some(arg) = k.arg.as_ref().filter(|_| self.is_tensor(&k.value)) {
                    let e = self.tensor_args.entry(callee.clone()).or_default();
                    e.1.insert(arg.to_string());
                }
            }
        }
    }

    /// A call on the forward path: recorded, then judged by each family that knows it.
    fn check_live_call(&mut self, call: &'a ExprCall) {
        let q = self.c.model.names.qualify(&call.func);
        self.handled.insert(usize::from(call.func.start()));
        self.record_call(call, q.as_deref());
        let fr = range(call.func.as_ref());
        if let Some(q) = q.as_deref() {
            if q == "builtins.getattr" && call.arguments.args.len() >= 2 {
                self.getattr_tensor_method(call);
            }
            if let Some(op) = q.strip_prefix("operator.") {
                self.operator_function(call, q, op);
            }
            if matches!(
                q,
                "operator.matmul" | "operator.imatmul" | "operator.__matmul__"
            ) {
                self.c.matmul_operator(
                    fr.clone(),
                    format!(
                        "`{q}` multiplies tensors with PyTorch's matmul instead of your kernel"
                    ),
                );
            } else if torch_compute(q) {
                self.torch_function_call(call, q);
            } else if self.c.phase_call(q, fr.clone()) {
            } else if cupy_compute(q) {
                self.c.torch_op(
                    fr.clone(),
                    format!("`{q}` computes with CuPy's library kernels instead of your kernel"),
                );
            } else if is_clock(q) {
                self.c.clock_call(q, fr.clone());
            } else if q == "builtins.next" {
                // `next(self._calls)` on an `itertools.count()` is a call counter.
                if let Some(k) = call
                    .arguments
                    .args
                    .first()
                    .and_then(|a| self.counter_key(a))
                {
                    self.counters.push((k, range(call)));
                }
            }
        }
        self.builtin_on_tensors(call, q.as_deref());
        self.inplace_method(call);
        self.input_appended_to_self(call);
        self.host_conversion(call);
        self.layer_call(call, q.as_deref());
        self.compute_method_call(call);
        self.torch_ops_as_arguments(call, q.as_deref());
    }
}

impl<'a> Visitor<'a> for LiveVisitor<'_, 'a, '_> {
    fn visit_stmt(&mut self, stmt: &'a Stmt) {
        match stmt {
            Stmt::AugAssign(a) => {
                self.augmented_operator(stmt, a);
                if a.op != Operator::MatMult {
                    self.augmented_mutation(a);
                }
                if matches!(a.op, Operator::Add | Operator::Sub) {
                    if let Some(k) = self.counter_key(&a.target) {
                        self.counters.push((k, range(stmt)));
                    }
                }
            }
            Stmt::Assign(a) => self.assign(stmt, a),
            Stmt::For(f) => {
                if self.layer_target(&f.iter).is_some() {
                    if let Expr::Name(n) = f.target.as_ref() {
                        self.local_layers.insert(n.id.to_string());
                    }
                }
            }
            Stmt::If(s) => self.record_test(&s.test),
            Stmt::While(s) => self.record_test(&s.test),
            Stmt::Return(r) if self.entry && !self.c.calls_nothing(self.body) => {
                self.returned_input(stmt, r);
                self.unwritten_output(stmt, r);
            }
            Stmt::FunctionDef(f) if self.c.gpu_dsl(f) => return,
            _ => {}
        }
        if let Stmt::Expr(e) = stmt {
            if let Expr::Call(c) = e.value.as_ref() {
                self.discarded.insert(usize::from(c.start()));
            }
        }
        if let Stmt::Assign(a) = stmt {
            if let [Expr::Name(n)] = a.targets.as_slice() {
                if self.is_alloc(&a.value) {
                    self.allocs.insert(n.id.to_string());
                } else {
                    self.allocs.remove(n.id.as_str());
                }
            }
        }
        let scope = crate::python::consts::Scope {
            facts: &self.c.model.facts,
            self_is_model: self.model_method,
        };
        walk_stmt_live(self, stmt, scope);
    }

    fn visit_expr(&mut self, expr: &'a Expr) {
        match expr {
            Expr::BinOp(b) if b.op == Operator::MatMult => self.matmul_binop(b, expr),
            Expr::If(i) => self.record_test(&i.test),
            Expr::BinOp(b) if self.tensor_operand(&b.left) || self.tensor_operand(&b.right) => {
                let r = self.op_range(&b.left, &b.right, expr);
                self.operator_finding(r, b.op.as_str());
            }
            Expr::UnaryOp(u)
                if matches!(
                    u.op,
                    ruff_python_ast::UnaryOp::USub | ruff_python_ast::UnaryOp::Invert
                ) && self.is_tensor(&u.operand) =>
            {
                let s = usize::from(expr.start());
                self.operator_finding(s..s + 1, u.op.as_str());
            }
            Expr::Compare(c) => {
                self.identity_compare(c);
                self.tensor_comparison(c, expr);
            }
            Expr::Call(call) => self.check_live_call(call),
            Expr::Attribute(_) | Expr::Name(_)
                if !matches!(expr, Expr::Name(n) if !n.ctx.is_load())
                    && !matches!(expr, Expr::Attribute(a) if !a.ctx.is_load())
                    && self.value_ref(expr) =>
            {
                return;
            }
            Expr::Name(n)
                if n.ctx.is_load() && self.c.model.names.binding(n.id.as_str()).is_some() =>
            {
                self.c.env_name_read(expr, n.id.as_str());
            }
            Expr::Attribute(_) | Expr::Subscript(_) => {
                if self.c.env_attribute_read(expr) {
                    return;
                }
            }
            _ => {}
        }
        visitor::walk_expr(self, expr);
    }
}
