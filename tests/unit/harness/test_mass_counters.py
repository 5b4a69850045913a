"""The engine's mass-bin counters (`harness.engine.mass_bin_counters`) against the law's mass bins
(`reference.rounded.MassBins`): the lookup table against the plain formula over the law's parts,
and every mass bin's first and last key counted, through the table and the raw order as the fold
counts them, into the bin the law says (`MassBins.bin_of_keys`)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from harness.key_bins import raw_to_ordered
from harness.engine.mass_bin_counters import SHIFT_BITS, MassCounters
from reference import TruncatedNormal, rounded_law

LAWS = [
    ((0.0, 1.0, -2.0, 2.0), torch.float32),  # main layout, split bins of both signs
    ((0.0, 1.0, -2.0, 2.0), torch.float64),
    ((2.0, 0.5, -math.inf, 1.0), torch.float32),  # a tail across zero
    ((0.0, 1.0, 8.0, 8.01), torch.float32),  # fine layout
    ((-8.0, 1.0, -8.01, -8.0), torch.float64),  # fine layout, negative values
]


def _law(case, dtype):
    return rounded_law(TruncatedNormal(*case), dtype)


def _part_of_raw(counters: MassCounters) -> np.ndarray:
    """Raw counter i is part _part_of_raw(...)[i]."""
    return counters.order(np.arange(counters.n, dtype=np.int64))


@pytest.mark.parametrize("case,dtype", LAWS, ids=str)
def test_table_is_the_plain_formula_over_the_parts(case, dtype):
    mb = _law(case, dtype).mass_bins
    counters = MassCounters.of(mb)
    first, shift = mb.first_parts(), mb.shift
    if mb.fine is None:
        coarse_of_raw = raw_to_ordered(mb.n_coarse.bit_length() - 1)
        first, shift = first[coarse_of_raw], shift[coarse_of_raw]
        # inside a split negative main bin the raw counters run backwards
        perm = np.arange(mb.n_parts, dtype=np.int64)
        cn = mb.split_bins[mb.split_bins < mb.n_coarse // 2]
        counts = mb.split_parts[mb.split_bins < mb.n_coarse // 2]
        starts = np.repeat(mb.first_parts()[cn], counts)
        offset = np.arange(counts.sum(), dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
        perm[starts + offset] = starts + np.repeat(counts, counts) - 1 - offset
        assert np.array_equal(_part_of_raw(counters), perm)
        assert len(counters.backward) == np.unique(counts).size  # (N(0, 1) on +-2: both signs split)
    else:
        assert counters.backward == ()
    assert counters.table.dtype == (np.int32 if mb.bits <= 32 else np.int64)
    assert counters.table.flags.writeable  # the fold's to keep
    assert np.array_equal(counters.table, (first << SHIFT_BITS) | shift)


@pytest.mark.parametrize("case,dtype", LAWS, ids=str)
def test_every_bin_end_is_counted_in_its_mass_bin(case, dtype):
    mb = _law(case, dtype).mass_bins
    counters = MassCounters.of(mb)
    lo, hi = mb.key_ranges(np.arange(mb.n_bins))
    keys = np.concatenate([lo, hi])
    table = counters.table.astype(np.int64)
    if mb.fine is None:
        patterns = _patterns(dtype, keys)
        coarse = (patterns >> np.uint64(mb.low_bits)).astype(np.int64)
        low = patterns & np.uint64((1 << mb.low_bits) - 1)
    else:
        fb = mb.fine
        below, above = keys < np.uint64(fb.key_lo), keys >= np.uint64(fb.key_end)
        rel = np.where(below | above, np.uint64(0), keys - np.uint64(fb.key_lo))
        coarse = np.where(below, 0, np.where(above, fb.n_bins + 1,
                                             (rel >> np.uint64(fb.shift)).astype(np.int64) + 1))
        low = np.where(below, np.uint64((1 << fb.shift) - 1),
                       np.where(above, np.uint64(0), rel & np.uint64((1 << fb.shift) - 1)))
    entry = table[coarse]
    raw = (entry >> SHIFT_BITS) + (low >> (entry & ((1 << SHIFT_BITS) - 1)).astype(np.uint64)).astype(np.int64)
    part = _part_of_raw(counters)[raw]
    got = np.searchsorted(mb.mass_first, part, side="right") - 1
    assert np.array_equal(got, mb.bin_of_keys(keys))
    assert np.array_equal(got[:mb.n_bins], np.arange(mb.n_bins))


def _patterns(dtype, keys) -> np.ndarray:
    """The unsigned bit patterns of ordered keys."""
    from reference import float_format
    return float_format(dtype).bits_from_keys(keys).astype(np.uint64)


def test_counts_per_part_add_up_to_the_mass_bins_and_the_main_bins():
    mb = _law((0.0, 1.0, -2.0, 2.0), torch.float32).mass_bins
    counts = np.random.default_rng(5).integers(0, 3, mb.n_parts)
    mass = mb.parts_to_mass(counts)
    main = mb.parts_to_coarse(counts)
    assert mass.sum() == main.sum() == counts.sum() and main.size == mb.n_coarse
    j = np.arange(mb.n_bins)
    assert np.array_equal(mass, np.add.reduceat(counts, mb.mass_first[j]))


def test_a_few_counters_give_the_same_bins_as_the_dense_counters():
    """`sparse_counts` over (raw counter, count) pairs, repeats included, against the dense
    counters put in order and summed (`order`, `coarse`, `MassBins.parts_to_mass`)."""
    mb = _law((0.0, 1.0, -2.0, 2.0), torch.float32).mass_bins
    counters = MassCounters.of(mb)
    rng = np.random.default_rng(8)
    raw = np.concatenate([rng.integers(0, counters.n, 5000),
                          np.concatenate([firsts for _, firsts in counters.backward])])
    counts = rng.integers(1, 4, raw.size)
    dense = np.zeros(counters.n, dtype=np.int64)
    np.add.at(dense, raw, counts)
    ordered = counters.order(dense)
    coarse, mass = counters.sparse_counts(raw, counts)
    assert np.array_equal(coarse, counters.coarse(ordered))
    assert np.array_equal(mass, mb.parts_to_mass(ordered))


@pytest.mark.parametrize("case,dtype", [law for law in LAWS if law[0][2] == -2.0], ids=str)
@pytest.mark.parametrize("pending,sparse", [(1 << 22, 1 << 22), (8192, 16384)],
                         ids=["all-small", "small-then-dense"])
def test_a_draw_counted_sparsely_is_the_draw_counted_densely(case, dtype, pending, sparse,
                                                             monkeypatch):
    """A small draw's flushes kept as (counter, count) pairs, or some of them before the dense
    counters take over, fold the same Summary as dense counters from the first chunk."""
    from candidates import resolve
    from harness.cases import Case
    from harness.checks import CHECKS
    from harness.engine import run_engine
    from harness.families import localized

    law = _law(case, dtype)
    shape = Case("few", *case, (64, 64))

    def draw():
        return run_engine(resolve("exact"), shape, dtype, "cpu", law, 1 << 16, 3,
                          families=CHECKS.families(), chunk_elements=4096)

    monkeypatch.setattr(localized, "PENDING_ELEMENTS", pending)
    monkeypatch.setattr(localized, "SPARSE_ELEMENTS", sparse)
    few = draw()
    monkeypatch.setattr(localized, "SPARSE_ELEMENTS", 0)
    dense = draw()
    assert np.array_equal(few.binned.hist, dense.binned.hist)
    assert np.array_equal(few.localized.mass_hist, dense.localized.mass_hist)
    assert few.binned.hist.sum() == 1 << 16
