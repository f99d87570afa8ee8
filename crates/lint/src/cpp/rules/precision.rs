//! TODO

use crate::rule::RuleMeta;
use kernelgate_model::Severity::Error;

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
