import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Self-attention block: multi-head attention, residual connection, layer norm.
    """

    def __init__(self, embed_dim: int, num_heads: int):
        super(Model, self).__init__()
        self.attn = nn.MultiheadAttention(embed_dim, num_heads, batch_first=True)
        self.norm = nn.LayerNorm(embed_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: (batch_size, seq_len, embed_dim)
        Returns:
            (batch_size, seq_len, embed_dim)
        """
        attn_output, _ = self.attn(x, x, x, need_weights=False)
        return self.norm(x + attn_output)


batch_size = 8
seq_len = 256
embed_dim = 512
num_heads = 8


def get_inputs():
    return [torch.rand(batch_size, seq_len, embed_dim)]


def get_init_inputs():
    return [embed_dim, num_heads]
