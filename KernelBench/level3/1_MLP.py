import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Multi-layer perceptron: Linear + ReLU for each hidden layer, then a Linear output layer.
    """

    def __init__(self, input_size: int, layer_sizes: list, output_size: int):
        super(Model, self).__init__()
        layers = []
        current = input_size
        for size in layer_sizes:
            layers.append(nn.Linear(current, size))
            layers.append(nn.ReLU())
            current = size
        layers.append(nn.Linear(current, output_size))
        self.network = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: (batch_size, input_size)
        Returns:
            (batch_size, output_size)
        """
        return self.network(x)


batch_size = 256
input_size = 1024
layer_sizes = [2048, 2048]
output_size = 1024


def get_inputs():
    return [torch.randn(batch_size, input_size)]


def get_init_inputs():
    return [input_size, layer_sizes, output_size]
