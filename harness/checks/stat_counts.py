"""Count checks: `check_atoms` (mass at RN(a), RN(b) and at zero) and `check_tails` (mass beyond
the law's 1e-3, 1e-5, 1e-7 quantiles on each side). Exact binomial tests, Bonferroni across
components."""

from __future__ import annotations

import math

import numpy as np

from ..result import Outcome
from ..summary import Summary
from .stat_common import (LawBins, binom_mde_ratio, binom_two_sided, bonferroni, cached_on_law,
                          fmt_value, not_applicable, quiet)

TAIL_TARGETS = (1e-3, 1e-5, 1e-7)
#: A tail set is used only if its exact mass is within this factor above its target (coarse
#: lattices: the first atom may already hold far more than 1e-3; that is the atoms check's job).
TAIL_MAX_FACTOR = 10.0


# ------------------------------------------------------------------------------------------ atoms


def _zero_mass(law) -> float:
    return float(np.sum(law.atom_probs(np.array([0.0, -0.0]))))


def atom_sides(law):
    """[(name, value, exact mass, Summary counter)]: the finite bounds (one entry when RN(a) ==
    RN(b)), and zero where it lies strictly inside [RN(a), RN(b)]. Zero is the value samplers
    write by construction (a Box-Muller radius of 0 when the uniform is 1, mean + std * 0,
    an underflow flushed to zero), and where the lattice is fine it is an atom of mass ~1e-40."""
    sides = []
    if math.isfinite(law.rn_a):
        sides.append(("RN(a)", float(law.rn_a), float(law.atom_a), "n_at_rn_a"))
    if math.isfinite(law.rn_b) and not (sides and float(law.rn_b) == sides[0][1]):
        sides.append(("RN(b)", float(law.rn_b), float(law.atom_b), "n_at_rn_b"))
    if float(law.rn_a) < 0.0 < float(law.rn_b):
        sides.append(("zero", 0.0, cached_on_law(law, "_zero_mass", _zero_mass), "n_at_zero"))
    return sides


def atoms_mde(law, n: int, alpha: float = 1e-3) -> float:
    """Smallest obs/exp ratio (> 1, extra mass) at the better-powered bound detected with power 0.5."""
    sides = atom_sides(law)
    if not sides or n <= 0:
        return math.nan
    level = alpha / len(sides)
    return min(binom_mde_ratio(n, p, level, upward=True) for _, _, p, _ in sides)


@quiet
def check_atoms(summary: Summary, law, *, alpha: float = 1e-3) -> Outcome:
    unit = "obs/exp"
    sides = atom_sides(law)
    if not sides:
        return not_applicable("no finite bound and no zero inside the law", unit)
    n = int(summary.n)
    if n == 0:
        return not_applicable("no samples", unit)
    obs = np.array([getattr(summary, attr) for *_, attr in sides], dtype=np.float64)
    mass = np.array([p for _, _, p, _ in sides], dtype=np.float64)
    exp = n * mass
    ps = binom_two_sided(obs, n, mass)
    p, j = bonferroni(ps)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(exp > 0, obs / np.where(exp > 0, exp, 1.0), np.where(obs > 0, np.inf, 1.0))
    decisive = bool(np.any((mass <= 0) & (obs > 0)))
    name, value = sides[j][0], sides[j][1]
    level = alpha / len(sides)
    upward = obs[j] >= exp[j]
    mde = binom_mde_ratio(n, mass[j], level, upward=upward)
    if math.isnan(mde):  # a deficit is not detectable at this n: state the excess one
        mde = binom_mde_ratio(n, mass[j], level, upward=True)
    msg = (f"worst {name} = {fmt_value(value)}: {int(obs[j])} observed vs {exp[j]:.6g} expected "
           f"(mass {mass[j]:.4g}, obs/exp {ratio[j]:.4g})")
    for o in range(len(sides)):
        if o != j:
            msg += f"; {sides[o][0]}: {int(obs[o])} vs {exp[o]:.6g}"
    details = {f"p_{s[0]}": float(q) for s, q in zip(sides, ps)}
    return Outcome(statistic=float(obs[j]), p_value=0.0 if decisive else p, effect=float(ratio[j]),
                   effect_unit=unit, mde=mde, message=msg, decisive=decisive, details=details)


# ------------------------------------------------------------------------------------------ tails


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


def tails_mde(law, n: int, alpha: float = 1e-3) -> float:
    """obs/exp ratio (< 1: a deficit, e.g. a cut tail) of the best-powered tail detected with power
    0.5; NaN when no tail can be tested."""
    side, target, k, mass = tail_sets(LawBins.of(law).probs)
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
    side, target, k, mass = tail_sets(bins.probs)
    if side.size == 0:
        return not_applicable("the law has no tail below 1e-2 on either side (coarse lattice)", unit)
    lower = np.cumsum(hist)
    upper = np.cumsum(hist[::-1])[::-1]
    obs = np.where(side == 0, lower[k], upper[k]).astype(np.float64)
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
