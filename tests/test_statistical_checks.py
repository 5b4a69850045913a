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
                                        "independence"]
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
    hist = np.floor(probs * n).astype(np.int64)
    hist[np.argmax(hist)] += n - hist.sum()
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
    from harness.power import mde_table

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
