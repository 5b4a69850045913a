"""The `repeated-shards` row of the catalog: shards that copy one another (torch on a CPU mesh,
one seed on every rank) are named for the `shards` row and, where the copies are whole, for the
value checks and `independence` they inflate; honest splits of the exact sampler match nothing.

The Summaries are folded in one process by the code the ranks run (`fold_layout`), as
tests/unit/harness/test_sharded_checks.py does; the copies are made there, shard by shard.
"""

from __future__ import annotations

import math

import pytest
import torch
from scipy import stats

from candidates import resolve
from harness.cases import Case
from harness.diagnosis.evidence import AGREE_LEVEL, FALSE_MATCH, MODEL_TOL, Z_AGREE, chi2_statistic
from harness.diagnosis.mechanism_catalog import MECHANISMS, diagnose, explain
from harness.diagnosis.mechanisms.repeated_shards import copies
from harness.families.binned import LawBins
from harness.sharded.layout import Layout, boxes
from harness.sharded.part_fold import PairStats, ShardingStats, box_slices, fold_layout
from harness.summary import Summary
from reference import TruncatedNormal, rounded_law

CASE = Case("c", 0.0, 1.0, -2.0, 2.0, (64, 256))
LAYOUTS = (Layout(2, "shard0"), Layout(2, "shard1"), Layout(4, "shard1"))
DTYPES = (torch.float32, torch.bfloat16)


def _law(dtype):
    return rounded_law(TruncatedNormal(CASE.mean, CASE.std, CASE.a, CASE.b), dtype)


def _exact(dtype, calls: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    out = torch.empty((calls, *CASE.shape), dtype=dtype)
    for k in range(calls):
        resolve("exact")(out[k], CASE.mean, CASE.std, CASE.a, CASE.b, g)
    return out


def _summary(batch, law, layout, copied: bool) -> Summary:
    locals_ = None
    if copied:  # every rank writes rank 0's shard: the same stream on every rank
        locals_ = [batch[(slice(None),) + box_slices(*b)].clone()
                   for b in boxes(batch.shape[1:], layout)]
        locals_[1:] = [locals_[0].clone() for _ in locals_[1:]]
    parts, sharding = fold_layout(batch, law, layout, locals_=locals_)
    summary = Summary.merge(parts)
    summary.sharding = sharding
    return summary


def _miss_chance(summary, law) -> float:
    """The chance that noise alone puts the histogram's chi-square over its df outside the
    copies' agreement band (Z_AGREE sd + MODEL_TOL of the prediction), two-sided normal."""
    bins = LawBins.of(law)
    df = chi2_statistic(bins.counts(summary), bins.probs)[1]
    return 2 * stats.norm.sf(Z_AGREE + MODEL_TOL / math.sqrt(2.0 / df))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_copied_shards_are_named_and_so_are_the_counts_they_inflate(dtype):
    """The match is deterministic (every element of every call equal at its local index: the
    shards check's equal-elements component at p ~ 0), and so are the copies (W). Each value
    check's explanation rests on the chi-square agreeing with W: it misses with the chance
    `_miss_chance` per Summary (<= AGREE_LEVEL without the tolerance), summed below 1e-6 here."""
    law = _law(dtype)
    batch = _exact(dtype, 16, seed=3)
    miss = 0.0
    for layout in LAYOUTS:
        summary = _summary(batch, law, layout, copied=True)
        miss += _miss_chance(summary, law)
        matches = {m.name: m for m in diagnose(summary, law)}
        match = matches.get("repeated-shards")
        assert match is not None, sorted(matches)
        assert match.parameter == layout.world_size, match.note
        for check in ("shards", "gof", "independence", "extremes"):
            assert explain(check, "fail", "", tuple(matches.values()))[0] == "repeated-shards"
    assert miss <= 1e-6 and AGREE_LEVEL <= 1e-6, miss


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_honest_splits_of_the_exact_sampler_match_nothing(dtype):
    """Failure chance: <= FALSE_MATCH per catalog row and Summary (6 Summaries x 21 rows:
    1.3e-7)."""
    law = _law(dtype)
    for seed, layout in enumerate(LAYOUTS):
        summary = _summary(_exact(dtype, 16, seed=100 + seed), law, layout, copied=False)
        assert diagnose(summary, law) == ()
    assert len(DTYPES) * len(LAYOUTS) * len(MECHANISMS) * FALSE_MATCH <= 1e-6


def test_copies_counts_the_whole_copies_only():
    def sharding(world: int, equal_pairs: dict) -> ShardingStats:
        st = ShardingStats(layout=Layout(world, "shard0"), shape=(8, 4),
                           boxes=[((0, 0), (8 // world, 4))] * world, rank_seeds=[0] * world)
        for i in range(world):
            for j in range(i + 1, world):
                st.pairs.append(PairStats(i, j, elements=100, equal=equal_pairs.get((i, j), 0)))
        return st

    assert copies(sharding(2, {(0, 1): 100})) == 2
    assert copies(sharding(2, {(0, 1): 99})) is None  # one differing element: not a whole copy
    assert copies(sharding(4, {(0, 1): 100, (2, 3): 100})) == 2  # two draws, each twice
    assert copies(sharding(4, {(0, 1): 100, (0, 2): 100, (0, 3): 100, (1, 2): 100,
                               (1, 3): 100, (2, 3): 100})) == 4
    assert copies(sharding(3, {})) is None
