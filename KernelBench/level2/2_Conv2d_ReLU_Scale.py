import torch
import torch.nn as nn


class Model(nn.Module):
    """
    2D convolution, ReLU, then multiplication by a constant.
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, scaling_factor: float):
        super(Model, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.scaling_factor = scaling_factor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: (batch_size, in_channels, height, width)
        Returns:
            (batch_size, out_channels, height - kernel_size + 1, width - kernel_size + 1)
        """
        x = self.conv(x)
        x = torch.relu(x)
        x = x * self.scaling_factor
        return x


batch_size = 8
in_channels = 16
out_channels = 32
height = 128
width = 128
kernel_size = 3
scaling_factor = 0.5


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, scaling_factor]
