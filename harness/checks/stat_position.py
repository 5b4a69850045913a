"""What only the place of an element in a tensor reveals: `check_position` (whether the elements
a kernel treats apart, the first and last, the vector-loop remainders, the row ends, follow the
law of the rest of the tensor) and
`check_repetition` (a stretch of the output that appears twice: a counter that wraps, an offset
reused by the next call).

Both read counts the engine folds on the device (`harness.engine.folder`: position classes over
the law's coarse groups of equal mass, `harness.bins.position_bins`; hashes of 32-element windows
at content-defined anchors), in memory that does not grow with n.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from ..bins import position_bins
from ..result import Outcome
from ..summary import Summary
from .stat_common import bonferroni, cached_on_law, clip_p, not_applicable, quiet
from .stat_fit import gof_groups, w_mde

#: Each merged group of a class expects at least this many elements (more than gof's Cochran 5:
#: the classes are small, and the chi-square approximation must hold at the p-values that fail).
POSITION_MIN_EXPECTED = 10.0
#: A repetition test is made only where the law's own expected number of equal windows is below
#: this (a law of a few values has equal windows by chance).
REPEAT_MAX_EXPECTED = 1e-2


def _bins(law):
    return cached_on_law(law, "_position_bins", position_bins)


def group_totals(summary: Summary, law, edges: np.ndarray, groups: int) -> np.ndarray:
    """Elements of the whole draw in each coarse group (`position_bins`), from the Summary's
    histogram: every histogram bin (a fine bin for a narrow law) lies inside one group, the group
    of its largest value (edges fall on bin boundaries). Bins without a finite value (NaN, inf)
    go to the first or last group by their side, as the engine's searchsorted puts those values."""
    if law.fine_bins is not None and summary.fine_hist is not None:
        lo, hi = law.fine_bin_bounds()
        inner = np.asarray(summary.fine_hist, dtype=np.float64)
        counts = inner[1:-1]
        below, above = float(inner[0]), float(inner[-1])
    else:
        lo, hi = law.fmt.hist_bin_bounds()
        counts = np.asarray(summary.hist, dtype=np.float64)
        below = above = 0.0
    hi, lo = np.asarray(hi, dtype=np.float64), np.asarray(lo, dtype=np.float64)
    side = np.where(np.arange(hi.size) < hi.size // 2, -np.inf, np.inf)
    value = np.where(np.isfinite(hi), hi, np.where(np.isfinite(lo), lo, side))
    group = np.minimum(np.searchsorted(edges, value, side="left"), groups - 1)
    totals = np.bincount(group, weights=counts, minlength=groups)[:groups]
    totals[0] += below
    totals[-1] += above
    return totals


def class_test(counts: np.ndarray, totals: np.ndarray, masses: np.ndarray):
    """(X2, df, p, w, n_eff, worst group, observed, expected) of one class against the rest of
    the draw (a 2 x G homogeneity chi-square, groups merged by the law's masses to expect
    POSITION_MIN_EXPECTED in the class); None when the class or the rest is too small for two
    merged groups."""
    n_c = float(counts.sum())
    rest = np.maximum(totals - counts, 0.0)
    n_r = float(rest.sum())
    if n_c <= 0 or n_r <= 0:
        return None
    pos, starts = gof_groups(masses, n_c, POSITION_MIN_EXPECTED)
    df = int(starts.size) - 1
    if df < 1:
        return None
    # Values outside every positive-mass group (impossible ones) count with their neighbours:
    # what they say is the finite/bounds checks' business; here only where they fall matters.
    cuts = pos[starts]
    cuts[0] = 0
    obs_c = np.add.reduceat(counts, cuts)
    obs_r = np.add.reduceat(rest, cuts)
    both = obs_c + obs_r
    live = both > 0
    obs_c, obs_r, both = obs_c[live], obs_r[live], both[live]
    df = int(both.size) - 1
    if df < 1:
        return None
    n = n_c + n_r
    exp_c, exp_r = n_c * both / n, n_r * both / n
    resid = (obs_c - exp_c) / np.sqrt(exp_c)
    x2 = float(np.sum(resid * resid) + np.sum((obs_r - exp_r) ** 2 / exp_r))
    n_eff = n_c * n_r / n
    j = int(np.argmax(np.abs(resid)))
    return (x2, df, clip_p(stats.chi2.sf(x2, df)), math.sqrt(max(x2 - df, 0.0) / n_eff), n_eff,
            int(np.flatnonzero(live)[j]), float(obs_c[j]), float(exp_c[j]))


@quiet
def check_position(summary: Summary, law, *, alpha: float = 1e-3) -> Outcome:
    """Per position class, its elements' coarse groups against the rest of the draw's (2 x G
    chi-square of homogeneity; groups merged by the law's masses); Bonferroni over the classes
    tested. A sampler wrong everywhere fails the marginal checks, not this one: it says that some
    positions are drawn from another law than the others."""
    unit = "Cohen's w (worst position class vs the rest)"
    classes = summary.position_classes
    if summary.position_counts is None or not classes:
        return not_applicable("no position classes (a tensor of one element, a law of one "
                              "group, or a sharded part)", unit)
    edges, masses = _bins(law)
    position_counts = np.asarray(summary.position_counts, dtype=np.float64)
    totals = group_totals(summary, law, edges, position_counts.shape[1])
    tested = []
    for name, counts in zip(classes, position_counts):
        result = class_test(counts, totals, masses)
        if result is not None:
            tested.append((name, int(counts.sum()), result))
    if not tested:
        return not_applicable("every position class holds too few elements at this n", unit)
    p, k = bonferroni([r[2] for _, _, r in tested])
    name, n_c, (x2, df, _, w, _, group, obs, exp) = tested[k]
    smallest = min(tested, key=lambda t: t[2][4])
    mde = w_mde(smallest[2][1], smallest[2][4], alpha / len(tested))
    msg = (f"class {name} ({n_c} elements) vs the rest of the tensor: chi2 {x2:.4g} on {df} df "
           f"(w {w:.3g}); coarse group {group} of {masses.size}: {obs:.0f} observed vs {exp:.4g} "
           f"expected from the other positions; {len(tested)} of {len(classes)} classes tested")
    return Outcome(statistic=x2, p_value=p, effect=w, effect_unit=unit, mde=mde, message=msg,
                   details={"class": name, "classes_tested": [t[0] for t in tested]})


def repetition_expected(summary: Summary, law) -> float:
    """Equal window pairs the law itself gives (at most pairs x q^W, q the collision probability
    of one element: two windows of W iid values, overlapping or not, are equal with probability
    at most q^W)."""
    from ..engine.folder import REPEAT_WINDOW

    q = float(law.collision_prob)
    if q <= 0:
        return 0.0
    return float(summary.rep_pairs) * math.exp(min(0.0, REPEAT_WINDOW * math.log(q)))


@quiet
def check_repetition(summary: Summary, law, *, alpha: float = 1e-3) -> Outcome:
    """Equal 32-element windows (anchored by content) inside a call and against the previous
    call: Poisson upper tail with the law's expected count; a stretch of >= 1024 elements that
    repeats shows as ~8 equal pairs (decisive where the law expects far below one)."""
    from ..engine.folder import REPEAT_WINDOW

    unit = "equal window pairs"
    if summary.rep_windows == 0 or summary.rep_pairs == 0:
        return not_applicable(f"no windows to compare (a tensor under {REPEAT_WINDOW} elements, "
                              f"no anchor, or a sharded part)", unit)
    lam = repetition_expected(summary, law)
    if lam > REPEAT_MAX_EXPECTED:
        return not_applicable(f"the law has too few values: {lam:.3g} equal window pairs expected "
                              f"by chance", unit)
    k = int(summary.rep_equal)
    p = 1.0 if k == 0 else clip_p(stats.poisson.sf(k - 1, lam))
    msg = (f"{k} pairs of equal {REPEAT_WINDOW}-element windows among {summary.rep_windows} anchored windows "
           f"({summary.rep_pairs:.3g} pairs compared; {lam:.3g} expected by chance)")
    if k:
        msg += ": a stretch of the output repeats (a counter that wraps, an offset reused)"
    return Outcome(statistic=float(k), p_value=p, effect=float(k), effect_unit=unit, mde=1.0,
                   message=msg, decisive=bool(k and lam < 1e-12),
                   details={"expected": lam, "windows": int(summary.rep_windows)})


def position_mde(law, n: int, shape: tuple, alpha: float = 1e-3) -> float:
    """Cohen's w the position check detects with power 0.5 in its smallest class tested, at n
    samples of a tensor of `shape` (no sampling)."""
    from ..bins import position_classes

    numel = max(1, math.prod(shape)) if shape else 1
    calls = max(1, n // numel)
    _, masses = _bins(law)
    if masses.size < 2:
        return math.nan
    sizes = []
    for _, idx in position_classes(tuple(shape)):
        n_c = calls * idx.size
        n_r = calls * numel - n_c
        _, starts = gof_groups(masses, n_c, POSITION_MIN_EXPECTED)
        if starts.size >= 2 and n_r > 0:
            sizes.append((n_c * n_r / (n_c + n_r), int(starts.size) - 1))
    if not sizes:
        return math.nan
    n_c, df = min(sizes)
    return w_mde(df, n_c, alpha / len(sizes))
