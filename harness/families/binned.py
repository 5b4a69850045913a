"""The binned family: the histogram over the law's exact bins, and the goodness of fit over it,
`check_gof` (Pearson chi-square) and `check_ks`.

State (`BinnedState`): ``hist``, counts over the main histogram's ordered-key bins
(`harness.summary`: every bit pattern for 16-bit dtypes, the top 20 bits of the ordered key for
32/64-bit ones), ``hist.sum() == n``; and for a narrow 32/64-bit law (one whose support covers few
of those bins, e.g. [8, 8.01] in float64) ``fine_bins`` = (key_lo, shift, n_bins) and
``fine_hist``, the same keys in up to 2**16 bins over its support plus one bin below and one above
(`RoundedLaw.fine_bin_probs`), ``fine_hist.sum() == n`` too.

Both checks compare these counts with the rounded law's exact bin masses, over the bins of
`common.LawBins`: the main histogram (``law.hist_bin_probs()``), or the fine bins; no loops over
bins. Where the localized family's mass counters refine the main bins, the main histogram is
summed from them (`BinnedFold.refine`: one bincount for a few chunks instead of two per chunk).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
import torch
from scipy import optimize, stats

from reference.dtypes import float_format

from ..key_bins import ordered_from_raw
from ..declaration import statistical
from ..engine import Family
from ..result import Outcome
from ..summary import Summary
from .common import LawBins, clip_p, ks_crit, ks_pvalue, not_applicable, quiet

@dataclass
class BinnedState:
    """Counts over the main histogram's bins, and over a narrow law's fine bins."""

    hist: np.ndarray  # int64[2**hist_bits], ordered-key order
    fine_bins: tuple | None = None  # (key_lo, shift, n_bins) of `reference.rounded.FineBins`
    fine_hist: np.ndarray | None = None  # int64[n_bins + 2]: [below, fine bins, at/above end]

    @property
    def exact(self) -> bool:
        """One bin per bit pattern (16-bit and 8-bit dtypes)."""
        return self.hist.size <= 1 << 16

    @classmethod
    def merge(cls, parts, whole) -> "BinnedState":
        first = parts[0]
        if any(p.fine_bins != first.fine_bins for p in parts):
            raise ValueError("Summary.merge: parts of different tensors or laws")
        fine = (None if first.fine_hist is None else
                np.sum([np.asarray(p.fine_hist, dtype=np.int64) for p in parts], axis=0))
        return cls(np.sum([np.asarray(p.hist, dtype=np.int64) for p in parts], axis=0),
                   first.fine_bins, fine)


class BinnedFold:
    """Counts each chunk's main bins (raw bit-pattern order, put in key order once at the end:
    the two orders differ by a fixed permutation) and a narrow law's fine bins."""

    def __init__(self, law, shape: tuple, fold):
        self.owner = fold
        self.fine_bins = None if law is None or law.fine_bins is None else (
            law.fine_bins.key_lo, law.fine_bins.shift, law.fine_bins.n_bins)
        self.refined = None  # counters that refine the main bins, and give their counts
        self.raw_hist = None  # the main bins' counts, allocated by the first fold not refined
        self.raw_fine = None
        if self.fine_bins is not None:
            key_lo, fine_shift, n_fine = self.fine_bins
            self.raw_fine = torch.zeros(n_fine + 2, dtype=torch.int64, device=fold.device)

    def refine(self, counters) -> None:
        """Counters that refine the main bins (the localized family's mass counters over the main
        layout) count them from now on: ``counters.coarse_hist()`` gives the main histogram."""
        self.refined = counters

    def fold(self, chunk) -> None:
        f = self.owner
        if self.refined is None:
            if self.raw_hist is None:
                self.raw_hist = torch.zeros(1 << f.s.hist_bits, dtype=torch.int64,
                                            device=f.device)
            chunk.pattern_hist = torch.bincount(chunk.bins, minlength=self.raw_hist.numel())
            self.raw_hist += chunk.pattern_hist
        if self.raw_fine is not None:
            keys = chunk.fine_keys
            shift = self.fine_bins[1]
            fine = torch.bitwise_right_shift(keys, shift, out=f.buffer("fine", tuple(keys.shape),
                                                                       keys.dtype))
            fine.add_(1)
            self.raw_fine += torch.bincount(fine, minlength=self.raw_fine.numel())

    def finish(self, whole: Summary) -> BinnedState:
        if self.refined is not None:
            hist = self.refined.coarse_hist()
        elif self.raw_hist is not None:
            hist = ordered_from_raw(self.raw_hist.cpu().numpy().astype(np.int64, copy=False))
        else:  # nothing folded
            hist = np.zeros(1 << self.owner.s.hist_bits, dtype=np.int64)
        fine = None if self.raw_fine is None else self.raw_fine.cpu().numpy()
        return BinnedState(hist, self.fine_bins, fine)


FAMILY = Family("binned", BinnedFold)


def histogram(summary: Summary) -> np.ndarray:
    """The main histogram's counts of a Summary folded with this family (int64, ordered-key
    order, ``hist.sum() == n``): what a failing group's figure draws (`harness.figure_data`)."""
    return np.asarray(summary.states[FAMILY.name].hist, dtype=np.int64)


_VALUES_CACHE: dict = {}


def pattern_values(fmt):
    """float64 value of every ordered key of a <= 16-bit format (NaN for NaN patterns)."""
    if fmt.name not in _VALUES_CACHE:
        _VALUES_CACHE[fmt.name] = fmt.values_from_keys(np.arange(1 << fmt.bits, dtype=np.uint64))
    return _VALUES_CACHE[fmt.name]


def exact_values(whole: Summary):
    """(values, counts) of the finite values seen, from a per-pattern histogram (16-bit and
    8-bit dtypes), or None when there is none: what the families whose sums a per-pattern
    histogram knows exactly (support, atoms, moments) finish from."""
    state = whole.states.get(FAMILY.name)
    if state is None or not state.exact:
        return None
    values = pattern_values(float_format(whole.dtype))
    hist = state.hist
    seen = np.isfinite(values) & (hist > 0)
    if not seen.any():
        return None
    return values[seen], hist[seen]




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


@functools.lru_cache(maxsize=4096)
def _ncx2_lambda_for_power_half(crit: float, df: int) -> float:
    """Noncentrality at which a chi-square(df) test with critical value crit has power 0.5.
    Cached: it does not depend on n, and a run asks it again for each n, stage and check."""
    if df <= 0 or not math.isfinite(crit):
        return math.nan

    def f(lam):
        return stats.ncx2.sf(crit, df, lam) - 0.5

    hi = max(1.0, crit)
    while f(hi) < 0:
        hi *= 2
    return float(optimize.brentq(f, 0.0, hi, xtol=1e-6 * hi))


def gof_mde(law, n: int, shape: tuple, alpha: float) -> float:
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
                       mde=gof_mde(law, n_total, summary.shape, alpha), message=msg, decisive=True,
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


def ks_mde(law, n: int, shape: tuple, alpha: float) -> float:
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
    f_law = LawBins.of(law).cdf
    f_emp = np.cumsum(hist) / n
    diff = f_emp - f_law
    k = int(np.argmax(np.abs(diff)))
    d = float(abs(diff[k]))
    if d == 0.0 and np.count_nonzero(probs > 0) < 2:
        return not_applicable("the law puts all its mass in one histogram bin", unit)
    p = ks_pvalue(d, n)
    msg = (f"D {d:.4g} at the top of bin {label(k)}: empirical CDF {f_emp[k]:.6g} vs law "
           f"{f_law[k]:.6g} (n {n})")
    return Outcome(statistic=d, p_value=p, effect=d, effect_unit=unit,
                   mde=ks_mde(law, n, summary.shape, alpha),
                   message=msg, details={"bin": k})


GOF = statistical(
    "gof", check_gof, families=(FAMILY,),
    doc='Chi-square / G over exact histogram bins of the rounded law.',
    method=(
        "Pearson chi-square goodness of fit over the Summary's histogram (ordered-key bins: every "
        "bit pattern for 16-bit dtypes, runs of 2^12 / 2^44 consecutive values for float32 / "
        "float64) against the rounded law's exact bin masses. Null: the samples are iid draws of "
        "the rounded law. Bins the law gives zero mass are judged apart: any count there is a "
        "zero-probability event (decisive, p = 0). Positive-mass bins are merged, in order and "
        "never across a zero-mass bin's count, into groups expecting >= 5 samples (Cochran); the "
        "statistic X2 = sum (O - E)^2 / E is referred to chi-square(groups - 1). False-alarm rate: "
        "alpha up to the chi-square approximation (measured calibrated; p-values uniform). Effect: "
        "excess Cohen's w = sqrt(max(X2 - df, 0) / n); message names the group with the largest "
        "standardized residual by value range. MDE: the w whose noncentral chi-square "
        "(lambda = n w^2) has median at the level-alpha critical value."
    ),
    unit="Cohen's w",
    mde=gof_mde,
)

KS = statistical(
    "ks", check_ks, families=(FAMILY,),
    doc="Kolmogorov-Smirnov against the rounded law's CDF at the bin edges.",
    method=(
        "Kolmogorov-Smirnov distance D = max |F_n - F| over histogram bin edges, F the rounded "
        "law's CDF at the top of each bin (cumulative bin masses; the left limit at a bin's bottom "
        "is the previous bin's top, so for 16-bit dtypes D is the exact sup over the line). Null: "
        "iid draws of the rounded law. p-value from the continuous one-sample KS law (exact "
        "scipy.stats.kstwo up to n = 20000, Kolmogorov's limit above, which is conservative): "
        "conservative for a discrete law and for a sup over a subset of points, so the false-alarm "
        "rate is <= alpha (close to alpha for 32/64-bit bins, well below it for coarse lattices). "
        "Effect: D. MDE: the level-alpha critical value of D at this n (an alternative with "
        "sup |F_alt - F| at that value is detected with probability ~0.5)."
    ),
    unit="D (CDF distance)",
    mde=ks_mde,
)
