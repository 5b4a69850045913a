"""The statistical checks: they do not cry wolf on exact samples, and they catch known defects.

Samples are drawn here (exact inverse CDF in float64, one RN into the dtype) and folded by the
engine's `summarize_samples`; no candidate is involved. Sizes are small (n <= 2^20) so the file runs
in about a minute on one core.
"""

from __future__ import annotations

import functools
import math
import warnings

import numpy as np
import pytest
import torch
from scipy import stats

from harness.checks.statistical import CHECK_DOCS, STATISTICAL_CHECKS, check_mdes
from harness.engine import summarize_samples
from harness.result import Outcome
from harness.summary import LagSums, Summary
from reference import TruncatedNormal, rounded_law

INF = math.inf
ALPHA = 1e-3


@functools.lru_cache(maxsize=None)
def law_of(mean, std, a, b, dtype):
    return rounded_law(TruncatedNormal(mean, std, a, b), dtype)


def draw(law, n: int, rng: np.random.Generator, dtype) -> np.ndarray:
    """n exact draws of the rounded law as float64 values (exact X, one RN into dtype)."""
    with np.errstate(invalid="ignore"):  # the reference's ppf computes inf + x on infinite bounds
        return law.fmt.round(law.dist.ppf(rng.random(n)))


def summarize(law, values: np.ndarray, shape: tuple, dtype) -> Summary:
    x = torch.from_numpy(np.ascontiguousarray(values, dtype=np.float64)).to(dtype)
    return summarize_samples(x.reshape(-1, *shape), law, shape)


def run_all(summary, law) -> dict:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return {name: fn(summary, law, alpha=ALPHA) for name, fn in STATISTICAL_CHECKS.items()}


def assert_sane(out: Outcome) -> None:
    assert isinstance(out, Outcome)
    assert 0.0 <= out.p_value <= 1.0 and not math.isnan(out.p_value)
    assert isinstance(out.message, str) and out.message and "\n" not in out.message
    if out.decisive:
        assert out.p_value == 0.0


# ----------------------------------------------------------------------------------- interface


def test_registry_and_docs():
    assert list(STATISTICAL_CHECKS) == ["gof", "ks", "atoms", "tails", "moments", "extremes",
                                        "independence", "spikes", "scan"]
    assert set(CHECK_DOCS) == set(STATISTICAL_CHECKS)
    for text in CHECK_DOCS.values():
        assert "MDE" in text and "alpha" in text and len(text) > 200


# ------------------------------------------------------------------------- no crying wolf

# (law parameters, dtype, shape, calls): one call = one tensor; 50 seeds each.
CALIBRATION = [
    ((0.0, 1.0, -2.0, 2.0), torch.bfloat16, (32, 64), 16),  # coarse lattice, atoms at the bounds
    ((0.0, 1.0, -INF, INF), torch.float32, (32, 64), 16),  # untruncated, 2^20 bins
    ((0.0, 1.0, 0.0, INF), torch.float16, (16, 128), 16),  # half-normal, bound at the mode
]
SEEDS = 50


@functools.lru_cache(maxsize=None)
def calibration_outcomes(index: int):
    params, dtype, shape, calls = CALIBRATION[index]
    law = law_of(*params, dtype)
    n = calls * math.prod(shape)
    rows = []
    for seed in range(SEEDS):
        rng = np.random.default_rng([20240601, index, seed])
        s = summarize(law, draw(law, n, rng, dtype), shape, dtype)
        rows.append(run_all(s, law))
    return rows


@pytest.mark.parametrize("index", range(len(CALIBRATION)), ids=lambda i: str(CALIBRATION[i][1]))
def test_exact_samples_rarely_suspicious(index):
    rows = calibration_outcomes(index)
    for name in STATISTICAL_CHECKS:
        outs = [r[name] for r in rows]
        for o in outs:
            assert_sane(o)
            assert not o.decisive, (name, o.message)
        ps = np.array([o.p_value for o in outs if o.applicable])
        # rate <= 1e-3 per check: P(>= 3 of 50) < 2e-5
        assert np.sum(ps < ALPHA) <= 2, (name, np.sort(ps)[:5])
        # combined p-values are valid (super-uniform): not too many below 0.05 (P(>= 10 of 50) < 1e-3)
        assert np.sum(ps < 0.05) <= 9, (name, np.sort(ps)[:12])


def _component_pvalues(rows, name):
    """p-values of the continuous statistics (before any Bonferroni min), one list per component."""
    outs = [r[name] for r in rows]
    if name == "gof":
        return {"chi2": [o.p_value for o in outs]}
    if name == "moments":
        return {c: [o.details[f"p_{c}"] for o in outs]
                for c in ("mean", "std", "skewness", "kurtosis")}
    if name == "extremes":
        return {c: [o.details[c] for o in outs] for c in ("p_ks_min", "p_ks_max")}
    if name == "independence":
        keys = [k for k in outs[0].details if k.startswith("p[lag-1") or k == "p[successive calls]"]
        return {k: [o.details[k] for o in outs] for k in keys}
    return {}


@pytest.mark.parametrize("index", range(len(CALIBRATION)), ids=lambda i: str(CALIBRATION[i][1]))
@pytest.mark.parametrize("name", ["gof", "moments", "extremes", "independence", "ks"])
def test_pvalues_uniform(index, name):
    rows = calibration_outcomes(index)
    if name == "ks":
        if CALIBRATION[index][1] != torch.float32:
            pytest.skip("KS is conservative on a coarse lattice (p-values not uniform by design)")
        comps = {"ks": [r["ks"].p_value for r in rows]}
    else:
        comps = _component_pvalues(rows, name)
    assert comps
    for comp, ps in comps.items():
        ps = np.asarray(ps, dtype=np.float64)
        assert np.all((ps >= 0) & (ps <= 1))
        assert stats.kstest(ps, "uniform").pvalue > 1e-4, (name, comp, np.sort(ps))


# ----------------------------------------------------------------------------- power


def _exact(law, n, seed, dtype):
    return draw(law, n, np.random.default_rng(seed), dtype)


def test_gof_catches_wider_scale_and_impossible_bins():
    dtype = torch.bfloat16
    law = law_of(0.0, 1.0, -INF, INF, dtype)
    rng = np.random.default_rng(1)
    x = law.fmt.round(law.dist.ppf(rng.random(1 << 18)) * 1.05)
    out = STATISTICAL_CHECKS["gof"](summarize(law, x, (64, 64), dtype), law)
    assert out.p_value < 1e-8 and not out.decisive, out.message
    assert out.effect > out.mde
    # a value where the law has no mass (NaN, or beyond the support) is decisive
    law2 = law_of(0.0, 1.0, -2.0, 2.0, dtype)
    y = _exact(law2, 1 << 14, 2, dtype)
    y[5] = 2.5
    out = STATISTICAL_CHECKS["gof"](summarize(law2, y, (64, 64), dtype), law2)
    assert out.decisive and out.p_value == 0.0 and "2.5" in out.message


def test_ks_catches_location_shift():
    dtype = torch.float32
    law = law_of(0.0, 1.0, -INF, INF, dtype)
    x = law.fmt.round(law.dist.ppf(np.random.default_rng(3).random(1 << 18)) + 0.03)
    out = STATISTICAL_CHECKS["ks"](summarize(law, x, (64, 64), dtype), law)
    assert out.p_value < 1e-6, out.message
    assert out.mde < out.effect


def test_atoms_catch_point_mass_at_a():
    dtype = torch.bfloat16
    law = law_of(0.0, 1.0, -2.0, 2.0, dtype)
    n = 1 << 20
    rng = np.random.default_rng(4)
    x = draw(law, n, rng, dtype)
    x[rng.random(n) < 1e-4 * 3] = -2.0  # 3e-4 extra mass at RN(a) (atom ~4e-4)
    out = STATISTICAL_CHECKS["atoms"](summarize(law, x, (64, 64), dtype), law)
    assert out.p_value < 1e-6 and out.effect > 1.2, out.message
    assert "RN(a)" in out.message
    # an atom of zero mass that is hit is decisive: bounds at +-100 sigma
    law = law_of(0.0, 0.02, -2.0, 2.0, dtype)
    y = draw(law, 5000, rng, dtype)
    y[:3] = -2.0
    out = STATISTICAL_CHECKS["atoms"](summarize(law, y, (10, 500), dtype), law)
    assert out.decisive and out.p_value == 0.0


def test_atoms_not_applicable_without_finite_bounds():
    law = law_of(0.0, 1.0, -INF, INF, torch.bfloat16)
    s = summarize(law, _exact(law, 4096, 5, torch.bfloat16), (64, 64), torch.bfloat16)
    assert not STATISTICAL_CHECKS["atoms"](s, law).applicable


def test_tails_catch_cut_tails():
    dtype = torch.float32
    law = law_of(0.0, 1.0, -INF, INF, dtype)
    rng = np.random.default_rng(6)
    u = stats.norm.cdf(-3.5) + rng.random(1 << 20) * (1 - 2 * stats.norm.cdf(-3.5))
    x = law.fmt.round(stats.norm.ppf(u))  # no mass beyond 3.5 sigma
    out = STATISTICAL_CHECKS["tails"](summarize(law, x, (64, 64), dtype), law)
    assert out.p_value < 1e-8 and out.effect < 0.85, out.message
    assert out.mde > out.effect


def test_tails_catch_far_outliers():
    dtype = torch.float32
    law = law_of(0.0, 1.0, -INF, INF, dtype)
    x = _exact(law, 1 << 16, 7, dtype)
    x[:4] = -6.0  # P(X < -6) ~ 1e-9
    out = STATISTICAL_CHECKS["tails"](summarize(law, x, (64, 64), dtype), law)
    assert out.p_value < 1e-6 and out.effect > 10, out.message


def test_moments_catch_scale_and_shift_and_expect_the_laws_std():
    dtype = torch.float32
    law = law_of(0.0, 1.0, -INF, INF, dtype)
    rng = np.random.default_rng(8)
    z = law.dist.ppf(rng.random(1 << 18))
    out = STATISTICAL_CHECKS["moments"](summarize(law, law.fmt.round(z * 1.02), (64, 64), dtype), law)
    assert out.p_value < 1e-6 and "std" in out.message and abs(out.effect - 1.02) < 0.01
    z = law.dist.ppf(rng.random(1 << 20))
    out = STATISTICAL_CHECKS["moments"](summarize(law, law.fmt.round(z + 0.02), (64, 64), dtype), law)
    assert out.p_value < 1e-6 and "mean" in out.message and abs(out.effect - 0.02) < 0.005
    # +-2 sigma: the law's std is 0.88 sigma; samples of the untruncated std must fail,
    # exact ones (already in the calibration) pass
    law2 = law_of(0.0, 1.0, -2.0, 2.0, dtype)
    assert abs(law2.std - 0.87962566) < 1e-6
    u = law.dist.ppf(rng.random(1 << 16))
    out = STATISTICAL_CHECKS["moments"](summarize(law2, law.fmt.round(np.clip(u, -2, 2)), (64, 64), dtype),
                                        law2)
    assert out.p_value < 1e-6


def test_moments_mde_is_the_critical_shift():
    """A sample whose mean sits exactly MDE sigma off gets p ~ alpha (power 0.5 convention)."""
    law = law_of(0.0, 1.0, -2.0, 2.0, torch.float32)
    n = 1 << 20
    mde = check_mdes(law, n, (1024, 1024))["moments.mean"][0]
    s = Summary(dtype="float32", shape=(1024, 1024), hist_bits=20, center=law.mean, scale=law.std,
                rn_a=law.rn_a, rn_b=law.rn_b, a=-2.0, b=2.0, n=n)
    k = [law.central_moment(j) / law.std**j for j in range(5)]
    d = mde  # shift in z units (= sigma of the law): raw moments of z + d
    raw = [1.0, d, 1.0 + d * d, k[3] + 3 * d + d**3, k[4] + 4 * d * k[3] + 6 * d * d + d**4]
    s.power_sums = n * np.array(raw)
    out = STATISTICAL_CHECKS["moments"](s, law)
    assert out.details["p_mean"] * 4 == pytest.approx(ALPHA, rel=1e-6)
    assert out.effect == pytest.approx(mde, rel=1e-9)


def test_extremes_catch_rows_far_below():
    """The bf16 bug report: a 10x500 tensor at std 0.02, bounds +-2 (+-100 sigma), 9 of 10 row
    minima at -2: outside the law's numerical support, decisive."""
    dtype = torch.bfloat16
    law = law_of(0.0, 0.02, -2.0, 2.0, dtype)
    x = _exact(law, 5000, 9, dtype).reshape(10, 500)
    x[:9, 17] = -2.0
    out = STATISTICAL_CHECKS["extremes"](summarize(law, x.ravel(), (10, 500), dtype), law)
    assert out.decisive and out.p_value == 0.0 and "-100" in out.message


def test_extremes_catch_unlikely_rows_inside_the_support():
    dtype = torch.float32
    law = law_of(0.0, 1.0, -INF, INF, dtype)
    x = _exact(law, 1 << 16, 10, dtype).reshape(-1, 64)
    x[[3, 400, 800], 5] = -7.0  # legal values, P(X < -7) ~ 1.3e-12
    out = STATISTICAL_CHECKS["extremes"](summarize(law, x.ravel(), (64, 64), dtype), law)
    assert not out.decisive and out.p_value < 1e-4, out.message
    assert "row 3 " in out.message
    # many rows shifted a little: the KS part
    y = _exact(law, 1 << 16, 11, dtype).reshape(-1, 64)
    y[: y.shape[0] // 3, 0] = np.minimum(y[: y.shape[0] // 3].min(axis=1), -3.0)
    out = STATISTICAL_CHECKS["extremes"](summarize(law, y.ravel(), (64, 64), dtype), law)
    assert out.p_value < 1e-8 and out.effect > out.mde


def test_extremes_not_applicable_for_rows_of_one():
    law = law_of(0.0, 1.0, -2.0, 2.0, torch.float32)
    s = summarize(law, _exact(law, 1000, 12, torch.float32), (1,), torch.float32)
    assert not STATISTICAL_CHECKS["extremes"](s, law).applicable


def test_independence_catches_antithetic_neighbours_and_duplicates():
    dtype = torch.bfloat16
    law = law_of(0.0, 1.0, -2.0, 2.0, dtype)
    rng = np.random.default_rng(13)
    u = rng.random(1 << 16)
    u[1::2] = 1.0 - u[::2]
    out = STATISTICAL_CHECKS["independence"](summarize(law, law.fmt.round(law.dist.ppf(u)), (64, 64), dtype),
                                             law)
    assert out.p_value < 1e-10 and "dim 1" in out.message and out.effect < -0.3
    # duplicated calls: every odd call repeats the previous one
    x = _exact(law, 1 << 16, 14, dtype).reshape(-1, 64, 64)
    x[1::2] = x[::2]
    out = STATISTICAL_CHECKS["independence"](summarize(law, x.ravel(), (64, 64), dtype), law)
    assert out.p_value < 1e-10 and "successive" in out.message
    # duplicate rows inside a call
    x = _exact(law, 1 << 16, 15, dtype).reshape(-1, 64, 64)
    x[:, 1] = x[:, 0]
    out = STATISTICAL_CHECKS["independence"](summarize(law, x.ravel(), (64, 64), dtype), law)
    assert out.p_value < 1e-10
    assert out.details["p[duplicate rows]"] < 1e-10


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=str)
def test_independence_judges_dependence_not_the_marginal(dtype):
    """Clamped N(0,1) draws (4.6 % on each bound: a wrong marginal, independent elements) leave
    the equal-element rate to the other checks; 1 % of elements copied from the previous call
    (the same marginal, dependent) is caught by that very component."""
    law = law_of(0.0, 1.0, -2.0, 2.0, dtype)
    rng = np.random.default_rng(21)
    n = 1 << 18
    clamped = law.fmt.round(np.clip(rng.standard_normal(n), -2.0, 2.0))
    out = STATISTICAL_CHECKS["independence"](summarize(law, clamped, (64, 64), dtype), law)
    assert out.p_value > ALPHA, out.message
    assert out.details["p[equal elements in successive calls]"] > ALPHA
    assert STATISTICAL_CHECKS["atoms"](summarize(law, clamped, (64, 64), dtype), law).p_value == 0
    copied = clamped.reshape(-1, 4096).copy()
    repeat = rng.random(copied[1:].shape) < 0.01
    copied[1:][repeat] = copied[:-1][repeat]
    out = STATISTICAL_CHECKS["independence"](summarize(law, copied.ravel(), (64, 64), dtype), law)
    assert out.details["p[equal elements in successive calls]"] < 1e-10, out.message


# ------------------------------------------------------------------- degenerate inputs
def test_correlations_of_a_nearly_constant_output_are_undefined_not_rounding_noise():
    """0.3 everywhere but three elements: the true lag-1 r is ~0, while float32 block sums put
    their rounding noise (r ~ 0.85 before the guard) in a variance of ~1e-10."""
    law = law_of(0.0, 1.0, -2.0, 2.0, torch.float32)
    v = np.full(1 << 16, 0.3)
    v[[5, 999, 40000]] = 0.31
    s = summarize(law, v, (64, 64), torch.float32)
    assert all(math.isnan(ls.correlation()) for ls in s.lag1.values())
    assert math.isnan(s.successive.correlation())
    out = STATISTICAL_CHECKS["independence"](s, law)
    assert "lag-1" not in out.message and "r " not in out.message.split("worst: ")[1][:20]



def _empty_summary(law, dtype_name="bfloat16", hist_bits=16, shape=(4, 4)):
    return Summary(dtype=dtype_name, shape=shape, hist_bits=hist_bits, center=law.mean,
                   scale=law.std if law.std > 0 else law.dist.std, rn_a=law.rn_a, rn_b=law.rn_b,
                   a=law.dist.a, b=law.dist.b, row_len=shape[-1])


def test_no_samples():
    law = law_of(0.0, 1.0, -2.0, 2.0, torch.bfloat16)
    outs = run_all(_empty_summary(law), law)
    for name, o in outs.items():
        assert_sane(o)
        assert not o.decisive


def test_single_atom_law():
    """[0.3, 0.30001] is narrower than one bf16 ulp: all mass on one atom."""
    dtype = torch.bfloat16
    law = law_of(0.0, 1.0, 0.3, 0.30001, dtype)
    assert law.std == 0
    s = summarize(law, _exact(law, 1 << 12, 16, dtype), (64, 64), dtype)
    outs = run_all(s, law)
    for name, o in outs.items():
        assert_sane(o)
        assert not o.decisive and o.p_value >= 1e-3, (name, o.message)
    assert not outs["moments"].applicable
    assert not outs["gof"].applicable


def test_huge_n_synthetic():
    """n = 2^30 from the exact expected histogram: no warnings, no NaN, nothing suspicious."""
    dtype = torch.bfloat16
    law = law_of(0.0, 1.0, -2.0, 2.0, dtype)
    n = 1 << 30
    s = _empty_summary(law, shape=(1 << 15, 1 << 15))
    probs = law.hist_bin_probs()
    # cumulative rounding: every run of bins within one count of its expectation (flooring each
    # bin would empty the thousands of tiny-mass bins near 0, a hole the scan rightly finds)
    edges = np.round(np.cumsum(probs) / probs.sum() * n).astype(np.int64)
    hist = np.diff(edges, prepend=0)
    s.hist, s.n, s.n_calls = hist, n, 1
    s.n_at_rn_a = int(round(law.atom_a * n))
    s.n_at_rn_b = int(round(law.atom_b * n))
    k = [law.central_moment(j) / s.scale**j for j in range(5)]
    s.power_sums = n * np.array([1.0, 0.0, k[2], k[3], k[4]])
    s.lag1 = {0: LagSums(n - (1 << 15), 0.0, 0.0, n * k[2], n * k[2], 0.0)}
    outs = run_all(s, law)
    for name, o in outs.items():
        assert_sane(o)
        assert o.p_value > 0.01, (name, o.message)
        if o.applicable and name != "extremes":
            assert math.isfinite(o.mde), name


def test_mde_table():
    from harness.cases import case_by_id
    from harness.checks.power import mde_table

    df = mde_table({"smoke": 1 << 16, "pr": 1 << 22}, [case_by_id("normal-2sigma")],
                   [torch.bfloat16, "float32"])
    assert list(df.columns) == ["profile", "case", "dtype", "n", "check", "mde", "unit"]
    assert set(df["dtype"]) == {"bfloat16", "float32"}
    pr = df[(df.profile == "pr") & (df.dtype == "float32")].set_index("check")["mde"]
    smoke = df[(df.profile == "smoke") & (df.dtype == "float32")].set_index("check")["mde"]
    n = df[df.dtype == "float32"].groupby("profile")["n"].first()
    assert n["smoke"] == 2 * 256 * 256 and n["pr"] == 1 << 22  # whole calls, at least two
    # the mean-shift MDE shrinks like 1/sqrt(n)
    ratio = math.sqrt(n["smoke"] / n["pr"])
    assert pr["moments.mean"] == pytest.approx(smoke["moments.mean"] * ratio, rel=1e-6)
    assert (pr["ks"] < smoke["ks"]) and (pr["gof"] < smoke["gof"])


# ------------------------------------------------------------------------------- narrow windows
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=str)
def test_fine_bins_let_the_fit_checks_see_inside_a_narrow_window(dtype):
    """[8, 8.01] is one main-histogram bin in float64 (four in float32): without fine bins gof,
    ks and tails could not judge it. A uniform sampler on the window (the density really falls
    by 8 % across it) is caught; exact samples pass."""
    law = law_of(0.0, 1.0, 8.0, 8.01, dtype)
    assert law.fine_bins is not None
    rng = np.random.default_rng(11)
    n = 1 << 18
    good = run_all(summarize(law, draw(law, n, rng, dtype), (256,), dtype), law)
    for name in ("gof", "ks", "tails"):
        assert good[name].applicable and good[name].p_value > ALPHA, (name, good[name].message)
    uniform = law.fmt.round(rng.uniform(8.0, 8.01, n))
    bad = run_all(summarize(law, uniform, (256,), dtype), law)
    assert bad["ks"].p_value < 1e-6, bad["ks"].message
    assert "at the top of bin 8.00" in bad["ks"].message  # labels name values inside the window
    # A smooth slope spread over 10^4 bins is KS's job: chi-square's MDE at this n is above it.
    assert bad["gof"].mde > 0.023  # w of an 8 % linear slope: 0.08 / sqrt(12)


def test_fine_bins_name_samples_outside_the_window():
    law = law_of(0.0, 1.0, 8.0, 8.01, torch.float64)
    values = np.r_[draw(law, 4096, np.random.default_rng(2), torch.float64), 7.5]
    out = run_all(summarize(law, values, (1,), torch.float64), law)["gof"]
    assert out.decisive and "below 8" in out.message


# ------------------------------------------------------------------- localized defects (issue 14)

from harness.checks.stat_local import (SCREEN_Z, LocalBins, critical_excess, scan_families,  # noqa: E402
                                       spike_watch, value_masses)


def _with_spike(law, n, rng, dtype, value, rate):
    x = draw(law, n, rng, dtype)
    x[rng.random(n) < rate] = value
    return x


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16], ids=str)
def test_spikes_find_a_point_mass_the_omnibus_checks_miss(dtype):
    """An extra 3e-5 of the samples on one ordinary value (not 0, whose cell is tiny): spikes
    fails, names the value's bin, and gof does not see it at this n (float32/float64)."""
    law = law_of(0.0, 1.0, -2.0, 2.0, dtype)
    n = 1 << 20
    value = float(law.fmt.round(np.array([0.7373]))[0])
    x = _with_spike(law, n, np.random.default_rng(21), dtype, value, 3e-5)
    outs = run_all(summarize(law, x, (64, 64), dtype), law)
    sp = outs["spikes"]
    assert_sane(sp)
    if dtype == torch.bfloat16:  # one bf16 atom near 0.74 holds 1.2e-3: 3e-5 is below its MDE
        assert sp.mde > 3e-5 and sp.p_value > ALPHA, sp.message
        return
    assert sp.p_value < 1e-6 and not sp.decisive, sp.message
    assert repr(value)[:6] in sp.message
    assert 1.5e-5 < sp.effect < 6e-5 and sp.mde < 3e-5
    assert outs["gof"].p_value > ALPHA, outs["gof"].message


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_spikes_stage_two_names_the_value(dtype):
    """The watch list from stage 1 makes the engine tally the exact values of the flagged bins;
    the value-level test then names the value and prices it at its own mass."""
    law = law_of(0.0, 1.0, -2.0, 2.0, dtype)
    value = float(law.fmt.round(np.array([-1.2345]))[0])
    rng = np.random.default_rng(22)
    s1 = summarize(law, _with_spike(law, 1 << 20, rng, dtype, value, 3e-5), (64, 64), dtype)
    watch = spike_watch(s1, law)
    assert 1 <= len(watch) <= 8
    x2 = _with_spike(law, 1 << 21, rng, dtype, value, 3e-5)
    t = torch.from_numpy(x2).to(dtype).reshape(-1, 64, 64)
    s2 = summarize_samples(t, law, (64, 64), watch=watch)
    out = STATISTICAL_CHECKS["spikes"](s2, law)
    assert out.p_value < 1e-20, out.message
    assert out.message.startswith(f"value {value!r}")
    assert out.details["worst_value"] == value and out.details["worst_value_count"] > 30
    assert out.details["worst_value_mass"] == pytest.approx(value_masses(law, [value])[0])


def test_value_masses_add_up_to_the_mass_bins():
    """float64 values: width-times-density masses of all values in a small mass bin sum to the
    bin's mass (the bin's own edges are within an ulp: relative error <= 2 / values)."""
    law = law_of(0.5, 1e-6, 0.5 - 2e-6, 0.5 + 2e-6, torch.float64)  # tiny std: small bins
    mb = law.mass_bins
    j = int(np.argmax(mb.probs))
    lo, hi = mb.key_ranges([j])
    count = int(hi[0] - lo[0]) + 1
    assert count <= 1 << 20
    keys = np.arange(int(lo[0]), int(hi[0]) + 1, dtype=np.uint64)
    total = value_masses(law, law.fmt.values_from_keys(keys)).sum()
    assert total == pytest.approx(mb.probs[j], rel=4.0 / count)
    f32 = law_of(0.0, 1.0, -2.0, 2.0, torch.float32)
    v = f32.fmt.round(np.array([-2.0, -0.3, 0.0, 1.0, 2.0]))
    assert np.array_equal(value_masses(f32, v), f32.atom_probs(v))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16], ids=str)
def test_scan_finds_a_hole_and_a_narrow_bump(dtype):
    law = law_of(0.0, 1.0, -2.0, 2.0, dtype)
    n = 1 << 21
    rng = np.random.default_rng(23)
    u = rng.random(n) * (1 - 6e-5)
    u = np.where(u >= 0.6, u + 6e-5, u)  # the quantiles [0.6, 0.60006) never produced
    hole = law.fmt.round(law.dist.ppf(u))
    out = run_all(summarize(law, hole, (64, 64), dtype), law)
    if dtype == torch.bfloat16:  # the hole is inside one bf16 cell (~2e-3): it only thins it
        assert out["scan"].p_value > ALPHA and out["scan"].mde > 6e-5, out["scan"].message
        return
    assert out["scan"].p_value < 1e-8 and out["scan"].effect < -3e-5, out["scan"].message
    assert out["scan"].mde < 6e-5 and "deficit" in out["scan"].message
    assert out["gof"].p_value > ALPHA and out["ks"].p_value > ALPHA
    # a bump: 5e-5 of the samples spread uniformly over the quantiles [0.2, 0.20005)
    x = draw(law, n, rng, dtype)
    hit = rng.random(n) < 5e-5
    x[hit] = law.fmt.round(law.dist.ppf(0.2 + 5e-5 * rng.random(int(hit.sum()))))
    bump = STATISTICAL_CHECKS["scan"](summarize(law, x, (64, 64), dtype), law)
    assert bump.p_value < 1e-6 and bump.effect > 2e-5, bump.message


def test_localized_checks_pass_exact_samples_of_narrow_and_coarse_laws():
    """Fine-bin-based mass bins (narrow windows), single-value mass bins (float32 tiny std) and
    16-bit exact bins: exact samples do not cry wolf."""
    for params, dtype in [((0.0, 1.0, 8.0, 8.01), torch.float64), ((0.0, 1.0, 8.0, 8.01), torch.float32),
                          ((0.5, 1e-6, 0.5 - 2e-6, 0.5 + 2e-6), torch.float32),
                          ((100.0, 1.0, 98.0, 102.0), torch.bfloat16), ((0.0, 1.0, 5.0, INF), torch.float16)]:
        law = law_of(*params, dtype)
        for seed in range(3):
            s = summarize(law, draw(law, 1 << 18, np.random.default_rng([24, seed]), dtype), (256,), dtype)
            for name in ("spikes", "scan"):
                o = STATISTICAL_CHECKS[name](s, law)
                assert_sane(o)
                assert o.applicable and o.p_value > ALPHA, (params, dtype, name, o.message)


def test_localized_checks_are_decisive_where_the_law_has_no_mass():
    law = law_of(0.0, 1.0, -2.0, 2.0, torch.float32)
    x = draw(law, 1 << 14, np.random.default_rng(25), torch.float32)
    x[7] = 2.5
    s = summarize(law, x, (64, 64), torch.float32)
    for name in ("spikes", "scan"):
        o = STATISTICAL_CHECKS[name](s, law)
        assert o.decisive and o.p_value == 0.0 and "no mass" in o.message, o.message


def test_the_screen_never_hides_a_significant_count():
    """The checks price exactly only counts more than SCREEN_Z sd from their expectation: any
    other count's two-sided exact p is far above every Bonferroni-adjusted level (>= 1e-4 here,
    against levels below 1e-3 / (families x intervals) ~ 1e-10)."""
    n = 1 << 22
    worst = 1.0
    for lam in np.geomspace(1e-6, 1e6, 121):
        q = lam / n
        k = np.arange(max(0.0, lam - SCREEN_Z * math.sqrt(lam)) // 1, lam + SCREEN_Z * math.sqrt(lam) + 1)
        k = k[(k - lam) ** 2 <= SCREEN_Z ** 2 * lam]
        if k.size:
            from harness.checks.stat_common import binom_two_sided

            worst = min(worst, float(binom_two_sided(k, n, q).min()))
    assert worst > 1e-4, worst


def test_scan_families_cover_every_run():
    """Any run of H bins contains an interval of the family longer than H / 2 (so a hole's
    empty count is seen at more than half its expected size), for every alignment."""
    fams = scan_families(4096)
    assert all(size >= 1 for _, _, size in fams)
    for h in range(1, 600):
        for start in range(0, 64):
            best = 0
            for level, w, _ in fams:
                step, length = 1 << level, w << level
                first = -(-start // step) * step
                if first + length <= start + h:
                    best = max(best, length)
            assert best > h / 2, (h, start, best)


def test_localized_mdes_meet_the_issue_targets():
    """Point mass 1e-5 at pr and 1e-6 at nightly, hole 1e-5 at pr (normal-2sigma float32, worst
    bin for spikes, typical bins for the scan)."""
    law = law_of(0.0, 1.0, -2.0, 2.0, torch.float32)
    mdes_pr = check_mdes(law, 1 << 22, (256, 256))
    mdes_nightly = check_mdes(law, 1 << 27, (256, 256))
    assert mdes_pr["spikes"][0] < 1e-5 and mdes_nightly["spikes"][0] < 1e-6
    assert mdes_pr["scan"][0] < 1e-5
    bins = LocalBins.of(law)
    assert critical_excess(1 << 22, bins.q_max, ALPHA / bins.n_positive) == mdes_pr["spikes"][0]
