"""The A/A control of scripts/gpu-aa.sh: level1/1_Square_matmul's own `torch.matmul` as a
candidate. No build, so each eval costs its timing, not an nvcc compile (a CUDA candidate with
`--base-kernel` builds its extension in each eval: about 100 s each on an H100)."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, A, B):
        return torch.matmul(A, B)
