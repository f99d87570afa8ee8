//! KG610 `cpp-precision-downgrade`: half/bf16/TF32 on an fp32 problem, except in branches only
//! half inputs take.

use crate::cpp::*;
use crate::rule::Rule;
use crate::rule::RuleMeta;
use kernelgate_model::Severity::Error;
use std::ops::Range;

impl<'t> Analyzer<'t> {
    /// Every KG610 finding of the analyzer is raised here (dropped on fp16/bf16 problems and in half-only branches).
    pub(in crate::cpp) fn precision_downgrade(&mut self, range: Range<usize>, msg: String) {
        self.flag(Rule::KG610, range, msg);
    }

    /// Reduced-precision findings inside kernels and device functions that only branches for
    /// half/bf16 inputs launch: fp32 inputs never run them.
    pub(in crate::cpp) fn drop_half_only_precision(&mut self) {
        let mut by_name: HashMap<&str, Vec<usize>> = HashMap::default();
        for (i, f) in self.funcs.iter().enumerate() {
            by_name.entry(f.name.as_str()).or_default().push(i);
        }
        let reach = |full_only: bool| -> Vec<bool> {
            let mut seen = vec![false; self.funcs.len()];
            let mut queue: Vec<usize> = (0..self.funcs.len())
                .filter(|&i| self.funcs[i].kind == FuncKind::Host)
                .collect();
            while let Some(i) = queue.pop() {
                if std::mem::replace(&mut seen[i], true) {
                    continue;
                }
                let f = &self.funcs[i];
                let launches = if full_only {
                    &f.full_launches
                } else {
                    &f.launches
                };
                for n in launches.iter().chain(f.calls.iter()) {
                    queue.extend(by_name.get(n.as_str()).into_iter().flatten().copied());
                }
            }
            seen
        };
        let (all, full) = (reach(false), reach(true));
        let half_only: Vec<Range<usize>> = (0..self.funcs.len())
            .filter(|&i| all[i] && !full[i] && self.funcs[i].kind != FuncKind::Host)
            .map(|i| self.funcs[i].range.clone())
            .collect();
        if half_only.is_empty() {
            return;
        }
        self.findings.retain(|(code, r, _)| {
            *code != Rule::KG610 || !half_only.iter().any(|h| h.contains(&r.start))
        });
    }
}

/// A condition only half/bf16 inputs satisfy: a conjunction with a dtype test against a
/// half type (`x.scalar_type() == at::kHalf && n % 2 == 0`, `std::is_same<scalar_t, at::Half>`).
pub(in crate::cpp) fn half_only_test(cond: &str) -> bool {
    let c: String = cond.chars().filter(|ch| !ch.is_whitespace()).collect();
    if c.contains("||") || c.contains("!=") {
        return false;
    }
    let half = |t: &str| {
        [
            "kHalf",
            "kFloat16",
            "kBFloat16",
            "ScalarType::Half",
            "ScalarType::BFloat16",
        ]
        .iter()
        .any(|h| t.contains(h))
    };
    c.trim_matches(|ch| ch == '(' || ch == ')')
        .split("&&")
        .any(|part| {
            (part.contains("==")
                && half(part)
                && (part.contains("scalar_type()") || part.contains("dtype()")))
                || (part.contains("is_same")
                    && part.contains("scalar_t")
                    && ["Half", "BFloat16", "__half", "__nv_bfloat16"]
                        .iter()
                        .any(|h| part.contains(h)))
        })
}

impl<'t> Analyzer<'t> {
    /// `.to(at::kHalf)`, `.half()`: a conversion to reduced precision.
    pub(in crate::cpp) fn reduced_precision_method(
        &mut self,
        node: Node<'t>,
        at: &Range<usize>,
        m: &str,
    ) {
        if matches!(m, "to" | "toType" | "dtype" | "type") {
            let args = node.field("arguments").map(|a| self.t(a)).unwrap_or("");
            if ["kHalf", "kFloat16", "kBFloat16", "Half", "BFloat16"]
                .iter()
                .any(|h| args.contains(h))
            {
                self.precision_downgrade(
                    at.clone(),
                    format!("`.{m}{args}` converts to reduced precision on an fp32 problem"),
                );
            }
        }
        if matches!(m, "half" | "bfloat16") {
            self.precision_downgrade(
                at.clone(),
                format!("`.{m}()` converts to reduced precision on an fp32 problem"),
            );
        }
    }
}

// ---------------------------------------------------------------- registry entries

pub(crate) const KG610: RuleMeta = RuleMeta {
    code: "KG610",
    name: "cpp-precision-downgrade",
    severity: Error,
    summary: "CUDA code computes in fp16/bf16/TF32 on an fp32 problem",
    doc: "On an fp32 problem the CUDA uses reduced-precision types or conversions (`__half`, `half2`, `__float2half`, `__nv_bfloat16`, fp8 types such as `__nv_fp8_e4m3`, `wmma` fragments, TF32 conversions, `.half()`, `at::kHalf`, fp16/TF32/fp8 PTX). It is faster but answers a different problem. Silent on fp16 and bf16 problems, on `#include <mma.h>` or `<cuda_fp16.h>` alone, and on the half/bf16 branch of a dtype dispatch that fp32 inputs never take (`if (x.scalar_type() == at::kHalf) {...}` and the kernels only that branch launches). Compute in fp32.",
    bad: "__half h = __float2half(x[i]);",
    good: "float v = x[i];",
};
