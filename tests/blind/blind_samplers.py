"""The blind set: defective samplers written after the mechanism catalog
(`harness.diagnosis.mechanism_catalog`) was frozen, each by a construction the catalog was not
built from, to measure how well its names generalize (tests/blind/test_blind_set.py).

Each sampler has torch.nn.init's protocol (fills the tensor in place, absolute bounds, the
generator on the tensor's device) and one defect. Its docstring states the true cause, the
catalog mechanism that is right for it ("Right name") and the level its effect in sigma calls
for ("Level", by the default thresholds of `harness.diagnosis.grading.thresholds`). `BLIND`
lists them with the case and dtype where the defect shows. The expectations were written from
the causes, never from what the catalog answers: where the catalog names a sampler wrongly,
the expectation stays and the miss is reported (docs/method/naming.md).

None of them is a library's construction: a library's kernel named for any of them is a false
naming.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from candidates.kernels import exact_based, truncated_normal, validate_args
from candidates.rounding import rn_cast

# ------------------------------------------------------------------------------ shared pieces


def uniforms(count: int, tensor: torch.Tensor, generator) -> torch.Tensor:
    """U[0, 1) float64 (multiples of 2^-53) on the tensor's device."""
    return torch.rand(count, dtype=torch.float64, device=tensor.device, generator=generator)


def write(tensor: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """Write float64 (or already cast) `values`, in row-major order, into `tensor` in place."""
    if values.dtype != tensor.dtype:
        values = rn_cast(values.to(torch.float64), tensor.dtype)
    with torch.no_grad():
        tensor.copy_(values.reshape(tensor.shape))
    return tensor


def fill_by_rejection(tensor, generator, propose: Callable[[int], torch.Tensor],
                      keep: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
    """Values from `propose(count)` (already in the tensor's dtype or float64) kept where
    `keep(values)`, until the tensor is full; written in the order drawn."""
    n = tensor.numel()
    kept, have = [], 0
    while have < n:
        batch = propose(max(2 * (n - have), 1024))
        batch = batch[keep(batch)]
        kept.append(batch)
        have += batch.numel()
    return write(tensor, torch.cat(kept)[:n])


def affine(z: torch.Tensor, mean: float, std: float) -> torch.Tensor:
    """z * std + mean for a standard z, in float64."""
    return z * std + mean


# ---------------------------------------------------------------------------------- samplers

#: The acceptance test's uniform of `zero_acceptance_rejection_`: 10-bit, from a table.
ACCEPT_BITS = 10
#: Proposals `zero_acceptance_rejection_` makes per round.
PROPOSALS = 1 << 20


def zero_acceptance_rejection_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """A rejection sampler for windows away from the mean: proposals uniform on [a, b] (float32
    arithmetic), accepted where u' <= exp(-(z^2 - z_peak^2) / 2), u' from a 10-bit table
    (multiples of 2^-10, 0 included).

    True cause: the acceptance uniform on a lattice: u' = 0 (one proposal in 1024) accepts any
    proposal, a uniform on [a, b] mixed into the law, and the acceptance rounded up to the
    next 2^-10. On [3, 6] sigma the density ratio accepts ~0.1 of the proposals: ~1.4 % of the
    values are the uniform's, ~16x the law's mass beyond 5 sigma. Right name:
    uniform-proposals. Level: harmful (the share beyond 4 sigma 0.3 % above the law's, over the
    1e-3 threshold; the std 12 % large).
    """
    mean, std, a, b = validate_args(mean, std, a, b)
    # the density's peak on [a, b]: the ratio is 1 there
    z_peak = min(max(0.0, (a - mean) / std), (b - mean) / std)
    lo = torch.tensor(a, dtype=torch.float32, device=tensor.device)
    span = torch.tensor(b - a, dtype=torch.float32, device=tensor.device)
    n, accepted, have = tensor.numel(), [], 0
    while have < n:
        u = torch.rand(PROPOSALS, dtype=torch.float32, device=tensor.device, generator=generator)
        x = (lo + span * u).clamp(a, b)
        table = torch.floor(uniforms(PROPOSALS, tensor, generator) * (1 << ACCEPT_BITS))
        accept_u = (table / (1 << ACCEPT_BITS)).to(torch.float32)
        z = (x.to(torch.float64) - mean) / std
        ratio = torch.exp(-(z * z - z_peak * z_peak) / 2).to(torch.float32)
        kept = x[accept_u <= ratio]
        accepted.append(kept)
        have += kept.numel()
    return write(tensor, torch.cat(accepted)[:n].to(torch.float64))


def polar_without_rejection_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """Marsaglia's polar method with its rejection of the points outside the unit disk left
    out: u, v uniform on [-1, 1], s = u^2 + v^2, z = u sqrt(max(0, -2 ln s / s)) and v's alike,
    then the values outside [a, b] redrawn.

    True cause: the 21.5 % of points with s > 1 give a negative radicand, clamped to 0: both
    values are mean + std * 0, exact zeros at mean 0 (the accepted points are exact normals).
    Right name: exact-zeros (zeros written by construction). Level: harmful (a fifth of the
    values moved to 0, the std 12 % small).
    """
    mean, std, a, b = validate_args(mean, std, a, b)

    def propose(count: int) -> torch.Tensor:
        half = (count + 1) // 2
        u = 2.0 * uniforms(half, tensor, generator) - 1.0
        v = 2.0 * uniforms(half, tensor, generator) - 1.0
        s = u * u + v * v
        radius = torch.sqrt(torch.clamp(-2.0 * torch.log(s) / s, min=0.0))
        return affine(torch.cat([u * radius, v * radius]), mean, std)

    return fill_by_rejection(tensor, generator, propose,
                             lambda x: torch.isfinite(x) & (x >= a) & (x <= b))


def box_muller_rounds_first_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """Box-Muller in float64 (both the cosine and the sine value), rounded into the tensor's
    dtype, then the values outside [a, b] redrawn, the test made on the rounded values.

    True cause: the test after the rounding keeps the values of N(mu, sigma) that round onto
    RN(a) or RN(b) from outside: each bound's atom gets its whole rounding cell. Right name:
    rounds-first. Level: fine (on +-2 sigma in bfloat16 the atoms gain ~2e-4 of the values, each
    moved by less than an ulp, 0.008 sigma).
    """
    mean, std, a, b = validate_args(mean, std, a, b)

    def propose(count: int) -> torch.Tensor:
        half = (count + 1) // 2
        radius = torch.sqrt(-2.0 * torch.log1p(-uniforms(half, tensor, generator)))
        angle = 2.0 * math.pi * uniforms(half, tensor, generator)
        z = torch.cat([radius * torch.cos(angle), radius * torch.sin(angle)])
        return rn_cast(affine(z, mean, std), tensor.dtype)

    return fill_by_rejection(tensor, generator, propose,
                             lambda y: (y.to(torch.float64) >= a) & (y.to(torch.float64) <= b))


#: Where `clamp_at_three_sigma_` clamps, in sigma.
CLAMP_SIGMAS = 3.0


def clamp_at_three_sigma_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """The exact draw of TN(mu, sigma, a, b), then clamped to mu +- 3 sigma (a fixed "outlier"
    clamp, on a law truncated further out or not at all).

    True cause: a clamp: the normal's mass beyond 3 sigma (0.13 % each side) piles onto the two
    values at +-3 sigma. Right name: clamp (values clamped, the mass beyond piled on the clamp's
    ends, here not the bounds). Level: fine (0.27 % of the values moved inward, the std 0.25 %
    small).
    """
    mean, std, a, b = validate_args(mean, std, a, b)
    lo, hi = mean - CLAMP_SIGMAS * std, mean + CLAMP_SIGMAS * std
    return exact_based(tensor, mean, std, a, b, generator,
                       x_map=lambda x: x.clamp(max(lo, a), min(hi, b)))


#: The location bias of `biased_then_clamped_` and `mistyped_centering_shift_`, in sigma.
BIAS_SIGMAS = 0.05


def biased_then_clamped_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """The exact draw plus 0.05 sigma (a centering constant off by 0.05), then clamped back into
    [a, b] so the bounds hold.

    True cause: the whole law shifted by +0.05 sigma; the values pushed past b pile on b and
    nothing is left within 0.05 sigma above a. Right name: shifted (shifted, then clamped into
    [a, b]). Level: harmful (the mean 0.05 sigma off, above the 0.01 sigma threshold).
    """
    mean, std, a, b = validate_args(mean, std, a, b)
    return exact_based(tensor, mean, std, a, b, generator,
                       x_map=lambda x: (x + BIAS_SIGMAS * std).clamp(a, b))


#: The random bits of `twelve_bit_uniform_inverse_cdf_`'s uniform.
COARSE_UNIFORM_BITS = 12


def twelve_bit_uniform_inverse_cdf_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """The exact inverse CDF fed a 12-bit uniform u = j / 4096, j = 0 .. 4095 (a uniform built
    from 12 random bits), F^-1(0) = a.

    True cause: u = 0 writes the lower bound: an atom at a of 2^-12 of the values, and the upper
    tail cut at the 1 - 2^-12 quantile. Right name: coarse-uniform. Level: harmful on the
    absolute-bounds trap (2.4e-4 of the values at -100 sigma).
    """
    mean, std, a, b = validate_args(mean, std, a, b)
    dist = truncated_normal(mean, std, a, b)
    n = tensor.numel()
    steps = float(1 << COARSE_UNIFORM_BITS)
    u = torch.floor(uniforms(n, tensor, generator) * steps) / steps
    x = torch.from_numpy(dist.ppf(u.cpu().numpy())).to(tensor.device)
    return write(tensor, x)


#: The random bits of `twenty_bit_uniform_inverse_cdf_`'s uniform.
FEW_BITS = 20


def twenty_bit_uniform_inverse_cdf_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """The exact inverse CDF fed a 20-bit uniform at its cells' midpoints, (j + 1/2) / 2^20 (a
    generator that hands out 20 random bits per value).

    True cause: at most 2^20 distinct values where the law has ~2^26 equally likely float32
    values on +-2 sigma: ~64x the law's equal pairs, every histogram bin still right. Right
    name: few-random-bits (k = 20). Level: fine (each value within 2^-20 of the law's quantile).
    """
    steps = float(1 << FEW_BITS)
    return exact_based(tensor, mean, std, a, b, generator,
                       u_map=lambda u: (torch.floor(u * steps) + 0.5) / steps)


def tf32_round(x: torch.Tensor) -> torch.Tensor:
    """float32 `x` rounded to TF32 (10 fraction bits, float32's exponent), to nearest even."""
    bits = x.view(torch.int32)
    low = bits & 0x1FFF
    keep = bits & ~0x1FFF
    half = 0x1000
    odd = (keep >> 13) & 1
    up = (low > half) | ((low == half) & (odd == 1))
    return torch.where(up, keep + 0x2000, keep).view(torch.float32)


def tf32_matmul_affine_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """The exact standardized draw z written as [z, 1] @ [std, mean] by a TF32 matmul (inputs
    rounded to TF32's 10 fraction bits, products exact, the sum in float32), clamped to [a, b].

    True cause: a step done in a coarser arithmetic than the output's: with mean 0 and std 1
    every float32 value is RN_tf32(z), on the float16/TF32 lattice (its last 13 bits zero).
    Right name: dtype-arithmetic. Level: fine (each value within 2^-11 relative of the law's,
    < 0.001 sigma on +-2 sigma).
    """
    mean, std, a, b = validate_args(mean, std, a, b)

    def cast(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        z = ((x - mean) / std).to(torch.float32)
        scale = tf32_round(torch.tensor([std], dtype=torch.float32, device=x.device))
        shift = tf32_round(torch.tensor([mean], dtype=torch.float32, device=x.device))
        return (tf32_round(z) * scale + shift).clamp(a, b).to(dtype)

    return exact_based(tensor, mean, std, a, b, generator, cast=cast)


def phi_space_inverse_cdf_in_dtype_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """An inverse CDF in Phi space, every step in the tensor's dtype: u = uniform_(Phi(alpha),
    Phi(beta)) in the dtype, x = ndtri(u) (float32, rounded into the dtype), x * std + mean in
    the dtype, clamped to [a, b].

    True cause: the uniform and every step rounded into a 16-bit dtype: near Phi(2) = 0.977 the
    float16 uniform steps by 2^-11, so the upper values sit ~0.009 sigma apart, nothing lies
    above 1.9986 sigma, and the mean moves by ~0.002 sigma. Right name: inverse-cdf-in-dtype.
    Level: fine (values moved by less than 0.01 sigma).
    """
    mean, std, a, b = validate_args(mean, std, a, b)
    alpha, beta = (a - mean) / std, (b - mean) / std
    lo = 0.5 * math.erfc(-alpha / math.sqrt(2.0))
    hi = 0.5 * math.erfc(-beta / math.sqrt(2.0))
    with torch.no_grad():
        u = torch.empty(tensor.shape, dtype=tensor.dtype, device=tensor.device)
        u.uniform_(lo, hi, generator=generator)
        z = torch.special.ndtri(u.to(torch.float32)).to(tensor.dtype)
        tensor.copy_(z.mul_(std).add_(mean).clamp_(a, b))
    return tensor


#: The guard of `epsilon_guard_tail_cut_`: u below it or above 1 - it is redrawn.
GUARD = 1e-3


def epsilon_guard_tail_cut_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """The exact inverse CDF with a guard against log(0): a uniform below 1e-3 or above
    1 - 1e-3 is redrawn.

    True cause: the law's 1e-3 at each end is never written: no value beyond the 1e-3
    quantiles (+-3.09 sigma untruncated), the rest renormalized. Right name: tail-cut. Level:
    fine (2e-3 of the values, each moved inward by a fraction of sigma).
    """
    def guarded(u: torch.Tensor) -> torch.Tensor:
        u = u.clone()
        bad = (u < GUARD) | (u >= 1.0 - GUARD)
        while bool(bad.any()):
            u[bad] = torch.rand(int(bad.sum()), dtype=torch.float64, device=u.device,
                                generator=generator)
            bad = (u < GUARD) | (u >= 1.0 - GUARD)
        return u

    return exact_based(tensor, mean, std, a, b, generator, u_map=guarded)


def mistyped_centering_shift_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """mean + std * (z + 0.05), z the exact standardized draw of TN on [alpha - 0.05,
    beta - 0.05] (a centering constant mistyped as 0.05 instead of 0).

    True cause: the law's location off by +0.05 sigma, its shape intact (the bounds moved with
    it: untruncated, nothing changes but the location). Right name: shifted. Level: harmful (the
    mean 0.05 sigma off).
    """
    mean, std, a, b = validate_args(mean, std, a, b)
    return exact_based(tensor, mean, std, a, b, generator,
                       make_dist=lambda m, s, lo, hi: truncated_normal(m + BIAS_SIGMAS * s, s, lo, hi))


#: The std of the normal on [-2, 2] sigma, over sigma.
STD_RATIO_2SIGMA = 0.8796256610342397


def double_corrected_scale_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """The exact sampler of TN(mu, sigma / 0.8796, a, b): a "variance correction" for the
    truncation at +-2 sigma applied to a sampler that needs none.

    True cause: the scale 13.7 % too wide inside the same bounds. Right name: scaled. Level:
    harmful (the std ~6 % large on +-2 sigma, above the 2 % threshold).
    """
    return exact_based(tensor, mean, std, a, b, generator,
                       make_dist=lambda m, s, lo, hi: truncated_normal(m, s / STD_RATIO_2SIGMA, lo, hi))


#: `ring_buffer_repeat_` repeats the previous call's values on every this-many-th call.
REPEAT_EVERY = 8


@dataclass
class RingState:
    """The previous call's values and the calls made, per (shape, dtype, device)."""

    calls: int = 0
    previous: torch.Tensor | None = None


RING: dict = {}


def ring_buffer_repeat_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """The exact sampler behind a ring of 7 buffers with an off-by-one: every 8th call of a
    shape returns the previous call's values instead of fresh ones.

    True cause: whole calls repeated: successive calls equal in 1 of 8, every value of the
    copy a duplicate. Right name: dependence. Level: harmful (1/8 of the calls copies, far above
    the 1e-3 share of repeats).
    """
    key = (tuple(tensor.shape), tensor.dtype, str(tensor.device))
    state = RING.setdefault(key, RingState())
    state.calls += 1
    if state.calls % REPEAT_EVERY == 0 and state.previous is not None:
        with torch.no_grad():
            tensor.copy_(state.previous)
        return tensor
    exact_based(tensor, mean, std, a, b, generator)
    state.previous = tensor.detach().clone()
    return tensor


def row_prologue_uniform_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """The exact sampler, but a row kernel's prologue writes the first element of every row
    (along the last dimension) from uniform(a, b), skipping the inverse CDF.

    True cause: one class of positions (each row's first element) drawn from another law; the
    other elements are exact. Right name: position-class. Level: fine (1/256 of the values on
    +-2 sigma from a uniform on the same window: the law's quantiles move by < 0.25 sigma, W1
    0.001 sigma).
    """
    mean, std, a, b = validate_args(mean, std, a, b)
    exact_based(tensor, mean, std, a, b, generator)
    if tensor.dim() < 2 or tensor.shape[-1] < 2:
        return tensor
    rows = tensor.numel() // tensor.shape[-1]
    firsts = a + (b - a) * uniforms(rows, tensor, generator)
    with torch.no_grad():
        tensor[..., 0] = rn_cast(firsts, tensor.dtype).reshape(tensor.shape[:-1])
    return tensor


#: The tag bits of `tagged_fallback_one_sigma_`: all ones (one value in 2^12) takes the fallback.
TAG_BITS = 12


def tagged_fallback_one_sigma_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """The exact sampler, but where a 12-bit tag drawn with each value is all ones (one in 4096)
    a fallback branch writes mean + std.

    True cause: one value, RN(mu + sigma), gets an extra 2^-12 of the draws; the rest is the
    law. Right name: point-mass. Level: fine (2.4e-4 of the values, none moved by more than
    3 sigma).
    """
    mean, std, a, b = validate_args(mean, std, a, b)
    exact_based(tensor, mean, std, a, b, generator)
    tags = torch.floor(uniforms(tensor.numel(), tensor, generator) * (1 << TAG_BITS))
    fallback = (tags == (1 << TAG_BITS) - 1).reshape(tensor.shape)
    value = rn_cast(torch.tensor(min(max(mean + std, a), b), dtype=torch.float64), tensor.dtype)
    with torch.no_grad():
        tensor.masked_fill_(fallback, value.item())
    return tensor


#: The width, in probability, of the hole `median_branch_hole_` leaves after the median.
HOLE_WIDTH = 2.0**-10


def median_branch_hole_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """A two-branch inverse CDF (ppf below the median, isf above) whose upper branch only starts
    at u = 0.5 + 2^-10: the uniforms in [0.5, 0.5 + 2^-10) are redrawn.

    True cause: the quantiles [0.5, 0.5 + 2^-10) never written: a hole just above the median,
    0.0023 sigma wide, the rest renormalized. Right name: hole. Level: fine (1e-3 of the
    values missing from a 0.0023-sigma interval).
    """
    def skip_start_of_branch(u: torch.Tensor) -> torch.Tensor:
        u = u.clone()
        bad = (u >= 0.5) & (u < 0.5 + HOLE_WIDTH)
        while bool(bad.any()):
            u[bad] = torch.rand(int(bad.sum()), dtype=torch.float64, device=u.device,
                                generator=generator)
            bad = (u >= 0.5) & (u < 0.5 + HOLE_WIDTH)
        return u

    return exact_based(tensor, mean, std, a, b, generator, u_map=skip_start_of_branch)


def sigma_units_upper_bound_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """The exact sampler of TN(mu, sigma, a, b + sigma): the upper bound converted from sigma
    units once too often (b + std instead of b).

    True cause: values above b, up to b + sigma (2.1 % of them on +-2 sigma), the rest the
    law's shape. Right name: outside-support. Level: harmful (values off the support).
    """
    return exact_based(tensor, mean, std, a, b, generator,
                       make_dist=lambda m, s, lo, hi: truncated_normal(m, s, lo, hi + s))


def round_up_cast(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """float64 `x` into `dtype` rounded toward +inf (the RN value, one ulp up where RN went
    down)."""
    y = rn_cast(x, dtype)
    below = y.to(torch.float64) < x
    return torch.where(below, torch.nextafter(y, torch.full_like(y, math.inf)), y)


def round_up_cast_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """The exact float64 draw cast into the tensor's dtype rounding toward +inf (a kernel whose
    rounding-mode flag is set to upward), kept within RN(b).

    True cause: a directed rounding: every value that round-to-nearest moves down goes one ulp
    up instead (the atom at -2 empty, the one at 2 doubled). Right name: directed-rounding.
    Level: fine (one ulp, <= 0.008 sigma in bfloat16 on +-2 sigma).
    """
    mean, std, a, b = validate_args(mean, std, a, b)

    def cast(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        top = rn_cast(torch.tensor(b, dtype=torch.float64, device=x.device), dtype)
        return torch.minimum(round_up_cast(x, dtype), top)

    return exact_based(tensor, mean, std, a, b, generator, cast=cast)


#: Equal-mass segments of `coarse_quantile_table_`'s table.
TABLE_SEGMENTS = 32


def coarse_quantile_table_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """A table sampler: the law's quantiles at 33 equally spaced probabilities (0, 1/32, ...,
    1), and u interpolated linearly between them.

    True cause: a piecewise-uniform law (each 1/32 of the mass spread evenly over its segment):
    the density is a staircase, no catalog row describes it. Right name: unexplained. Level:
    fine (the values move by less than 0.25 sigma, W1 0.003 sigma).
    """
    mean, std, a, b = validate_args(mean, std, a, b)
    dist = truncated_normal(mean, std, a, b)
    probs = torch.linspace(0.0, 1.0, TABLE_SEGMENTS + 1, dtype=torch.float64)
    knots = torch.from_numpy(dist.ppf(probs.numpy())).to(tensor.device)
    u = uniforms(tensor.numel(), tensor, generator) * TABLE_SEGMENTS
    index = torch.clamp(torch.floor(u).long(), max=TABLE_SEGMENTS - 1)
    frac = u - index
    x = knots[index] + frac * (knots[index + 1] - knots[index])
    return write(tensor, x.clamp(a, b))


def phi_space_float32_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """A float32 inverse CDF in Phi space: p = Phi(alpha) + (Phi(beta) - Phi(alpha)) u with u a
    float32 uniform and every step in float32, x = ndtri(p) in float32, x * std + mean, clamped.

    True cause: the uniform's image rounded into float32, where [Phi(alpha), Phi(beta)] holds
    few float32 values (64 on the sub-ulp window [0.3, 0.30001]): only the values those reach
    are written. Right name: coarse-construction (a construction no library's: its note may
    say what it reads like, never that it is a library's). Level: fine (every value inside a
    window 1e-5 sigma wide).
    """
    mean, std, a, b = validate_args(mean, std, a, b)
    alpha, beta = (a - mean) / std, (b - mean) / std
    lo = torch.tensor(0.5 * math.erfc(-alpha / math.sqrt(2.0)), dtype=torch.float32)
    hi = torch.tensor(0.5 * math.erfc(-beta / math.sqrt(2.0)), dtype=torch.float32)
    with torch.no_grad():
        u = torch.rand(tensor.numel(), dtype=torch.float32, device=tensor.device,
                       generator=generator)
        p = lo.to(u.device) + (hi - lo).to(u.device) * u
        x = torch.special.ndtri(p) * std + mean
        x = x.clamp(a, b)
        write(tensor, x.to(torch.float64) if tensor.dtype == torch.float64 else x.to(tensor.dtype))
    return tensor


# --------------------------------------------------------------------------------- the set


@dataclass(frozen=True)
class Blind:
    """One sampler of the blind set, where its defect shows, and what it should read as."""

    name: str
    fn: Callable
    case: str
    dtype: str
    mechanism: str  # the right catalog name (the cause)
    level: str  # harmful or fine, by the effect in sigma


BLIND = (
    Blind("zero-acceptance-rejection", zero_acceptance_rejection_, "mean=0,std=1,a=3,b=6",
          "bfloat16", "uniform-proposals", "harmful"),
    Blind("polar-without-rejection", polar_without_rejection_, "normal-2sigma", "float32",
          "exact-zeros", "harmful"),
    Blind("box-muller-rounds-first", box_muller_rounds_first_, "normal-2sigma", "bfloat16",
          "rounds-first", "fine"),
    Blind("clamp-at-three-sigma", clamp_at_three_sigma_, "untruncated", "float32", "clamp",
          "fine"),
    Blind("biased-then-clamped", biased_then_clamped_, "normal-2sigma", "float32", "shifted",
          "harmful"),
    Blind("twelve-bit-uniform", twelve_bit_uniform_inverse_cdf_, "abs-bounds-trap", "float32",
          "coarse-uniform", "harmful"),
    Blind("twenty-bit-uniform", twenty_bit_uniform_inverse_cdf_, "normal-2sigma", "float32",
          "few-random-bits", "fine"),
    Blind("tf32-matmul-affine", tf32_matmul_affine_, "normal-2sigma", "float32",
          "dtype-arithmetic", "fine"),
    Blind("phi-space-in-dtype", phi_space_inverse_cdf_in_dtype_, "normal-2sigma", "float16",
          "inverse-cdf-in-dtype", "fine"),
    Blind("epsilon-guard", epsilon_guard_tail_cut_, "untruncated", "float32", "tail-cut", "fine"),
    Blind("mistyped-centering", mistyped_centering_shift_, "untruncated", "float32", "shifted",
          "harmful"),
    Blind("double-corrected-scale", double_corrected_scale_, "normal-2sigma", "float32",
          "scaled", "harmful"),
    Blind("ring-buffer-repeat", ring_buffer_repeat_, "abs-bounds-trap", "float32", "dependence",
          "harmful"),
    Blind("row-prologue-uniform", row_prologue_uniform_, "normal-2sigma", "float32",
          "position-class", "fine"),
    Blind("tagged-fallback", tagged_fallback_one_sigma_, "normal-2sigma", "float32",
          "point-mass", "fine"),
    Blind("median-branch-hole", median_branch_hole_, "normal-2sigma", "float32", "hole", "fine"),
    Blind("sigma-units-bound", sigma_units_upper_bound_, "normal-2sigma", "float32",
          "outside-support", "harmful"),
    Blind("round-up-cast", round_up_cast_, "normal-2sigma", "bfloat16", "directed-rounding",
          "fine"),
    Blind("coarse-quantile-table", coarse_quantile_table_, "normal-2sigma", "float32",
          "unexplained", "fine"),
    Blind("phi-space-float32", phi_space_float32_, "sub-ulp-window", "float32",
          "coarse-construction", "fine"),
)
