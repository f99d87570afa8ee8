import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <vector>

constexpr int THREADS = 256;

// The input is viewed as (outer, reduced, inner). One block per output element
// (outer index, inner index): threads stride over the reduced dimension, then a
// warp-shuffle tree and one shared-memory pass combine the partial sums.
__global__ void sum_dim_kernel(const float* __restrict__ x, float* __restrict__ out,
                               int64_t reduced, int64_t inner) {
    const int64_t o = blockIdx.x;           // flattened (outer, inner) output index
    const int64_t a = o / inner;
    const int64_t b = o % inner;
    const float* base = x + a * reduced * inner + b;

    float acc = 0.0f;
    for (int64_t r = threadIdx.x; r < reduced; r += blockDim.x) {
        acc += base[r * inner];
    }
    for (int offset = 16; offset > 0; offset >>= 1) {
        acc += __shfl_down_sync(0xffffffffu, acc, offset);
    }
    __shared__ float warp_sums[THREADS / 32];
    const int lane = threadIdx.x % 32;
    const int warp = threadIdx.x / 32;
    if (lane == 0) warp_sums[warp] = acc;
    __syncthreads();
    if (warp == 0) {
        acc = lane < (int)(blockDim.x / 32) ? warp_sums[lane] : 0.0f;
        for (int offset = 16; offset > 0; offset >>= 1) {
            acc += __shfl_down_sync(0xffffffffu, acc, offset);
        }
        if (lane == 0) out[o] = acc;
    }
}

torch::Tensor sum_dim_forward(torch::Tensor x, int64_t dim) {
    TORCH_CHECK(x.is_cuda(), "sum_dim_forward: x must be a CUDA tensor");
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
    const int64_t outputs = outer * inner;
    if (outputs == 0) return out;
    TORCH_CHECK(outputs <= 2147483647LL, "sum_dim_forward: too many outputs for one grid");
    sum_dim_kernel<<<(unsigned int)outputs, THREADS, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), out.data_ptr<float>(), reduced, inner);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

cpp_source = "torch::Tensor sum_dim_forward(torch::Tensor x, int64_t dim);"

kg_sum_cuda = load_inline(
    name="kg_sum_cuda",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["sum_dim_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super(ModelNew, self).__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return kg_sum_cuda.sum_dim_forward(x, self.dim)
