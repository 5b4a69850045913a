"""Cross-checks of the dtype facts and the rounded law against torch's own casts and mpmath.

* `FloatFormat.round` / `encode` agree bit for bit with torch's ``.to(dtype)`` (float32 inputs, which
  torch rounds once) on random bit patterns, on every midpoint of the 8/16-bit lattices and one
  float32 ulp either side; `round_torch` agrees with torch's float64 casts, which go via float32.
* The cells the law integrates over are the ones torch rounds into.
* Atom masses match 50-digit mpmath integrals of the normal density over cell ∩ [a, b], including
  both boundary atoms and atoms 1e-200 (and 1e-400, in log space) deep in a tail.
* Totals, bin sums, histogram bins, tail probabilities and Sheppard's corrections are consistent.
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest
import torch

from reference import TruncatedNormal, float_format, rounded_law
from reference.dtypes import SUPPORTED_DTYPES

NARROW = [d for d in SUPPORTED_DTYPES if float_format(d).bits <= 16]
_INT = {8: torch.uint8, 16: torch.int16, 32: torch.int32, 64: torch.int64}


def _torch_bits(t: torch.Tensor, bits: int) -> np.ndarray:
    return t.view(_INT[bits]).numpy().astype(np.int64).astype(np.uint64) & np.uint64((1 << bits) - 1)


def _torch_cast(x: np.ndarray, dtype) -> np.ndarray:
    return torch.from_numpy(np.ascontiguousarray(x)).to(dtype).double().numpy()


def _same(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Equal as values, sign of zero included; NaN equals NaN."""
    return ((a == b) & (np.signbit(a) == np.signbit(b))) | (np.isnan(a) & np.isnan(b))


def _torch_lattice(dtype) -> np.ndarray:
    """Every finite value of an 8/16-bit dtype (one zero), sorted, decoded by torch itself."""
    bits = float_format(dtype).bits
    pats = torch.arange(1 << bits, dtype=torch.int32).to(torch.uint8 if bits == 8 else torch.int16)
    v = pats.view(dtype).double().numpy()
    return np.unique(v[np.isfinite(v)])


# ---------------------------------------------------------------------------------------- dtypes
@pytest.mark.parametrize("dtype", SUPPORTED_DTYPES, ids=str)
def test_round_and_bits_match_torch_on_float32_inputs(dtype):
    fmt = float_format(dtype)
    rng = np.random.default_rng(7)
    xs = [rng.integers(0, 2**32, 1_000_000, dtype=np.uint64).astype(np.uint32).view(np.float32)]
    if fmt.bits <= 16:
        lat = _torch_lattice(dtype)
        mids = ((lat[:-1] + lat[1:]) / 2).astype(np.float32)  # exact in float32
        assert np.array_equal(mids.astype(np.float64), (lat[:-1] + lat[1:]) / 2)
        for m in (mids, -mids):
            xs += [m, np.nextafter(m, np.float32(np.inf)), np.nextafter(m, -np.float32(np.inf))]
        thr = np.float32(fmt.overflow_threshold)
        xs.append(np.array([thr, -thr, np.nextafter(thr, np.float32(0)), np.nextafter(thr, np.float32(np.inf))], np.float32))
    xs.append(np.array([np.inf, -np.inf, 0.0, -0.0, 1e-45, -1e-45, 3.4e38, -3.4e38], np.float32))
    x = np.concatenate(xs)
    x = x[~np.isnan(x)]
    t = torch.from_numpy(x).to(dtype)
    ref = t.double().numpy()
    got = fmt.round(x.astype(np.float64))
    assert _same(got, ref).all(), x[~_same(got, ref)][:10]
    if fmt.bits <= 32:
        ok = ~np.isnan(ref)
        assert np.array_equal(fmt.encode(x.astype(np.float64))[ok], _torch_bits(t, fmt.bits)[ok])


@pytest.mark.parametrize("dtype", SUPPORTED_DTYPES, ids=str)
def test_float64_inputs_round_torch_matches_and_round_differs_only_by_double_rounding(dtype):
    """torch casts float64 -> float32 -> (16/8-bit): `round_torch` reproduces it; the canonical single
    rounding `round` differs only within half a float32 ulp of a midpoint."""
    fmt = float_format(dtype)
    rng = np.random.default_rng(11)
    n = 300_000
    x = rng.standard_normal(n) * np.exp(rng.uniform(-40, 40, n))
    if fmt.bits <= 16:
        lat = _torch_lattice(dtype)
        m = rng.choice((lat[:-1] + lat[1:]) / 2, n)
        m = np.where(m == 0, 2.0**-140, m)
        x = np.concatenate([x, m, m + np.abs(m) * (rng.integers(-3, 4, n) * 2.0**-24 + rng.uniform(-1, 1, n) * 2.0**-27)])
    elif fmt.bits == 32:
        v = fmt.round(x)
        up = fmt.next_up(v)
        mid = v + (up - v) / 2  # float32 midpoints are exact in float64
        ok = np.isfinite(mid)
        mid = mid[ok]
        x = np.concatenate([x, mid, np.nextafter(mid, np.inf), np.nextafter(mid, -np.inf)])
    ref = _torch_cast(x, dtype)
    assert _same(fmt.round_torch(x), ref).all()
    differ = ~_same(fmt.round(x), ref)
    if fmt.bits >= 32:
        assert not differ.any()
    else:
        assert differ.any()  # the sample holds points in the double-rounding zone
        f32 = x.astype(np.float32).astype(np.float64)
        # Every difference is a float64 x that float32 moves onto a midpoint of the format.
        on_mid = fmt.round(np.nextafter(f32, np.inf)) != fmt.round(np.nextafter(f32, -np.inf))
        assert on_mid[differ].all()


@pytest.mark.parametrize("dtype", SUPPORTED_DTYPES, ids=str)
def test_ordered_keys_match_torch_formula_and_sort(dtype):
    fmt = float_format(dtype)
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.standard_normal(20000) * np.exp(rng.uniform(-30, 30, 20000)), [0.0, -0.0, np.inf, -np.inf]])
    t = torch.from_numpy(x).to(dtype)
    v = t.double().numpy()
    keep = ~np.isnan(v)
    if fmt.bits == 64:
        u = torch.from_numpy(x).view(torch.int64)
        mask = -1
    else:
        u = t.view(_INT[fmt.bits]).to(torch.int64) & ((1 << fmt.bits) - 1)
        mask = (1 << fmt.bits) - 1
    sign = torch.tensor(1, dtype=torch.int64) << (fmt.bits - 1)
    tkey = torch.where((u & sign) != 0, (~u) & mask, u | sign)  # the engine's formula
    tkey = tkey.numpy().astype(np.uint64)
    mine = fmt.ordered_keys(v)
    assert np.array_equal(mine[keep], tkey[keep])
    assert _same(fmt.values_from_keys(mine[keep]), v[keep]).all()
    order = np.argsort(mine[keep], kind="stable")
    srt = v[keep][order]
    assert np.all(srt[:-1] <= srt[1:])
    if fmt.has_neg_zero:
        k0 = fmt.ordered_keys(np.array([-0.0, 0.0]))
        assert int(k0[1]) == int(k0[0]) + 1


@pytest.mark.parametrize("dtype", SUPPORTED_DTYPES, ids=str)
def test_hist_bin_bounds(dtype):
    fmt = float_format(dtype)
    lo, hi = fmt.hist_bin_bounds()
    assert len(lo) == len(hi) == 1 << fmt.hist_bits
    have = ~np.isnan(lo)
    assert np.array_equal(have, ~np.isnan(hi))
    shift = np.uint64(fmt.bits - fmt.hist_bits)
    bins = np.nonzero(have)[0].astype(np.uint64)
    assert np.array_equal(fmt.ordered_keys(lo[have]) >> shift, bins)
    assert np.array_equal(fmt.ordered_keys(hi[have]) >> shift, bins)
    assert np.all(np.isfinite(lo[have])) and np.all(lo[have] <= hi[have])
    # The smallest/largest finite value: the key just outside the bin's [lo, hi] is in another bin or not finite.
    below = fmt.next_down(lo[have])
    inside = (fmt.ordered_keys(below) >> shift) == bins
    assert not np.any(inside & np.isfinite(below))
    assert np.array_equal(lo[have] == -fmt.max_finite, bins == bins.min())


@pytest.mark.parametrize("dtype", SUPPORTED_DTYPES, ids=str)
def test_next_up_down(dtype):
    fmt = float_format(dtype)
    if fmt.bits <= 16:
        lat = _torch_lattice(dtype)
        assert np.array_equal(fmt.next_up(lat[:-1]), lat[1:])
        assert np.array_equal(fmt.next_down(lat[1:]), lat[:-1])
    else:
        npd = np.float32 if fmt.bits == 32 else np.float64
        v = np.random.default_rng(5).standard_normal(10000).astype(npd)
        assert np.array_equal(fmt.next_up(v.astype(float)), np.nextafter(v, npd(np.inf)).astype(float))
        assert np.array_equal(fmt.next_down(v.astype(float)), np.nextafter(v, -npd(np.inf)).astype(float))
    assert fmt.next_up(np.array([-0.0]))[0] == fmt.min_subnormal
    assert fmt.next_down(np.array([0.0]))[0] == -fmt.min_subnormal


@pytest.mark.parametrize("dtype", SUPPORTED_DTYPES, ids=str)
@pytest.mark.parametrize("rounding", ["rn", "torch"])
def test_cells_are_where_torch_rounds(dtype, rounding):
    """Points just inside a cell round (in torch) to its value, points just outside to a neighbour."""
    fmt = float_format(dtype)
    rng = np.random.default_rng(13)
    if fmt.bits <= 16:
        v = _torch_lattice(dtype)
        v = np.concatenate([v, [-0.0]])
    else:
        v = fmt.round(rng.standard_normal(50000) * np.exp(rng.uniform(-80, 80, 50000)))
    via = rounding == "torch"
    lo, hi = fmt.cell_edges(v, via_float32=via)
    assert np.all(lo <= v) and np.all(v <= hi)
    if fmt.bits == 64:
        # float64 cannot hold its own midpoints: the edges are their float64 RN, shared by neighbours
        assert np.array_equal(hi[:-1][np.isfinite(hi[:-1])] >= v[:-1][np.isfinite(hi[:-1])], np.ones(np.isfinite(hi[:-1]).sum(), bool))
        nb = fmt.next_up(v)
        assert np.all((hi == v) | (hi == nb) | ~np.isfinite(hi))
        return
    if via or fmt.bits >= 32:
        # torch rounds float64 once into float32/float64, and via float32 into narrower formats.
        cast, step = (lambda x: _torch_cast(x, dtype)), (lambda e, d: np.nextafter(e, d))
    else:
        # Casts from float32 are single roundings: probe the RN cells with float32 points.
        cast = lambda x: torch.from_numpy(x.astype(np.float32)).to(dtype).double().numpy()
        step = lambda e, d: np.nextafter(e.astype(np.float32), np.float32(d)).astype(np.float64)
    fin_lo, fin_hi = np.isfinite(lo), np.isfinite(hi)
    zero = v == 0
    inside_lo = cast(step(lo[fin_lo], np.inf))
    inside_hi = cast(step(hi[fin_hi], -np.inf))
    assert np.all((inside_lo == v[fin_lo]) | zero[fin_lo])
    assert np.all((inside_hi == v[fin_hi]) | zero[fin_hi])
    if fmt.has_neg_zero:
        assert np.all(np.signbit(inside_lo[zero[fin_lo]]) == np.signbit(v[fin_lo][zero[fin_lo]]))
    out_lo = cast(step(lo[fin_lo], -np.inf))
    out_hi = cast(step(hi[fin_hi], np.inf))
    moves = (v[fin_lo] != -fmt.max_finite) | (fmt.overflow != "saturate")
    assert np.all((out_lo != v[fin_lo])[moves & ~zero[fin_lo]])
    assert np.all((out_hi != v[fin_hi])[~zero[fin_hi] & ((v[fin_hi] != fmt.max_finite) | (fmt.overflow != "saturate"))])


# ---------------------------------------------------------------------------------------- mpmath
mp.mp.dps = 50


def _mp_mass(lo, hi, mu, sigma):
    """50-digit integral of the N(mu, sigma^2) density over [lo, hi] (standardized and factored as
    phi(l) * int_0^w exp(-l s - s^2/2) ds, l the end nearer the mode, so quadrature sees an O(1)
    integrand even 1e-300 deep in a tail)."""
    mu, sigma = mp.mpf(float(mu)), mp.mpf(float(sigma))
    zl, zh = (mp.mpf(float(lo)) - mu) / sigma, (mp.mpf(float(hi)) - mu) / sigma
    if zl + zh < 0:
        zl, zh = -zh, -zl
    l = max(zl, 0) if zl < 0 < zh else zl
    if zl < 0 < zh:  # straddles the mode: two pieces from 0
        return _mp_mass(0, -zl, 0, 1) + _mp_mass(0, zh, 0, 1)
    w = zh - l
    g = mp.quad(lambda s: mp.exp(-l * s - s * s / 2), [0, w])
    return mp.exp(-l * l / 2) / mp.sqrt(2 * mp.pi) * g


def _mp_total(a, b, mu, sigma):
    za = mp.mpf(float(a) - float(mu)) / float(sigma) if np.isfinite(a) else mp.mpf("-inf")
    zb = mp.mpf(float(b) - float(mu)) / float(sigma) if np.isfinite(b) else mp.mpf("inf")
    if za >= 0:
        return (mp.erfc(za / mp.sqrt(2)) - mp.erfc(zb / mp.sqrt(2))) / 2
    if zb <= 0:
        return (mp.erfc(-zb / mp.sqrt(2)) - mp.erfc(-za / mp.sqrt(2))) / 2
    return 1 - (mp.erfc(-za / mp.sqrt(2)) + mp.erfc(zb / mp.sqrt(2))) / 2


def _mp_atom(v, lat, a, b, mu, sigma, fmt):
    """mpmath mass of the atom v: its cell from the torch-decoded lattice, intersected with [a, b]."""
    i = np.searchsorted(lat, v)
    lo = (mp.mpf(lat[i - 1]) + mp.mpf(lat[i])) / 2 if i > 0 else mp.mpf("-inf")
    hi = (mp.mpf(lat[i]) + mp.mpf(lat[i + 1])) / 2 if i + 1 < len(lat) else mp.mpf(fmt.overflow_threshold)
    if v == 0:  # law splits the zero cell at 0 between -0 and +0; compare the +0 atom
        lo = mp.mpf(0)
    lo, hi = max(lo, mp.mpf(float(a))), min(hi, mp.mpf(float(b)))
    return _mp_mass(lo, hi, mu, sigma) / _mp_total(a, b, mu, sigma)


CASES = [
    (0.0, 0.02, -0.04, 0.04),  # ViT: boundary atoms -0.0400390625 outside [a, b]
    (0.0, 1.0, -2.0, 2.0),  # representable bounds: half cells
    (0.0, 1.0, -np.inf, np.inf),  # atoms 1e-200 deep (z ~ 30)
    (0.0, 1.0, 8.0, 8.01),  # narrow window
    (0.0, 1.0, 0.3, 0.30001),  # narrower than a bf16 ulp
    (100.0, 1.0, 98.0, 102.0),  # bf16 lattice coarser than sigma
    (0.0, 1.0, 3.0, 4.0),  # mean outside
]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c}")
def test_atoms_match_mpmath(dtype, case):
    mu, sigma, a, b = case
    d = TruncatedNormal(mu, sigma, a, b)
    law = rounded_law(d, dtype)
    fmt = law.fmt
    lat = _torch_lattice(dtype)
    vals, probs = law.values, law.probs
    assert abs(probs.sum() - 1) < 1e-12
    fin = np.isfinite(vals)
    pick = [0, len(vals) - 1]  # both boundary atoms
    rng = np.random.default_rng(17)
    pick += list(rng.choice(len(vals), min(10, len(vals)), replace=False))
    # the atom nearest to mass 1e-200 in a tail, where one exists
    pos = probs > 0
    if probs[pos].min() < 1e-200:
        pick.append(int(np.argmin(np.abs(np.log(np.where(pos, probs, 1e-320)) - np.log(1e-200)))))
    worst = 0.0
    for i in pick:
        v = vals[i]
        if not fin[i] or probs[i] == 0 or (v == 0 and np.signbit(v)):
            continue
        exact = _mp_atom(v, lat, a, b, mu, sigma, fmt)
        worst = max(worst, float(abs(probs[i] / exact - 1)))
    assert worst < 1e-11, worst
    assert law.atom_a == probs[0] and law.atom_b == probs[-1] or not np.isfinite(a) or not np.isfinite(b)


def test_worked_boundary_atom():
    """README number: mass of bf16 atom -0.0400390625 of N(0, 0.02^2) on [-0.04, 0.04]."""
    d = TruncatedNormal(0.0, 0.02, -0.04, 0.04)
    law = rounded_law(d, torch.bfloat16)
    assert law.rn_a == -0.0400390625 and law.rn_b == 0.0400390625
    assert law.values[0] == -0.0400390625 and law.support_lo == -0.0400390625
    # its cell is [-0.0401611328125, -0.0399169921875]: only [-0.04, -0.0399169921875] is inside [a, b]
    exact = _mp_mass(-0.04, -0.0399169921875, 0.0, 0.02) / _mp_total(-0.04, 0.04, 0.0, 0.02)
    assert abs(law.atom_a / float(exact) - 1) < 1e-12
    assert f"{law.atom_a:.6g}" == "0.000235742"
    # A sampler rounding first and clamping afterwards would give it the whole cell instead.
    assert law.atom_a == law.atom_b


def test_log_probs_far_below_float64():
    """Atoms of TN(0, 1, [10, 1000]) near z = 40 weigh ~1e-326: log_probs stays exact."""
    d = TruncatedNormal(0.0, 1.0, 10.0, 1000.0)
    law = rounded_law(d, torch.bfloat16)
    lat = _torch_lattice(torch.bfloat16)
    for v in (40.0, 45.0, 10.0, 992.0):
        i = int(np.nonzero(law.values == v)[0][0])
        exact = mp.log(_mp_atom(v, lat, 10.0, 1000.0, 0.0, 1.0, law.fmt))
        assert abs(law.log_probs[i] - float(exact)) < 1e-10 * max(1.0, abs(float(exact)))
    assert np.all(np.isfinite(law.log_probs))


# ---------------------------------------------------------------------------------------- consistency
LAW_CASES = CASES + [(0.0, 1.0, 0.0, np.inf), (0.0, 1.0, 5.0, np.inf), (0.5, 1e-6, -2.0, 2.0), (0.0, 1e3, -1.0, 1.0), (400.0, 60.0, -np.inf, np.inf)]


@pytest.mark.parametrize("dtype", SUPPORTED_DTYPES, ids=str)
def test_totals_and_histogram_sum_to_one(dtype):
    for case in LAW_CASES:
        law = rounded_law(TruncatedNormal(*case), dtype)
        h = law.hist_bin_probs()
        assert h.shape == (1 << law.fmt.hist_bits,)
        assert abs(h.sum() - 1) < 1e-12, case
        if law.fmt.bits <= 16:
            assert abs(law.probs.sum() - 1) < 1e-12
            assert np.array_equal(h[law.keys.astype(np.intp)], law.probs)
            assert law.collision_prob == pytest.approx(float(np.sum(law.probs**2)), rel=1e-14)
        else:
            with pytest.raises(ValueError, match="not enumerated"):
                law.values
        assert law.atom_a == law.atom_probs(law.rn_a)
        # nothing outside [support_lo, support_hi]
        assert law.prob_lt(law.support_lo) == 0 and law.prob_gt(law.support_hi) == 0


@pytest.mark.parametrize("dtype", NARROW, ids=str)
def test_bin_probs_and_tails_agree_with_atoms(dtype):
    rng = np.random.default_rng(23)
    for case in [(0.0, 1.0, -np.inf, np.inf), (0.0, 0.02, -0.04, 0.04), (0.0, 1.0, 5.0, np.inf), (0.0, 1.0, -1.0, 1.0)]:
        law = rounded_law(TruncatedNormal(*case), dtype)
        vals, probs = law.values, law.probs
        real = ~np.isnan(vals)
        i, j = np.sort(rng.integers(0, len(vals), (2, 60)), axis=0)
        i, j = np.r_[i, 0], np.r_[j, len(vals) - 1]
        ok = real[i] & real[j]
        i, j = i[ok], j[ok]
        want = np.array([math.fsum(probs[p : q + 1]) for p, q in zip(i, j)])
        bp = law.bin_probs(vals[i], vals[j])
        assert np.allclose(bp, want, rtol=1e-12, atol=0)
        # ends are keys: [+0, +0] is the +0 atom alone, [-0, +0] both zeros
        if law.fmt.has_neg_zero and (vals == 0).sum() == 2:
            pz = probs[(vals == 0) & ~np.signbit(vals)][0]
            nz = probs[(vals == 0) & np.signbit(vals)][0]
            assert law.bin_probs(0.0, 0.0) == pz and law.bin_probs(-0.0, 0.0) == pytest.approx(pz + nz, rel=1e-15)
            assert law.prob_le(-0.0) == law.prob_le(0.0)  # values compare equal
        # tails from the right side, accurate deep in either tail (zero ends skipped: -0 == +0 as values)
        real &= np.isfinite(vals)
        v, p = vals[real], probs[real]
        right = np.cumsum(p[::-1])[::-1]  # P(Y >= v) summed from the far end
        left = np.cumsum(p)
        nz = np.nonzero(v != 0)[0][:: max(1, len(v) // 300)]
        nz_in = nz[(nz > 0) & (nz < len(v) - 1)]
        for got, want in (
            (law.prob_ge(v[nz]), right[nz]),
            (law.prob_le(v[nz]), left[nz]),
            (law.prob_gt(v[nz_in]), right[nz_in + 1]),
            (law.prob_lt(v[nz_in]), left[nz_in - 1]),
            (law.prob_le_gt(v[nz])[0], left[nz]),
            (law.prob_le_gt(v[nz_in])[1], right[nz_in + 1]),
            (law.prob_lt_ge(v[nz])[1], right[nz]),
            (law.prob_lt_ge(v[nz_in])[0], left[nz_in - 1]),
        ):
            pos = want > 1e-290
            assert np.allclose(got[pos], want[pos], rtol=1e-11, atol=0)


@pytest.mark.parametrize("dtype", SUPPORTED_DTYPES, ids=str)
def test_split_tail_pairs_equal_the_one_sided_tails(dtype):
    """prob_le_gt / prob_lt_ge compute one side and complement the other; both must keep the
    one-sided methods' relative accuracy, deep tails and NaN included."""
    for case in LAW_CASES:
        law = rounded_law(TruncatedNormal(*case), dtype)
        dist = law.dist
        qs = np.array([1e-300, 1e-30, 1e-9, 1e-3, 0.25, 0.5, 0.75, 1 - 1e-3, 1 - 1e-9])
        x = np.r_[dist.ppf(qs), dist.isf(qs), law.support_lo, law.support_hi, np.nan, -np.inf, np.inf]
        v = law.fmt.round(x[~np.isnan(x) | np.isnan(x)])
        le, gt = law.prob_le_gt(v)
        lt, ge = law.prob_lt_ge(v)
        for got, want in ((le, law.prob_le(v)), (gt, law.prob_gt(v)), (lt, law.prob_lt(v)), (ge, law.prob_ge(v))):
            assert np.array_equal(np.isnan(got), np.isnan(want)), case
            ok = ~np.isnan(want)
            assert np.allclose(got[ok], want[ok], rtol=1e-12, atol=1e-300), case


def test_bin_probs_float32_against_atom_sums():
    d = TruncatedNormal(0.0, 1.0, -2.0, 2.0)
    law = rounded_law(d, torch.float32)
    fmt = law.fmt
    v = fmt.round(np.array([-2.0, 0.3, 1.9999]))
    for start in v:
        vals = [start]
        for _ in range(999):
            vals.append(fmt.next_up(np.array([vals[-1]]))[0])
        vals = np.array(vals)
        atoms = law.atom_probs(vals)
        assert law.bin_probs(vals[0], vals[-1]) == pytest.approx(atoms.sum(), rel=1e-12)
    # the float32 histogram agrees with its bins' values
    h = law.hist_bin_probs()
    lo, hi = fmt.hist_bin_bounds()
    k = fmt.ordered_keys(np.array([0.5]))[0] >> np.uint64(12)
    assert h[k] == pytest.approx(law.bin_probs(lo[k], hi[k]), rel=1e-14)
    # a = -2 is on the lattice: its atom owns the half cell inside [a, b] (spacing above -2 is 2^-23)
    assert law.atom_a == pytest.approx(float(d.prob(-2.0, -2.0 + 2.0**-24)), rel=1e-13)


def test_bound_on_a_midpoint_and_zero_cells():
    fmt = float_format(torch.bfloat16)
    mid = 1.0 + 2.0**-8  # midpoint of 1 (even) and 1 + 2^-7: RN(a) = 1 gets the single point a only
    law = rounded_law(TruncatedNormal(0.0, 1.0, mid, 3.0), torch.bfloat16)
    assert law.rn_a == 1.0 and law.atom_a == 0.0 and law.support_lo == fmt.next_up(np.array([1.0]))[0]
    law = rounded_law(TruncatedNormal(0.0, 1.0, -1.0, 1.0), torch.bfloat16)
    zeros = law.values == 0
    assert zeros.sum() == 2 and np.signbit(law.values[zeros][0])  # -0 first in key order
    # torch's zero of the fnuz formats is unsigned: one zero atom with the whole cell
    law = rounded_law(TruncatedNormal(0.0, 1.0, -1.0, 1.0), torch.float8_e4m3fnuz)
    assert (law.values == 0).sum() == 1


def test_overflow_rules():
    # float8_e4m3fn saturates: 448 takes everything above 432
    d = TruncatedNormal(400.0, 60.0, -np.inf, np.inf)
    law = rounded_law(d, torch.float8_e4m3fn)
    assert law.values[-1] == 448.0 and law.probs[-1] == pytest.approx(float(d.prob(432.0, np.inf)), rel=1e-13)
    # float8_e5m2 overflows to inf beyond 61440
    law = rounded_law(TruncatedNormal(60000.0, 1000.0, -np.inf, np.inf), torch.float8_e5m2)
    assert law.values[-1] == np.inf and law.probs[-1] == pytest.approx(float(law.dist.prob(61440.0, np.inf)), rel=1e-13)
    assert np.isnan(law.mean)
    # fnuz: overflow becomes the single NaN pattern, fed by both tails
    d = TruncatedNormal(0.0, 200.0, -np.inf, np.inf)
    law = rounded_law(d, torch.float8_e4m3fnuz)
    nan_p = law.probs[np.isnan(law.values)]
    assert nan_p.size == 1 and nan_p[0] == pytest.approx(2 * float(d.prob(248.0, np.inf)), rel=1e-13)


def test_sheppard_bf16_small_std():
    """bf16 at std comparable to its spacing: var(Y) = var(X) + h^2/12 and mu4(Y) = mu4 + h^2 var/2 +
    h^4/80 (the moments of X + U, U uniform on a cell), exact up to exp(-2 pi^2 var / h^2) for a normal law on a uniform lattice."""
    sigma, h = 0.05, 2.0**-7  # all the mass sits in [1, 2), where bf16's spacing is 2^-7
    law = rounded_law(TruncatedNormal(1.5, sigma, 1.1, 1.9), torch.bfloat16)
    # truncation at +-8 sigma changes var by < 1e-12 relative: compare with the continuous law
    var_x = law.dist.var
    assert law.mean == pytest.approx(1.5, abs=1e-15)
    assert law.var == pytest.approx(var_x + h * h / 12, rel=1e-11)
    assert law.var / var_x - 1 > 5e-4  # far beyond sampling error at n = 2^27
    mu4 = law.dist.central_moment(4)
    assert law.central_moment(4) == pytest.approx(mu4 + h * h * var_x / 2 + h**4 / 80, rel=1e-10)
    # the ViT case: at std 0.02 bf16's Sheppard effect is 1e-6 relative, still not zero
    law = rounded_law(TruncatedNormal(0.0, 0.02, -0.04, 0.04), torch.bfloat16)
    assert law.std != law.dist.std and abs(law.std / law.dist.std - 1) < 1e-5


def test_float32_moments_and_collisions():
    # tiny std around 0.5: float32 spacing is 0.06 sigma -> enumerated, Sheppard visible
    law = rounded_law(TruncatedNormal(0.5, 1e-6, 0.5 - 2e-6, 0.5 + 2e-6), torch.float32)
    assert law.moments_from_atoms
    assert law.var / law.dist.var - 1 > 1e-4
    # N(0, 1) on [-2, 2]: 2^31 atoms; continuous moments with a negligible Sheppard bound
    law = rounded_law(TruncatedNormal(0.0, 1.0, -2.0, 2.0), torch.float32)
    assert not law.moments_from_atoms and law.sheppard_bound < 1e-12
    assert law.var == law.dist.var
    # the bin-integral collision probability against exact atoms, where both are available
    law = rounded_law(TruncatedNormal(0.5, 1e-4, 0.5 - 4e-4, 0.5 + 4e-4), torch.float32)
    assert law.moments_from_atoms
    assert law.collision_from_bins() == pytest.approx(law.collision_prob, rel=1e-6)


def test_torch_rounding_variant():
    d = TruncatedNormal(0.0, 0.02, -0.04, 0.04)
    rn, tr = rounded_law(d, torch.bfloat16), rounded_law(d, torch.bfloat16, rounding="torch")
    assert np.array_equal(rn.values, tr.values)
    assert abs(tr.probs.sum() - 1) < 1e-12
    rel = np.abs(tr.probs / rn.probs - 1)
    # double rounding moves 2^-17 of a cell at each edge, both edges the same way: 2^-16 per atom
    assert rel[1:-1].max() == pytest.approx(2.0**-16, rel=1e-3)


def test_speed_smoke():
    """Not a benchmark (see benchmarks/reference_speed.py): just that nothing is pathologically slow."""
    import time

    t = time.perf_counter()
    rounded_law(TruncatedNormal(0.0, 1.0, -np.inf, np.inf), torch.bfloat16).probs
    rounded_law(TruncatedNormal(0.1, 1.0, -2.0, 2.0), torch.float32).hist_bin_probs()
    # about a pathology (a quadratic path, a hang), not speed: ~0.4 s cold, measured with a load
    # of 8 on 2 cores; a bound near the usual time would fail on a busy CI runner
    assert time.perf_counter() - t < 60


def test_float32_fast_paths_equal_integer_paths():
    """float32 encode/decode use numpy's hardware casts; the integer RN path is the reference."""
    fmt = float_format(torch.float32)
    rng = np.random.default_rng(29)
    x = rng.standard_normal(500_000) * np.exp(rng.uniform(-110, 110, 500_000))
    x = np.concatenate([x, [0.0, -0.0, np.inf, -np.inf, 1e-46, -1e-46, 3.5e38, -3.5e38]])
    assert np.array_equal(fmt.encode(x), fmt.encode_int(x))
    u = rng.integers(0, 2**32, 500_000, dtype=np.uint64)
    assert _same(fmt.decode(u), fmt.decode_int(u)).all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("case", [(0.0, 1.0, 8.0, 8.01), (0.0, 1.0, -8.01, -8.0),
                                  (0.0, 1.0, 0.3, 0.30001), (100.0, 1.0, 98.0, 102.0)])
def test_fine_bins_cover_the_support_and_carry_its_mass(case, dtype):
    law = rounded_law(TruncatedNormal(*case), dtype)
    fb = law.fine_bins
    assert fb is not None and 1 <= fb.n_bins <= 1 << 16
    lo, hi = law.fine_bin_bounds()
    assert lo[0] == law.support_lo and hi[-1] >= law.support_hi
    assert np.all(lo[1:] > hi[:-1]) and np.all(law.fmt.next_up(hi[:-1]) == lo[1:])  # contiguous
    p = law.fine_bin_probs()
    assert abs(math.fsum(p) - 1.0) < 1e-12
    # each fine bin's mass is the law's mass of that value range, summed atom by atom where the
    # bins hold single values (shift 0), and via bin_probs otherwise (tested elsewhere)
    if fb.shift == 0:
        assert np.allclose(p, law.atom_probs(lo), rtol=1e-12, atol=0)
    # the main histogram is too coarse here: that is why the fine bins exist
    assert np.count_nonzero(law.hist_bin_probs() > 0) < 256


# float64 windows a few to a few thousand values wide, far out in a tail (points the explorer
# drew, harness.explore): float64 cannot hold its own midpoints, and measuring cells from an
# absolute 0 gave every odd-mantissa value mass 0 and its even neighbours twice their share.
FLOAT64_FEW_VALUES = [
    (-1366.0998553781576, 3.107280308165485e-06, -1366.0997512053398, -1366.0997512052993),  # 179, +33.5 sd
    (18.450710126655885, 1.6583311718178477e-08, 18.4507097226065, 18.450709722606625),  # 36, -24.4 sd
    (-793.0042982758746, 2.7044524650059517e-08, -793.0042980034644, -793.0042980032503),  # 1879, +10 sd
]


def _exact_cell(v: float) -> tuple:
    """The rounding cell of float64 v, its midpoints exact (54 bits)."""
    with mp.workprec(120):
        lo = (mp.mpf(float(np.nextafter(v, -np.inf))) + mp.mpf(float(v))) / 2
        hi = (mp.mpf(float(v)) + mp.mpf(float(np.nextafter(v, np.inf)))) / 2
    return lo, hi


@pytest.mark.parametrize("case", FLOAT64_FEW_VALUES, ids=str)
def test_float64_atoms_of_a_narrow_window_match_mpmath_over_exact_cells(case):
    from reference.oracle import Oracle

    law = rounded_law(TruncatedNormal(*case), torch.float64)
    fmt = law.fmt
    k0, k1 = (int(k) for k in fmt.ordered_keys(np.array([law.support_lo, law.support_hi])))
    values = fmt.values_from_keys(np.arange(k0, k1 + 1, dtype=np.uint64))
    probs = law.atom_probs(values)
    assert np.all(probs > 0), "every value of the window has a cell, odd mantissas included"
    assert abs(math.fsum(probs) - 1.0) < 1e-12
    oracle = Oracle(*case, dps=40)
    rng = np.random.default_rng(5)
    pick = sorted({0, 1, len(values) - 2, len(values) - 1}
                  | set(rng.choice(len(values), min(40, len(values)), replace=False).tolist()))
    worst = max(abs(float(probs[i] / oracle.prob(*_exact_cell(values[i]))) - 1.0) for i in pick)
    assert worst < 1e-11, worst
    # The moments from these atoms: a mean a few ulps wide keeps its digits (mean_offset), the
    # skewness is the atoms' own (not that of offsets from a mean rounded by half an ulp).
    if len(values) <= 200:
        with mp.workdps(40):
            p = [oracle.prob(*_exact_cell(v)) for v in values]
            x = [mp.mpf(float(v)) - mp.mpf(float(values[0])) for v in values]
            mean = mp.fsum(pi * xi for pi, xi in zip(p, x))
            m2 = mp.fsum(pi * (xi - mean) ** 2 for pi, xi in zip(p, x))
            m3 = mp.fsum(pi * (xi - mean) ** 3 for pi, xi in zip(p, x))
            skew = float(m3 / m2 ** mp.mpf(1.5))
        assert law.mean_offset(values[0]) == pytest.approx(float(mean), rel=1e-9)
        assert law.var == pytest.approx(float(m2), rel=1e-9)
        assert abs(law.skewness - skew) < 1e-6


def test_fine_bins_of_a_half_infinite_narrow_law_span_its_mass_only():
    """a = -inf: the support reaches -max_float, the mass a few std below b. Fine bins over the
    whole support were 2**48 keys wide and overflowed the engine's int64 key offsets."""
    law = rounded_law(TruncatedNormal(3.176695668485366, 4.548854358186189e-06, -math.inf,
                                      3.176684483284724), torch.float64)
    fb = law.fine_bins
    assert fb is not None and fb.shift <= 32
    lo, hi = law.fine_bin_bounds()
    assert lo[0] > 3.17 and hi[-1] >= law.support_hi
    assert abs(math.fsum(law.fine_bin_probs()) - 1.0) < 1e-12
