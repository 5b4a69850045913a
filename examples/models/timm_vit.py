"""A ViT initialized with timm's own sampler, for `--cases-from examples/models/timm_vit.py:build`
and `--cases-from examples/models/timm_vit.py:timm_only`.

timm's VisionTransformer draws its weights with ``timm.layers.trunc_normal_`` (timm's copy of
torch ≤ 2.11's algorithm, all in the tensor's dtype) and its positional embedding with
``trunc_normal_(std=.02)``.

* `build` mixes the two samplers the way a model that borrows from both does: ``pos_embed`` and
  ``cls_token`` through ``torch.nn.init.trunc_normal_``, every ``nn.Linear`` weight through
  timm's ``trunc_normal_``, and the patch embedding through timm's ``trunc_normal_tf_`` (bounds
  in σ units: ±2σ);
* `timm_only` initializes as timm's VisionTransformer does by default (its ``'timm'`` scheme):
  ``pos_embed`` and every ``nn.Linear`` weight through timm's ``trunc_normal_(std=.02)``,
  ``cls_token`` with ``normal_(std=1e-6)`` (not a truncated normal), the patch embedding left at
  torch's default: every truncated-normal call is timm's.

Built in bfloat16 on the CPU at a small width (no download, no network): the harness records
each call with the function that made it and judges it with that function's candidate
(``torch``, ``timm``, ``timm-tf``).

timm is imported as ``timm.layers`` where that works. timm installed without its dependencies
(as this project installs it: PyPI's torchvision does not load beside the CPU torch wheel) fails
at ``import timm.layers``; the model then takes timm's own ``weight_init.py`` through the timm
adapter's loader (`candidates.libraries.timm.weight_init`), the same functions from the same file.
"""

from __future__ import annotations

import torch
from torch import nn


def timm_weight_init():
    """timm's weight_init module (`timm.layers.weight_init` or, without torchvision, its file)."""
    try:
        from timm.layers import weight_init
    except Exception:  # timm without torchvision: see the module docstring
        from candidates.libraries.timm import weight_init as load

        weight_init = load()
    return weight_init


class Block(nn.Module):
    def __init__(self, dim: int, mlp_ratio: float = 4.0):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, int(dim * mlp_ratio))
        self.fc2 = nn.Linear(int(dim * mlp_ratio), dim)


class VisionTransformer(nn.Module):
    def __init__(self, img_size: int = 64, patch: int = 16, dim: int = 192, depth: int = 2,
                 classes: int = 100):
        super().__init__()
        tokens = (img_size // patch) ** 2
        self.patch_embed = nn.Conv2d(3, dim, kernel_size=patch, stride=patch)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, tokens + 1, dim))
        self.blocks = nn.ModuleList(Block(dim) for _ in range(depth))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def init_weights(self) -> None:
        """torch's sampler for the embeddings, timm's for the Linear weights and the patch
        embedding (timm's defaults: std .02, bounds -2, 2, i.e. ±100σ; the tf variant ±2σ)."""
        timm_init = timm_weight_init()
        nn.init.trunc_normal_(self.pos_embed, std=0.02)
        nn.init.trunc_normal_(self.cls_token, std=0.02)
        timm_init.trunc_normal_tf_(self.patch_embed.weight, std=0.02)
        for module in self.modules():
            if isinstance(module, nn.Linear):
                timm_init.trunc_normal_(module.weight, std=0.02)
                nn.init.zeros_(module.bias)


    def init_weights_timm(self) -> None:
        """timm's own scheme (``init_weights_vit_timm``): timm's sampler for every truncated
        normal, std .02 with its default bounds -2, 2 (±100σ)."""
        timm_init = timm_weight_init()
        timm_init.trunc_normal_(self.pos_embed, std=0.02)
        nn.init.normal_(self.cls_token, std=1e-6)
        for module in self.modules():
            if isinstance(module, nn.Linear):
                timm_init.trunc_normal_(module.weight, std=0.02)
                nn.init.zeros_(module.bias)


def build(depth: int = 2, dim: int = 192, dtype=torch.bfloat16) -> VisionTransformer:
    """The model on the CPU, in `dtype`, initialized with torch's and timm's samplers."""
    model = VisionTransformer(dim=dim, depth=depth).to(dtype)
    model.init_weights()
    return model


def timm_only(depth: int = 2, dim: int = 192, dtype=torch.bfloat16) -> VisionTransformer:
    """The model on the CPU, in `dtype`, initialized as timm initializes its ViT: every
    truncated-normal call is timm's ``trunc_normal_``."""
    model = VisionTransformer(dim=dim, depth=depth).to(dtype)
    model.init_weights_timm()
    return model
