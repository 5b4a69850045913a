"""A ViT with timm's init scheme, for `--cases-from examples/models/vit.py:build`.

The layers and the init calls follow timm's VisionTransformer (`_init_weights`, `init_weights`):
``pos_embed`` and ``cls_token`` drawn with ``trunc_normal_(std=.02)``, every ``nn.Linear`` weight
(qkv, proj, the MLP, the head) with ``trunc_normal_(std=.02)``: torch.nn.init's absolute default
bounds a = -2, b = 2, i.e. +-100 sigma. Built on the meta device (no memory, no download), in
bfloat16, at ViT-S/16 width with 2 blocks: the harness records each distinct call (shape, dtype,
mean, std, a, b) once. ``build(depth=12, dim=768, heads=12)`` gives ViT-B/16's calls.
"""

from __future__ import annotations

import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, dim: int, heads: int, mlp_ratio: float = 4.0):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, int(dim * mlp_ratio))
        self.fc2 = nn.Linear(int(dim * mlp_ratio), dim)
        self.heads = heads


class VisionTransformer(nn.Module):
    def __init__(self, img_size: int = 224, patch: int = 16, dim: int = 384, depth: int = 2,
                 heads: int = 6, classes: int = 1000):
        super().__init__()
        tokens = (img_size // patch) ** 2
        self.patch_embed = nn.Conv2d(3, dim, kernel_size=patch, stride=patch)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, tokens + 1, dim))
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(depth))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def init_weights(self) -> None:
        """timm's scheme: trunc_normal_(std=.02) for the embeddings and every Linear weight."""
        nn.init.trunc_normal_(self.pos_embed, std=0.02)
        nn.init.trunc_normal_(self.cls_token, std=0.02)
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.trunc_normal_(module.weight, std=0.02)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)


def build(depth: int = 2, dim: int = 384, heads: int = 6, dtype=torch.bfloat16) -> VisionTransformer:
    """The model on the meta device, in `dtype`, initialized (meta: the calls cost nothing)."""
    with torch.device("meta"):
        model = VisionTransformer(dim=dim, depth=depth, heads=heads).to(dtype)
    model.init_weights()
    return model
