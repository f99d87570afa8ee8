# kernelgate: problem=level1/3_ReLU backend=cpp precision=fp32
"""ReLU as a CPU C++ extension (first version: walks the tensor column by column)."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

relu_source = r"""
torch::Tensor relu_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_contiguous() && x.scalar_type() == torch::kFloat32, "relu_forward: contiguous float32 input");
    auto out = torch::empty_like(x);
    const float* in = x.data_ptr<float>();
    float* o = out.data_ptr<float>();
    const int64_t rows = x.dim() > 1 ? x.size(0) : 1;
    const int64_t cols = x.numel() / rows;
    // Column-major walk over row-major data: correct, but every access misses the cache line.
    for (int64_t c = 0; c < cols; ++c) {
        for (int64_t r = 0; r < rows; ++r) {
            const float v = in[r * cols + c];
            o[r * cols + c] = v > 0.0f ? v : 0.0f;
        }
    }
    return out;
}
"""

relu = load_inline(
    name="demo_relu_v1",
    cpp_sources=relu_source,
    functions=["relu_forward"],
    extra_cflags=["-O2"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return relu.relu_forward(x)
