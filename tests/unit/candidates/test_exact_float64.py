"""The gold sampler's float64 path (`candidates.kernels.refine_float64`): exact value by value.

* atom by atom on narrow windows where every value's mass is known (`RoundedLaw.atom_probs`): a
  binade's first value (narrower cell), the negative side, bounds inside cells;
* the last bits of a wide law (`harness.families.resolution.check_low_bits`), which the
  one-uniform draw fails;
* the other dtypes unchanged: the one-uniform draw rounded once, bit for bit.
Fixed seeds; each chi-square assertion fails an exact sampler with probability 1e-6."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy import stats

import candidates.kernels as kernels
from candidates import resolve
from candidates.rounding import rn_cast
from harness.checks import summarize_samples
from harness.families.resolution import check_low_bits
from reference import TruncatedNormal, rounded_law
from reference.dtypes import float_format

F64 = float_format("float64")
ULP1 = 2.0**-52  # float64 spacing in [1, 2)
LEVEL = 1e-6


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


@pytest.mark.parametrize("window", [
    (0.0, 1.0, 1 - 8 * ULP1, 1 + 8 * ULP1),  # 1.0 owns [1 - ulp/4, 1 + ulp/2]: a 3/4 cell
    (0.0, 1.0, -1 - 8.3 * ULP1, -1 + 5.7 * ULP1),  # negative, bounds inside cells
    (0.0, 1.0, 2.0, 2.0 + 80 * ULP1),  # a representable bound owns half its cell
    (0.0, 1.0, 8.0 + 3 * ULP1, 8.0 + 300 * ULP1),  # a tail 8 std out
])
def test_every_value_gets_its_mass(window):
    """2^18 draws of a window of 20-40 float64 values (where the refinement redraws inside
    blocks of 2^24 values) against each value's mass: chi-square, p >= 1e-6."""
    law = rounded_law(TruncatedNormal(*window), "float64")
    k0, k1 = (int(v) for v in F64.ordered_keys(np.array([law.support_lo, law.support_hi])))
    values = F64.values_from_keys(np.arange(k0, k1 + 1, dtype=np.uint64))
    probs = law.atom_probs(values)
    n = 1 << 18
    x = resolve("exact")(torch.empty(n, dtype=torch.float64), *window, _gen(5)).numpy()
    index = (F64.ordered_keys(x) - np.uint64(k0)).astype(np.int64)
    assert index.min() >= 0 and index.max() <= k1 - k0
    counts = np.bincount(index, minlength=k1 - k0 + 1)
    expected = n * probs / probs.sum()
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert stats.chi2.sf(chi2, values.size - 1) >= LEVEL, (chi2, counts / expected)


def test_the_last_bits_are_the_laws_and_were_not_before(monkeypatch):
    """N(0, 1) on +-2, 2^19 values: the refined draw passes the low-bits check (p >= 1e-6); the
    one-uniform draw fails it (chi2 ~3500 on 15 df: class 0000 x1.1)."""
    law = rounded_law(TruncatedNormal(0.0, 1.0, -2.0, 2.0), "float64")

    def low_bits_p() -> float:
        x = resolve("exact")(torch.empty(8, 1 << 16, dtype=torch.float64), 0.0, 1.0, -2.0, 2.0,
                             _gen(3))
        return check_low_bits(summarize_samples(x, law), law).p_value

    assert low_bits_p() >= LEVEL
    monkeypatch.setattr(kernels, "refine_float64", lambda x, dist, uniforms: x)
    assert low_bits_p() < 1e-12


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_other_dtypes_are_the_one_uniform_draw(dtype):
    dist = TruncatedNormal(0.0, 1.0, -2.0, 2.0)
    u = torch.rand(10_000, dtype=torch.float64, generator=_gen(9))
    want = rn_cast(kernels.inverse_cdf(dist, u), dtype)
    got = resolve("exact")(torch.empty(10_000, dtype=dtype), 0.0, 1.0, -2.0, 2.0, _gen(9))
    assert torch.equal(got, want)


def test_the_refinement_moves_a_draw_inside_its_block_only():
    """Same u: the refined value lies within 2^24 ulps of the one-uniform draw, in [a, b], and
    the same seed gives the same values."""
    dist = TruncatedNormal(0.5, 2.0, -1.0, 3.0)
    u = torch.rand(20_000, dtype=torch.float64, generator=_gen(4))
    x0 = kernels.inverse_cdf(dist, u)
    g = _gen(6)
    x = kernels.refine_float64(x0, dist, lambda where, draw: torch.rand(
        where.numel(), dtype=torch.float64, generator=g))
    assert (x != x0).float().mean() > 0.99
    assert torch.allclose(x, x0, rtol=2.0**-27, atol=0) and x.min() >= -1.0 and x.max() <= 3.0
    again = resolve("exact")(torch.empty(20_000, dtype=torch.float64), 0.5, 2.0, -1.0, 3.0, _gen(4))
    assert torch.equal(again, resolve("exact")(torch.empty(20_000, dtype=torch.float64), 0.5, 2.0,
                                               -1.0, 3.0, _gen(4)))


def test_exact_counter_is_refined_from_its_counter_stream():
    """exact-counter in float64: the low-bits check passes (p >= 1e-6) and the same key gives the
    same values (the refinement's uniforms are its stream's, by global position)."""
    law = rounded_law(TruncatedNormal(0.0, 1.0, -2.0, 2.0), "float64")
    x = torch.empty(8, 1 << 16, dtype=torch.float64)
    g = _gen(21)
    for k in range(8):
        resolve("exact-counter")(x[k], 0.0, 1.0, -2.0, 2.0, g)
    assert check_low_bits(summarize_samples(x, law), law).p_value >= LEVEL
    again = resolve("exact-counter")(torch.empty(1 << 16, dtype=torch.float64), 0.0, 1.0, -2.0, 2.0,
                                     _gen(21))
    assert torch.equal(again, x[0])
