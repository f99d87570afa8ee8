import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <cmath>

// Exact GELU (erf form), one pass over contiguous float32 memory on the CPU.
torch::Tensor gelu_forward(torch::Tensor x) {
    TORCH_CHECK(x.device().is_cpu(), "gelu_forward: x must be a CPU tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "gelu_forward: x must be float32");
    TORCH_CHECK(x.is_contiguous(), "gelu_forward: x must be contiguous");
    torch::Tensor out = torch::empty_like(x);
    const float* in = x.data_ptr<float>();
    float* o = out.data_ptr<float>();
    const int64_t n = x.numel();
    for (int64_t i = 0; i < n; ++i) {
        const float v = in[i];
        o[i] = 0.5f * v * (1.0f + std::erf(v * 0.70710678118654752f));
    }
    return out;
}
"""

kg_gelu_cpp = load_inline(
    name="kg_gelu_cpp",
    cpp_sources=cpp_source,
    functions=["gelu_forward"],
    extra_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return kg_gelu_cpp.gelu_forward(x)
