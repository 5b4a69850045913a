"""The k-bit inverse CDF's collision rate (`harness.diagnosis.library_ops.uniform_bits`) against the
whole lattice enumerated, and `few-random-bits` reading it from samples drawn through that very
construction with numpy.

Deterministic: the estimate's lattice points and the samples come from fixed numpy seeds. Over
seeds, the estimate is off the enumeration by more than 6 of its own sd with probability
< 1e-8 (normal approximation, 4096 points); the samples' equal pairs sit > 10 sd above the law's
at n = 2^19 (~4000 pairs against ~1000), so the departure at FALSE_MATCH never misses, and a
true construction fails its agreement with probability <= AGREE_LEVEL = 1e-6.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from harness.checks import summarize_samples
from harness.diagnosis.library_ops.uniform_bits import SPACES, collision_rate, lattice_values, run_ends
from harness.diagnosis.mechanism_catalog import diagnose, explain
from reference import TruncatedNormal, rounded_law
from summaries import named


def enumerated_rate(law, bits: int, space: str) -> float:
    values = lattice_values(law.dist, law.fmt, bits, space, np.arange(1 << bits, dtype=np.int64))
    _, counts = np.unique(values, return_counts=True)
    return float(np.sum(counts.astype(np.float64) ** 2)) * 2.0 ** (-2 * bits)


@pytest.mark.parametrize("space", SPACES)
@pytest.mark.parametrize("window", [(-2.0, 2.0), (0.0, math.inf), (1.0, 3.0), (3.0, 4.0)])
def test_the_estimate_agrees_with_the_whole_lattice(space, window):
    """bfloat16 and float16 at 12 bits and float32 at 20: the dtype merges lattice points in
    some windows and none in others; the estimate tracks the enumeration in each."""
    for dtype, bits in ((torch.bfloat16, 12), (torch.float16, 12), (torch.float32, 20)):
        law = rounded_law(TruncatedNormal(0.0, 1.0, *window), dtype)
        want = enumerated_rate(law, bits, space)
        got = collision_rate(law, bits, space)
        assert abs(got.rate - want) <= 6 * got.rel_sd * want + 1e-12 * want, (dtype, got, want)


def test_every_value_one_lattice_point_gives_two_to_the_minus_k():
    """float32 on +-2 sigma with 23 bits: no value holds two lattice points, so q = 2^-23 with
    no sampling error, whatever the space."""
    law = rounded_law(TruncatedNormal(0.0, 1.0, -2.0, 2.0), torch.float32)
    for space in SPACES:
        got = collision_rate(law, 23, space)
        assert got.rate == 2.0**-23 and got.rel_sd == 0.0, got


def test_run_ends_find_the_run_of_equal_values():
    values = np.repeat(np.arange(10.0), [1, 3, 2, 5, 1, 1, 4, 2, 3, 1])
    j = np.arange(values.size, dtype=np.int64)
    first, last = run_ends(lambda i: values[i], j, values.size - 1)
    for i in j:
        run = np.flatnonzero(values == values[i])
        assert (first[i], last[i]) == (run[0], run[-1])


def test_a_sample_of_the_construction_reads_as_its_bits():
    """2^19 float32 values of the 24-bit construction in erf space (numpy's uniform indices
    through `lattice_values`): few-random-bits with k = 24 explains the collisions row (that the
    exact sampler's Summaries match no row is test_catalog's)."""
    law = rounded_law(TruncatedNormal(0.0, 1.0, -2.0, 2.0), torch.float32)
    rng = np.random.default_rng(20261204)
    j = rng.integers(0, 1 << 24, size=1 << 19, dtype=np.int64)
    x = lattice_values(law.dist, law.fmt, 24, "erf", j)
    samples = torch.from_numpy(x.astype(np.float32)).reshape(-1, 256, 256)
    summary = summarize_samples(samples, law)
    matches = diagnose(summary, law)
    match = named(matches, "few-random-bits")
    assert match.parameter == 24, match.note
    assert explain("collisions", "fail", "", matches)[0] == "few-random-bits"
