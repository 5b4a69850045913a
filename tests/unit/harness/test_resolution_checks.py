"""The fold and the checks at the resolution of single values (`collisions`, `lattices`, low bits).

* the engine's pair count against a brute-force count, blocks pooled across calls and chunks;
* the lattice counts against numpy's own round trips;
* the last-bit classes against numpy's own count of the scanned values;
* a merge of parts adds blocks, pairs, lattice and last-bit counts;
* the checks: not applicable where the law says so, the figure users read, and the known-bad
  samplers' defects as the fold sees them.
Deterministic: fixed seeds, and each assertion on a sample states its failure chance."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from candidates import resolve
from harness.key_bins import COLLISION_BLOCK_MAX, RESOLUTION_SCAN, collision_block
from harness.cases import case_by_id
from harness.checks import summarize_samples
from harness.families.resolution import (LONG_ROW, check_collisions, check_lattices,
                                         check_low_bits, equal_pairs_in_sorted_rows, figure_text,
                                         low_bits_mde, on_lattice, quasi_poisson_p,
                                         resolution_bits, sort_rows)
from harness.sharded.part_fold import fold_layout
from harness.sharded.layout import Layout
from harness.summary import Summary
from reference import TruncatedNormal, rounded_law


def _law(case, dtype):
    return rounded_law(TruncatedNormal(case.mean, case.std, case.a, case.b), dtype)


def _brute_pairs(values: np.ndarray, m: int) -> int:
    """Equal pairs within consecutive blocks of m values, the last one shorter."""
    total = 0
    for start in range(0, values.size, m):
        _, counts = np.unique(values[start:start + m], return_counts=True)
        total += int((counts * (counts - 1) // 2).sum())
    return total


def test_equal_pairs_in_sorted_rows_counts_every_pair_of_a_run():
    rows = torch.tensor([[1, 1, 1, 2, 3, 3], [3, 4, 4, 4, 4, 5], [7, 7, 8, 9, 9, 9]])
    # runs: 3 + 1 | 6 | 1 + 3; the 3 ending row 0 and the 3 starting row 1 are other rows
    assert equal_pairs_in_sorted_rows(rows) == 4 + 6 + 4
    rng = np.random.default_rng(3)
    x = rng.integers(0, 40, size=(50, 64))
    assert equal_pairs_in_sorted_rows(torch.sort(torch.from_numpy(x), dim=1)[0]) == \
        sum(_brute_pairs(r, 64) for r in x)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("length", [LONG_ROW // 4, LONG_ROW, 4 * LONG_ROW + 3])
def test_sort_rows_sorts_each_row_short_or_long(dtype, length):
    """Rows shorter than LONG_ROW go through one 2-D sort, longer ones one by one (radix sort on
    CPU): both give each row in ascending order, negatives and repeats included."""
    rng = np.random.default_rng(length)
    x = torch.from_numpy(rng.integers(-2**31, 2**31 - 1, size=(3, length))).to(dtype)
    x[:, ::7] = x[:, :1]  # repeats
    assert torch.equal(sort_rows(x), torch.from_numpy(np.sort(x.numpy(), axis=1)))


def test_fold_pools_small_calls_into_whole_blocks():
    """Calls of 5000 values (a block spans a fifth of one, chunks end mid-block): the pairs are
    those of consecutive blocks of the flat stream of the draw's values, the last block
    shorter."""
    case = case_by_id("large-mean")  # float32 at 100: q ~ 2^-18.8, blocks of 1024
    law = _law(case, torch.float32)
    m = collision_block(float(law.collision_prob), 32)
    assert m == 1024
    g = torch.Generator().manual_seed(11)
    calls = torch.empty(100, 5000)  # 500 000 values: within RESOLUTION_SCAN, all scanned
    for k in range(calls.shape[0]):
        resolve("uniform-24-bits")(calls[k], case.mean, case.std, case.a, case.b, g)
    s = summarize_samples(calls, law)
    flat = calls.reshape(-1).view(torch.int32).numpy()
    assert calls.numel() <= RESOLUTION_SCAN
    assert s.resolution.collision_block == m and s.resolution.collision_blocks == -(-500_000 // m)
    assert s.resolution.collision_pairs == _brute_pairs(flat, m) > 0


def test_fold_scans_the_first_values_of_a_draw_only(monkeypatch):
    import harness.families.resolution as family

    scan = 1 << 18  # the rule, at a smaller scan than RESOLUTION_SCAN (the same code path)
    monkeypatch.setattr(family, "RESOLUTION_SCAN", scan)
    assert scan < RESOLUTION_SCAN
    case = case_by_id("normal-2sigma")
    law = _law(case, torch.float32)
    x = torch.zeros(3 * scan // (1 << 16), 1 << 16)  # every value 0: all pairs equal
    s = summarize_samples(x, law)
    m = COLLISION_BLOCK_MAX
    assert s.resolution.scanned == scan and s.resolution.collision_blocks == scan // m == 1
    assert s.resolution.collision_pairs == s.resolution.collision_blocks * m * (m - 1) // 2 == s.resolution.collision_compared
    assert list(s.resolution.lattice_counts) == [scan, scan]  # 0 is everywhere


@pytest.mark.parametrize("dtype,coarse", [(torch.float32, "bfloat16"), (torch.float32, "float16"),
                                          (torch.float64, "float32")])
def test_lattice_counts_are_round_trips(dtype, coarse):
    rng = np.random.default_rng(5)
    base = rng.standard_normal(20000) * np.exp(rng.uniform(-30, 30, 20000))
    coarse_t = getattr(torch, coarse)
    x = torch.from_numpy(base).to(dtype)
    x[::3] = x[::3].to(coarse_t).to(dtype)  # a third on the coarse lattice for sure
    want = int((x.to(coarse_t).to(dtype) == x).sum())
    assert on_lattice(x, coarse) == want >= 20000 // 3


def test_merge_adds_blocks_pairs_and_lattice_counts():
    case = case_by_id("normal-2sigma")
    law = _law(case, torch.float32)
    g = torch.Generator().manual_seed(2)
    batch = torch.empty(4, 256, 256)
    for k in range(4):
        resolve("dropped-last-bit")(batch[k], case.mean, case.std, case.a, case.b, g)
    parts, _ = fold_layout(batch, law, Layout(2, "shard0"))
    merged = Summary.merge(parts)
    assert merged.resolution.collision_block == COLLISION_BLOCK_MAX
    for name in ("collision_blocks", "collision_pairs", "scanned", "collision_compared",
                 "collision_triples"):
        assert getattr(merged.resolution, name) == sum(getattr(p.resolution, name) for p in parts)
    assert merged.resolution.scanned == batch.numel()
    assert np.array_equal(merged.resolution.lattice_counts, sum(p.resolution.lattice_counts for p in parts))
    whole = summarize_samples(batch, law)
    assert np.array_equal(merged.resolution.lattice_counts, whole.resolution.lattice_counts)  # per element: exact
    assert merged.resolution.low_bits == 4 and np.array_equal(merged.resolution.low_bit_counts, whole.resolution.low_bit_counts)
    assert merged.resolution.low_bit_counts.sum() == batch.numel()
    # each part pools its own 2^17 values (one shorter block each); the whole has one of 2^18
    assert (merged.resolution.collision_blocks, whole.resolution.collision_blocks) == (2, 1)


def test_not_applicable_where_the_law_decides():
    bf = _law(case_by_id("normal-2sigma"), torch.bfloat16)
    s = summarize_samples(torch.zeros(2, 1000, dtype=torch.bfloat16), bf)
    assert not check_collisions(s, bf).applicable and not check_lattices(s, bf).applicable
    tiny = _law(case_by_id("tiny-std"), torch.float32)  # ~2^6 equally likely values
    assert collision_block(float(tiny.collision_prob), 32) == 0
    s = summarize_samples(torch.full((2, 1000), 0.5), tiny)
    out = check_collisions(s, tiny)
    assert not out.applicable and "too concentrated" in out.message
    assert check_lattices(s, tiny).applicable


def test_the_figure_reads_as_bits_of_randomness():
    # 2^31 pairs compared, 2^8 equal: 2^23 equally likely values
    bits, lo, hi = resolution_bits(2.0**31, 256.0)
    assert bits == pytest.approx(23.0) and lo < 23.0 < hi and hi - lo < 0.4
    assert figure_text(bits, lo, hi, 26.02).startswith("≈ 2^23.0 equally likely values")
    assert figure_text(bits, lo, hi, 26.02).endswith("where the law's own figure is 2^26.0")
    none = resolution_bits(2.0**31, 0.0)
    assert none[0] == math.inf and none[1] == pytest.approx(31 - math.log2(-math.log(0.025)), abs=0.01)
    assert figure_text(*none, 55.0).startswith("> 2^")
    # the quasi-Poisson test is the exact Poisson test at dispersion 1
    from scipy import stats
    assert quasi_poisson_p(140, 100.0, 1.0) == pytest.approx(2 * stats.poisson.sf(139, 100.0))
    assert quasi_poisson_p(0, 1e-6, 1.0) == 1.0


@pytest.mark.parametrize("name,dtype,bits", [("uniform-24-bits", torch.float32, 24.0),
                                             ("dropped-last-bit", torch.float32, 25.0),
                                             ("float32-widened", torch.float64, 26.0)])
def test_the_known_bads_lose_the_bits_they_should(name, dtype, bits):
    """Each resolution known-bad on N(0, 1) at +-2, one scan of 2^21 values: its figure within
    0.25 bit of what its construction gives (the law has 2^26.0 values in float32, 2^55.0 in
    float64). The scan holds two blocks of 2^18 values, >= 1000 equal pairs: 0.25 bit is 5.5 sd
    of log2 of a Poisson count of 1000, a miss has probability < 1e-7 (fixed seed besides)."""
    case = case_by_id("normal-2sigma")
    law = _law(case, dtype)
    g = torch.Generator().manual_seed(7)
    x = torch.empty(32, 1 << 16, dtype=dtype)
    resolve(name)(x, case.mean, case.std, case.a, case.b, g)
    out = check_collisions(summarize_samples(x, law), law)
    assert out.details["bits"] == pytest.approx(bits, abs=0.25), out.message
    assert out.p_value < 1e-12
    if name == "float32-widened":
        lat = check_lattices(summarize_samples(x, law), law)
        assert lat.p_value == 0.0 or lat.decisive or lat.p_value < 1e-300
        assert lat.details["lattices"]["float32"][0] == RESOLUTION_SCAN


# ------------------------------------------------------------------------------ low-order bits


def test_the_fold_counts_the_last_bits_of_the_scanned_finite_values():
    """Values of every binade, some NaN and inf (not scanned): the classes are the last 4 bits
    of the finite values' patterns, as numpy counts them."""
    law = _law(case_by_id("normal-2sigma"), torch.float32)
    rng = np.random.default_rng(8)
    x = torch.from_numpy((rng.standard_normal(3 * 40000) * np.exp(rng.uniform(-40, 40, 3 * 40000)))
                         .astype(np.float32)).view(3, 40000)
    x[0, :7], x[1, 3], x[2, -2:] = math.nan, math.inf, -math.inf
    s = summarize_samples(x, law)
    finite = x.reshape(-1)[torch.isfinite(x.reshape(-1))].view(torch.int32).numpy()
    assert s.resolution.low_bits == 4 and s.resolution.scanned == finite.size
    assert np.array_equal(s.resolution.low_bit_counts, np.bincount(finite & 15, minlength=16))


@pytest.mark.parametrize("name,dtype", [("dropped-last-bit", torch.float32),
                                        ("dropped-last-bit", torch.float64),
                                        ("float32-widened", torch.float64)])
def test_low_bits_catch_the_known_bads(name, dtype):
    """N(0, 1) on +-2, one scan of 2^19 values: a cleared last bit empties the 8 odd classes
    (w = 1), float32 values in a float64 tensor end in 29 zero bits (w = sqrt(15)); p < 1e-12
    (chi2 > 5e5 on 15 df, far beyond any sampling noise)."""
    case = case_by_id("normal-2sigma")
    law = _law(case, dtype)
    x = torch.empty(8, 1 << 16, dtype=dtype)
    resolve(name)(x, case.mean, case.std, case.a, case.b, torch.Generator().manual_seed(4))
    out = check_low_bits(summarize_samples(x, law), law)
    assert out.applicable and out.p_value < 1e-12, out.message
    assert out.effect == pytest.approx(1.0 if name == "dropped-last-bit" else math.sqrt(15), rel=0.02)
    assert out.mde == pytest.approx(low_bits_mde(law, x.numel(), tuple(x.shape), 1e-3))


@pytest.mark.parametrize("case_id,dtype,mean,std,a,b", [
    ("normal-2sigma", torch.float32, 0, 0, 0, 0), ("normal-2sigma", torch.float64, 0, 0, 0, 0),
    ("few-values", torch.float32, 1.0, 1e-5, 0.0, 2.0),  # ~80 values per std: classes +-1.7%
])
def test_low_bits_pass_the_exact_sampler(case_id, dtype, mean, std, a, b):
    """2^19 exact values: p >= 1e-6 (a false failure has probability 1e-6 a priori; fixed seed).
    The few-values law's classes are not uniform: against 1/16 each the same counts would give
    chi2 ~50 on average (critical 37.7 at 1e-3); against the law they pass."""
    if case_id != "few-values":
        case = case_by_id(case_id)
        mean, std, a, b = case.mean, case.std, case.a, case.b
    law = rounded_law(TruncatedNormal(mean, std, a, b), dtype)
    x = torch.empty(8, 1 << 16, dtype=dtype)
    resolve("exact")(x, mean, std, a, b, torch.Generator().manual_seed(12))
    out = check_low_bits(summarize_samples(x, law), law)
    assert out.applicable and out.p_value >= 1e-6, out.message
    if case_id == "few-values":
        probs = np.asarray(out.details["probs"])
        assert probs[1] * 16 > 1.015 and probs[15] * 16 < 0.985


def test_low_bits_not_applicable_where_the_law_decides():
    bf = _law(case_by_id("normal-2sigma"), torch.bfloat16)
    s = summarize_samples(torch.zeros(2, 1000, dtype=torch.bfloat16), bf)
    assert not check_low_bits(s, bf).applicable and math.isnan(low_bits_mde(bf, 1 << 22, (), 1e-3))
    one = rounded_law(TruncatedNormal(1.0, 1e-9, 1.0 - 1e-9, 1.0 + 1e-9), torch.float32)  # 1.0 only
    out = check_low_bits(summarize_samples(torch.ones(2, 1000), one), one)
    assert not out.applicable and "too few bit patterns" in out.message
    # a value ending in a pattern the law never ends in is decisive
    odd = torch.ones(2, 1000)
    odd[0, 0] = float(np.nextafter(np.float32(1.0), np.float32(2.0)))
    out = check_low_bits(summarize_samples(odd, one), one)
    assert out.decisive and out.p_value == 0.0
