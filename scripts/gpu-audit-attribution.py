"""The op audit's attribution by code on a GPU: kg_audit run directly on small candidates, each
GPU kernel's class with the vendor-name pattern alone ("by name") and with attribution by code
("by code": the candidate's extension binary, its Triton kernels).

  python3 scripts/gpu-audit-attribution.py            (on a CUDA machine, from the repo root)

Cases: the candidate's own tiled matmul kernel named `sgemm_tiled` (by name: cuBLAS, so a 0%
custom share and `low_custom_share`); the same launched next to a cuBLAS call the extension makes
itself (the binary calls cuBLAS: the name proves nothing, the kernel stays cuBLAS's); ATen's
matmul called from the extension (cuBLAS's kernels, vendor either way); a Triton kernel named
`gemm_kernel`.
"""

import os
import sys
import types

import torch
from torch.utils.cpp_extension import load_inline

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "crates", "harness", "python", "tests"))
from harness_modules import load  # noqa: E402

kg_audit = load("kg_audit")

N = 1024

SGEMM = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#define TILE 16
__global__ void sgemm_tiled(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c, int n) {
    __shared__ float as[TILE][TILE];
    __shared__ float bs[TILE][TILE];
    int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
    float acc = 0.f;
    for (int t = 0; t < n; t += TILE) {
        as[threadIdx.y][threadIdx.x] = a[row * n + t + threadIdx.x];
        bs[threadIdx.y][threadIdx.x] = b[(t + threadIdx.y) * n + col];
        __syncthreads();
        for (int k = 0; k < TILE; ++k) acc += as[threadIdx.y][k] * bs[k][threadIdx.x];
        __syncthreads();
    }
    c[row * n + col] = acc;
}
torch::Tensor mm(torch::Tensor a, torch::Tensor b) {
    int n = a.size(0);
    auto c = torch::empty_like(a);
    dim3 block(TILE, TILE), grid(n / TILE, n / TILE);
    sgemm_tiled<<<grid, block, 0, at::cuda::getCurrentCUDAStream()>>>(a.data_ptr<float>(), b.data_ptr<float>(), c.data_ptr<float>(), n);
    return c;
}
"""

# The same kernel, and a cuBLAS call of the extension's own (half the work each).
WITH_CUBLAS = SGEMM.replace("#define TILE 16", "#include <cublas_v2.h>\n#define TILE 16") + r"""
torch::Tensor mm_both(torch::Tensor a, torch::Tensor b) {
    int n = a.size(0);
    auto c = mm(a, b);
    auto d = torch::empty_like(a);
    float one = 1.f, zero = 0.f;
    cublasHandle_t h = at::cuda::getCurrentCUDABlasHandle();
    cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, b.data_ptr<float>(), n, a.data_ptr<float>(), n, &zero, d.data_ptr<float>(), n);
    return c + d;
}
"""

ATEN_MM = r"""
#include <torch/extension.h>
torch::Tensor mm(torch::Tensor a, torch::Tensor b) { return torch::mm(a, b); }
"""


def build(name, src, functions, libs=()):
    return load_inline(
        name=name,
        cpp_sources="\n".join(f"torch::Tensor {f}(torch::Tensor a, torch::Tensor b);" for f in functions),
        cuda_sources=src,
        functions=list(functions),
        extra_ldflags=[f"-l{lib}" for lib in libs],
        verbose=False,
    )


class Model(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, a, b):
        return self.fn(a, b)


def triton_case():
    import triton
    import triton.language as tl

    @triton.jit
    def gemm_kernel(a_ptr, b_ptr, c_ptr, n, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
        pm, pn = tl.program_id(0), tl.program_id(1)
        rm = pm * BM + tl.arange(0, BM)
        rn = pn * BN + tl.arange(0, BN)
        rk = tl.arange(0, BK)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, n, BK):
            a = tl.load(a_ptr + rm[:, None] * n + (k + rk)[None, :])
            b = tl.load(b_ptr + (k + rk)[:, None] * n + rn[None, :])
            acc += tl.dot(a, b, input_precision="ieee")
        tl.store(c_ptr + rm[:, None] * n + rn[None, :], acc)

    def run(a, b):
        c = torch.empty_like(a)
        gemm_kernel[(N // 64, N // 64)](a, b, c, N, BM=64, BN=64, BK=32)
        return c

    mod = types.ModuleType("cand_triton")
    mod.gemm_kernel = gemm_kernel
    mod.run = run
    return mod, Model(run)


def classes(result):
    return sorted({(e["op"][:40], e["class"], e["library"] or "-") for e in result["entries"]})


def main():
    assert torch.cuda.is_available(), "needs a CUDA device"
    torch.manual_seed(0)
    a = torch.randn(N, N, device="cuda")
    b = torch.randn(N, N, device="cuda")
    cases = []
    own = build("kg_attr_sgemm", SGEMM, ["mm"])
    cases.append(("own kernel named sgemm_tiled", own, Model(own.mm)))
    both = build("kg_attr_both", WITH_CUBLAS, ["mm", "mm_both"], libs=["cublas"])
    cases.append(("the same next to its own cuBLAS call", both, Model(both.mm_both)))
    aten = build("kg_attr_aten", ATEN_MM, ["mm"])
    cases.append(("ATen's matmul called from the extension", aten, Model(aten.mm)))
    try:
        tmod, tmodel = triton_case()
        cases.append(("Triton kernel named gemm_kernel", tmod, tmodel))
    except Exception as e:  # noqa: BLE001
        print(f"triton case skipped: {e}")
    by_code = kg_audit.Auditor.own_kernel
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}")
    for label, mod, model in cases:
        if not isinstance(mod, types.ModuleType) or mod.__name__.startswith("kg_attr"):
            holder = types.ModuleType("cand")
            holder.ext = mod
            mod = holder
        for _ in range(2):  # compile and warm up outside the audit
            model(a, b)
        torch.cuda.synchronize()
        kg_audit.Auditor.own_kernel = lambda self, kernel, lib, launched: False
        before = kg_audit.audit(torch, model, mod, (a, b), "cuda")
        kg_audit.Auditor.own_kernel = by_code
        after = kg_audit.audit(torch, model, mod, (a, b), "cuda")
        print(f"\n== {label}")
        print(f"   by name: custom share {before['custom_share']:.3f}  {classes(before)}")
        print(f"   by code: custom share {after['custom_share']:.3f}  {classes(after)}")


if __name__ == "__main__":
    main()
