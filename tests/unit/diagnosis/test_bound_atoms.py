"""The atom mechanisms read the evidence their construction leaves beyond the atom itself:
`coarse-uniform` the repeats of a lattice uniform (and, on 32/64-bit values, the whole law of
the inverse CDF at its lattice points), `exact-zeros` the pairs, the coarser lattices and the
last bits of a mixture with a point mass at 0.

Failure chances. The samples are drawn from fixed seeds (deterministic). Over seeds: each true
mechanism fails one of its agreements with probability <= AGREE_LEVEL = 1e-6 (its own bound;
at most 6 agreements each, <= 6e-6 per test, counted as the bounds given); the shifted sample's
equal pairs sit ~5000 sd below the floor a lattice with its atom's cell writes, which no seed
reaches.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from candidates import resolve
from harness.checks import summarize_samples
from harness.diagnosis.mechanism_catalog import diagnose, explain
from harness.diagnosis.mechanisms.bound_atoms import pair_rate
from reference import TruncatedNormal, rounded_law
from summaries import named

pytestmark = pytest.mark.usefixtures("one_thread")

N = 1 << 19
LAW = TruncatedNormal(0.0, 1.0, -2.0, 2.0)


def exact_float32(seed: int) -> torch.Tensor:
    """N float32 values of TN(0, 1, -2, 2) from the exact sampler, shaped (calls, 256, 256)."""
    samples = torch.empty(N // (256 * 256), 256, 256)
    resolve("exact")(samples, 0.0, 1.0, -2.0, 2.0, generator=torch.Generator().manual_seed(seed))
    return samples


def test_pair_rate_counts_every_values_pairs():
    rate, sd = pair_rate(np.array([2.0, 2.0]))
    assert rate == pytest.approx(4.0 / 12.0)  # 2 equal pairs of the 6
    rate, sd = pair_rate(np.array([7.0]))
    assert rate == 1.0 and sd == 0.0
    rate, sd = pair_rate(np.ones(1000))
    assert rate == 0.0 and sd == pytest.approx(2.0 * np.sqrt(1e-6 / 1000))


@pytest.mark.parametrize("side", ["a", "b"])
def test_a_12_bit_uniform_reads_as_coarse_uniform_on_every_check(side):
    """The inverse CDF of TN(0, 1, -2, 2) at u = j / 4096 (u = 0 gives a) or at u = (j + 1) /
    4096 (u = 1 gives b), in float32: an atom of 2^-12 at that bound, the far tail cut, 4096
    values written. coarse-uniform (k = 12) explains the repeats too, so the story names it
    for the equal pairs and the histogram alike, not few-random-bits, which reads the same
    values without their atom."""
    law = rounded_law(LAW, torch.float32)
    j = np.random.default_rng(11).integers(0, 4096, N)
    u = (j + (0.0 if side == "a" else 1.0)) / 4096.0
    values = torch.from_numpy(LAW.ppf(u).astype(np.float32)).reshape(-1, 256, 256)
    matches = diagnose(summarize_samples(values, law), law)
    match = named(matches, "coarse-uniform")
    assert match.parameter == 12 and f"RN({side})" in match.note, match.note
    assert {"collisions", "lattices", "gof", "atoms"} <= match.explains, match.note
    ends = "left ends (j + 0)" if side == "a" else "right ends (j + 1)"
    assert f"the inverse CDF at the 4096 {ends} 2^-12: 4096 values written" in match.note
    for check in ("collisions", "gof", "atoms", "tails"):
        assert explain(check, "fail", "", matches)[0] == "coarse-uniform", check


def test_a_shift_clamped_back_is_no_coarse_uniform():
    """The exact float32 law + 0.05 sigma, clamped back into [-2, 2]: an atom at b (0.29 %) and
    nothing in the 0.05 sigma above a (the law's 0.30 % there), coarse-uniform's bound
    signature, but the values are nearly all distinct, where a lattice with a 2^-8.4 end cell
    repeats at >= 2^-11.4 a pair: no coarse-uniform, and the story is the shift's."""
    law = rounded_law(LAW, torch.float32)
    samples = exact_float32(5).add_(0.05).clamp_(-2.0, 2.0)
    matches = diagnose(summarize_samples(samples, law), law)
    assert not [m for m in matches if m.name == "coarse-uniform"], matches
    assert explain("atoms", "fail", "", matches)[0] == "shifted"


def test_zeros_added_read_as_exact_zeros_on_the_resolution_checks_too():
    """A fifth of the exact float32 values on +-2 sigma replaced by +0 (mean + std * 0): the
    mixture's histogram, equal pairs, coarser lattices and last bits are all predicted, so
    exact-zeros explains every row point-mass explains, and more, and names them."""
    law = rounded_law(LAW, torch.float32)
    samples = exact_float32(6)
    zero = torch.from_numpy(np.random.default_rng(12).random(N) < 0.2).reshape(samples.shape)
    samples[zero] = 0.0
    matches = diagnose(summarize_samples(samples, law), law)
    match = named(matches, "exact-zeros")
    assert {"gof", "atoms", "collisions", "lattices", "low_bits"} <= match.explains, match.note
    assert match.parameter == pytest.approx(0.2, abs=6 * np.sqrt(0.16 / N))
    for check in ("gof", "atoms", "collisions", "lattices", "low_bits"):
        assert explain(check, "fail", "", matches)[0] == "exact-zeros", check
