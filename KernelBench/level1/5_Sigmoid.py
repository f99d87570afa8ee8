import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Simple model that applies a Sigmoid activation elementwise.
    """

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: input tensor of any shape
        Returns:
            tensor of the same shape
        """
        return torch.sigmoid(x)


batch_size = 4096
dim = 4096


def get_inputs():
    x = torch.randn(batch_size, dim)
    return [x]


def get_init_inputs():
    return []  # No special initialization inputs needed
