import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Standard 2D convolution, square kernel, no padding, stride 1.
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super(Model, self).__init__()
        self.conv2d = nn.Conv2d(in_channels, out_channels, kernel_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: (batch_size, in_channels, height, width)
        Returns:
            (batch_size, out_channels, height_out, width_out)
        """
        return self.conv2d(x)


batch_size = 8
in_channels = 16
out_channels = 64
kernel_size = 3
height = 128
width = 128


def get_inputs():
    x = torch.randn(batch_size, in_channels, height, width)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
