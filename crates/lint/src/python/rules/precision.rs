//! TODO

use crate::rule::RuleMeta;
use kernelgate_model::Severity::Error;

// ---------------------------------------------------------------- registry entries

pub(crate) const KG501: RuleMeta = RuleMeta {
    code: "KG501",
    name: "precision-downgrade",
    severity: Error,
    summary: "An fp32 problem is computed in fp16/bf16",
    doc: "On an fp32 problem the candidate converts tensors to half precision (`.half()`, `.bfloat16()`, `.to(torch.float16)`, `.type(\"torch.cuda.HalfTensor\")`, fp8 dtypes, `dtype=torch.bfloat16`, `cast_inputs=`, `torch.autocast`, `torch.set_default_dtype(torch.float16)`). Lower precision is faster but answers a different problem; the tolerance is set for fp32. Silent on fp16 and bf16 problems.",
    bad: "def forward(self, x):\n    return ext.run(x.half()).float()",
    good: "def forward(self, x):\n    return ext.run(x)  # fp32 kernel",
};

pub(crate) const KG502: RuleMeta = RuleMeta {
    code: "KG502",
    name: "tf32-enabled",
    severity: Error,
    summary: "TF32 or reduced-precision matmul is switched on for an fp32 problem",
    doc: "`torch.backends.cuda.matmul.allow_tf32 = True`, `torch.backends.cudnn.allow_tf32 = True`, `allow_fp16_reduced_precision_reduction` , `torch.backends.cudnn.flags(allow_tf32=True)`, `torch.set_float32_matmul_precision(\"high\"|\"medium\")` or a TF32 override in the environment (`TORCH_ALLOW_TF32_CUBLAS_OVERRIDE`, `NVIDIA_TF32_OVERRIDE`) make fp32 matmuls run in TF32 — for the reference too, which changes the baseline. Silent on fp16 and bf16 problems.",
    bad: "torch.backends.cuda.matmul.allow_tf32 = True",
    good: "# keep full fp32 precision",
};
