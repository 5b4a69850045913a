"""independence and repetition price their repeats with the collision rate of the output's own
marginal (`harness.families.independence.marginal_rate`): a sampler whose float32 or float64
values all lie on the float16 lattice (the law rounded into float16, iid) repeats values across
calls as often as within a call, and is not read as dependence; a dependent sampler of the same
marginal still is.

Failure chances. The samples come from fixed numpy seeds (deterministic); over seeds:
* the iid coarse-lattice samples: each p-value asserted above ALPHA = 1e-3 gets a second look on
  a fresh seed (the harness's two stages), so it fails with probability <= 1e-6;
* the dependent samples: 1 % of the elements copied from the previous call put ~10 000 equal
  pairs where ~250 are expected (z ~ 600), an identical call every one; a repeated stretch of
  2048 elements gives ~16 equal windows where < 1e-30 are expected: p < 1e-10 always.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy import special

from harness.checks import CHECKS, summarize_samples
from harness.families.independence import marginal_rate, spread_bits
from reference import TruncatedNormal, rounded_law

OUTCOMES = CHECKS.outcomes()
ALPHA = 1e-3
SHAPE = (256, 256)
N = 1 << 20
EQUAL = "p[equal elements in successive calls]"


def on_float16(seed, n: int = N, law=None) -> np.ndarray:
    """n draws of TN(0, 1, -2, 2) in float64 by the inverse CDF, rounded into float16."""
    u = np.random.default_rng(seed).random(n)
    lo, hi = special.ndtr(-2.0), special.ndtr(2.0)
    x = special.ndtri(lo + u * (hi - lo))
    return torch.from_numpy(x).to(torch.float16).double().numpy()


def judged(values: np.ndarray, dtype, shape=SHAPE):
    """(summary, law, independence's outcome, repetition's outcome) of `values` in `dtype`."""
    law = rounded_law(TruncatedNormal(0.0, 1.0, -2.0, 2.0), dtype)
    x = torch.from_numpy(np.ascontiguousarray(values)).to(dtype).reshape(-1, *shape)
    summary = summarize_samples(x, law)
    return (summary, law, OUTCOMES["independence"](summary, law),
            OUTCOMES["repetition"](summary, law))


def looked_twice(p_of) -> float:
    """p of the first draw, or where it is below ALPHA, of a fresh one (the two stages)."""
    p = p_of(0)
    return p if p >= ALPHA else p_of(1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_a_coarse_lattice_is_not_read_as_dependence(dtype):
    def p_of(k):
        _, _, independence, repetition = judged(on_float16([5, k]), dtype)
        assert not repetition.applicable or repetition.p_value >= ALPHA, repetition.message
        return independence.p_value

    assert looked_twice(p_of) >= ALPHA


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_the_rate_is_the_marginals_from_the_resolution_scan(dtype):
    """q from the scan's equal pairs, within 5 % of the float16 law's collision rate (the scan
    holds ~10^7 equal pairs: a relative sd ~ 2e-4, at most 0.02 with the dispersion bound)."""
    summary, law, _, _ = judged(on_float16(9), dtype)
    rate = marginal_rate(summary, law)
    own = float(rounded_law(TruncatedNormal(0.0, 1.0, -2.0, 2.0), torch.float16).collision_prob)
    assert rate.scanned and "resolution scan" in rate.source
    assert rate.q == pytest.approx(own, rel=0.05)
    assert own <= rate.upper() < 1.2 * own
    assert float(law.collision_prob) < 1e-3 * own  # the law's own rate: no use here


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_a_dependent_sampler_of_the_same_marginal_still_fails(dtype):
    values = on_float16(11).reshape(-1, SHAPE[0] * SHAPE[1])
    copied = values.copy()
    repeat = np.random.default_rng(12).random(copied[1:].shape) < 0.01
    copied[1:][repeat] = copied[:-1][repeat]
    _, _, independence, _ = judged(copied.ravel(), dtype)
    assert independence.details[EQUAL] < 1e-10, independence.message
    # a generator that repeats its draws: every call the previous one
    repeated = np.repeat(values[::2], 2, axis=0)
    _, _, independence, _ = judged(repeated.ravel(), dtype)
    assert independence.details[EQUAL] < 1e-10, independence.message


def test_a_repeated_stretch_of_a_coarse_lattice_still_repeats():
    values = on_float16(13).reshape(-1, SHAPE[0] * SHAPE[1])
    values[1, 5000:7048] = values[0, 100:2148]
    _, _, _, repetition = judged(values.ravel(), torch.float32)
    assert repetition.applicable and repetition.p_value < 1e-10, repetition.message


def test_rows_on_a_coarse_lattice_hash_apart():
    """float64 rows of float16 values end in 42 zero bits, which an odd coefficient keeps: the
    rows' linear hashes must still tell them apart (`spread_bits`). 16 384 rows of 64 in calls
    of 144 rows: no duplicate row (iid rows of ~2^11 values each equal with chance ~2^-700)."""
    values = on_float16(17, n=144 * 64 * 128)
    summary, law, independence, _ = judged(values, torch.float64, shape=(144, 64))
    assert summary.independence.n_rows_compared > 0
    assert summary.independence.n_duplicate_rows == 0, independence.message
    bits = torch.from_numpy(values).view(torch.int64)
    assert torch.unique(spread_bits(bits.clone())).numel() == torch.unique(bits).numel()
