//! TODO

use crate::rule::RuleMeta;
use kernelgate_model::Severity::Error;

// ---------------------------------------------------------------- registry entries

pub(crate) const KG101: RuleMeta = RuleMeta {
    code: "KG101",
    name: "torch-op-fallback",
    severity: Error,
    summary: "A PyTorch compute op runs in ModelNew's code path",
    doc: "Code reachable from `ModelNew.forward` calls a PyTorch compute function (`torch.matmul`, `torch.nn.functional.softmax`, `torch.compile`, `torch.ops.aten.*`, `torch._VF.*`, `torch.__dict__[\"...\"]`, ...), under any alias, through a constant-foldable `getattr`, stored in a class attribute, a container or a `functools.partial`, or in a decorator (`@torch.compile`), or taken as a value to call later (`getattr(ext, \"gelu\", None) or F.gelu`, `operator.attrgetter(\"sigmoid\")(torch)`); CuPy's and nvmath's library functions (`cupy.matmul`) count too. The work is then done by PyTorch's kernels, not the candidate's, and the measured speedup is PyTorch's. Allocation and metadata (`torch.empty`, `empty_like`, `zeros`, `view`, `reshape`, `cat`, `F.pad`, ...) are allowed, and so are branches the problem never takes (`if self.bias is not None:` when `get_init_inputs()` gives no bias, `if not x.is_cuda:`, a half-precision path on an fp32 problem). Move the computation into your kernel. Next to custom code that provably runs (an extension function that launches a working kernel and whose result `forward` uses, or a working Triton kernel launched from `forward`'s path) this is partial replacement, which KernelBench allows: a warning, and the runtime op audit measures how much PyTorch still does. With no such code (KG702, or only a decoy) it is an error. `torch.compile` and host work (`.numpy()`, `.apply_()`) stay errors: the audit would count the compiler's kernels as the candidate's and cannot see the host's work.",
    bad: "import torch.nn.functional as Fn\n\ndef forward(self, x):\n    return Fn.softmax(x, dim=1)",
    good: "def forward(self, x):\n    out = torch.empty_like(x)\n    softmax_ext.softmax(x, out)\n    return out",
};

pub(crate) const KG102: RuleMeta = RuleMeta {
    code: "KG102",
    name: "nn-layer-fallback",
    severity: Error,
    summary: "A torch.nn compute layer is called in ModelNew's code path",
    doc: "A `torch.nn` compute layer (`nn.Linear`, `nn.Conv2d`, `nn.ReLU`, ..., or a class derived from one) is invoked from code reachable from `ModelNew.forward` (also as `layer.forward(x)`, `layer._call_impl(x)`, or `super().forward(x)` in a `ModelNew` that subclasses the layer), so PyTorch does the work. Creating the layer only to hold parameters with the reference's initialisation is fine: pass `self.linear.weight` to your kernel instead of calling `self.linear(x)`. Next to custom code that provably runs (an extension function that launches a working kernel and whose result `forward` uses, or a working Triton kernel launched from `forward`'s path) this is partial replacement, which KernelBench allows: a warning, and the runtime op audit measures how much PyTorch still does. With no such code (KG702, or only a decoy) it is an error.",
    bad: "def __init__(self):\n    self.fc = nn.Linear(128, 64)\n\ndef forward(self, x):\n    return self.fc(x)",
    good: "def forward(self, x):\n    return gemm_ext.linear(x, self.fc.weight, self.fc.bias)",
};

pub(crate) const KG103: RuleMeta = RuleMeta {
    code: "KG103",
    name: "matmul-operator",
    severity: Error,
    summary: "The `@` operator multiplies tensors with PyTorch",
    doc: "`a @ b` (and `a @= b`) on tensors dispatches to PyTorch's matmul. In code reachable from `ModelNew.forward` this replaces the custom kernel with cuBLAS. Call your kernel instead.",
    bad: "def forward(self, a, b):\n    return a @ b",
    good: "def forward(self, a, b):\n    return matmul_ext.matmul(a, b)",
};

pub(crate) const KG104: RuleMeta = RuleMeta {
    code: "KG104",
    name: "tensor-method-fallback",
    severity: Error,
    summary: "A tensor compute method or operator runs in ModelNew's code path",
    doc: "A tensor method that computes (`x.sigmoid()`, `x.matmul(w)`, `x.sum(dim=1)`, `x.relu_()`, `y.add_(b)`, `y.__mul__(2)`, ...) is called from code reachable from `ModelNew.forward`, or an arithmetic or comparison operator is applied to a tensor `forward` holds (an input, a kernel's result, a view of either: `y * scale`, `-x`, `y *= 2`, `x > 0`, `operator.add(y, b)`, `sum(parts)`), or the tensor is handed to NumPy (`.numpy()`). It runs a PyTorch kernel (or the host) instead of yours. Metadata and layout methods (`size`, `view`, `reshape`, `contiguous`, `data_ptr`, `to(device)`, `clone`, `t`, ...) are allowed; calls on the extension module returned by `load_inline` are not tensor methods. Next to custom code that provably runs (an extension function that launches a working kernel and whose result `forward` uses, or a working Triton kernel launched from `forward`'s path) this is partial replacement, which KernelBench allows: a warning, and the runtime op audit measures how much PyTorch still does. With no such code (KG702, or only a decoy) it is an error.",
    bad: "def forward(self, x):\n    return x.sigmoid()",
    good: "def forward(self, x):\n    return sigmoid_ext.sigmoid(x.contiguous())",
};
