# kernelgate: problem=level1/5_Sigmoid backend=cpp precision=fp32
"""Sigmoid as a CPU C++ extension."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

sigmoid_source = r"""
#include <cmath>

torch::Tensor sigmoid_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_contiguous() && x.scalar_type() == torch::kFloat32, "sigmoid_forward: contiguous float32 input");
    auto out = torch::empty_like(x);
    const float* in = x.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t i = 0; i < x.numel(); ++i) {
        o[i] = 1.0f / (1.0f + std::exp(in[i]));  // bug: the sign of the exponent
    }
    return out;
}
"""

sigmoid = load_inline(
    name="demo_sigmoid",
    cpp_sources=sigmoid_source,
    functions=["sigmoid_forward"],
    extra_cflags=["-O2"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return sigmoid.sigmoid_forward(x)
