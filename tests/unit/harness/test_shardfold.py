"""Sharded folding without processes: `Summary.merge` of the ranks' parts is the fold of the whole,
and the cross-shard comparisons count what they say they count.

The parts are folded by `harness.sharded.part_fold.PartFold` exactly as the ranks fold them
(harness/distributed.py calls the same code); here the boxes are cut from one batch in one process.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from candidates import resolve
from harness.cases import Case, case_by_id
from harness.checks import summarize_samples
from harness.engine import poison_
from harness.families.extremes import ROW_EXTREMES_CAP
from harness.sharded.part_fold import compare_pair, fold_layout
from harness.sharded.layout import Layout
from harness.summary import Summary
from reference import TruncatedNormal, rounded_law

#: (family, field) of every count a merge must give bit for bit; family None: the core
INT_FIELDS = ((None, "n"), (None, "n_calls"), ("support", "n_nan"), ("support", "n_posinf"),
              ("support", "n_neginf"), ("support", "n_unwritten"),
              ("support", "n_outside_rounded"), ("support", "n_outside_strict"),
              ("atoms", "n_at_rn_a"), ("atoms", "n_at_rn_b"),
              ("independence", "n_equal_successive"), ("independence", "n_pairs_successive"),
              ("independence", "n_duplicate_rows"), ("independence", "n_rows_compared"),
              ("extremes", "n_rows_total"))


def _field(summary: Summary, family: str | None, name: str):
    return getattr(summary if family is None else summary.states[family], name)


def _law(case, dtype):
    return rounded_law(TruncatedNormal(case.mean, case.std, case.a, case.b), dtype)


def _draw(case, dtype, calls, seed=0, candidate="exact"):
    g = torch.Generator().manual_seed(seed)
    out = torch.empty((calls, *case.shape), dtype=dtype)
    cand = resolve(candidate)
    for k in range(calls):
        cand(out[k], case.mean, case.std, case.a, case.b, g)
    return out


def assert_same_summary(merged: Summary, whole: Summary, float_rtol: float) -> None:
    for family, name in INT_FIELDS:
        assert int(_field(merged, family, name)) == int(_field(whole, family, name)), name
    assert np.array_equal(merged.binned.hist, whole.binned.hist)
    if whole.binned.fine_hist is not None:
        assert np.array_equal(merged.binned.fine_hist, whole.binned.fine_hist)
    assert merged.has("localized") == whole.has("localized")
    if whole.has("localized"):  # 32/64-bit: the mass bins of spikes and scan
        got, want = merged.localized, whole.localized
        assert np.array_equal(got.mass_hist, want.mass_hist)
        assert got.watch_bins == want.watch_bins
        if want.watch_keys is not None:
            assert np.array_equal(got.watch_keys, want.watch_keys)
            assert np.array_equal(got.watch_counts, want.watch_counts)
    assert np.array_equal(merged.extremes.row_min, whole.extremes.row_min, equal_nan=True)
    assert np.array_equal(merged.extremes.row_max, whole.extremes.row_max, equal_nan=True)
    for name in ("min", "max", "worst_outside", "worst_outside_strict"):
        a, b = getattr(merged.support, name), getattr(whole.support, name)
        assert (a == b) or (math.isnan(a) and math.isnan(b)), name
    np.testing.assert_allclose(merged.moments.power_sums, whole.moments.power_sums,
                               rtol=float_rtol, atol=1e-9)
    assert set(merged.independence.lag1) == set(whole.independence.lag1)
    for dim, sums in whole.independence.lag1.items():
        got = merged.independence.lag1[dim]
        assert got.count == sums.count, f"lag1[{dim}] pairs"
        np.testing.assert_allclose([got.sum_u, got.sum_v, got.sum_uu, got.sum_vv, got.sum_uv],
                                   [sums.sum_u, sums.sum_v, sums.sum_uu, sums.sum_vv, sums.sum_uv],
                                   rtol=float_rtol, atol=1e-6 * max(1.0, sums.sum_uu))
    s1, s2 = merged.independence.successive, whole.independence.successive
    assert s1.count == s2.count
    # float32 block sums: the error scales with the sum of |terms| (<= sum_uu), not with the sum
    np.testing.assert_allclose([s1.sum_uv, s1.sum_uu], [s2.sum_uv, s2.sum_uu], rtol=float_rtol,
                               atol=1e-6 * max(1.0, s2.sum_uu))


LAYOUTS = [Layout(w, p) for w in (2, 3, 4) for p in ("shard0", "shard1", "replicate")]
CASES = [case_by_id("normal-2sigma"), case_by_id("abs-bounds-trap"), case_by_id("vit-pos-embed"),
         Case("tiny-rows", 0.0, 1.0, -2.0, 2.0, (7, 3))]


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda l: l.label)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_merge_of_parts_is_the_fold_of_the_whole(case, dtype, layout):
    calls = 3 if math.prod(case.shape) > 10_000 else 40
    batch = _draw(case, dtype, calls, seed=7)
    law = _law(case, dtype)
    whole = summarize_samples(batch, law)
    parts, _ = fold_layout(batch, law, layout)
    merged = Summary.merge(parts)
    # 16-bit: recomputed from the merged histogram, bit for bit; 32-bit: float sums in another order
    assert_same_summary(merged, whole, float_rtol=0 if dtype == torch.bfloat16 else 1e-6)


def heaviest_bins(probs: np.ndarray, n: int, expected: float = 20.0) -> tuple:
    """The fewest heaviest mass bins that together expect `expected` of n samples, by a stable
    order (mass descending, ties by index: the same bins on every machine, whatever the sort's
    tie order). n iid draws miss them all with probability (1 - mass)^n <= exp(-expected)."""
    order = np.lexsort((np.arange(probs.size), -probs))  # primary key last: -mass, then index
    k = int(np.searchsorted(np.cumsum(probs[order]) * n, expected)) + 1
    return tuple(sorted(int(j) for j in order[:k]))


@pytest.mark.parametrize("layout", [Layout(3, "shard0"), Layout(4, "shard1")], ids=lambda l: l.label)
def test_merge_adds_the_watched_values_of_every_part(layout):
    """Stage 2 of spikes on a sharded group: each part tallies the exact values of the watched
    mass bins, and the merge adds them key by key (a value seen by several ranks counted once
    per occurrence)."""
    case = case_by_id("normal-2sigma")
    batch = _draw(case, torch.float32, 2, seed=11)
    law = _law(case, torch.float32)
    # Chosen by mass, not by the sort's tie order (the law is symmetric: its bins tie in pairs).
    # The bins' mass is capped near 2**-18.5, so ~57 of them expect 20 of the 2 * 65536 samples.
    watch = heaviest_bins(law.mass_bins.probs, batch.numel())
    whole = summarize_samples(batch, law, watch=watch)
    # P(no sample in the watched bins) <= e^-20 = 2e-9 (fixed seed besides: this draw has some)
    assert whole.localized.watch_keys is not None and whole.localized.watch_counts.sum() > 0
    # One watched value written again into the first and the last box of the layout (element
    # (0, 0) of call 0, element (-1, -1) of call 1): a value that two ranks see, deterministically.
    values = batch.reshape(-1)[np.isin(law.mass_bins.bin_of_keys(law.fmt.ordered_keys(
        batch.reshape(-1).double().numpy())), watch)]
    v = float(values[0])
    batch[0, 0, 0] = batch[1, -1, -1] = v
    whole = summarize_samples(batch, law, watch=watch)
    key = int(law.fmt.ordered_keys(np.array([v]))[0])
    assert int(whole.localized.watch_counts[np.searchsorted(whole.localized.watch_keys, key)]) >= 2
    parts, _ = fold_layout(batch, law, layout, watch=watch)
    assert sum(int(key in set(p.localized.watch_keys.tolist())) for p in parts) >= 2  # seen by two ranks
    assert_same_summary(Summary.merge(parts), whole, float_rtol=1e-6)


def test_merge_keeps_rows_duplicates_and_poison_in_uneven_chunks():
    """Duplicate rows, unwritten and non-finite elements, uneven boxes (10 rows over 4 ranks:
    3, 3, 3, 1), several chunks, and more rows than the cap of kept row extremes."""
    case = Case("dups", 0.0, 1.0, -2.0, 2.0, (10, 5))
    calls = ROW_EXTREMES_CAP // 10 + 30
    batch = _draw(case, torch.float16, calls, seed=3)
    batch[:, 4] = batch[:, 1]  # a duplicate row in every call
    batch[5, 2, 3] = float("nan")
    batch[6, 9, 0] = float("inf")
    poison_(batch[7, 0, :2])
    law = _law(case, torch.float16)
    whole = summarize_samples(batch, law)
    # one duplicate per call compared: the calls whose rows fit under the cap
    assert whole.independence.n_duplicate_rows == ROW_EXTREMES_CAP // 10 and whole.support.n_unwritten == 2
    for layout in (Layout(4, "shard0"), Layout(4, "shard1"), Layout(3, "shard1")):
        parts, _ = fold_layout(batch, law, layout, chunk_calls=1000)
        assert_same_summary(Summary.merge(parts), whole, float_rtol=0)


def test_merge_refuses_parts_of_different_calls():
    case = Case("c", 0.0, 1.0, -2.0, 2.0, (4, 4))
    law = _law(case, torch.float32)
    a, _ = fold_layout(_draw(case, torch.float32, 3), law, Layout(2, "shard0"))
    b, _ = fold_layout(_draw(case, torch.float32, 4), law, Layout(2, "shard0"))
    with pytest.raises(ValueError, match="different numbers of calls"):
        Summary.merge([a[0], b[1]])


def test_identical_shards_are_counted_as_such():
    """What torch 2.13 does on a CPU mesh with one seed everywhere: each rank writes the same
    values into its shard."""
    case = Case("c", 0.0, 1.0, -2.0, 2.0, (8, 6))
    law = _law(case, torch.bfloat16)
    batch = _draw(case, torch.bfloat16, 5)
    layout = Layout(2, "shard0")
    same = batch[:, :4]
    _, stats = fold_layout(batch, law, layout, locals_=[same, same.clone()])
    (pair,) = stats.pairs
    assert (pair.i, pair.j, pair.calls, pair.box_numel) == (0, 1, 5, 24)
    assert pair.equal == pair.elements == 120 and pair.calls_equal == 5
    assert pair.dup_rows == pair.rows == 20 and pair.corr.correlation() == pytest.approx(1.0)
    # the honest split of one draw: nothing equal beyond chance, no repeated row. For exact
    # draws (collision probability c = 9.6e-4 per element pair in bf16): P(equal >= 10 of 120)
    # = 7e-17, P(some of the 80 row pairs equal) <= 80 c^6 = 6e-17, P(a call equal) ~ c^24
    _, stats = fold_layout(batch, law, layout)
    (pair,) = stats.pairs
    assert pair.calls_equal == 0 and pair.dup_rows == 0 and pair.equal < 10


def test_rows_across_shards_at_other_indices_are_found():
    mine = torch.arange(24, dtype=torch.float32).reshape(1, 4, 6)
    theirs = torch.roll(mine, 1, dims=1) + 100
    theirs[0, 3] = mine[0, 0]  # row 0 of shard i reappears as row 3 of shard j
    pair = compare_pair(0, 1, mine, theirs, 0.0, 1.0)
    assert pair.dup_rows == 1 and pair.rows == 4 and pair.row_pairs == 16 and pair.equal == 0


def test_rows_on_a_coarse_lattice_do_not_collide_across_shards():
    # float64 values on the float16 lattice end in 42 zero bits: hashed without spreading their
    # bits first, rows of them hash into ~2^22 values, and 4096 x 4096 distinct row pairs share
    # a hash ~4 times (5 with these rows). Every row here differs (each first element is a
    # distinct float16 value); spread, a false match has chance ~1.7e7 x 2^-64 < 1e-12.
    g = torch.Generator().manual_seed(1)
    lattice = torch.arange(1 << 16, dtype=torch.int32).to(torch.int16).view(torch.float16)
    lattice = lattice[torch.isfinite(lattice) & (lattice.abs() <= 2)]
    first = lattice[torch.randperm(len(lattice), generator=g)][:8192]
    second = lattice[torch.randint(len(lattice), (8192,), generator=g)]
    rows = torch.stack([first, second], 1).to(torch.float64)
    pair = compare_pair(0, 1, rows[:4096].reshape(1, 4096, 2), rows[4096:].reshape(1, 4096, 2),
                        0.0, 1.0)
    assert pair.rows == 4096 and pair.dup_rows == 0


def test_replicas_that_differ_are_counted_per_call():
    case = Case("c", 0.0, 1.0, -2.0, 2.0, (8, 6))
    law = _law(case, torch.float32)
    batch = _draw(case, torch.float32, 4)
    other = batch.clone()
    other[2, 1, 1] += 1.0
    _, stats = fold_layout(batch, law, Layout(3, "replicate"), locals_=[batch, batch.clone(), other])
    assert stats.replica_calls == 8 and stats.replica_calls_differing == 1
    assert stats.replica_differing == 1 and stats.replica_first.startswith("rank 2, call 3")
