# kernelgate: problem=level1/7_Softmax backend=cpp precision=fp32
"""Row-wise softmax as a CPU C++ extension, refactored to keep no temporary in the output:
the exponentials are recomputed, in double precision, in the sum pass and in the write pass."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

softmax_source = r"""
#include <cmath>

torch::Tensor softmax_forward(torch::Tensor x) {
    TORCH_CHECK(x.dim() == 2 && x.is_contiguous() && x.scalar_type() == torch::kFloat32,
                "softmax_forward: contiguous 2-D float32 input");
    auto out = torch::empty_like(x);
    const int64_t rows = x.size(0), cols = x.size(1);
    const float* in = x.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t r = 0; r < rows; ++r) {
        const float* row = in + r * cols;
        double m = row[0];
        for (int64_t c = 1; c < cols; ++c) m = row[c] > m ? row[c] : m;
        double sum = 0.0;
        for (int64_t c = 0; c < cols; ++c) sum += std::exp(static_cast<double>(row[c]) - m);
        for (int64_t c = 0; c < cols; ++c)
            o[r * cols + c] = static_cast<float>(std::exp(static_cast<double>(row[c]) - m) / sum);
    }
    return out;
}
"""

softmax = load_inline(
    name="demo_softmax_v2",
    cpp_sources=softmax_source,
    functions=["softmax_forward"],
    extra_cflags=["-O2"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return softmax.softmax_forward(x)
