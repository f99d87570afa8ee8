import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

constexpr int TILE = 32;

// out = relu(x @ w^T + b) + bias, with x: (M, K), w: (N, K) as nn.Linear stores it.
// Shared-memory tiled GEMM (TILE x TILE outputs per block, one per thread) with the
// bias, ReLU and second bias fused into the store. The w tile is padded by one column
// so that reading it along k hits distinct banks.
__global__ void linear_relu_add_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                       const float* __restrict__ b, const float* __restrict__ bias,
                                       float* __restrict__ out, int M, int N, int K) {
    __shared__ float xs[TILE][TILE];
    __shared__ float ws[TILE][TILE + 1];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * TILE + ty;   // output row (index into x)
    const int col = blockIdx.x * TILE + tx;   // output column (index into w)
    const int wrow = blockIdx.x * TILE + ty;  // w row this thread loads

    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        const int k = k0 + tx;
        xs[ty][tx] = (row < M && k < K) ? x[(int64_t)row * K + k] : 0.0f;
        ws[ty][tx] = (wrow < N && k < K) ? w[(int64_t)wrow * K + k] : 0.0f;
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < TILE; ++kk) acc += xs[ty][kk] * ws[tx][kk];
        __syncthreads();
    }
    if (row < M && col < N) {
        const float v = acc + b[col];
        out[(int64_t)row * N + col] = fmaxf(v, 0.0f) + bias[col];
    }
}

torch::Tensor linear_relu_add_forward(torch::Tensor x, torch::Tensor w, torch::Tensor b,
                                      torch::Tensor bias) {
    for (const torch::Tensor* t : {&x, &w, &b, &bias}) {
        TORCH_CHECK(t->is_cuda(), "linear_relu_add_forward: tensors must be CUDA tensors");
        TORCH_CHECK(t->scalar_type() == torch::kFloat32, "linear_relu_add_forward: tensors must be float32");
        TORCH_CHECK(t->is_contiguous(), "linear_relu_add_forward: tensors must be contiguous");
    }
    TORCH_CHECK(x.dim() == 2 && w.dim() == 2 && x.size(1) == w.size(1), "linear_relu_add_forward: shape mismatch");
    const int64_t M = x.size(0), K = x.size(1), N = w.size(0);
    TORCH_CHECK(b.numel() == N && bias.numel() == N, "linear_relu_add_forward: bias size mismatch");
    TORCH_CHECK(M < (1LL << 31) && N < (1LL << 31) && K < (1LL << 31), "linear_relu_add_forward: too large");

    torch::Tensor out = torch::empty({M, N}, x.options());
    if (M == 0 || N == 0) return out;
    const dim3 threads(TILE, TILE);
    const dim3 blocks((unsigned int)((N + TILE - 1) / TILE), (unsigned int)((M + TILE - 1) / TILE));
    linear_relu_add_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), w.data_ptr<float>(), b.data_ptr<float>(), bias.data_ptr<float>(),
        out.data_ptr<float>(), (int)M, (int)N, (int)K);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

cpp_source = (
    "torch::Tensor linear_relu_add_forward(torch::Tensor x, torch::Tensor w, "
    "torch::Tensor b, torch::Tensor bias);"
)

kg_linear_relu_add_cuda = load_inline(
    name="kg_linear_relu_add_cuda",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["linear_relu_add_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int, bias_shape: tuple):
        super(ModelNew, self).__init__()
        # Same parameters, created in the same order as the reference, so seeded weights match.
        self.linear = nn.Linear(in_features, out_features)
        self.bias = nn.Parameter(torch.randn(bias_shape) * 0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return kg_linear_relu_add_cuda.linear_relu_add_forward(
            x, self.linear.weight, self.linear.bias, self.bias
        )
