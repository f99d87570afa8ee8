//! KG501 `precision-downgrade` and KG502 `tf32-enabled`: computing in fewer bits than an
//! fp32 problem asks for. Silent on fp16/bf16 problems and on branches the problem never takes.

use super::*;
use crate::rule::RuleMeta;
use kernelgate_model::Severity::Error;

impl<'a, 'c> Checker<'a, 'c> {
    /// A half-precision dtype expression.
    pub(super) fn is_half_dtype(&self, e: &Expr) -> bool {
        let low = |q: &str| {
            let q = q.strip_prefix("torch.").unwrap_or(q);
            let q = q.strip_prefix("cuda.").unwrap_or(q);
            matches!(
                q,
                "float16" | "half" | "bfloat16" | "HalfTensor" | "BFloat16Tensor"
            ) || q.starts_with("float8")
                || q.starts_with("float4")
        };
        if let Some(q) = self.model.names.qualify(e) {
            return under(&q, "torch") && low(&q);
        }
        self.model.names.fold_str(e).as_deref().is_some_and(low)
    }

    /// An environment variable that switches cuBLAS/PyTorch to TF32 for everyone.
    pub(super) fn tf32_env_key(&self, e: &Expr) -> bool {
        self.model
            .names
            .fold_str(e)
            .is_some_and(|k| k.contains("TF32"))
    }
}

impl<'a, 'c> Checker<'a, 'c> {
    /// The KG501 finding for `msg` at `r`, unless it lies on a branch the problem never takes
    /// (`if x.dtype == torch.float16:` on an fp32 problem): that conversion never runs. On a
    /// branch of a dtype test the analysis cannot decide (the input was rebound, the test goes
    /// through a helper) it is not proven to run for this problem's dtype: a warning.
    pub(super) fn downgrade_finding(
        &self,
        r: std::ops::Range<usize>,
        msg: String,
    ) -> Option<RawFinding> {
        if self.model.branches.is_dead(r.start) {
            return None;
        }
        let start = r.start;
        let finding = RawFinding::new(Rule::KG501, r, msg);
        Some(match self.undecided_test(start, dtype_test) {
            Some(test) => finding.unproven(&format!(
                "it is on a branch of `{test}`, a dtype test the analysis cannot decide, so it is not proven to run on this fp32 problem"
            )),
            None => finding,
        })
    }

    pub(super) fn precision_downgrade(
        &mut self,
        r: std::ops::Range<usize>,
        msg: impl Into<String>,
    ) {
        self.push(Rule::KG501, r, msg);
    }

    pub(super) fn tf32_enabled(&mut self, r: std::ops::Range<usize>, msg: impl Into<String>) {
        self.push(Rule::KG502, r, msg);
    }

    /// `torch.set_default_dtype(torch.float16)`.
    pub(super) fn half_default_dtype(&mut self, call: &ExprCall) {
        if call
            .arguments
            .args
            .first()
            .is_some_and(|a| self.is_half_dtype(a))
        {
            self.precision_downgrade(
                range(call.func.as_ref()),
                "makes half precision the default dtype on an fp32 problem",
            );
        }
    }

    /// `os.putenv("NVIDIA_TF32_OVERRIDE", "1")`, `os.environ.update({...})`.
    pub(super) fn tf32_env_call(&mut self, call: &ExprCall) {
        let args = &call.arguments.args;
        let keys: Vec<&Expr> = match args.first() {
            Some(Expr::Dict(d)) => d.iter_keys().flatten().collect(),
            Some(k) => vec![k],
            None => call
                .arguments
                .keywords
                .iter()
                .filter(|k| k.arg.as_ref().is_some_and(|a| a.contains("TF32")))
                .map(|k| &k.value)
                .collect(),
        };
        let tf32 = keys.iter().any(|k| self.tf32_env_key(k))
            || call
                .arguments
                .keywords
                .iter()
                .any(|k| k.arg.as_ref().is_some_and(|a| a.contains("TF32")));
        if tf32 {
            self.tf32_enabled(
                range(call),
                "sets a TF32 override in the environment on an fp32 problem",
            );
        }
    }

    /// `torch.backends.cudnn.flags(allow_tf32=True)`.
    pub(super) fn tf32_backend_flags(&mut self, call: &ExprCall) {
        for kw in call.arguments.keywords.iter() {
            let Some(arg) = kw.arg.as_ref() else { continue };
            if (arg.contains("tf32") || arg.contains("reduced_precision"))
                && crate::python::reach::const_truth(&kw.value) != Some(false)
            {
                self.tf32_enabled(
                    range(kw),
                    format!("`{arg}=` enables reduced-precision (TF32) math on an fp32 problem"),
                );
            }
        }
    }

    /// `torch.set_float32_matmul_precision("high")`.
    pub(super) fn matmul_precision(&mut self, call: &ExprCall) {
        let v = call
            .arguments
            .args
            .first()
            .and_then(|a| self.model.names.fold_str(a));
        if v.as_deref() != Some("highest") {
            self.tf32_enabled(
                range(call.func.as_ref()),
                "lowers fp32 matmul precision (TF32/bf16) on an fp32 problem",
            );
        }
    }

    /// `torch.autocast(...)`, `torch.cuda.amp.autocast(...)`.
    pub(super) fn autocast(&mut self, call: &ExprCall, q: &str) {
        self.precision_downgrade(
            range(call.func.as_ref()),
            format!("`{q}` computes in half precision on an fp32 problem"),
        );
    }

    /// `.half()`, `.bfloat16()`, `.to(torch.float16)`, also through `getattr(x, "ha" + "lf")()`.
    pub(super) fn half_method(&mut self, call: &ExprCall) {
        let args = &call.arguments.args;
        let method: Option<(&Expr, String, std::ops::Range<usize>)> = match call.func.as_ref() {
            Expr::Attribute(a) => Some((a.value.as_ref(), a.attr.to_string(), range(&a.attr))),
            Expr::Call(g)
                if g.arguments.args.len() >= 2
                    && self.model.names.qualify(&g.func).as_deref() == Some("builtins.getattr") =>
            {
                self.model
                    .names
                    .fold_str(&g.arguments.args[1])
                    .map(|m| (&g.arguments.args[0], m, range(g)))
            }
            _ => None,
        };
        let Some((recv, m, at)) = method else { return };
        let m = m.as_str();
        if self.model.names.qualify(recv).is_some() {
            return;
        }
        let half = matches!(m, "half" | "bfloat16") && args.is_empty();
        let to_half = matches!(m, "to" | "type") && args.iter().any(|x| self.is_half_dtype(x));
        if half || to_half {
            self.precision_downgrade(
                at,
                format!("`.{m}(...)` converts to half precision on an fp32 problem"),
            );
        }
    }

    /// `dtype=torch.float16`, `cast_inputs=torch.float16`.
    pub(super) fn half_dtype_keywords(&mut self, call: &ExprCall) {
        for kw in call.arguments.keywords.iter() {
            let Some(arg) = kw.arg.as_ref() else { continue };
            if matches!(arg.as_str(), "dtype" | "cast_inputs") && self.is_half_dtype(&kw.value) {
                self.precision_downgrade(
                    range(kw),
                    format!("`{arg}=` half precision on an fp32 problem"),
                );
            }
        }
    }

    /// `os.environ["NVIDIA_TF32_OVERRIDE"] = "1"`.
    pub(super) fn tf32_env_assignment(&mut self, t: &Expr, sub: &ruff_python_ast::ExprSubscript) {
        if self.model.names.qualify(&sub.value).as_deref() == Some("os.environ")
            && self.tf32_env_key(&sub.slice)
        {
            self.tf32_enabled(
                range(t),
                "sets a TF32 override in the environment on an fp32 problem",
            );
        }
    }

    /// `torch.backends.cuda.matmul.allow_tf32 = True` and the other reduced-precision switches.
    pub(super) fn tf32_backend_switch(
        &mut self,
        path: &str,
        r: std::ops::Range<usize>,
        value: Option<&Expr>,
    ) {
        let reduced = [
            "allow_tf32",
            "allow_fp16_reduced_precision_reduction",
            "allow_bf16_reduced_precision_reduction",
            "fp32_precision",
        ];
        if reduced.iter().any(|k| path.ends_with(k)) && self.fp32() {
            let lowers = match value {
                Some(v) => match self.model.names.fold_str(v) {
                    Some(s) => s != "ieee" && s != "highest",
                    None => crate::python::reach::const_truth(v) != Some(false),
                },
                None => true,
            };
            if lowers {
                self.tf32_enabled(
                    r,
                    format!("`{path}` enables reduced-precision (TF32) math on an fp32 problem"),
                );
            }
        }
    }
}

/// A test that looks at a dtype (`x.dtype == torch.float16`, `x.is_floating_point()`,
/// `x.element_size() == 2`).
pub(super) fn dtype_test(test: &str) -> bool {
    [
        "dtype",
        "half",
        "float16",
        "bfloat16",
        "is_floating_point",
        "element_size",
        "itemsize",
        "scalar_type",
        "float32",
    ]
    .iter()
    .any(|k| test.contains(k))
}

// ---------------------------------------------------------------- registry entries

pub(crate) const KG501: RuleMeta = RuleMeta {
    code: "KG501",
    name: "precision-downgrade",
    severity: Error,
    summary: "An fp32 problem is computed in fp16/bf16",
    error_when: "the conversion runs on an fp32 problem: at module level, in a function, or on the forward path off any undecided dtype test",
    warn_when: "it is on a branch of a dtype test the analysis cannot decide (the input was rebound, the test goes through a helper): not proven to run for fp32; the runtime checks decide. Dead branches and fp16/bf16 problems raise nothing",
    doc: "On an fp32 problem the candidate converts tensors to half precision (`.half()`, `.bfloat16()`, `.to(torch.float16)`, `.type(\"torch.cuda.HalfTensor\")`, fp8 dtypes, `dtype=torch.bfloat16`, `cast_inputs=`, `torch.autocast`, `torch.set_default_dtype(torch.float16)`). Lower precision is faster but answers a different problem; the tolerance is set for fp32. Silent on fp16 and bf16 problems.",
    bad: "def forward(self, x):\n    return ext.run(x.half()).float()",
    good: "def forward(self, x):\n    return ext.run(x)  # fp32 kernel",
};

pub(crate) const KG502: RuleMeta = RuleMeta {
    code: "KG502",
    name: "tf32-enabled",
    severity: Error,
    summary: "TF32 or reduced-precision matmul is switched on for an fp32 problem",
    error_when: "whenever TF32 or reduced-precision matmul is switched on for an fp32 problem",
    warn_when: "never from its own analysis (`[lint] severity` can lower it per repository)",
    doc: "`torch.backends.cuda.matmul.allow_tf32 = True`, `torch.backends.cudnn.allow_tf32 = True`, `allow_fp16_reduced_precision_reduction` , `torch.backends.cudnn.flags(allow_tf32=True)`, `torch.set_float32_matmul_precision(\"high\"|\"medium\")` or a TF32 override in the environment (`TORCH_ALLOW_TF32_CUBLAS_OVERRIDE`, `NVIDIA_TF32_OVERRIDE`) make fp32 matmuls run in TF32 — for the reference too, which changes the baseline. Silent on fp16 and bf16 problems.",
    bad: "torch.backends.cuda.matmul.allow_tf32 = True",
    good: "# keep full fp32 precision",
};
