"""The numerical kernels the harness's own samplers share: the exact inverse CDF in float64, one
round-to-nearest cast, argument validation, and a counter-based uniform stream.

The good samplers (`exact`, `exact-counter`) compute everything here from `reference` (the law)
and `candidates.rounding` (the cast): nothing comes from the judge's code in `harness`, so a defect
in the judge's index or folding arithmetic cannot cancel out on both sides.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from candidates.rounding import rn_cast

__all__ = ["CHUNK", "HALF_CELL", "harness_version", "validate_args", "rn_scalar", "inverse_cdf",
           "exact_fill", "truncated_normal", "exact_based", "counter_uniform", "global_flat_index",
           "chunk_sizes"]

#: Elements per chunk in the float64 samplers: bounds their scratch memory (a few float64 arrays of
#: this size) independently of the tensor's size. Even, so antithetic pairs never straddle chunks.
CHUNK = 2**22

# u is a multiple of 2**-53 in [0, 1) (torch's CPU float64 uniform); shifting by half a cell maps it to
# the midpoints (2k+1)*2**-54, symmetric under u <-> 1-u and never 0, so neither tail ever yields +-inf
# (ppf(0) = a = -inf for an untruncated law) and both tails are resolved down to 2**-54.
HALF_CELL = 2.0**-54


def harness_version() -> str:
    """sha256[:12] over the harness-side code the built-ins run (candidates/ and reference/)."""
    if _VERSION_CACHE:
        return _VERSION_CACHE[0]
    root = Path(__file__).resolve().parent.parent
    h = hashlib.sha256()
    for sub in ("candidates", "reference"):
        for p in sorted((root / sub).glob("*.py")):
            h.update(p.name.encode())
            h.update(p.read_bytes())
    _VERSION_CACHE.append(h.hexdigest()[:12])
    return _VERSION_CACHE[0]


_VERSION_CACHE: list[str] = []


def validate_args(mean, std, a, b) -> tuple[float, float, float, float]:
    """Floats (mean, std, a, b), or ValueError for parameters that define no truncated normal."""
    mean, std, a, b = float(mean), float(std), float(a), float(b)
    if math.isnan(mean) or math.isinf(mean):
        raise ValueError(f"trunc_normal: mean must be finite, got {mean}")
    if not math.isfinite(std) or std <= 0:
        raise ValueError(f"trunc_normal: std must be finite and > 0, got {std}")
    if math.isnan(a) or math.isnan(b):
        raise ValueError(f"trunc_normal: bounds must not be NaN, got a={a}, b={b}")
    if a > b:
        raise ValueError(f"trunc_normal: need a <= b, got a={a} > b={b}")
    if a == b and math.isinf(a):
        raise ValueError(f"trunc_normal: a == b == {a} is not a finite point")
    return mean, std, a, b


def rn_scalar(v: float, tensor: torch.Tensor) -> torch.Tensor:
    """RN(v) in the tensor's dtype as a 0-d tensor (fill_(float) would round twice for 16-bit)."""
    return rn_cast(torch.tensor(v, dtype=torch.float64), tensor.dtype).to(tensor.device)


def inverse_cdf(dist, u: torch.Tensor) -> torch.Tensor:
    """X = F^-1(u) for u in [0, 1), float64 on u's device, exact in both tails (see HALF_CELL)."""
    un = u.cpu().numpy()
    lower = un < 0.5
    # Index arrays with take/put: several times faster than boolean-mask get/set on 4M elements.
    lo, hi = np.flatnonzero(lower), np.flatnonzero(~lower)
    x = np.empty_like(un)
    if lo.size:
        x.put(lo, dist.ppf(un.take(lo) + HALF_CELL))
    if hi.size:
        # 1 - u is exact for u >= 0.5 (Sterbenz), so the upper tail probability loses nothing.
        x.put(hi, dist.isf(np.maximum((1.0 - un.take(hi)) - HALF_CELL, HALF_CELL)))
    return torch.from_numpy(x).to(u.device)


def exact_fill(
    tensor: torch.Tensor,
    dist,
    generator: torch.Generator | None,
    *,
    u_map: Callable[[torch.Tensor], torch.Tensor] | None = None,
    x_map: Callable[[torch.Tensor], torch.Tensor] | None = None,
    cast: Callable[[torch.Tensor, torch.dtype], torch.Tensor] = rn_cast,
) -> torch.Tensor:
    """Fill ``tensor`` (any layout) with ``cast(x_map(F^-1(u_map(u))))`` chunk by chunk, in row-major
    order of its elements. The hooks let the known-bad samplers inject exactly one defect each.
    Caller handles validation, meta tensors, empty tensors and no_grad."""
    n = tensor.numel()
    # A contiguous tensor is written through a flat view; any other layout gets a contiguous scratch
    # copied in at the end (copy_ honours the view's strides, leaving the rest of its base untouched).
    out = tensor.view(-1) if tensor.is_contiguous() else torch.empty(n, dtype=tensor.dtype, device=tensor.device)
    for start in range(0, n, CHUNK):
        k = min(CHUNK, n - start)
        u = torch.rand(k, dtype=torch.float64, device=tensor.device, generator=generator)
        if u_map is not None:
            u = u_map(u)
        x = inverse_cdf(dist, u)
        if x_map is not None:
            x = x_map(x)
        out[start:start + k].copy_(cast(x, tensor.dtype))
    if not tensor.is_contiguous():
        tensor.copy_(out.view(tensor.shape))
    return tensor


def truncated_normal(mean: float, std: float, a: float, b: float):
    """The exact law TN(mean, std, a, b) (`reference.TruncatedNormal`)."""
    from reference import TruncatedNormal  # imported late: reference is numpy-heavy and optional for loading

    return TruncatedNormal(mean, std, a, b)


def exact_based(tensor, mean, std, a, b, generator, make_dist=None, **hooks):
    """Shared shell of the exact family: validation, meta/empty/point cases, no_grad; the hooks
    (`exact_fill`'s) let a known-bad sampler inject exactly one defect."""
    mean, std, a, b = validate_args(mean, std, a, b)
    if tensor.is_meta:
        return tensor
    with torch.no_grad():
        if tensor.numel() == 0:
            return tensor
        if a == b:
            tensor.copy_(rn_scalar(a, tensor).expand(tensor.shape))
            return tensor
        dist = (make_dist or truncated_normal)(mean, std, a, b)
        return exact_fill(tensor, dist, generator, **hooks)


_GAMMA = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


def counter_uniform(key: int, index: np.ndarray) -> np.ndarray:
    """u in [0, 1), multiples of 2^-53, of SplitMix64's output number index + 1 from state `key`
    (a counter-based stream: any element is computed from its index alone)."""
    with np.errstate(over="ignore"):
        z = np.uint64(int(key) % (1 << 64)) + (np.asarray(index, dtype=np.uint64) + np.uint64(1)) * _GAMMA
        z = (z ^ (z >> np.uint64(30))) * _MIX1
        z = (z ^ (z >> np.uint64(27))) * _MIX2
        z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(11)).astype(np.float64) * 2.0**-53


def chunk_sizes(size: int, parts: int) -> list[int]:
    """torch.chunk's split of `size` into `parts` (chunks of ceil(size / parts), empty ones last)."""
    sizes = [len(c) for c in torch.arange(size).chunk(parts)]
    return sizes + [0] * (parts - len(sizes))


def global_flat_index(shape: tuple, offsets: tuple, local_shape: tuple) -> np.ndarray:
    """Row-major flat index, in the whole tensor of `shape`, of every element of the box at
    `offsets` of `local_shape`, in the box's own row-major order."""
    if math.prod(local_shape) == 0:
        return np.zeros(0, dtype=np.int64)
    if not shape:
        return np.zeros(1, dtype=np.int64)
    strides = [math.prod(shape[d + 1:]) for d in range(len(shape))]
    index = np.zeros(1, dtype=np.int64)
    for offset, size, stride in zip(offsets, local_shape, strides):
        index = (index[:, None] + (np.arange(offset, offset + size, dtype=np.int64) * stride)[None, :]).ravel()
    return index
