"""The tails: `check_tails`, the counts beyond the law's 1e-3, 1e-5, 1e-7 quantiles on each side
(exact binomial tests, Bonferroni across the tails). Tails has no state of its own: it reads the
binned family's histogram, cut at bin boundaries.
"""

from __future__ import annotations

import math

import numpy as np

from ..declaration import statistical
from ..result import Outcome
from ..summary import Summary
from . import binned
from .common import (LawBins, binom_mde_ratio, binom_two_sided, bonferroni, cached_on_law,
                     not_applicable, quiet)

TAIL_TARGETS = (1e-3, 1e-5, 1e-7)
#: A tail set is used only if its exact mass is within this factor above its target (coarse
#: lattices: the first atom may already hold far more than 1e-3; that is the atoms check's job).
TAIL_MAX_FACTOR = 10.0



def tail_sets(probs: np.ndarray):
    """The tail tests as arrays: side (0 lower, 1 upper), target, cut bin k, exact mass.

    Lower tail at target q: bins 0..k, k chosen among the two bins around the crossing of the
    cumulative mass with q (the one closer to q on a log scale, mass in (0, TAIL_MAX_FACTOR q]).
    Upper tail: bins k..end from the reversed cumulative sum (no 1 - F cancellation). Duplicate
    (side, k) pairs (coarse lattices) are tested once.
    """
    probs = np.asarray(probs, dtype=np.float64)
    q = np.asarray(TAIL_TARGETS, dtype=np.float64)
    lower = np.cumsum(probs)  # mass of bins <= k
    upper_rev = np.cumsum(probs[::-1])  # upper_rev[j] = mass of bins >= size-1-j
    size = probs.size

    def pick(cum):
        k1 = np.searchsorted(cum, q, side="right") - 1  # last index with cum <= q (-1 if none)
        k2 = np.minimum(k1 + 1, size - 1)
        c1 = np.where(k1 >= 0, cum[np.maximum(k1, 0)], 0.0)
        c2 = cum[k2]
        with np.errstate(divide="ignore"):
            d1 = np.where(c1 > 0, np.abs(np.log(np.where(c1 > 0, c1, 1.0) / q)), np.inf)
            d2 = np.where((c2 > 0) & (c2 <= TAIL_MAX_FACTOR * q),
                          np.abs(np.log(np.where(c2 > 0, c2, 1.0) / q)), np.inf)
        k = np.where(d2 < d1, k2, k1)
        mass = np.where(d2 < d1, c2, c1)
        ok = np.isfinite(np.minimum(d1, d2))
        return k, mass, ok

    kl, ml, okl = pick(lower)
    ku_rev, mu, oku = pick(upper_rev)
    ku = size - 1 - ku_rev
    side = np.concatenate([np.zeros(q.size, np.int64), np.ones(q.size, np.int64)])
    target = np.concatenate([q, q])
    k = np.concatenate([kl, ku])
    mass = np.concatenate([ml, mu])
    ok = np.concatenate([okl, oku])
    side, target, k, mass = side[ok], target[ok], k[ok], mass[ok]
    # the two sides must not overlap (a lower set ending at or beyond an upper set's start)
    if side.size:
        low_max = np.max(k[side == 0], initial=-1)
        up_min = np.min(k[side == 1], initial=size)
        keep = ~(((side == 0) & (k >= up_min)) | ((side == 1) & (k <= low_max)))
        side, target, k, mass = side[keep], target[keep], k[keep], mass[keep]
    _, first = np.unique(side * (size + 1) + k, return_index=True)
    first = np.sort(first)
    return side[first], target[first], k[first], mass[first]


def law_tail_sets(law):
    """`tail_sets` of the law's bins (read-only), found once per law: every stage's check and
    the diagnosis read them."""
    def build(law):
        out = tail_sets(LawBins.of(law).probs)
        for array in out:
            array.setflags(write=False)
        return out

    return cached_on_law(law, "_tail_sets", build)


def tails_mde(law, n: int, shape: tuple, alpha: float) -> float:
    """obs/exp ratio (< 1: a deficit, e.g. a cut tail) of the best-powered tail detected with power
    0.5; NaN when no tail can be tested."""
    side, target, k, mass = law_tail_sets(law)
    if side.size == 0 or n <= 0:
        return math.nan
    level = alpha / side.size
    j = int(np.argmax(mass))
    return binom_mde_ratio(n, float(mass[j]), level, upward=False)


@quiet
def check_tails(summary: Summary, law, *, alpha: float = 1e-3) -> Outcome:
    unit = "obs/exp"
    bins = LawBins.of(law)
    hist = bins.counts(summary)
    n = int(hist.sum())
    if n == 0:
        return not_applicable("no samples", unit)
    side, target, k, mass = law_tail_sets(law)
    if side.size == 0:
        return not_applicable("the law has no tail below 1e-2 on either side (coarse lattice)", unit)
    lower = np.cumsum(hist)
    # bins k.. hold what bins ..k-1 do not (integer counts: exact)
    upper = n - np.where(k > 0, lower[np.maximum(k - 1, 0)], 0)
    obs = np.where(side == 0, lower[k], upper).astype(np.float64)
    exp = n * mass
    ps = binom_two_sided(obs, n, mass)
    p, j = bonferroni(ps)
    ratio = obs / exp
    level = alpha / side.size
    upward = obs[j] >= exp[j]
    mde = binom_mde_ratio(n, float(mass[j]), level, upward=upward)
    if math.isnan(mde):
        mde = binom_mde_ratio(n, float(mass[j]), level, upward=True)
    size = hist.size
    where = bins.label(0, int(k[j])) if side[j] == 0 else bins.label(int(k[j]), size - 1)
    which = "lower" if side[j] == 0 else "upper"
    msg = (f"worst: {which} tail {target[j]:.0e} ({where}): {int(obs[j])} observed vs "
           f"{exp[j]:.6g} expected (obs/exp {ratio[j]:.4g}); {side.size} tails tested")
    details = {f"{'lower' if s == 0 else 'upper'}_{t:.0e}": (int(o), float(e), float(q))
               for s, t, o, e, q in zip(side, target, obs, exp, ps)}
    return Outcome(statistic=float(obs[j]), p_value=p, effect=float(ratio[j]), effect_unit=unit,
                   mde=mde, message=msg, details=details)


TAILS = statistical(
    "tails", check_tails, families=(binned.FAMILY,),
    doc="Counts beyond the law's 1e-3, 1e-5 and 1e-7 quantiles on each side.",
    method=(
        "Counts beyond the rounded law's 1e-3, 1e-5 and 1e-7 quantiles on each side. The cuts are "
        "histogram bin boundaries chosen from the law's cumulative bin masses (lower tail from the "
        "cumulative sum, upper tail from the reversed one, no 1 - F cancellation) so that the "
        "exact tail mass is closest to each target (log scale, at most 10x it); duplicate cuts on "
        "coarse lattices are tested once. Null: iid draws of the rounded law; each count is "
        "Bin(n, exact tail mass); exact two-sided binomial tests, Bonferroni over the <= 6 tests. "
        "Catches cut tails (observed << expected) and far outliers (observed >> expected). "
        "False-alarm rate <= alpha. Effect: obs/exp of the worst tail. MDE: the obs/exp ratio "
        "below 1 (a deficit, e.g. a cut tail) of the heaviest tail set whose mean sits on the "
        "lower critical count at level alpha / tests."
    ),
    unit="obs/exp (deficit in the 1e-3 tail)",
    mde=tails_mde,
)
