"""Correct casts of float64 tensors into a floating dtype: round to nearest (ties to even) and toward zero.

Why not just ``x.to(dtype)``: torch casts float64 to float16/bfloat16 *through float32* (on CPU, c10's
Half/BFloat16 are constructed from a float), i.e. it rounds twice. Double rounding differs from one
round-to-nearest whenever the float32 rounding lands exactly on a 16-bit tie: e.g.
``torch.tensor(1 + 2**-8 + 2**-30, dtype=torch.float64).to(torch.bfloat16)`` gives 1.0, but the nearest
bfloat16 is 1.0078125. On continuous draws that happens for about 2**-14 (float16, measured 5.9e-5) and 2**-17
(bfloat16, measured 8.7e-6) of the values, far too often for a gold sampler: the harness's canonical law is *one* RN cast and the gold
sampler must write exactly that.

The fix is the classic one: round float64 -> float32 *to odd* (truncate toward zero, then set the last
bit if anything was cut off), then float32 -> 16-bit with torch's correct RN. Round-to-odd into a format
with at least two more significand bits than the target makes the second rounding exact; float32 has 13
(float16, more in float16's subnormal range) and 16 (bfloat16, subnormals included) more bits.

All operations are elementwise torch ops on the tensor's device; no Python loops over elements.
"""

from __future__ import annotations

import torch

__all__ = ["rn_cast", "rz_cast", "toward_zero_one_ulp"]

_INT_OF = {
    torch.float64: torch.int64,
    torch.float32: torch.int32,
    torch.float16: torch.int16,
    torch.bfloat16: torch.int16,
}


def toward_zero_one_ulp(y: torch.Tensor, where: torch.Tensor) -> torch.Tensor:
    """``y`` with the elements selected by ``where`` moved one ulp toward zero (inf -> max finite).

    Floats are sign-magnitude, so subtracting 1 from the bit pattern viewed as a signed integer shrinks
    the magnitude for both signs; callers only select nonzero elements.
    """
    bits = y.view(_INT_OF[y.dtype])
    return torch.where(where, bits - 1, bits).view(y.dtype)


def _odd_float32(x: torch.Tensor) -> torch.Tensor:
    """float64 -> float32 rounded to odd (see the module docstring)."""
    y = x.to(torch.float32)  # RN; exact in hardware for float64 -> float32
    back = y.to(torch.float64)
    away = (back.abs() > x.abs()).to(torch.int32)  # RN moved away from zero: step back = truncation
    inexact = (back != x).to(torch.int32)  # anything cut off sets the last bit ("sticky")
    # Integer arithmetic on the bit pattern instead of torch.where: fewer passes over the chunk.
    return ((y.view(torch.int32) - away) | inexact).view(torch.float32)


def rn_cast(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """One round-to-nearest-even cast of a float64 tensor into ``dtype`` (a new tensor)."""
    if x.dtype != torch.float64:
        raise TypeError(f"rn_cast expects float64, got {x.dtype}")
    if dtype in (torch.float64, torch.float32):
        return x.to(dtype)
    if dtype in (torch.float16, torch.bfloat16):
        return _odd_float32(x).to(dtype)
    raise TypeError(f"rn_cast: unsupported dtype {dtype}")


def rz_cast(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Cast float64 into ``dtype`` rounding toward zero ("chopping"): the correct RN result, moved one
    ulp toward zero wherever RN moved away from zero. Never overflows to inf (chopping cannot)."""
    y = rn_cast(x, dtype)
    if dtype == torch.float64:
        return y
    return toward_zero_one_ulp(y, y.to(torch.float64).abs() > x.abs())
