"""Accuracy of `reference.TruncatedNormal` against the mpmath oracle, in every regime of the law.

Regimes: symmetric +-k (k from 1e-9 to 40 sigma), one-sided tails [k, inf) up to k = 1e3 and their
mirrors, windows [k, k + w] with k up to 40 and w from 1e-12 to 990, the mean outside the interval,
infinite bounds, and std from 1e-30 to 1e30 with the same standardized bounds.

Error measures (TOL = 1e-12):
* probabilities, densities, even central moments, var, std: relative error;
* the mean: |error| <= TOL * std + one ulp of the mean (the mean of a 1e-12-sigma window at 10 sigma
  cannot be stored closer than its ulp);
* odd central moments and skewness: relative, or in units of std^k when they are below 1e-13 of it
  (exactly symmetric laws); excess kurtosis: relative to max(|kurtosis|, 1e-3) (it crosses zero);
* quantiles: backward error, |P(X <= ppf(p)) / p - 1| <= TOL plus what moving x by one ulp changes.

Also: SciPy's truncnorm wrong where this module is right, argument validation, the oracle's own
consistency (recurrence vs quadrature) and the README's worked number.
"""

from __future__ import annotations

import functools
import math

import mpmath
import numpy as np
import pytest
from mpmath import mpf

from reference import TruncatedNormal
from reference.oracle import Oracle

TOL = 1e-12
INF = math.inf

# id -> (mean, std, a, b)
LAWS = {
    # symmetric +-k
    "sym-1e-9": (0.0, 1.0, -1e-9, 1e-9),
    "sym-1e-4": (0.0, 1.0, -1e-4, 1e-4),
    "sym-1": (0.0, 1.0, -1.0, 1.0),
    "sym-2": (0.0, 1.0, -2.0, 2.0),
    "sym-3": (0.0, 1.0, -3.0, 3.0),
    "sym-10": (0.0, 1.0, -10.0, 10.0),
    "sym-40": (0.0, 1.0, -40.0, 40.0),
    "untruncated": (0.0, 1.0, -INF, INF),
    # one-sided tails and mirrors
    "half-normal": (0.0, 1.0, 0.0, INF),
    "right-5": (0.0, 1.0, 5.0, INF),
    "right-38": (0.0, 1.0, 38.0, INF),
    "right-1e3": (0.0, 1.0, 1000.0, INF),
    "left-1e3": (0.0, 1.0, -INF, -1000.0),
    "left-5": (0.0, 1.0, -INF, -5.0),
    "cut-left--1": (0.0, 1.0, -1.0, INF),
    "cut-right-0.5": (0.0, 1.0, -INF, 0.5),
    # windows [k, k + w]
    "win-0+1e-12": (0.0, 1.0, 0.0, 1e-12),
    "win-2+1e-6": (0.0, 1.0, 2.0, 2.000001),
    "win-40+1e-12": (0.0, 1.0, 40.0, 40.0 + 1e-12),
    "win-0.3+1e-5": (0.0, 1.0, 0.3, 0.30001),
    "win-8+0.01": (0.0, 1.0, 8.0, 8.01),
    "win-1+2": (0.0, 1.0, 1.0, 3.0),
    "win-3+1": (0.0, 1.0, 3.0, 4.0),
    "win-20+10": (0.0, 1.0, 20.0, 30.0),
    "win-39+1": (0.0, 1.0, 39.0, 40.0),
    "win-10+990": (0.0, 1.0, 10.0, 1000.0),
    "win--40-1e-12": (0.0, 1.0, -40.0 - 1e-12, -40.0),
    # mean outside the interval, lopsided windows around it
    "mu-right-of-window": (5.0, 1.0, -1.0, 0.0),
    "mu-at-b": (-10.0 + 10.0, 1.0, -10.0, 0.0),
    "mu-at-a": (-10.0, 1.0, -10.0, 0.0),
    "lopsided-[-1e-5,2]": (0.0, 1.0, -1e-5, 2.0),
    "lopsided-[-1.9,0.1]": (0.0, 1.0, -1.9, 0.1),
    "near-sym-[-3,3.001]": (0.0, 1.0, -3.0, 3.001),
    # scale: std 1e-30 .. 1e30 with the same standardized bounds; the design's practical cases
    "std-1e-30-sym-2": (0.0, 1e-30, -2e-30, 2e-30),
    "std-1e-30-win-40+1e-6": (0.0, 1e-30, 4e-29, 4.0000001e-29),
    "std-1e30-right-5": (0.0, 1e30, 5e30, INF),
    "std-1e30-sym-1e-9": (0.0, 1e30, -1e21, 1e21),
    "std-1e30-right-1e3": (0.0, 1e30, 1e33, INF),
    "init-trap-0.02-pm2": (0.0, 0.02, -2.0, 2.0),
    "vit-0.02-pm0.04": (0.0, 0.02, -0.04, 0.04),
    "tiny-std-1e-6": (0.5, 1e-6, 0.5 - 2e-6, 0.5 + 2e-6),
    "huge-std-1e3": (0.0, 1e3, -1.0, 1.0),
    "large-mean-100": (100.0, 1.0, 98.0, 102.0),
}
IDS = list(LAWS)
TAIL_PS = (1e-300, 1e-100, 1e-10, 0.3)


@functools.lru_cache(maxsize=None)
def law(name):
    return TruncatedNormal(*LAWS[name])


@functools.lru_cache(maxsize=None)
def oracle(name):
    return Oracle(*LAWS[name])


def rel(got, want):
    want = mpf(want)
    if want == 0:
        return 0.0 if got == 0 else INF
    return float(abs((mpf(float(got)) - want) / want))


@functools.lru_cache(maxsize=None)
def points(name):
    """Interior test points: the law's own quantiles at TAIL_PS in both tails (not at a bound)."""
    d = law(name)
    xs = [float(d.ppf(p)) for p in TAIL_PS] + [float(d.isf(p)) for p in TAIL_PS]
    return tuple(sorted({x for x in xs if d.a < x < d.b}))


# --------------------------------------------------------------------------------------------------
# moments


@pytest.mark.parametrize("name", IDS)
def test_mean_var_std(name):
    d, o = law(name), oracle(name)
    std = float(o.std)
    assert abs(mpf(d.mean) - o.mean) <= TOL * std + np.spacing(abs(float(o.mean))), (d.mean, o.mean)
    assert rel(d.var, o.var) <= TOL
    assert rel(d.std, o.std) <= TOL


@pytest.mark.parametrize("name", IDS)
def test_central_moments(name):
    d, o = law(name), oracle(name)
    s2 = o.central_moment(2)
    for k in range(3, 9):
        want, got = o.central_moment(k), d.central_moment(k)
        unit = s2 ** (mpf(k) / 2)
        if k % 2 and abs(want) < mpf(1e-13) * unit:
            assert float(abs(mpf(got) - want) / unit) <= TOL, (k, got, want)
        else:
            assert rel(got, want) <= TOL, (k, got, want)


@pytest.mark.parametrize("name", IDS)
def test_skewness_kurtosis(name):
    d, o = law(name), oracle(name)
    sk, ku = o.skewness, o.kurtosis
    if abs(sk) < 1e-13:
        assert abs(d.skewness - float(sk)) <= TOL
    else:
        assert rel(d.skewness, sk) <= TOL, (d.skewness, sk)
    assert float(abs(mpf(d.kurtosis) - ku)) <= TOL * max(abs(float(ku)), 1e-3), (d.kurtosis, ku)


def test_readme_std_of_two_sigma_truncation():
    """The worked number the README quotes: a +-2 sigma truncation of N(0, 1) has std 0.87962566."""
    d, o = TruncatedNormal(0.0, 1.0, -2.0, 2.0), Oracle(0.0, 1.0, -2.0, 2.0)
    assert rel(d.std, o.std) <= TOL
    assert mpmath.nstr(o.std, 12).startswith("0.87962566")
    assert round(d.std, 8) == 0.87962566


# --------------------------------------------------------------------------------------------------
# distribution functions


@pytest.mark.parametrize("name", IDS)
def test_cdf_sf_pdf(name):
    d, o = law(name), oracle(name)
    xs = np.array(points(name))
    cdf, sf, lcdf, lsf, pdf = d.cdf(xs), d.sf(xs), d.logcdf(xs), d.logsf(xs), d.pdf(xs)
    for i, x in enumerate(xs):
        oc, os_ = o.cdf(x), o.sf(x)
        assert rel(cdf[i], oc) <= TOL, ("cdf", x, cdf[i], oc)
        assert rel(sf[i], os_) <= TOL, ("sf", x, sf[i], os_)
        opdf = o.pdf(x)
        if opdf > 1e-290:  # below that the density itself is not a normal float64
            assert rel(pdf[i], opdf) <= TOL, ("pdf", x)
        lwant = mpmath.log(opdf)
        assert float(abs(mpf(d.logpdf(x)) - lwant)) <= TOL * max(1.0, abs(float(lwant))), ("logpdf", x)
        # log-tails: absolute error in the log where it is O(1) or bigger, relative near 0
        for got, want in ((lcdf[i], o.logcdf(x)), (lsf[i], o.logsf(x))):
            assert float(abs(mpf(got) - want)) <= TOL * max(1.0, abs(float(want))) and rel(got, want) <= TOL


@pytest.mark.parametrize("name", IDS)
def test_prob_of_small_and_large_windows(name):
    """P(lo <= X <= hi) for windows of 1e-12, 1e-6 and 1 sigma starting at every test point."""
    d, o = law(name), oracle(name)
    los, his = [], []
    for x in points(name):
        for w in (1e-12, 1e-6, 1.0):
            hi = x + max(w * d.scale, 4 * np.spacing(abs(x)))
            los.append(x)
            his.append(min(hi, d.b))
    los, his = np.array(los), np.array(his)
    got, lgot = d.prob(los, his), d.log_prob(los, his)
    for lo, hi, g, lg in zip(los, his, got, lgot):
        want = o.prob(lo, hi)
        assert rel(g, want) <= TOL, (lo, hi, g, want)
        lwant = mpmath.log(want)
        assert float(abs(mpf(lg) - lwant)) <= TOL * max(1.0, abs(float(lwant)))


def test_prob_conventions():
    d = TruncatedNormal(0.0, 1.0, -2.0, 2.0)
    assert d.prob(-5.0, 5.0) == 1.0
    assert d.prob(1.0, 0.5) == 0.0 and d.log_prob(1.0, 0.5) == -INF
    assert d.prob(3.0, 4.0) == 0.0
    assert d.prob(1.0, 1.0) == 0.0
    grid = d.prob(np.array([-1.0, 0.0])[:, None], np.array([0.5, 1.0, 1.5])[None, :])
    assert grid.shape == (2, 3)
    assert isinstance(d.cdf(0.0), float)
    assert d.cdf(-2.0) == 0.0 and d.cdf(2.0) == 1.0 and d.sf(2.0) == 0.0
    assert d.cdf(0.0) == pytest.approx(0.5, rel=1e-15)
    assert np.isnan(d.cdf(np.nan)) and np.isnan(d.ppf(np.nan)) and np.isnan(d.ppf(1.5))
    assert d.pdf(3.0) == 0.0 and d.pdf(-2.0) > 0.0
    assert d.ppf(0.0) == -2.0 and d.ppf(1.0) == 2.0 and d.isf(0.0) == 2.0 and d.isf(1.0) == -2.0


@pytest.mark.parametrize("name", ["win-3+1", "right-5", "lopsided-[-1.9,0.1]", "init-trap-0.02-pm2"])
def test_mirror_symmetry(name):
    mean, std, a, b = LAWS[name]
    d, m = TruncatedNormal(mean, std, a, b), TruncatedNormal(-mean, std, -b, -a)
    xs = np.array(points(name))
    np.testing.assert_array_equal(d.cdf(xs), m.sf(-xs))
    np.testing.assert_array_equal(d.ppf(np.array(TAIL_PS)), -m.isf(np.array(TAIL_PS)))
    assert d.central_moment(3) == -m.central_moment(3) and d.var == m.var


# --------------------------------------------------------------------------------------------------
# quantiles


def _backward_ok(o, x, p, tail):
    """|P(tail at x) / p - 1| <= TOL + the change one ulp of x makes (the float grid's limit)."""
    got = o.cdf(x) if tail == "lower" else o.sf(x)
    grid = o.pdf(x) / p * float(np.spacing(abs(x)))
    return abs(got / p - 1) <= TOL + 2 * grid


@pytest.mark.parametrize("name", IDS)
def test_ppf_isf_against_oracle(name):
    d, o = law(name), oracle(name)
    for p in TAIL_PS + (0.5,):
        for fn, tail in ((d.ppf, "lower"), (d.isf, "upper")):
            x = float(fn(p))
            assert d.a <= x <= d.b
            if d.a < x < d.b:
                assert _backward_ok(o, x, p, tail), (fn.__name__, p, x)
    # forward error where the quantile is an interior float
    for p in (1e-10, 0.3):
        x = float(d.ppf(p))
        if d.a < x < d.b:
            want = o.ppf(p, x0=x)
            assert float(abs(mpf(x) - want)) <= 4 * np.spacing(abs(x)) + TOL * float(o.std) * 1e-3 or _backward_ok(
                o, x, p, "lower"
            )


@pytest.mark.parametrize(
    "name", ["sym-2", "init-trap-0.02-pm2", "right-5", "win-10+990", "win-0.3+1e-5", "untruncated", "mu-at-a", "win-40+1e-12"]
)
def test_ppf_roundtrip_vectorized(name):
    """cdf(ppf(p)) == p (and sf(isf(q)) == q) on 20 000 p's, also 1e-300 deep, to TOL + grid."""
    d = law(name)
    rng = np.random.default_rng(7)
    ps = np.concatenate([10.0 ** -rng.uniform(0, 300, 10_000), rng.uniform(0, 0.5, 10_000)])
    for fn, back in ((d.ppf, d.cdf), (d.isf, d.sf)):
        x = fn(ps)
        assert np.all((x >= d.a) & (x <= d.b))
        err = np.abs(back(x) / ps - 1)
        with np.errstate(over="ignore"):
            grid = d.pdf(x) / ps * np.spacing(np.abs(x))
        assert np.all(err <= TOL + 2 * grid), (fn.__name__, ps[np.argmax(err - 2 * grid)])


# --------------------------------------------------------------------------------------------------
# order statistics


@pytest.mark.parametrize("name", ["sym-2", "right-1e3", "left-1e3", "win-40+1e-12", "init-trap-0.02-pm2", "untruncated"])
@pytest.mark.parametrize("m", [1, 1000, 1e9])
def test_min_cdf_max_sf(name, m):
    d, o = law(name), oracle(name)
    xs = np.array(points(name))
    mins, maxs = d.min_cdf(xs, m), d.max_sf(xs, m)
    for x, mn, mx in zip(xs, mins, maxs):
        assert rel(mn, o.min_cdf(x, m)) <= TOL, ("min_cdf", x)
        assert rel(mx, o.max_sf(x, m)) <= TOL, ("max_sf", x)
    if m == 1:
        np.testing.assert_allclose(mins, d.cdf(xs), rtol=1e-15)
        np.testing.assert_allclose(maxs, d.sf(xs), rtol=1e-15)


# --------------------------------------------------------------------------------------------------
# SciPy is not the reference


def test_scipy_variance_wrong_on_tiny_symmetric_window():
    stats = pytest.importorskip("scipy.stats")
    a, b = -1e-9, 1e-9
    want = Oracle(0.0, 1.0, a, b).var  # = 1e-18 / 3 to ~1e-19 relative
    ours = TruncatedNormal(0.0, 1.0, a, b).var
    with np.errstate(all="ignore"):
        theirs = float(stats.truncnorm(a, b).var())
    assert rel(ours, want) <= TOL
    assert theirs < 0 or rel(theirs, want) > 1e-3, theirs


def test_scipy_kurtosis_wrong_on_39_40():
    stats = pytest.importorskip("scipy.stats")
    want = Oracle(0.0, 1.0, 39.0, 40.0).kurtosis
    ours = TruncatedNormal(0.0, 1.0, 39.0, 40.0).kurtosis
    theirs = float(stats.truncnorm(39.0, 40.0).stats(moments="k"))
    assert rel(ours, want) <= TOL
    assert rel(theirs, want) > 1e-2, theirs


# --------------------------------------------------------------------------------------------------
# validation and the oracle itself


@pytest.mark.parametrize(
    "args, word",
    [
        ((0.0, 0.0, -1.0, 1.0), "std"),
        ((0.0, -1.0, -1.0, 1.0), "std"),
        ((0.0, INF, -1.0, 1.0), "std"),
        ((0.0, math.nan, -1.0, 1.0), "std"),
        ((INF, 1.0, -1.0, 1.0), "mean"),
        ((math.nan, 1.0, -1.0, 1.0), "mean"),
        ((0.0, 1.0, math.nan, 1.0), "a"),
        ((0.0, 1.0, -1.0, math.nan), "b"),
        ((0.0, 1.0, 1.0, 1.0), "a must be less than b"),
        ((0.0, 1.0, 2.0, 1.0), "a must be less than b"),
        ((0.0, 1.0, INF, INF), "a must be less than b"),
        ((0.0, 1.0, -INF, -INF), "a must be less than b"),
        ((0.0, "x", -1.0, 1.0), "std"),
    ],
)
def test_invalid_parameters_raise(args, word):
    with pytest.raises(ValueError, match=word):
        TruncatedNormal(*args)


def test_central_moment_order_checked():
    d = TruncatedNormal(0.0, 1.0, -2.0, 2.0)
    assert d.central_moment(0) == 1.0 and d.central_moment(1) == 0.0
    with pytest.raises(ValueError):
        d.central_moment(9)


def test_oracle_refuses_low_precision():
    with pytest.raises(ValueError, match="dps"):
        Oracle(0.0, 1.0, -2.0, 2.0, dps=29)
    assert Oracle(0.0, 1.0, -2.0, 2.0, dps=30).dps == 30


@pytest.mark.parametrize("name", ["win-1+2", "win-2+1e-6", "lopsided-[-1.9,0.1]"])
def test_oracle_recurrence_agrees_with_quadrature(name):
    """The oracle's moments (raw-moment recurrence) against an independent mpmath.quad route."""
    o = oracle(name)
    mean, std, _, _ = LAWS[name]
    centre, m2, m3, m4 = o.moments_by_quadrature()
    with mpmath.workdps(60):
        assert abs((mean + std * centre) - o.mean) <= mpf(10) ** -40 * o.std
        assert abs(m2 * std**2 / o.var - 1) <= mpf(10) ** -40
        assert abs(m3 * std**3 - o.central_moment(3)) <= mpf(10) ** -40 * o.var ** mpf(1.5)
        assert abs(m4 * std**4 / o.central_moment(4) - 1) <= mpf(10) ** -40
