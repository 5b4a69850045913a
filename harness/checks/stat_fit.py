"""Goodness of fit over the histogram bins: `check_gof` (Pearson chi-square) and `check_ks`.

Both compare the Summary's bin counts with the rounded law's exact bin masses, over the bins of
`stat_common.LawBins`: the main ordered-key histogram (``summary.hist``,
``law.hist_bin_probs()``), or the fine bins of a narrow 32/64-bit law; no loops over bins.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import optimize, stats

from ..result import Outcome
from ..summary import Summary
from .stat_common import LawBins, clip_p, ks_crit, ks_pvalue, not_applicable, quiet

#: Cochran's rule: every merged group of bins expects at least this many samples.
MIN_EXPECTED = 5.0


def gof_groups(probs: np.ndarray, n: float, min_expected: float = MIN_EXPECTED):
    """Merge adjacent positive-mass bins into groups expecting >= min_expected samples each.

    Returns (pos, starts): ``pos`` the indices of the bins with positive mass (in order; zero-mass
    bins are judged apart and never enter a group, so no group straddles an impossible bin's
    count), ``starts`` the positions in ``pos`` where each group begins (for np.add.reduceat).

    Rule (vectorized): cut the cumulative expected count into consecutive windows of width
    ``min_expected``; a group whose total still falls short (possible right after a heavy bin) is
    merged into its left neighbour, the first one into its right neighbour; two passes suffice
    (each group then contains a full window), a third is a guard. If the whole expectation is below
    ``min_expected`` there is a single group (df = 0).
    """
    probs = np.asarray(probs, dtype=np.float64)
    pos = np.flatnonzero(probs > 0)
    if pos.size == 0:
        return pos, np.zeros(0, dtype=np.int64)
    e = n * probs[pos]
    excl = np.cumsum(e) - e
    g = np.floor(excl / min_expected)
    start = np.ones(pos.size, dtype=bool)
    start[1:] = g[1:] != g[:-1]
    for _ in range(4):
        starts = np.flatnonzero(start)
        if starts.size <= 1:
            break
        sums = np.add.reduceat(e, starts)
        small = sums < min_expected
        if not small.any():
            break
        start[starts[1:][small[1:]]] = False
        if small[0]:
            start[starts[1]] = False
    return pos, np.flatnonzero(start)


def _ncx2_lambda_for_power_half(crit: float, df: int) -> float:
    """Noncentrality at which a chi-square(df) test with critical value crit has power 0.5."""
    if df <= 0 or not math.isfinite(crit):
        return math.nan

    def f(lam):
        return stats.ncx2.sf(crit, df, lam) - 0.5

    hi = max(1.0, crit)
    while f(hi) < 0:
        hi *= 2
    return float(optimize.brentq(f, 0.0, hi, xtol=1e-6 * hi))


def gof_mde(law, n: int, alpha: float = 1e-3) -> float:
    """Cohen's w detectable with power 0.5 at level alpha with n samples (after bin merging)."""
    if n <= 0:
        return math.nan
    _, starts = gof_groups(LawBins.of(law).probs, n)
    return w_mde(int(starts.size) - 1, n, alpha)


def w_mde(df: int, n: int, alpha: float) -> float:
    if df < 1 or n <= 0:
        return math.nan
    crit = float(stats.chi2.isf(alpha, df))
    return math.sqrt(_ncx2_lambda_for_power_half(crit, df) / n)


def _observed_and_law(summary: Summary, law):
    """The Summary's bin counts, the law's masses of the same bins, n, and the bins' labeller."""
    bins = LawBins.of(law)
    hist = bins.counts(summary)
    return hist, bins.probs, int(hist.sum()), bins.label


@quiet
def check_gof(summary: Summary, law, *, alpha: float = 1e-3) -> Outcome:
    hist, probs, n_total, label = _observed_and_law(summary, law)
    unit = "Cohen's w"
    if n_total == 0:
        return not_applicable("no samples", unit)

    impossible = probs <= 0
    counts_imp = np.where(impossible, hist, 0)
    n_imp = int(counts_imp.sum())

    n_pos = n_total - n_imp
    pos, starts = gof_groups(probs, n_pos)
    df = int(starts.size) - 1
    details = {"df": df, "n_impossible": n_imp, "groups": int(starts.size)}

    if n_imp:
        k = int(np.argmax(counts_imp))
        where = label(k)
        msg = (f"{n_imp} of {n_total} samples where the law has no mass; worst bin {where}: "
               f"{int(hist[k])} observed vs 0 expected")
        return Outcome(statistic=math.inf, p_value=0.0, effect=math.inf, effect_unit=unit,
                       mde=gof_mde(law, n_total, alpha), message=msg, decisive=True,
                       details=details)
    if df < 1:
        return not_applicable("the law puts all its mass in one group of bins", unit)

    p_pos = probs[pos] / probs[pos].sum()
    exp = np.add.reduceat(n_pos * p_pos, starts)
    obs = np.add.reduceat(hist[pos].astype(np.float64), starts)
    resid = (obs - exp) / np.sqrt(exp)
    x2 = float(np.sum(resid * resid))
    p = clip_p(stats.chi2.sf(x2, df))
    w = math.sqrt(max(x2 - df, 0.0) / n_total)
    j = int(np.argmax(np.abs(resid)))
    k0 = int(pos[starts[j]])
    k1 = int(pos[starts[j + 1] - 1]) if j + 1 < starts.size else int(pos[-1])
    msg = (f"chi2 {x2:.6g} on {df} df (excess w {w:.3g}); worst bins {label(k0, k1)}: "
           f"observed {int(obs[j])} vs expected {exp[j]:.6g} (residual {resid[j]:+.3g})")
    details.update(max_residual=float(resid[j]), worst_bins=(k0, k1))
    return Outcome(statistic=x2, p_value=p, effect=w, effect_unit=unit,
                   mde=w_mde(df, n_total, alpha), message=msg, details=details)


def ks_mde(law, n: int, alpha: float = 1e-3) -> float:
    """sup |F_alt - F| detectable with power ~0.5: the level-alpha critical value of D."""
    return ks_crit(alpha, n) if n > 0 else math.nan


@quiet
def check_ks(summary: Summary, law, *, alpha: float = 1e-3) -> Outcome:
    hist, probs, n, label = _observed_and_law(summary, law)
    unit = "D (CDF distance)"
    if n == 0:
        return not_applicable("no samples", unit)
    # F at the top of every bin (right-continuous); the left limit at a bin's bottom is the top of
    # the previous bin, so the sup over bin edges covers both one-sided limits at every atom.
    f_law = np.cumsum(probs)
    f_law /= f_law[-1] if f_law[-1] > 0 else 1.0
    f_emp = np.cumsum(hist) / n
    diff = f_emp - f_law
    k = int(np.argmax(np.abs(diff)))
    d = float(abs(diff[k]))
    if np.count_nonzero(probs > 0) < 2 and d == 0.0:
        return not_applicable("the law puts all its mass in one histogram bin", unit)
    p = ks_pvalue(d, n)
    msg = (f"D {d:.4g} at the top of bin {label(k)}: empirical CDF {f_emp[k]:.6g} vs law "
           f"{f_law[k]:.6g} (n {n})")
    return Outcome(statistic=d, p_value=p, effect=d, effect_unit=unit, mde=ks_mde(law, n, alpha),
                   message=msg, details={"bin": k})
