import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Linear layer, a learned per-feature bias added, then ReLU.
    """

    def __init__(self, in_features: int, out_features: int, bias_shape: tuple):
        super(Model, self).__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: (batch_size, in_features)
        Returns:
            (batch_size, out_features)
        """
        x = self.gemm(x)
        x = x + self.bias
        x = torch.relu(x)
        return x


batch_size = 128
in_features = 1024
out_features = 512
bias_shape = (out_features,)


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, bias_shape]
