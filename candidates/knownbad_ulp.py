"""Known-bad samplers whose every value lies within an ulp or two of the exact law's: the
within-an-ulp class of defects, each the exact sampler (`candidates.kernels.exact_based`) with
one defect in its last step.

* ``double-rounding`` (`double_rounding_`): the exact float64 draw rounded to float32, then to
  the 16-bit dtype, round-to-nearest each time (torch's own CPU cast of a float64 into bfloat16 or
  float16). Where the float32 value lands exactly on a 16-bit tie, ties-to-even decides instead
  of the bits below float32: 2^-14 of float16 values and 2^-17 of bfloat16 values move one ulp.
  float32 and float64 outputs have no standard format between them and float64: exact there.
* ``coarse-intermediate`` (`coarse_intermediate_`): the final affine step, mean + std z (z the
  exact standardized draw), computed in the next-coarser dtype: float32 for a float64 tensor,
  float16 for float32, bfloat16 for float16, and bfloat16's own arithmetic for bfloat16 (the
  coarsest dtype of the grid). Each value is within an ulp or two of that coarser format of the
  exact one; where the coarser format's lattice is coarse against std (tiny std, a large mean),
  the same ulp is a large move in sigma.
* ``bound-cell`` (`bound_cell_`): the exact draw rounded once, then the value one ulp inside
  RN(a) written as RN(a), and the one one ulp inside RN(b) as RN(b) (a tolerance guard that
  snaps values within one ulp to the bound): each finite bound's atom takes its neighbour's
  whole cell.

Each writes inside [RN(a), RN(b)] (the coarser arithmetic and the double rounding are clamped
there, as a sampler that tests its bounds last does), on the tensor's device, for every dtype of
the grid. Known-bad: never "fixed"; they exist to show that a defect of an ulp is graded by
its size in sigma, not by its detectability.
"""

from __future__ import annotations

import torch

from candidates.kernels import exact_based, rn_scalar, validate_args
from candidates.rounding import rn_cast

__all__ = ["double_rounding_", "coarse_intermediate_", "bound_cell_", "COARSER",
           "double_rounded_cast", "coarse_affine", "snap_bound_neighbours"]

#: The dtype each output dtype's affine step runs in, one step coarser (bfloat16: its own).
COARSER = {
    torch.float64: torch.float32,
    torch.float32: torch.float16,
    torch.float16: torch.bfloat16,
    torch.bfloat16: torch.bfloat16,
}

#: The dtypes cast through float32 by `double_rounded_cast` (float32 holds 13 and 16 more bits).
SIXTEEN_BIT = (torch.float16, torch.bfloat16)


def bounds_in(dtype: torch.dtype, a: float, b: float, device) -> tuple[torch.Tensor, torch.Tensor]:
    """RN(a), RN(b) in `dtype` as 0-d tensors on `device` (one rounding each, as the law's)."""
    probe = torch.empty(0, dtype=dtype, device=device)
    return rn_scalar(a, probe), rn_scalar(b, probe)


def double_rounded_cast(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """float64 ``x`` into `dtype` through float32, round-to-nearest-even at each step (the
    16-bit dtypes); one RN cast for float32 and float64."""
    if dtype in SIXTEEN_BIT:
        return x.to(torch.float32).to(dtype)
    return rn_cast(x, dtype)


def coarse_affine(z: torch.Tensor, mean: float, std: float, dtype: torch.dtype) -> torch.Tensor:
    """mean + std * z with the operands and each operation's result rounded into `dtype`
    (torch's arithmetic in that dtype: a 16-bit op computes in float32 and rounds once)."""
    coarse_z = rn_cast(z, dtype)
    coarse_std = rn_cast(torch.tensor(std, dtype=torch.float64), dtype).to(z.device)
    coarse_mean = rn_cast(torch.tensor(mean, dtype=torch.float64), dtype).to(z.device)
    return coarse_z.mul(coarse_std).add(coarse_mean)


def snap_bound_neighbours(y: torch.Tensor, rn_a: torch.Tensor, rn_b: torch.Tensor) -> torch.Tensor:
    """``y`` with the value next to a finite RN(a) inside the window written as RN(a), and the
    value next to a finite RN(b) as RN(b) (where that value is not RN(a)'s neighbour too)."""
    up_a = torch.nextafter(rn_a, rn_b)
    down_b = torch.nextafter(rn_b, rn_a)
    out = y
    if bool(torch.isfinite(rn_a)) and bool(up_a < rn_b):
        out = torch.where(y == up_a, rn_a, out)
    if bool(torch.isfinite(rn_b)) and bool(down_b > rn_a) and bool(down_b != up_a):
        out = torch.where(y == down_b, rn_b, out)
    return out


def double_rounding_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """The exact float64 draw cast into a 16-bit dtype through float32 (two round-to-nearest
    steps), clamped to [RN(a), RN(b)]; exact in float32 and float64.

    Models torch's CPU float64 -> bfloat16/float16 cast (c10 builds a 16-bit value from a
    float). The values that move are those whose float32 rounding lands on a 16-bit tie: 2^-14 of
    float16 values, 2^-17 of bfloat16 values, one ulp each. Caught by: atoms and gof on a window
    around a 16-bit tie (a window of four float32 ulps about 1 + 2^-8 in bfloat16: 1/8 of the
    values go to the even side); nowhere on the grid at the pr n.
    """
    mean, std, a, b = validate_args(mean, std, a, b)

    def cast(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        rn_a, rn_b = bounds_in(dtype, a, b, x.device)
        return double_rounded_cast(x, dtype).clamp(rn_a, rn_b)

    return exact_based(tensor, mean, std, a, b, generator, cast=cast)


def coarse_intermediate_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """The exact standardized draw z, then mean + std z computed in the next-coarser dtype
    (`COARSER`), written into the tensor's dtype and clamped to [RN(a), RN(b)].

    Models a last step done in a narrower format than the output's (a float32 tensor filled by
    a float16 kernel, a float16 one by a bfloat16 one). On +-2 sigma each value moves by an ulp
    or two of the coarser format (<= 2^-10 sigma in float16); with a tiny std or a large mean the
    coarser lattice is coarse against sigma. Caught by: lattices and collisions (float32, float64:
    every value on the coarser format's lattice), gof (float16: only the bfloat16 values),
    moments (bfloat16: the std rounded into bfloat16 scales the law).
    """
    mean, std, a, b = validate_args(mean, std, a, b)

    def cast(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        z = (x - mean) / std
        y = coarse_affine(z, mean, std, COARSER[dtype])
        rn_a, rn_b = bounds_in(dtype, a, b, x.device)
        written = rn_cast(y.to(torch.float64), dtype)
        return torch.maximum(torch.minimum(written, rn_b), rn_a)

    return exact_based(tensor, mean, std, a, b, generator, cast=cast)


def bound_cell_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """The exact draw rounded once, then the value one ulp inside each finite bound written at
    the bound (RN(a)'s atom takes its neighbour's whole cell, RN(b)'s likewise).

    Models a guard that snaps values within one ulp of a bound onto it. At a representable bound
    the atom holds its half cell and its neighbour's whole one: 3x the law's where the spacing is
    even (bfloat16 at -2 sigma: 6.6e-4 instead of 2.2e-4), each moved value one ulp. Caught by:
    atoms (16-bit and wherever the bound's atom is resolved), gof.
    """
    mean, std, a, b = validate_args(mean, std, a, b)

    def cast(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        rn_a, rn_b = bounds_in(dtype, a, b, x.device)
        return snap_bound_neighbours(rn_cast(x, dtype), rn_a, rn_b)

    return exact_based(tensor, mean, std, a, b, generator, cast=cast)
