"""Where a clamp put its ends, read from the sample, and the clamped law it predicts there: the
pieces `bound_atoms.Clamp` tests a clamp inside the support with.

A clamp to [c_lo, c_hi] writes every draw beyond a point as the point: the extreme values
written are the points (each side's is the sample's min or max), each an atom holding its base
law's mass beyond it, and nothing is written beyond them. In the rounded law Y of the base the
atom at c_hi is P(Y >= c_hi) (the mass beyond it and its own cell, which rounds onto it), and
at c_lo it is P(Y <= c_lo).

The counts at a point: exact where the point is a bound (the atoms family) or where a
per-pattern histogram holds every value (16-bit and 8-bit dtypes); otherwise from the row
extremes, a row of m draws having its max at c_hi with probability 1 - (1 - q)^m where each
draw is there with probability q (the rows are disjoint sets of iid draws, so their count is
binomial).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from reference.dtypes import float_format

from ...families.binned import exact_values
from ...families.common import binom_two_sided, binom_upper
from ...families.resolution import COLLISIONS, LATTICES, LOW_BITS, low_bit_law, pair_law
from ..evidence import (AGREE_LEVEL, EMPTY_EXPECTED, FALSE_MATCH, MODEL_TOL, Evidence, agrees,
                        chi2_fit, count_sd)

#: The two ends of a clamp: the side below (its point the sample's min) and above (its max).
SIDES = ("lo", "hi")


@dataclass(frozen=True)
class PointCount:
    """The draws seen at one point: `count` of `trials`, each trial a draw (`row_len` 1) or a
    row of `row_len` draws whose extreme on the point's side is the point."""

    count: int
    trials: int
    row_len: int = 1

    def rate(self, q: float) -> float:
        """The chance of one trial where each draw is at the point with chance q."""
        q = min(max(q, 0.0), 1.0)
        if self.row_len <= 1 or q >= 1.0:
            return q
        return -math.expm1(self.row_len * math.log1p(-q))


@dataclass(frozen=True)
class ClampPoint:
    """One side's point: its `value`, whether it is the law's bound RN(a) or RN(b) (`at_bound`),
    the rounded law's mass beyond it (`beyond`) and at it (`own`), and its count."""

    side: str
    value: float
    at_bound: bool
    beyond: float
    own: float
    seen: PointCount | None

    @property
    def law_mass(self) -> float:
        """The rounded law's mass at the point and beyond it: what a clamp there piles on it."""
        return self.beyond + self.own


def bound_of(law, side: str) -> float:
    return float(law.rn_a if side == "lo" else law.rn_b)


def mass_beyond(law, side: str, value: float) -> float:
    """The rounded law's mass strictly beyond `value` on `side`."""
    probe = np.array([value])
    return float((law.prob_lt(probe) if side == "lo" else law.prob_gt(probe))[0])


def count_at(ev: Evidence, side: str, value: float, at_bound: bool) -> PointCount | None:
    """The draws seen at `value`: exact at a bound or from a per-pattern histogram, else the
    kept rows whose extreme on `side` is `value` (None where the Summary holds neither)."""
    if at_bound and ev.has("atoms"):
        return PointCount(ev.atom_count("a" if side == "lo" else "b"), ev.n)
    seen = exact_values(ev.summary)
    if seen is not None:
        values, counts = seen
        return PointCount(int(counts[values == value].sum()), ev.n)
    if not ev.has("extremes") or int(ev.summary.row_len) < 1:
        return None
    state = ev.state("extremes")
    rows = np.asarray(state.row_min if side == "lo" else state.row_max, dtype=np.float64)
    rows = rows[np.isfinite(rows)]  # a sharded part's rows it held no element of
    if rows.size == 0:
        return None
    return PointCount(int(np.count_nonzero(rows == value)), int(rows.size),
                      int(ev.summary.row_len))


def clamp_points(ev: Evidence) -> dict | None:
    """Each side's point, by side: the sample's min and max, where they lie in [RN(a), RN(b)]
    (None where the Summary has no support or atoms state, no finite extremes, one value
    only, or a value outside the law's support: not a clamp's)."""
    if not (ev.has("support") and ev.has("atoms")) or ev.n <= 0:
        return None
    law, support = ev.law, ev.summary.support
    lo, hi = float(support.min), float(support.max)
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        return None
    if lo < float(law.rn_a) or hi > float(law.rn_b):
        return None
    points = {}
    for side, value in zip(SIDES, (lo, hi)):
        at_bound = value == bound_of(law, side)
        own = float(law.atom_probs(np.array([value]))[0])
        points[side] = ClampPoint(side, value, at_bound, mass_beyond(law, side, value), own,
                                  count_at(ev, side, value, at_bound))
    return points


def cut_and_heavy(ev: Evidence, point: ClampPoint, factor: float) -> bool:
    """Whether an interior point is where a clamp left its end, at FALSE_MATCH each: the law
    puts >= EMPTY_EXPECTED draws beyond it, where none was written, and the point holds far
    more draws than its own cell gives.

    False-match rate. Under the law, the max M leaves n P(Y > M) >= EMPTY_EXPECTED with chance
    P(M <= v*) = (1 - P(Y > v*))^n <= exp(-EMPTY_EXPECTED) = FALSE_MATCH (v* the last value
    that leaves as much). Given M = c, the draws are iid Y | Y <= c with one at c at least, so
    the count at c less one is stochastically below Bin(n - 1, p'), p' = P(Y = c) / P(Y <= c);
    a count of rows at c is at most the count of draws there. The heavy test asks that count
    less one past Bin(n - 1, p')'s upper tail at FALSE_MATCH, and past `factor` times its mean
    (a share beyond any rounding cell)."""
    seen = point.seen
    if point.at_bound or seen is None or seen.count < 2:
        return False
    n = ev.n
    if n * point.beyond < EMPTY_EXPECTED:
        return False
    inside = 1.0 - point.beyond
    p_cell = point.own / inside if inside > 0 else 1.0
    excess = seen.count - 1
    return bool(excess > factor * (n - 1) * p_cell
                and float(binom_upper(excess, n - 1, p_cell)) < FALSE_MATCH)


def count_agrees(seen: PointCount, q: float) -> bool:
    """Whether a point's count agrees with a mass q per draw: its exact binomial p-value is at
    least AGREE_LEVEL, or it lies within Z_AGREE sds plus MODEL_TOL of the prediction."""
    rate = seen.rate(q)
    if float(binom_two_sided(seen.count, seen.trials, rate)) >= AGREE_LEVEL:
        return True
    return agrees(seen.count / seen.trials, rate, count_sd(seen.trials, rate), MODEL_TOL)


def clamped_bin_probs(probs: np.ndarray, k_lo: int, k_hi: int, outside_lo: float,
                      outside_hi: float, inside: float) -> np.ndarray:
    """The binned law of a clamp whose points lie in bins k_lo < k_hi: `inside` times the base's
    law on bins `probs` (its mass inside [a, b]), nothing beyond the points' bins, and each
    point's bin holding the base's whole mass from that bin outward (the part of the bin inside
    the point stays in it, the rest and all beyond lands on the point) plus the base's mass
    beyond the bound (`outside_lo`, `outside_hi`: the untruncated normal's, 0 for the law)."""
    probs = np.asarray(probs, dtype=np.float64)
    out = inside * probs
    out[k_lo] = outside_lo + inside * float(np.sum(probs[:k_lo + 1]))
    out[k_hi] = outside_hi + inside * float(np.sum(probs[k_hi:]))
    out[:k_lo] = 0.0
    out[k_hi + 1:] = 0.0
    return out


def bit_pattern(value: float, fmt) -> int:
    """The integer bit pattern of `value` in the format `fmt` (32 or 64 bits)."""
    width = np.uint32 if fmt.bits == 32 else np.uint64
    return int(np.array([value], dtype=np.float32 if fmt.bits == 32 else np.float64)
               .view(width)[0])


def repeats_agree(ev: Evidence, atoms: dict, inside: float, moved: float) -> frozenset:
    """The resolution checks whose statistic agrees with a clamp's law: `inside` times the law
    with its mass `moved` (the points' cells and beyond) taken out, and `atoms` (value -> mass)
    added. Equal pairs: the quasi-Poisson law of the scan's blocks at q2 = inside^2 sum P(Y = v)^2
    + sum q^2, q3 likewise (the atoms' triples widen the pairs' spread); values on each coarser
    lattice: binomial; last-bit classes: chi-square at AGREE_LEVEL. Each within Z_AGREE sds plus
    MODEL_TOL (the law's own tail beyond the points is left in its pair and lattice masses, a
    relative error below `moved`)."""
    if not ev.has("resolution"):
        return frozenset()
    law, state = ev.law, ev.summary.resolution
    fmt = law.fmt
    kept = inside * (1.0 - moved)
    found = set()
    compared = float(state.collision_compared)
    if compared > 0 and state.collision_block:
        q2 = inside**2 * float(law.collision_prob) + sum(q**2 for q in atoms.values())
        q3 = inside**3 * float(law.collision_cube) + sum(q**3 for q in atoms.values())
        mean, dispersion = pair_law(compared, float(state.collision_triples), q2, q3)
        if agrees(float(state.collision_pairs), mean, math.sqrt(mean * dispersion), MODEL_TOL):
            found.add(COLLISIONS.name)
    scanned = int(state.scanned)
    if state.lattice_names and state.lattice_counts is not None and scanned > 0:
        fits = True
        for name, count in zip(state.lattice_names, state.lattice_counts):
            on = float_format(name).round(np.array(list(atoms))) == np.array(list(atoms))
            mass = kept * float(law.lattice_mass(name)) + float(
                np.sum(np.array(list(atoms.values()))[on]))
            fits &= agrees(int(count) / scanned, mass, count_sd(scanned, mass), MODEL_TOL)
        if fits:
            found.add(LATTICES.name)
    if state.low_bit_counts is not None and fmt.bits >= 32:
        bits = int(state.low_bits)
        probs = kept * low_bit_law(law, bits)
        for value, q in atoms.items():
            probs[bit_pattern(value, fmt) & ((1 << bits) - 1)] += q
        p = chi2_fit(np.asarray(state.low_bit_counts), probs)
        if p is not None and p >= AGREE_LEVEL:
            found.add(LOW_BITS.name)
    return frozenset(found)
