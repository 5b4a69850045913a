"""`RoundedLaw.low_bit_masses`: the law of the last bits of a value's bit pattern.

Against the atoms one by one (`RoundedLaw.atom_probs` over every key, the runs' middles are summed
by the midpoint rule at the scale of 16 keys) and, on a small law, against mpmath's cell masses.
Deterministic (no sampling)."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest

from reference import TruncatedNormal, rounded_law
from reference.dtypes import float_format


def _brute(law, lo: float, hi: float, k: int = 4) -> np.ndarray:
    """Class masses summed over every value of [lo, hi], atom by atom."""
    fmt = law.fmt
    k0, k1 = (int(x) for x in fmt.ordered_keys(np.array([lo, hi])))
    v = fmt.values_from_keys(np.arange(k0, k1 + 1, dtype=np.uint64))
    classes = (fmt.encode(v) & np.uint64((1 << k) - 1)).astype(np.intp)
    return np.bincount(classes, weights=law.atom_probs(v), minlength=1 << k)


@pytest.mark.parametrize("params,dtype", [
    ((1.0, 0.003, -math.inf, math.inf), "float32"),  # a power of two at the mean; long runs
    ((0.7, 0.002, 0.69, 0.71), "float32"),  # truncated inside one binade
    ((8.0, 3e-11, -math.inf, math.inf), "float64"),  # a float64 window measured from its origin
    ((1.0, 1e-5, 0.0, 2.0), "float32"),  # ~80 values per std: every run summed atom by atom
])
def test_masses_equal_the_sum_over_every_atom(params, dtype):
    mean, std = params[0], params[1]
    law = rounded_law(TruncatedNormal(*params), dtype)
    lo, hi = max(params[2], mean - 12 * std), min(params[3], mean + 12 * std)
    want = _brute(law, lo, hi)
    got = law.low_bit_masses(4)
    assert got.sum() == pytest.approx(1.0, abs=1e-9)  # the midpoint rule: ~(16 h / std)^2 / 24
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-15)


def test_the_law_is_not_uniform_where_values_are_few_or_cells_uneven():
    few = rounded_law(TruncatedNormal(1.0, 1e-5, 0.0, 2.0), "float32").low_bit_masses(4) * 16
    assert few[0] == pytest.approx(1.0, abs=1e-3) and few[1] > 1.015 and few[15] < 0.985
    wide = rounded_law(TruncatedNormal(0.0, 1.0, -2.0, 2.0), "float64").low_bit_masses(4) * 16
    np.testing.assert_allclose(wide, 1.0, atol=1e-9)
    # bfloat16 N(0, 1): enumerated, and its 128 values per binade are not equally likely
    bf = rounded_law(TruncatedNormal(0.0, 1.0, -2.0, 2.0), "bfloat16")
    assert bf.low_bit_masses(4).sum() == pytest.approx(float(np.sum(bf.probs)))


def test_masses_against_mpmath():
    """float32 TN(1, 1e-5) on [0.99998, 1.00003] (a bound inside the support, a power of two):
    every cell's mass from mpmath at 40 digits, summed by class."""
    mean, std, a, b = 1.0, 1e-5, 0.99998, 1.00003
    law = rounded_law(TruncatedNormal(mean, std, a, b), "float32")
    fmt = float_format("float32")
    k0, k1 = (int(x) for x in fmt.ordered_keys(np.array([law.support_lo, law.support_hi])))
    keys = np.arange(k0, k1 + 1, dtype=np.uint64)
    v = fmt.values_from_keys(keys)
    lo, hi = fmt.cell_edges(v)
    mpmath.mp.dps = 40
    cdf = lambda x: mpmath.ncdf((mpmath.mpf(x) - mean) / std)
    z = cdf(b) - cdf(a)
    want = np.zeros(16)
    for value, l, h in zip(v, lo, hi):
        l, h = max(l, a), min(h, b)
        if h > l:
            want[int(fmt.encode(np.array([value]))[0]) & 15] += float((cdf(h) - cdf(l)) / z)
    np.testing.assert_allclose(law.low_bit_masses(4), want, rtol=1e-10)
