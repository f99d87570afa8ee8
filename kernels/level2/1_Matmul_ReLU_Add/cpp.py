import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
// out[i][j] = max(x[i] . w[j] + b[j], 0) + bias[j]
// x: (M, K), w: (N, K) as nn.Linear stores it, so both operands are read along K.
torch::Tensor linear_relu_add_forward(torch::Tensor x, torch::Tensor w, torch::Tensor b,
                                      torch::Tensor bias) {
    for (const torch::Tensor* t : {&x, &w, &b, &bias}) {
        TORCH_CHECK(t->device().is_cpu(), "linear_relu_add_forward: tensors must be on the CPU");
        TORCH_CHECK(t->scalar_type() == torch::kFloat32, "linear_relu_add_forward: tensors must be float32");
        TORCH_CHECK(t->is_contiguous(), "linear_relu_add_forward: tensors must be contiguous");
    }
    TORCH_CHECK(x.dim() == 2 && w.dim() == 2 && x.size(1) == w.size(1), "linear_relu_add_forward: shape mismatch");
    const int64_t M = x.size(0), K = x.size(1), N = w.size(0);
    TORCH_CHECK(b.numel() == N && bias.numel() == N, "linear_relu_add_forward: bias size mismatch");

    torch::Tensor out = torch::empty({M, N}, x.options());
    const float* xp = x.data_ptr<float>();
    const float* wp = w.data_ptr<float>();
    const float* bp = b.data_ptr<float>();
    const float* biasp = bias.data_ptr<float>();
    float* op = out.data_ptr<float>();
    constexpr int64_t LANES = 8;  // independent partial sums: lets the compiler vectorise
    for (int64_t i = 0; i < M; ++i) {
        const float* xr = xp + i * K;
        for (int64_t j = 0; j < N; ++j) {
            const float* wr = wp + j * K;
            float part[LANES] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
            int64_t k = 0;
            for (; k + LANES <= K; k += LANES) {
                for (int64_t l = 0; l < LANES; ++l) part[l] += xr[k + l] * wr[k + l];
            }
            float acc = 0.f;
            for (; k < K; ++k) acc += xr[k] * wr[k];
            for (int64_t l = 0; l < LANES; ++l) acc += part[l];
            const float v = acc + bp[j];
            op[i * N + j] = (v > 0.f ? v : 0.f) + biasp[j];
        }
    }
    return out;
}
"""

kg_linear_relu_add_cpp = load_inline(
    name="kg_linear_relu_add_cpp",
    cpp_sources=cpp_source,
    functions=["linear_relu_add_forward"],
    extra_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int, bias_shape: tuple):
        super(ModelNew, self).__init__()
        # Same parameters, created in the same order as the reference, so seeded weights match.
        self.linear = nn.Linear(in_features, out_features)
        self.bias = nn.Parameter(torch.randn(bias_shape) * 0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return kg_linear_relu_add_cpp.linear_relu_add_forward(
            x, self.linear.weight, self.linear.bias, self.bias
        )
