"""The values of an inverse-CDF sampler driven by a uniform of k random bits, and how often two
of them agree: the prediction `few-random-bits` tests the equal pairs of a 32/64-bit sample
against.

The construction is the one the inverse-CDF samplers share (JAX, NumPyro, timm, torch <= 2.11):

    u = RN(j 2^-k), j uniform on 0 .. 2^k - 1             (the k random bits)
    v = RN(lo + RN((hi - lo) u))                          (in the output dtype)
    x = RN(mean + std Q(v)), clipped to [RN(a), RN(b)]

in one of two spaces: `erf` (lo, hi = erf(alpha / sqrt 2), erf(beta / sqrt 2), Q(v) = sqrt 2
erfinv(v)) or `cdf` (lo, hi = Phi(alpha), Phi(beta), Q = Phi^-1). Q itself is computed in
float64 and the value rounded once: the library's own last-bit errors move a value by an ulp,
not the number of lattice points that share it, which is what the collision rate counts.

The map j -> x is non-decreasing, so the c(x) lattice points writing one value x are one run of
j. Two draws agree with probability q = sum_x (c(x) 2^-k)^2 = 2^-k E_j[c(x(j))]; `collision_rate`
estimates it from sampled j, each run's ends found by bisection, so it is exact where every value
holds one lattice point (q = 2^-k) and where a value holds many (q near the rounded law's own
rate), and in between, where the dtype's rounding of v or of x merges lattice points.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import special

from ...families.common import cached_on_law
from .affine import first_index

#: The two spaces of the uniform (see the module docstring).
SPACES = ("erf", "cdf")
#: Sampled lattice points per estimate: the estimate's relative sd is sd(c) / mean(c) / sqrt of
#: it (0 where every value holds one point; ~1 % where the counts vary by their mean).
SAMPLES = 1 << 12
#: The widest uniform modelled: u = j 2^-k is exact in float64.
MAX_BITS = 53


@dataclass(frozen=True)
class BitsRate:
    """The collision rate q of the k-bit construction in one space, with its relative sd."""

    bits: int
    space: str
    rate: float
    rel_sd: float


def lattice_values(dist, fmt, bits: int, space: str, j: np.ndarray) -> np.ndarray:
    """The output value (float64) of lattice points j of the k-bit construction in `space`."""
    alpha, beta = float(dist.alpha), float(dist.beta)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        if space == "erf":
            ends = special.erf(np.array([alpha, beta]) / math.sqrt(2.0))
        else:
            ends = special.ndtr(np.array([alpha, beta]))
        lo, hi = (float(v) for v in fmt.round(ends))
        span = float(fmt.round(np.array([hi - lo]))[0])
        u = fmt.round(np.ldexp(j.astype(np.float64), -bits))
        v = fmt.round(lo + fmt.round(span * u))
        v = np.clip(v, min(lo, hi), max(lo, hi))
        z = math.sqrt(2.0) * special.erfinv(v) if space == "erf" else special.ndtri(v)
        x = fmt.round(float(dist.loc) + float(dist.scale) * z)
    lo_x, hi_x = (float(v) for v in fmt.round(np.array([float(dist.a), float(dist.b)])))
    return np.clip(x, lo_x, hi_x)


def run_ends(value_of, j: np.ndarray, top: int) -> tuple[np.ndarray, np.ndarray]:
    """(first, last): for each j, the ends of the run of lattice points in 0 .. top whose value
    equals j's, by bisection on the non-decreasing map `value_of` (`affine.first_index`: the
    first point reaching j's value, and the first past it, less one)."""
    x = value_of(j)
    first = first_index(value_of, x, 0, top, guess=j)
    last = first_index(value_of, np.nextafter(x, np.inf), 0, top, guess=j) - 1
    return first, last


def collision_rate(law, bits: int, space: str) -> BitsRate:
    """The chance that two draws of the k-bit construction agree, estimated from SAMPLES lattice
    points (a fixed seed per k and space: the same figure on every machine), cached on the law."""
    if not 1 <= bits <= MAX_BITS or space not in SPACES:
        raise ValueError(f"no {bits}-bit uniform in {space!r} space")

    def build(law):
        fmt, dist = law.fmt, law.dist
        rng = np.random.default_rng([bits, SPACES.index(space)])
        top = (1 << bits) - 1
        j = rng.integers(0, top, size=SAMPLES, endpoint=True, dtype=np.int64)

        def value_of(i):
            return lattice_values(dist, fmt, bits, space, i)

        first, last = run_ends(value_of, j, top)
        counts = (last - first + 1).astype(np.float64)
        mean = float(counts.mean())
        rel = float(counts.std() / mean / math.sqrt(SAMPLES)) if mean > 0 else 0.0
        return BitsRate(bits, space, math.ldexp(mean, -bits), rel)

    return cached_on_law(law, f"_uniform_bits_{space}_{bits}", build)
