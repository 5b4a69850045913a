"""A Llama/Qwen3-style decoder whose ``init_weights`` calls ``trunc_normal_`` with torch's
absolute default bounds, for `--cases-from examples/models/llama.py:build`.

This is the bug report's model (shared/seeds/001: qwen3 pretrained from scratch in bfloat16): every
weight drawn with ``trunc_normal_(w, mean=0, std=0.02, a=-2, b=2)``, bounds at +-100 sigma, the
output projection with a depth-scaled std as torchtitan does (0.02 / sqrt(2 * layers)). Built on
the meta device and then materialized with ``to_empty`` on the CPU before ``init_weights`` (the way
FSDP2 training scripts do it), in bfloat16, with a small vocabulary and width so that it runs here
in seconds; ``build(vocab=151936, dim=4096, layers=36, heads=32, kv_heads=8, ffn=12288)`` gives
Qwen3-8B's calls (a 151936 x 4096 embedding: run that one on a machine with the memory).
"""

from __future__ import annotations

import math

import torch
from torch import nn


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int, kv_heads: int):
        super().__init__()
        head_dim = dim // heads
        self.wq = nn.Linear(dim, heads * head_dim, bias=False)
        self.wk = nn.Linear(dim, kv_heads * head_dim, bias=False)
        self.wv = nn.Linear(dim, kv_heads * head_dim, bias=False)
        self.wo = nn.Linear(heads * head_dim, dim, bias=False)


class FeedForward(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)


class Decoder(nn.Module):
    def __init__(self, vocab: int, dim: int, layers: int, heads: int, kv_heads: int, ffn: int):
        super().__init__()
        self.tok_embeddings = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList(nn.ModuleDict({"attention": Attention(dim, heads, kv_heads),
                                                   "feed_forward": FeedForward(dim, ffn)})
                                    for _ in range(layers))
        self.output = nn.Linear(dim, vocab, bias=False)
        self.n_layers = layers

    def init_weights(self, std: float = 0.02) -> None:
        """The bug report's init: trunc_normal_ with the default bounds a=-2, b=2."""
        nn.init.trunc_normal_(self.tok_embeddings.weight, mean=0.0, std=std, a=-2, b=2)
        depth_std = std / math.sqrt(2 * self.n_layers)
        for layer in self.layers:
            for name, module in layer.named_modules():
                if isinstance(module, nn.Linear):
                    out = name.endswith(("wo", "w2"))
                    nn.init.trunc_normal_(module.weight, mean=0.0, std=depth_std if out else std,
                                          a=-2, b=2)
        nn.init.trunc_normal_(self.output.weight, mean=0.0, std=std, a=-2, b=2)


def build(vocab: int = 4096, dim: int = 256, layers: int = 2, heads: int = 4, kv_heads: int = 2,
          ffn: int = 768, dtype=torch.bfloat16) -> Decoder:
    """The decoder built on meta, materialized with to_empty on the CPU, initialized."""
    with torch.device("meta"):
        model = Decoder(vocab, dim, layers, heads, kv_heads, ffn).to(dtype)
    model.to_empty(device="cpu")
    model.init_weights()
    return model
