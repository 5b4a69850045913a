"""The `clamp` row on a clamp inside the support: its points read from the sample's extremes, the
clamped law predicted from them, and no match for the exact sampler or a cut tail.

Samples are the exact sampler's draws (or torch's normal), 2^19 values from fixed seeds, clamped
with torch; each Summary is folded by the harness's own families (`summarize_samples`).

Failure chances, over seeds. A true clamp: each inner point holds >= 600 rows' extremes (or
>= 700 draws), so its emptiness beyond (>= 700 expected, EMPTY_EXPECTED = 20.7 suffice) and its
weight (>= 600 against a cell's ~1e-3) never fail; each inner point's count misses its agreement
(4.9 sd plus 5 % of ~600, 6.3 sd) with chance <= 3e-10 (the normal's atom at a, ~12 000 draws:
10 sd; an unclamped side's extreme, the law's own, is not tested), and the histogram its fit
with chance <= AGREE_LEVEL; where the law is untruncated in float32 the equal pairs (4.9 sd
plus 5 %, with the atoms' triples in the spread: 5.85 sd) and the lattice counts (6.8 sd) miss
theirs with chance <= 5e-9: <= 1.01e-6 per Summary. The exact sampler and a cut tail: the row
matches only through a bound atom off the law or an inner point both cut and heavy, each at
FALSE_MATCH = 1e-9 (two sides each, `clamp_points.cut_and_heavy`): <= 4e-9 per Summary, 2e-8
over the five below.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from candidates import resolve
from harness.checks import summarize_samples
from harness.diagnosis.evidence import Evidence
from harness.diagnosis.mechanism_catalog import diagnose, explain
from harness.diagnosis.mechanisms.bound_atoms import BEYOND_CELL, Clamp
from harness.diagnosis.mechanisms.clamp_points import (PointCount, clamp_points,
                                                         clamped_bin_probs, cut_and_heavy)
from reference import TruncatedNormal, rounded_law

pytestmark = pytest.mark.usefixtures("one_thread")

INF = math.inf
#: 2^19 values: 8 calls of 256 x 256.
SHAPE = (8, 256, 256)


def law_of(a: float, b: float, dtype):
    return rounded_law(TruncatedNormal(0.0, 1.0, a, b), dtype)


def exact_draws(a: float, b: float, dtype, seed: int) -> torch.Tensor:
    samples = torch.empty(SHAPE, dtype=dtype)
    return resolve("exact")(samples, 0.0, 1.0, a, b, generator=torch.Generator().manual_seed(seed))


def normal_draws(seed: int) -> torch.Tensor:
    """N(0, 1) in float64 (the untruncated normal a clamp may start from)."""
    return torch.randn(SHAPE, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))


#: name -> (the law's a, b, dtype, the clamped draws, the farthest inner point in sigma)
CLAMPED = {
    "two-sided at 3 sigma, untruncated": (
        -INF, INF, torch.float32, lambda: exact_draws(-INF, INF, torch.float32, 5).clamp(-3, 3),
        3.0),
    "one-sided at 2.5 sigma": (
        -INF, INF, torch.float32, lambda: exact_draws(-INF, INF, torch.float32, 6).clamp(max=2.5),
        2.5),
    "inside +-2 sigma at 1.5 sigma": (
        -2.0, 2.0, torch.float32, lambda: exact_draws(-2.0, 2.0, torch.float32, 7).clamp(-1.5, 1.5),
        1.5),
    # the normal clamped to [a, 1.5]: the mass below a piles on RN(a), all above 1.5 on 1.5
    "the normal to [a, 1.5 sigma]": (
        -2.0, 2.0, torch.float32, lambda: normal_draws(8).clamp(-2.0, 1.5).float(), 1.5),
    # bfloat16: the points' counts are exact (the per-pattern histogram)
    "two-sided at 3 sigma, bfloat16": (
        -INF, INF, torch.bfloat16,
        lambda: exact_draws(-INF, INF, torch.bfloat16, 9).clamp(-3, 3), 3.0),
}


@pytest.mark.parametrize("name", sorted(CLAMPED))
def test_a_clamp_inside_the_support_reads_as_clamp(name):
    a, b, dtype, draw, farthest = CLAMPED[name]
    law = law_of(a, b, dtype)
    summary = summarize_samples(draw(), law)
    match = Clamp().test(Evidence(summary, law))
    assert match is not None and match.parameter == pytest.approx(farthest, abs=1e-6), match
    assert {"gof", "tails", "extremes", "moments"} <= match.explains, match.note
    assert "the histogram fits the clamped law" in match.note
    if dtype == torch.float32 and math.isinf(a):
        # the atoms' equal pairs and their values on the bfloat16 and float16 lattices
        assert {"collisions", "lattices"} <= match.explains, match.note
    matches = diagnose(summary, law)
    assert explain("tails", "fail", "", matches)[0] == "clamp", [(m.name, m.note)
                                                                 for m in matches]


#: name -> (the law's a, b, dtype, its draws): no clamp anywhere
UNCLAMPED = {
    "exact, untruncated": (-INF, INF, torch.float32,
                           lambda: exact_draws(-INF, INF, torch.float32, 11)),
    "exact, +-2 sigma": (-2.0, 2.0, torch.float32,
                         lambda: exact_draws(-2.0, 2.0, torch.float32, 12)),
    "exact, untruncated, bfloat16": (-INF, INF, torch.bfloat16,
                                     lambda: exact_draws(-INF, INF, torch.bfloat16, 13)),
    # a tail cut at 3 sigma: nothing beyond, as a clamp leaves, but no atom at the ends
    "cut at 3 sigma": (-INF, INF, torch.float32, lambda: cut_at(3.0, 14)),
    "cut above 2.5 sigma": (-INF, INF, torch.float32, lambda: cut_at(2.5, 15, below=False)),
}


def cut_at(c: float, seed: int, below: bool = True) -> torch.Tensor:
    """The exact draws with |x| <= c (x <= c where not `below`), redrawn until full."""
    kept, have, n = [], 0, math.prod(SHAPE)
    while have < n:
        x = exact_draws(-INF, INF, torch.float32, seed).reshape(-1)
        x = x[(x.abs() <= c) if below else (x <= c)]
        kept.append(x)
        have += x.numel()
        seed += 1000
    return torch.cat(kept)[:n].reshape(SHAPE)


@pytest.mark.parametrize("name", sorted(UNCLAMPED))
def test_no_clamp_where_none_was_applied(name):
    """The prediction never matches the law itself (nor a tail cut without the atom): the points
    of these samples are not both cut and heavy."""
    a, b, dtype, draw = UNCLAMPED[name]
    law = law_of(a, b, dtype)
    ev = Evidence(summarize_samples(draw(), law), law)
    points = clamp_points(ev)
    assert points is not None
    assert not any(cut_and_heavy(ev, p, BEYOND_CELL) for p in points.values()), points
    assert Clamp().test(ev) is None


def test_the_clamped_bins_move_the_mass_beyond_onto_the_points_bins():
    probs = np.array([0.1, 0.2, 0.3, 0.25, 0.15])
    out = clamped_bin_probs(probs, 1, 3, 0.0, 0.0, 1.0)
    assert np.allclose(out, [0.0, 0.3, 0.3, 0.4, 0.0]) and out.sum() == pytest.approx(1.0)
    # the normal as base: its mass outside [a, b] joins the points', the rest scaled by Z
    out = clamped_bin_probs(probs, 0, 2, 0.05, 0.03, 0.92)
    assert np.allclose(out, [0.05 + 0.092, 0.184, 0.03 + 0.92 * 0.7, 0.0, 0.0])
    assert out.sum() == pytest.approx(1.0)


def test_a_row_holds_the_point_unless_all_its_draws_miss_it():
    assert PointCount(0, 10).rate(0.01) == 0.01
    assert PointCount(0, 10, 256).rate(0.00135) == pytest.approx(1 - (1 - 0.00135) ** 256)
    assert PointCount(0, 10, 256).rate(1.0) == 1.0
