"""How far a sample's values are from the law, as effect sizes with confidence bounds: the figures
the level is decided from (`harness.diagnosis.grading.levels`).

Each figure has a point estimate and a two-sided interval [lo, hi] that holds the candidate's true
figure with probability >= 1 - `DELTA` (1e-6) per figure. "True" is about the candidate's own law
pushed onto the same cells of sigma / 64 the severity figures use
(`harness.diagnosis.grading.severity.LawCells`; z = (x - mean) / sigma, sigma the law's std), so
the figure a bound holds is the same at every n: a level decided from the bounds does not drift
with n, where a level decided from noise floors did.

* ``moved_<d>`` (d in `MOVED_LADDER`, written 0p25 for 0.25): the share of the values the monotone
  coupling (quantile u of the candidate to quantile u of the law, the optimal transport on the
  line) moves by d sigma or more. Bounds from the DKW band (Massart): with
  e = sqrt(ln(2 / delta) / (2 n)), the candidate's quantile G^-1(u) lies in
  [G_n^-1(u - e), G_n^-1(u + e)] for every u at once, where u - e < 0 (u + e > 1) reads the lowest
  (highest) z of the law's support or of the observed cells, whichever is further. lo: the share of
  u whose whole interval is d or more from F^-1(u); hi: the share whose farthest end is. One event
  holds every rung. d is compared with a relative tolerance `STEP_TOLERANCE`, so a lattice step of
  exactly d counts.
* ``tail_<k>`` (k in `TAIL_LADDER`): the share of the values beyond k sigma (cells whose middle
  is beyond) minus the law's share, signed; Clopper-Pearson bounds on the count.
* ``far``: values beyond `FAR_SIGMA` sigma more than the law gives, per `LARGE` values (a large
  embedding), where the law gives fewer than `FAR_LAW_EXPECTED` of them in such a tensor (NaN
  elsewhere); Clopper-Pearson bounds times LARGE.
* ``mean_off`` (sigma, signed): the mean from the moments family's power sums (the values' own
  sums; the cells where the Summary has none) against the law's; empirical Bernstein bounds
  (Maurer & Pontil 2009, Thm 4, delta / 2 a side) with range R the z width of the law's support
  [RN(a), RN(b)] (where that is infinite, the cells n draws reach but with probability delta / 2)
  or of the observed values, whichever is wider.
* ``std_off`` (relative, signed) and ``std_off_lo``: the std ratio minus 1, and a lower bound of
  its size |ratio - 1| (Maurer & Pontil 2009, Thm 10: |sqrt(V_n) - s| <= R sqrt(2 ln(2 / delta) /
  (n - 1))). No useful upper bound exists where R is wide (the trap's support is 200 sigma).
* ``w1_lo``: a lower bound of the Wasserstein-1 distance in sigma (the point is severity's
  ``w1_sigma``): |G - F| >= |G_n - F| - e on the DKW event, so W1 >= sum (|G_n - F| - e)+ dz.
* ``nonfinite``, ``off_support``: counts of NaN and infinite values and of finite values outside
  [RN(a), RN(b)] (the support family's), exact; NaN where the law itself has such values.
* dependence, where the Summary holds the family: ``dep_r``, the largest |r| of the lag-1
  correlations (independence), Fisher's interval at delta / (2 m) a side over m components
  (asymptotic: the pairs of a lag overlap); ``equal_successive`` (elements equal to the same
  element of the previous call), ``duplicate_rows``, ``repeated_windows`` (repetition's equal
  32-element windows, each window counted once) and ``equal_values`` (collisions: the chance two
  values are equal), each the observed share minus what the law gives (the law's collision rate
  as `harness.families.independence.collision_rates` takes it), Clopper-Pearson bounds
  (``equal_values``: on the pair count divided by its dispersion, `resolution.pair_law` with
  sum p^3 at its largest for the observed sum p^2: approximate).

Every figure is a few vectorized passes over the cells; no value is drawn.

May import: `harness.families` (the states, the bins), `harness.engine` (the scale), the floors
below them, `.severity` (the cells) and `.thresholds` (the ladders).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from ...engine import standard_scale
from ...families import independence, moments, repetition, resolution, support
from ...families.common import LawBins
from .severity import CELLS_PER_SIGMA, DELTA, LawCells, cdf_gap, reach
from .thresholds import LARGE, MOVED_LADDER, TAIL_LADDER

#: A displacement within this relative distance below d counts as d (a lattice step of exactly
#: d sigma, whose z differences carry float rounding).
STEP_TOLERANCE = 1e-9
#: Far values: beyond this many sigma ...
FAR_SIGMA = 10
#: ... where the law gives fewer than this many values in a LARGE tensor.
FAR_LAW_EXPECTED = 1e-3
#: Shares below this are float rounding of cumulative masses, not values.
NO_SHARE = 1e-12


def rung_name(step: float) -> str:
    """'0p25' for 0.25, '2' for 2.0: a ladder step as a column name takes it."""
    return f"{step:g}".replace(".", "p")


MOVED_NAMES = tuple(f"moved_{rung_name(d)}" for d in MOVED_LADDER)
TAIL_NAMES = tuple(f"tail_{k}" for k in TAIL_LADDER)
#: Figures with a point and two bounds (columns <name>, <name>_lo, <name>_hi).
BOUNDED = (*MOVED_NAMES, *TAIL_NAMES, "far", "mean_off", "dep_r", "equal_successive",
           "duplicate_rows", "repeated_windows", "equal_values")
#: Every name `effects` returns.
NAMES = (*(f"{name}{end}" for name in BOUNDED for end in ("", "_lo", "_hi")), "std_off",
         "std_off_lo", "w1_lo", "nonfinite", "off_support")


def interval(point: float, lo: float, hi: float, name: str) -> dict:
    return {name: float(point), f"{name}_lo": float(lo), f"{name}_hi": float(hi)}


def clopper_pearson(k: float, n: float, delta: float = DELTA) -> tuple[float, float]:
    """Bounds of a binomial rate from k of n, each side failing with probability delta / 2."""
    if n <= 0:
        return 0.0, 1.0
    lo = float(stats.beta.ppf(delta / 2, k, n - k + 1)) if k > 0 else 0.0
    hi = float(stats.beta.isf(delta / 2, k + 1, n - k)) if k < n else 1.0
    return lo, hi


def share_figure(name: str, k: float, n: float, expected: float, delta: float = DELTA) -> dict:
    """The observed share k / n minus `expected`, with Clopper-Pearson bounds."""
    if n <= 0:
        return interval(math.nan, math.nan, math.nan, name)
    lo, hi = clopper_pearson(k, n, delta)
    return interval(k / n - expected, lo - expected, hi - expected, name)


def quantiles(cdf: np.ndarray, z: np.ndarray, u: np.ndarray) -> np.ndarray:
    """z at the generalized inverse of the step CDF `cdf` (its value at the top of each cell):
    the first cell whose cdf reaches u."""
    return z[np.minimum(np.searchsorted(cdf, u, side="left"), z.size - 1)]


def moved_figures(z, p, q, n: int, z_min: float, z_max: float, delta: float = DELTA) -> dict:
    """The moved shares at every rung of MOVED_LADDER and their DKW bounds (module docstring):
    `p`, `q` the law's and the sample's shares of the cells at `z`, [z_min, z_max] where the
    candidate's values can be."""
    out = {}
    fp, fq = np.cumsum(p), np.cumsum(q)
    fp /= fp[-1]
    fq /= fq[-1]
    e = math.sqrt(math.log(2 / delta) / (2 * n))
    u = np.concatenate([fp, fq, fq - e, fq + e, [0.0, 1.0]])
    u = np.unique(u[(u >= 0) & (u <= 1)])
    width = np.diff(u)
    mid = (u[:-1] + u[1:]) / 2
    real = width > NO_SHARE
    mid, width = mid[real], width[real]
    law = quantiles(fp, z, mid)
    sample = quantiles(fq, z, mid)
    low = np.where(mid - e > 0, quantiles(fq, z, np.clip(mid - e, 0, 1)), z_min)
    high = np.where(mid + e <= 1, quantiles(fq, z, np.clip(mid + e, 0, 1)), z_max)
    point = np.abs(sample - law)
    lower = np.maximum(low - law, 0.0) + np.maximum(law - high, 0.0)
    upper = np.maximum(np.abs(low - law), np.abs(high - law))
    for d, name in zip(MOVED_LADDER, MOVED_NAMES):
        at = d * (1 - STEP_TOLERANCE)
        out.update(interval(width[point >= at].sum(), width[lower >= at].sum(),
                            width[upper >= at].sum(), name))
    return out


def w1_lower(z, p, q, n: int, delta: float = DELTA) -> float:
    """A lower bound of W1 in sigma on the DKW event (module docstring)."""
    e = math.sqrt(math.log(2 / delta) / (2 * n))
    gap = cdf_gap(p / p.sum(), q / q.sum())[:-1]
    return float(np.sum(np.maximum(np.abs(gap) - e, 0.0) * np.diff(z)))


def tail_figures(z, p, counts, n: int, delta: float = DELTA) -> dict:
    """The excess share beyond each rung of TAIL_LADDER (`p`: the law's share of all values)."""
    out = {}
    for k, name in zip(TAIL_LADDER, TAIL_NAMES):
        beyond = np.abs(z) > k
        out.update(share_figure(name, float(counts[beyond].sum()), n, float(p[beyond].sum()),
                                delta))
    return out


def far_figure(z, p, counts, n: int, delta: float = DELTA) -> dict:
    """Far values per LARGE tensor beyond the law's (NaN where the law gives them itself)."""
    beyond = np.abs(z) > FAR_SIGMA
    law_share = float(p[beyond].sum())
    if law_share * LARGE >= FAR_LAW_EXPECTED:
        return interval(math.nan, math.nan, math.nan, "far")
    f = share_figure("far", float(counts[beyond].sum()), n, law_share, delta)
    return {k: v * LARGE for k, v in f.items()}


def bernstein_width(variance: float, n: float, span: float, delta: float) -> float:
    """Half-width of the empirical Bernstein interval of a mean (Maurer & Pontil 2009, Thm 4,
    delta / 2 a side) from n values of sample variance `variance` within a range `span`."""
    t = math.log(4 / delta)
    return math.sqrt(2 * variance * t / n) + 7 * span * t / (3 * (n - 1))


def moment_figures(m1: float, var: float, n: float, law_mean: float, law_sd: float,
                   span: float, delta: float = DELTA) -> dict:
    """mean_off and std_off with their bounds (module docstring): `m1`, `var` the sample's mean
    and unbiased variance in z, the law's mean and sd in z, `span` the range R in z."""
    if n < 2 or not (law_sd > 0) or not math.isfinite(span):
        return {**interval(math.nan, math.nan, math.nan, "mean_off"), "std_off": math.nan,
                "std_off_lo": math.nan}
    w = bernstein_width(var, n, span, delta)
    out = interval((m1 - law_mean) / law_sd, (m1 - w - law_mean) / law_sd,
                   (m1 + w - law_mean) / law_sd, "mean_off")
    s = math.sqrt(max(var, 0.0))
    ws = span * math.sqrt(2 * math.log(2 / delta) / (n - 1))
    ratio_lo, ratio_hi = (s - ws) / law_sd, (s + ws) / law_sd
    out["std_off"] = s / law_sd - 1
    out["std_off_lo"] = max(ratio_lo - 1, 1 - ratio_hi, 0.0)
    return out


def sample_moments(summary, law, z, counts, n_finite: int) -> tuple[float, float, float, float]:
    """(sample mean, unbiased variance, law mean, law sd) in z of the law's scale, the means from
    one origin: from the power sums where the Summary has them (both means then measured from
    the Summary's centre, the law's without rounding E[Y] first), else from the cells (against
    the law's cells, so the cells' rounding cancels)."""
    state = summary.states.get(moments.FAMILY.name)
    sums = (np.asarray(state.power_sums, dtype=np.float64) if state is not None else None)
    if (sums is not None and np.all(np.isfinite(sums[:3])) and sums[0] >= 2
            and float(summary.scale) > 0):
        count, own = sums[0], float(summary.scale)
        unit = own / standard_scale(law)  # the sums are of (x - summary.center) / own
        m1 = sums[1] / count
        var = max(sums[2] / count - m1 * m1, 0.0) * count / (count - 1)
        law_mean = float(law.mean_offset(float(summary.center))) / own
        law_sd = math.sqrt(float(law.central_moment(2))) / own
        return m1 * unit, var * unit**2, law_mean * unit, law_sd * unit
    c = counts.astype(np.float64)
    m1 = float(np.dot(c, z)) / n_finite
    var = float(np.dot(c, (z - m1) ** 2)) / max(n_finite - 1, 1)
    return m1, var, math.nan, math.nan


def support_bounds_z(law) -> tuple[float, float]:
    """The law's support [RN(a), RN(b)] in z (infinite where a bound is)."""
    center, scale = float(law.mean), standard_scale(law)
    return (float(law.rn_a) - center) / scale, (float(law.rn_b) - center) / scale


def support_z(law, z, p, n: int, delta: float) -> tuple[float, float]:
    """The z range the candidate's values are taken to lie in: the law's support; where that is
    infinite, the cells n draws of the law reach but with probability delta / 2
    (`severity.reach`)."""
    lo, hi = support_bounds_z(law)
    i0, i1 = reach(p, n, delta)
    return (lo if math.isfinite(lo) else float(z[i0]), hi if math.isfinite(hi) else float(z[i1]))


def off_support_count(summary, law, z, counts) -> float:
    """Finite values outside [RN(a), RN(b)]: the support family's count, else the cells'."""
    if summary.states.get(support.FAMILY.name) is not None:
        return float(support.support_counts(summary)["n_outside_rounded"])
    lo, hi = support_bounds_z(law)
    half = 0.5 / CELLS_PER_SIGMA
    return float(counts[(z < lo - half) | (z > hi + half)].sum())


def effects(summary, law, delta: float = DELTA) -> dict:
    """The effect figures of one Summary against its law (`NAMES`, module docstring), each bound
    failing with probability at most `delta`."""
    out = dict.fromkeys(NAMES, math.nan)
    cells = LawCells.of(law)
    per_cell, nonfinite = cells.cell_counts(LawBins.of(law).counts(summary))
    n_finite = int(per_cell.sum())
    n = n_finite + nonfinite
    if n == 0 or cells.z.size == 0:
        return out
    if cells.nonfinite_mass == 0:
        out["nonfinite"] = float(nonfinite)
    keep = (cells.probs > 0) | (per_cell > 0)
    z, p, c = cells.z[keep], cells.probs[keep], per_cell[keep]
    out["off_support"] = off_support_count(summary, law, z, c)
    out.update(tail_figures(z, p, c, n, delta))
    out.update(far_figure(z, p, c, n, delta))
    out.update(dependence_figures(summary, law, delta))
    if n_finite < 2 or p.sum() <= 0:
        return out
    pf, q = p / p.sum(), c / n_finite
    lo, hi = support_z(law, z, pf, n_finite, delta)
    seen = z[c > 0]
    half = 0.5 / CELLS_PER_SIGMA
    z_min, z_max = min(lo, float(seen[0]) - half), max(hi, float(seen[-1]) + half)
    out.update(moved_figures(z, pf, q, n_finite, z_min, z_max, delta))
    out["w1_lo"] = w1_lower(z, pf, q, n_finite, delta)
    m1, var, law_mean, law_sd = sample_moments(summary, law, z, c, n_finite)
    if math.isnan(law_mean):
        law_mean = float(np.dot(pf, z))
        law_sd = math.sqrt(float(np.dot(pf, (z - law_mean) ** 2)))
    out.update(moment_figures(m1, var, n_finite, law_mean, law_sd, z_max - z_min, delta))
    return out


# -- dependence --------------------------------------------------------------------------------

def lag_sums(sums) -> independence.LagSums:
    return sums if isinstance(sums, independence.LagSums) else independence.LagSums(**sums)


def correlation_figure(state, delta: float = DELTA) -> dict:
    """The largest |r| over the lag-1 components and Fisher's bounds of each |r|."""
    comps = [lag_sums(s) for _, s in sorted(state.lag1.items())] + [lag_sums(state.successive)]
    found = [(s.correlation(), s.count) for s in comps if s.count > 3]
    found = [(r, m) for r, m in found if math.isfinite(r)]
    if not found:
        return interval(math.nan, math.nan, math.nan, "dep_r")
    zc = float(stats.norm.isf(delta / (2 * len(found))))
    points, los, his = [], [], []
    for r, m in found:
        centre = math.atanh(max(min(r, 1 - 1e-15), -1 + 1e-15))
        a, b = math.tanh(centre - zc / math.sqrt(m - 3)), math.tanh(centre + zc / math.sqrt(m - 3))
        points.append(abs(r))
        los.append(0.0 if a <= 0 <= b else min(abs(a), abs(b)))
        his.append(max(abs(a), abs(b)))
    return interval(max(points), max(los), max(his), "dep_r")


def dependence_figures(summary, law, delta: float = DELTA) -> dict:
    """The dependence figures the Summary's families allow (module docstring); NaN elsewhere."""
    out = {}
    state = summary.states.get(independence.FAMILY.name)
    if state is not None:
        out.update(correlation_figure(state, delta))
        q = independence.collision_rates(summary, law)[0]
        out.update(share_figure("equal_successive", int(state.n_equal_successive),
                                int(state.n_pairs_successive), q, delta))
        rows = int(state.n_rows_compared)
        shape = tuple(summary.shape)
        per_call = math.prod(shape[:-1]) if len(shape) >= 2 else 1
        m = int(summary.row_len)
        expected = 0.0
        if rows and per_call >= 2 and m >= 2 and 0 < q < 1:
            expected = min(1.0, (per_call - 1) / 2 * math.exp(m * math.log(q)))
        out.update(share_figure("duplicate_rows", int(state.n_duplicate_rows), rows, expected,
                                delta))
    state = summary.states.get(repetition.FAMILY.name)
    if state is not None and state.windows > 0 and state.pairs > 0:
        windows = int(state.windows)
        expected = repetition.repetition_expected(summary, law) / windows
        out.update(share_figure("repeated_windows", min(int(state.equal), windows), windows,
                                min(expected, 1.0), delta))
    state = summary.states.get(resolution.FAMILY.name)
    if state is not None and float(state.collision_compared) > 0:
        compared, triples = float(state.collision_compared), float(state.collision_triples)
        pairs = int(state.collision_pairs)
        # the pair count's dispersion under the candidate's own law, whose sum p^3 is at most
        # (sum p^2)^1.5: the larger of that and the law's own
        q2 = max(pairs / compared, float(law.collision_prob))
        _, dispersion = resolution.pair_law(compared, triples, q2, q2**1.5)
        out.update(share_figure("equal_values", pairs / dispersion, compared / dispersion,
                                float(law.collision_prob), delta))
    return out
