"""Localized defects: `check_spikes` (a point mass on one value) and `check_scan` (bumps and holes
at every scale), which the omnibus checks average away.

Both read the finest exact histogram the Summary holds (`LocalBins`): for 16-bit (and 8-bit)
dtypes the histogram of every bit pattern, one bin per value; for 32/64-bit dtypes the law's *mass
bins* (``summary.mass_hist``, `reference.rounded.MassBins`): contiguous key ranges that each hold at
most about 2**-18.5 = 2.7e-6 of the law (a single value may hold more), where a main histogram bin near 1 holds
1e-4 of float32 N(0, 1) and one extra value, or a narrow hole, moves its count by a few units in
hundreds. Every bin is a contiguous range of values with an exact mass under the rounded law.

Error control (both checks; the proof is the union bound). Under the null the samples are iid
draws of the rounded law, so the count of any fixed set of values S is Bin(n, P(Y in S)), and an
exact binomial tail p_S satisfies P(p_S <= t) <= t for every t (doubling the smaller tail for a
two-sided test keeps that). A check's family of sets is fixed before the data (by the law and n
alone); each set gets a share w_S of the level, sum w_S <= 1, and the check's p-value is
min(1, min_S p_S / w_S). Then P(p <= alpha) <= sum_S P(p_S <= alpha w_S) <= alpha. Only sets whose
count is unusual are priced exactly (a z-screen picks them); skipping the others can only make the
reported p larger, never smaller, so the bound holds for the p that is reported.

Stage 2 of `spikes` (see `spike_watch` and `harness.runner`): the mass bins stage 1 found most
over-represented are *watched* in stage 2's fresh draw: the engine tallies the exact values that
fall in them, and each value is judged against its own mass P(Y = v). The watch list depends only on
stage 1, whose data are independent of stage 2's, so conditional on it the stage-2 family (every
bit pattern in the watched bins) is fixed and the union bound holds again.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from ..result import Outcome
from ..summary import Summary
from .stat_common import (binom_two_sided, binom_upper, bins_label, cached_on_law, clip_p, fmt_value,
                          not_applicable, quiet)

#: Counts at most this many standard deviations from their expectation are not priced exactly
#: (their tail probability is far above any Bonferroni-adjusted level; see the module docstring).
SCREEN_Z = 3.0
#: At most this many mass bins are watched at stage 2.
WATCH_MAX = 8
#: Scan windows: at pyramid level 0 (single bins) these lengths, at every level these numbers of
#: consecutive blocks of 2**level bins (lengths 1, 2, 3, 4, 6, 8, 12, 16, 24, ...: each at most 1.5x
#: the previous, starts every 2**level bins, i.e. every 1/4 or 1/6 of the length).
SCAN_LEVEL0_WINDOWS = (1, 2, 3)
SCAN_WINDOWS = (4, 6)

SPIKES_UNIT = "point mass (share of samples)"
SCAN_UNIT = "share of samples (+ bump, - hole)"


# ------------------------------------------------------------------------------------ the bins


class LocalBins:
    """The finest exact bins of a Summary: counts, law masses, and a labeller.

    ``exact`` (<= 16-bit): one bin per bit pattern in ordered-key order (``summary.hist``,
    ``law.hist_bin_probs()``). Otherwise the law's mass bins (``summary.mass_hist``,
    ``law.mass_bins.probs``)."""

    def __init__(self, law):
        self.law = law
        self.mass = getattr(law, "mass_bins", None)
        self.exact = self.mass is None
        self.probs = (np.asarray(law.hist_bin_probs(), dtype=np.float64) if self.exact
                      else np.asarray(self.mass.probs, dtype=np.float64))
        pos = np.flatnonzero(self.probs > 0)
        self.first, self.last = (int(pos[0]), int(pos[-1])) if pos.size else (0, -1)
        self.n_positive = int(pos.size)
        self.q_max = float(self.probs.max()) if pos.size else 0.0
        # mass-weighted mean bin mass: the mass of the bin a typical sample falls in
        self.q_typical = float(np.dot(self.probs, self.probs)) if pos.size else 0.0

    @classmethod
    def of(cls, law) -> "LocalBins":
        return cached_on_law(law, "_stat_local_bins", cls)

    def counts(self, summary) -> np.ndarray | None:
        """The Summary's counts over these bins; None when it was built without mass bins (a
        hand-made Summary: the engine always folds them)."""
        if self.exact:
            return np.asarray(summary.hist, dtype=np.int64)
        if getattr(summary, "mass_hist", None) is None:
            return None
        return np.asarray(summary.mass_hist, dtype=np.int64)

    def n_values(self, j0: int, j1: int) -> float:
        """How many bit patterns bins j0..j1 hold."""
        if self.exact:
            return float(j1 - j0 + 1)
        lo, _ = self.mass.key_ranges([j0])
        _, hi = self.mass.key_ranges([j1])
        return float(hi[0] - lo[0]) + 1.0

    def label(self, j0: int, j1: int | None = None) -> str:
        """Value range of bins j0..j1 (inclusive), with the number of values it holds."""
        j1 = j0 if j1 is None else j1
        if self.exact:
            return bins_label(self.law, j0, j1)
        fmt = self.law.fmt
        lo, _ = self.mass.key_ranges([j0])
        _, hi = self.mass.key_ranges([j1])
        v0, v1 = (float(fmt.values_from_keys(k)[0]) for k in (lo, hi))
        count = int(hi[0] - lo[0]) + 1
        if math.isnan(v0) or math.isnan(v1):
            return "NaN bit patterns" if math.isnan(v0) and math.isnan(v1) else (
                f"[NaN patterns .. {fmt_value(v1)}]" if math.isnan(v0) else f"[{fmt_value(v0)} .. NaN patterns]")
        if count == 1:
            return f"{v0!r} (one value)"
        return f"[{v0!r}, {v1!r}] ({count:,} values)"


def _impossible(counts: np.ndarray, probs: np.ndarray, bins: LocalBins, unit: str, mde: float):
    """A decisive Outcome when samples sit where the law has no mass, else None."""
    imp = (probs <= 0) & (counts > 0)
    if not imp.any():
        return None
    total = int(counts[imp].sum())
    j = int(np.argmax(np.where(imp, counts, -1)))
    msg = (f"{total} samples where the law has no mass; worst {bins.label(j)}: "
           f"{int(counts[j])} observed vs 0 expected")
    return Outcome(statistic=math.inf, p_value=0.0, effect=math.inf, effect_unit=unit, mde=mde,
                   message=msg, decisive=True, details={"n_impossible": total})


# ------------------------------------------------------------------------------------ spikes


def _spike_bin_pvalues(counts: np.ndarray, probs: np.ndarray, n: int):
    """(candidate bins, their exact upper-tail p-values): bins with positive mass whose count is more
    than SCREEN_Z standard deviations above its expectation."""
    lam = n * probs
    d = counts - lam
    cand = np.flatnonzero((probs > 0) & (d > 0) & (d * d > SCREEN_Z * SCREEN_Z * lam))
    return cand, binom_upper(counts[cand], n, probs[cand])


def critical_excess(n: int, q: float, level: float) -> float:
    """The excess share eps at which Bin(n, q + eps) has its median on the level-`level` upper
    critical count of Bin(n, q): the point mass detected with power 0.5."""
    if not (q > 0) or n <= 0:
        return math.nan
    crit = float(stats.binom.isf(level, n, q)) + 1.0  # smallest k with P(X >= k) <= level
    return max(crit - n * q, 1.0) / n


def spikes_mde(law, n: int, alpha: float = 1e-3) -> float:
    """Smallest extra point mass (share of samples on one value) detected with power 0.5 at stage 1,
    wherever it sits: in the heaviest bin (worst case; a value of negligible own mass in a light bin
    needs less)."""
    bins = LocalBins.of(law)
    if bins.n_positive < 2 or n <= 0:
        return math.nan
    return critical_excess(n, bins.q_max, alpha / bins.n_positive)


def spike_watch(summary: Summary, law) -> tuple:
    """The mass bins stage 1 found most over-represented (at most WATCH_MAX, those whose
    Bonferroni-adjusted upper-tail p is below 1), for the engine to tally exactly at stage 2; empty
    for dtypes whose histogram already has one bin per value."""
    bins = LocalBins.of(law)
    counts = None if bins.exact else bins.counts(summary)
    if counts is None or bins.n_positive < 2:
        return ()
    n = int(counts.sum())
    if n == 0:
        return ()
    cand, ps = _spike_bin_pvalues(counts, bins.probs, n)
    keep = ps * bins.n_positive < 1.0
    order = np.argsort(ps[keep], kind="stable")[:WATCH_MAX]
    return tuple(int(j) for j in cand[keep][order])


def _watched_values(summary: Summary, law, bins: LocalBins, n: int):
    """(p-value over the watched values, decisive, details, message), or None without a tally.

    The family: every bit pattern of the watched bins (their number is the Bonferroni factor);
    each value's count against Bin(n, P(Y = v)), exact upper tail."""
    keys = getattr(summary, "watch_keys", None)
    watched = tuple(getattr(summary, "watch_bins", ()) or ())
    if keys is None or not watched or bins.exact:
        return None
    n_patterns = float(sum(bins.n_values(j, j) for j in watched))
    if len(keys) == 0:
        return 1.0, False, {"watched_bins": len(watched), "watched_values": 0}, \
            f"no sample in the {len(watched)} watched bins"
    counts = np.asarray(summary.watch_counts, dtype=np.int64)
    values = law.fmt.values_from_keys(np.asarray(keys, dtype=np.uint64))
    mass = value_masses(law, values)
    ps = binom_upper(counts, n, mass)
    i = int(np.argmin(ps))
    decisive = bool(np.any((mass <= 0) & (counts > 0)))
    p = 0.0 if decisive else clip_p(n_patterns * float(ps[i]))
    msg = (f"value {float(values[i])!r}: {int(counts[i])} observed vs {n * mass[i]:.4g} expected "
           f"(its mass {mass[i]:.4g}; {len(keys)} distinct values in the {len(watched)} watched "
           f"bins)")
    details = {"watched_bins": len(watched), "watched_values": int(len(keys)),
               "worst_value": float(values[i]), "worst_value_count": int(counts[i]),
               "worst_value_mass": float(mass[i])}
    return p, decisive, details, msg


def value_masses(law, values: np.ndarray) -> np.ndarray:
    """P(Y = v) of single values. For formats narrower than float64 the law's own atom masses
    (cell edges are exact in float64). A float64 value's cell [v - ulp/2, v + ulp/2] has edges
    float64 cannot hold (the law's cells snap them to the even neighbour, which is fine for bins
    of many values but gives a single value 0 or 2 ulps): its mass is the cell's width inside
    [a, b] times the density at v, exact to O((ulp / std)**2)."""
    values = np.asarray(values, dtype=np.float64)
    fmt = law.fmt
    if fmt.bits < 64:
        return np.asarray(law.atom_probs(values), dtype=np.float64)
    dist = law.dist
    below = (values - fmt.next_down(values)) * 0.5  # exact: a power of two
    above = (fmt.next_up(values) - values) * 0.5
    with np.errstate(invalid="ignore", over="ignore"):
        width = np.minimum(above, dist.b - values) + np.minimum(below, values - dist.a)
        mass = np.maximum(width, 0.0) * dist.pdf(values)
    return np.where(np.isfinite(mass), mass, 0.0)


def _judged_counts(summary: Summary, law, unit: str, mde_of, alpha: float):
    """What spikes and scan judge: (bins, counts, n, mde), or the Outcome that settles the check
    first (no mass-bin counts, no samples, samples where the law has no mass, a one-bin law)."""
    bins = LocalBins.of(law)
    counts = bins.counts(summary)
    if counts is None:
        return not_applicable("the Summary has no mass-bin counts", unit)
    n = int(counts.sum())
    if n == 0:
        return not_applicable("no samples", unit)
    mde = mde_of(law, n, alpha)
    bad = _impossible(counts, bins.probs, bins, unit, mde)
    if bad is not None:
        return bad
    if bins.n_positive < 2:
        return not_applicable("the law is one value (or one bin)", unit)
    return bins, counts, n, mde


def synthetic_summary(law, dtype, counts: np.ndarray) -> Summary:
    """A Summary holding only the finest-bin counts (`LocalBins`: every value for 16-bit dtypes,
    the mass bins otherwise): what the calibration and the power simulation feed spikes and scan
    in place of the engine's histogram of n draws."""
    from ..engine import new_summary

    s = new_summary(law, (256, 256), dtype)
    s.n = int(counts.sum())
    if law.mass_bins is None:
        s.hist = counts
    else:
        s.mass_hist = counts
    return s


@quiet
def check_spikes(summary: Summary, law, *, alpha: float = 1e-3) -> Outcome:
    unit = SPIKES_UNIT
    judged = _judged_counts(summary, law, unit, spikes_mde, alpha)
    if isinstance(judged, Outcome):
        return judged
    bins, counts, n, mde = judged
    probs = bins.probs
    k = bins.n_positive
    cand, ps = _spike_bin_pvalues(counts, probs, n)
    if cand.size:
        i = int(np.argmin(ps))
        j, p_bins = int(cand[i]), clip_p(k * float(ps[i]))
    else:  # nothing above the screen: report the largest standardized excess
        lam = n * probs
        z = np.where(probs > 0, (counts - lam) / np.sqrt(np.maximum(lam, 1e-300)), -np.inf)
        j, p_bins = int(np.argmax(z)), 1.0
    lam_j = n * probs[j]
    effect = (counts[j] - lam_j) / n
    details = {"bins": k, "candidates": int(cand.size), "worst_bin": j, "p_bins": p_bins}
    msg = (f"worst bin {bins.label(j)}: {int(counts[j])} observed vs {lam_j:.4g} expected "
           f"(mass {probs[j]:.4g}, excess {effect:.3g} of the samples; {k:,} bins)")
    p = p_bins
    watched = _watched_values(summary, law, bins, n)
    decisive = False
    if watched is not None:  # stage 2: the bins and the watched values, Bonferroni over the two
        p_values, decisive, more, vmsg = watched
        details.update(more, p_values=p_values)
        p = 0.0 if decisive else clip_p(2.0 * min(p_bins, p_values))
        msg = f"{vmsg}; {msg}" if p_values <= p_bins else f"{msg}; watched: {vmsg}"
    return Outcome(statistic=float(counts[j]), p_value=p, effect=float(effect), effect_unit=unit,
                   mde=mde, message=msg, decisive=decisive, details=details)


# ------------------------------------------------------------------------------------ scan


def scan_families(n_bins: int) -> list:
    """The scan's families as (level, window, intervals): windows of `window` consecutive blocks of
    2**level bins, starting at every block, over `n_bins` bins. Depends on the number of bins only."""
    out = []
    level, blocks = 0, n_bins
    while blocks >= 1:
        windows = (SCAN_LEVEL0_WINDOWS if level == 0 else ()) + SCAN_WINDOWS
        for w in windows:
            if blocks >= w:
                out.append((level, w, blocks - w + 1))
        if blocks < 2 * SCAN_WINDOWS[0]:
            break
        level, blocks = level + 1, (blocks + 1) // 2
    return out


def _halve(x: np.ndarray) -> np.ndarray:
    if x.size % 2:
        x = np.append(x, x.dtype.type(0))
    return x[0::2] + x[1::2]


def _window_sums(x: np.ndarray, w: int, cache: dict) -> np.ndarray:
    """Sums of w consecutive entries, from sums of shorter windows (direct sums of shifted
    copies: no cancellation, unlike differences of a running sum)."""
    if w not in cache:
        if w == 1:
            out = x
        elif w % 2 == 0:
            half = _window_sums(x, w // 2, cache)
            out = half[: half.size - w // 2] + half[w // 2:]
        else:
            prev = _window_sums(x, w - 1, cache)
            out = prev[:-1] + x[w - 1:]
        cache[w] = out
    return cache[w]


def _scan(counts: np.ndarray, probs: np.ndarray, n: int, families: list):
    """Best interval of the scan: (adjusted p, level, window, start block, count, expected), and how
    many intervals were priced exactly.

    The screen runs in float32 (half the memory traffic; its rounding, ~1e-7 of a count, is far
    below the 3 sd it looks for); the intervals it keeps are priced from exact int64 counts and
    float64 masses (direct sums over the window's blocks)."""
    n_fam = len(families)
    best = (math.inf, 0, 1, 0, 0.0, 0.0)
    screened = 0
    by_level: dict = {}
    for level, w, size in families:
        by_level.setdefault(level, []).append((w, size))
    c, q = counts.astype(np.int64), probs
    z2 = np.float32(SCREEN_Z * SCREEN_Z)
    for level in range(max(by_level) + 1 if by_level else 0):
        if level:
            c, q = _halve(c), _halve(q)
        if level not in by_level:
            continue
        cf, lf = c.astype(np.float32), (q * n).astype(np.float32)
        cache_c, cache_l = {}, {}
        for w, size in by_level[level]:
            s = _window_sums(cf, w, cache_c)
            lam = _window_sums(lf, w, cache_l)
            dev = s - lam
            np.multiply(dev, dev, out=dev)
            cand = np.flatnonzero(dev > z2 * lam)
            if not cand.size:
                continue
            exact_c = c[cand].copy()
            exact_q = q[cand].copy()
            for t in range(1, w):
                exact_c += c[cand + t]
                exact_q += q[cand + t]
            keep = exact_c != n * exact_q
            cand, exact_c, exact_q = cand[keep], exact_c[keep], exact_q[keep]
            screened += int(cand.size)
            if not cand.size:
                continue
            ps = binom_two_sided(exact_c, n, exact_q)
            i = int(np.argmin(ps))
            adj = float(ps[i]) * n_fam * size
            if adj < best[0]:
                best = (adj, level, w, int(cand[i]), float(exact_c[i]), float(n * exact_q[i]))
    return best, screened


def hole_guaranteed(families: list, n_fam: int, q_bin: float, n: int, alpha: float) -> float:
    """Smallest hole (mass of an interval never produced) that contains, at the median alignment
    against the bins, a whole scan interval whose empty count is significant: the hole detected
    with power >= 0.5 (deficits in partly covered intervals only add power)."""
    best = math.inf
    for level, w, size in families:
        length = w << level  # bins
        lam = n * q_bin * length
        if 2.0 * math.exp(-lam) * n_fam * size > alpha:  # 2 P(X = 0) <= 2 exp(-lam)
            continue
        # a hole H bins long holds a whole window of `length` bins starting on a multiple of
        # 2**level for a fraction min(1, (H - length) / 2**level) of its alignments to the bins
        need = length + 0.5 * (1 << level)
        best = min(best, need * q_bin)
    return best


def scan_mde(law, n: int, alpha: float = 1e-3) -> float:
    """Smallest hole mass (share of the samples that a narrow interval never gets) the scan finds
    with power 0.5, where the bins are typical (mass-weighted mean bin mass)."""
    bins = LocalBins.of(law)
    if bins.n_positive < 2 or n <= 0:
        return math.nan
    families = scan_families(bins.last - bins.first + 1)
    return hole_guaranteed(families, len(families), bins.q_typical, n, alpha)


@quiet
def check_scan(summary: Summary, law, *, alpha: float = 1e-3) -> Outcome:
    unit = SCAN_UNIT
    judged = _judged_counts(summary, law, unit, scan_mde, alpha)
    if isinstance(judged, Outcome):
        return judged
    bins, counts, n, mde = judged
    probs = bins.probs
    lo, hi = bins.first, bins.last
    families = scan_families(hi - lo + 1)
    (adj, level, w, start, obs, lam), screened = _scan(counts[lo:hi + 1], probs[lo:hi + 1], n, families)
    details = {"families": len(families), "screened": screened}
    if not math.isfinite(adj):
        return Outcome(statistic=0.0, p_value=1.0, effect=0.0, effect_unit=unit, mde=mde,
                       message=f"no interval more than {SCREEN_Z:g} sd from its expectation "
                               f"({len(families)} families of intervals)", details=details)
    j0 = lo + (start << level)
    j1 = min(hi, j0 + (w << level) - 1)
    effect = (obs - lam) / n
    kind = "excess" if obs > lam else "deficit"
    msg = (f"worst interval {bins.label(j0, j1)}: {int(obs)} observed vs {lam:.6g} expected "
           f"({kind} {abs(effect):.3g} of the samples; {w << level} bins, "
           f"{len(families)} families of intervals)")
    details.update(worst_bins=(j0, j1), level=level, window=w)
    return Outcome(statistic=obs, p_value=clip_p(adj), effect=float(effect), effect_unit=unit,
                   mde=mde, message=msg, details=details)
