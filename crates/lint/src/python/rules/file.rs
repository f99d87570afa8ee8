//! The whole-file pass: every statement and expression of the module, outside
//! `if __name__ == "__main__":`. It only dispatches to the rule families.

use super::*;

pub(super) struct FileVisitor<'x, 'a, 'c> {
    pub(super) c: &'x mut Checker<'a, 'c>,
    /// Inside `get_inputs`/`get_init_inputs`: the reference's inputs may be half precision.
    pub(super) in_inputs_fn: u32,
}

impl<'a> Visitor<'a> for FileVisitor<'_, 'a, '_> {
    fn visit_stmt(&mut self, stmt: &'a Stmt) {
        if matches!(stmt, Stmt::If(_))
            && self.c.model.names.in_main_block(usize::from(stmt.start()))
        {
            // A self-test under `if __name__ == "__main__":` never runs under the harness.
            return;
        }
        match stmt {
            Stmt::Try(t) if !t.handlers.is_empty() => self.c.try_statement(t),
            Stmt::With(w) => self.c.suppressing_context(w),
            Stmt::Assign(a) => {
                for t in &a.targets {
                    self.target(t, Some(&a.value));
                }
            }
            Stmt::AugAssign(a) => self.target(&a.target, Some(&a.value)),
            Stmt::AnnAssign(a) => self.target(&a.target, a.value.as_deref()),
            Stmt::Delete(d) => {
                for t in &d.targets {
                    self.target(t, None);
                }
            }
            Stmt::ClassDef(c) => {
                for s in &c.body {
                    if let Stmt::Assign(a) = s {
                        // `class ModelNew: act = torch.relu` is called as `self.act(x)`.
                        self.c.stored_torch_ops(&a.value);
                    }
                }
                self.c.tensor_subclass_bases(c);
            }
            Stmt::FunctionDef(f) => {
                self.c.torch_op_interception(f);
                let inputs = matches!(f.name.as_str(), "get_inputs" | "get_init_inputs");
                self.in_inputs_fn += inputs as u32;
                visitor::walk_stmt(self, stmt);
                self.in_inputs_fn -= inputs as u32;
                return;
            }
            _ => {}
        }
        visitor::walk_stmt(self, stmt);
    }

    fn visit_expr(&mut self, expr: &'a Expr) {
        match expr {
            Expr::Call(call) => self.c.check_call(call, self.in_inputs_fn > 0),
            Expr::Lambda(l) if !self.c.in_reachable(usize::from(l.start())) => {
                self.c.lambda_fallback(l)
            }
            Expr::Attribute(a) => {
                self.c.frame_attribute(a);
                if self.c.subclass_attribute(a) || self.c.banned_attribute(expr) {
                    return;
                }
            }
            Expr::Name(n) if n.ctx.is_load() => self.c.banned_name(expr, n.id.as_str()),
            _ => {}
        }
        visitor::walk_expr(self, expr);
    }
}

impl<'a> FileVisitor<'_, 'a, '_> {
    /// An assignment (or `del`) target: a module attribute replaced, the environment's TF32
    /// switch set, a module's `__dict__` entry replaced, a PyTorch op stored to call later.
    fn target(&mut self, t: &'a Expr, value: Option<&'a Expr>) {
        match t {
            Expr::Attribute(_) => {
                if let Some(path) = self.c.model.names.qualify(t) {
                    self.c.tamper(&path, range(t), value);
                }
            }
            Expr::Tuple(tu) => tu.elts.iter().for_each(|e| self.target(e, None)),
            Expr::Subscript(sub) => {
                if self.c.fp32() && value.is_some() {
                    self.c.tf32_env_assignment(t, sub);
                }
                // torch.nn.functional.__dict__["relu"] = ...
                if let Expr::Attribute(d) = sub.value.as_ref() {
                    if d.attr.as_str() == "__dict__" {
                        if let Some(base) = self.c.model.names.qualify(&d.value) {
                            let name = self
                                .c
                                .model
                                .names
                                .fold_str(&sub.slice)
                                .unwrap_or_else(|| "?".into());
                            self.c.tamper(&format!("{base}.{name}"), range(t), value);
                        }
                    }
                }
            }
            _ => {}
        }
        // `self.act = torch.relu` / `OPS = {"act": F.gelu}`: a PyTorch op stored to be called
        // later under a name the call site cannot resolve. Plain-name aliases resolve at calls.
        if let Some(v) = value {
            if !matches!(t, Expr::Name(_))
                || matches!(v, Expr::List(_) | Expr::Tuple(_) | Expr::Dict(_))
            {
                self.c.stored_torch_ops(v);
            }
        }
    }
}

impl<'a, 'c> Checker<'a, 'c> {
    /// Every call in the file; each family judges the calls it knows. The `match` keeps the
    /// first matching path only, as one call is one function.
    pub(super) fn check_call(&mut self, call: &'a ExprCall, in_inputs_fn: bool) {
        let q = self.model.names.qualify(&call.func);
        let args = &call.arguments.args;
        self.banned_through_call(call, q.as_deref());
        self.setattr_by_another_name(call, q.as_deref());
        self.tensor_subclass_by_type(call, q.as_deref());
        if let Some(p) = q.as_deref().filter(|p| under(p, "torch.library")) {
            self.library_registration(call, p);
        }
        self.mode_entered(call);
        let fp32 = self.fp32();
        match q.as_deref() {
            Some("operator.methodcaller") => self.methodcaller(call),
            Some("torch.set_default_dtype") if fp32 && !in_inputs_fn => {
                self.half_default_dtype(call)
            }
            Some(p)
                if fp32
                    && (p == "os.putenv"
                        || p == "os.environ.setdefault"
                        || p == "os.environ.update") =>
            {
                self.tf32_env_call(call)
            }
            Some(p) if fp32 && under(p, "torch.backends") => self.tf32_backend_flags(call),
            Some("builtins.setattr" | "builtins.delattr") if !args.is_empty() => {
                self.setattr_call(call)
            }
            Some("builtins.getattr") if args.len() >= 2 => self.dynamic_getattr(call),
            Some("builtins.__import__" | "importlib.import_module" | "importlib.__import__") => {
                self.dynamic_import(call)
            }
            Some("builtins.open" | "io.open" | "codecs.open") => self.check_open(call),
            Some("builtins.print") => self.forged_print(call),
            Some("torch.save") => self.torch_save(call),
            Some("torch.set_float32_matmul_precision") if fp32 => self.matmul_precision(call),
            Some(p) if fp32 && !in_inputs_fn && (p.ends_with(".autocast") && under(p, "torch")) => {
                self.autocast(call, p)
            }
            _ => {}
        }
        if fp32 && !in_inputs_fn {
            self.half_method(call);
        }
        self.file_write_method(call);
        if fp32 && !in_inputs_fn {
            self.half_dtype_keywords(call);
        }
        self.stream_keywords(call);
    }
}
