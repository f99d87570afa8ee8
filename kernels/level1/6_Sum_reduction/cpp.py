import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <algorithm>
#include <vector>

// Sum over one dimension of a contiguous float32 tensor, keeping that dimension with size 1.
// The tensor is viewed as (outer, reduced, inner); accumulation is in double.
torch::Tensor sum_dim_forward(torch::Tensor x, int64_t dim) {
    TORCH_CHECK(x.device().is_cpu(), "sum_dim_forward: x must be a CPU tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "sum_dim_forward: x must be float32");
    TORCH_CHECK(x.is_contiguous(), "sum_dim_forward: x must be contiguous");
    const int64_t ndim = x.dim();
    if (dim < 0) dim += ndim;
    TORCH_CHECK(dim >= 0 && dim < ndim, "sum_dim_forward: dim out of range");

    std::vector<int64_t> out_sizes(x.sizes().begin(), x.sizes().end());
    int64_t outer = 1, inner = 1;
    const int64_t reduced = out_sizes[dim];
    for (int64_t d = 0; d < dim; ++d) outer *= out_sizes[d];
    for (int64_t d = dim + 1; d < ndim; ++d) inner *= out_sizes[d];
    out_sizes[dim] = 1;

    torch::Tensor out = torch::empty(out_sizes, x.options());
    const float* in = x.data_ptr<float>();
    float* o = out.data_ptr<float>();
    std::vector<double> acc(inner);
    for (int64_t a = 0; a < outer; ++a) {
        std::fill(acc.begin(), acc.end(), 0.0);
        const float* base = in + a * reduced * inner;
        for (int64_t r = 0; r < reduced; ++r) {
            const float* row = base + r * inner;
            for (int64_t b = 0; b < inner; ++b) acc[b] += row[b];
        }
        for (int64_t b = 0; b < inner; ++b) o[a * inner + b] = static_cast<float>(acc[b]);
    }
    return out;
}
"""

kg_sum_cpp = load_inline(
    name="kg_sum_cpp",
    cpp_sources=cpp_source,
    functions=["sum_dim_forward"],
    extra_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super(ModelNew, self).__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return kg_sum_cpp.sum_dim_forward(x, self.dim)
