"""Interval masses of a rounded law: P(Y <= v), P(Y < v), P(Y >= v), P(Y > v), P(lo <= Y <= hi),
and the keys of its tail quantiles.

Every mass comes from ``dist.prob`` on one interval, relatively accurate deep in a tail (never a
difference of two CDF values); complements too (``prob_gt`` integrates the right side)."""

from __future__ import annotations

import functools

import numpy as np

from .atoms import Atoms
from .cells import CellMeasure

__all__ = ["ENUMERATE_TAIL", "IntervalMasses", "first_true"]

#: Tail mass left out where a 32/64-bit law is summed over its keys (`IntervalMasses.bulk_keys`:
#: moments change by ~ this times (40 std)^k).
ENUMERATE_TAIL = 1e-30


def first_true(state, lo: int, hi: int, guess: int):
    """First key k in (lo, hi] with state(k), for a state that is False up to some key and True
    after it, taken False at lo and True at hi (neither evaluated): what a bisection finds. Rounds
    of at most ~130 keys evaluated at once: first around `guess` at distances 1, 2, 4, ..., then
    64 evenly spaced keys in the bracket. None when a round sees True left of False."""
    L, R = lo, hi
    g = min(max(guess, L + 1), R - 1)
    first = True
    while R - L > 1:
        if first:
            d = [0] + [s << j for j in range(64) for s in (1, -1)]
            probes = sorted({g + x for x in d if L < g + x < R})
            first = False
        elif R - L <= 65:
            probes = list(range(L + 1, R))
        else:
            probes = sorted({L + ((R - L) * i) // 65 for i in range(1, 65)} - {L, R})
        st = np.asarray(state(probes), dtype=bool)
        falses = [k for k, s in zip(probes, st) if not s]
        trues = [k for k, s in zip(probes, st) if s]
        if falses and trues and max(falses) > min(trues):
            return None
        if falses:
            L = max(falses)
        if trues:
            R = min(trues)
    return R


class IntervalMasses:
    """The law's masses of intervals of Y, from the X-mass on one side of an edge."""

    def __init__(self, cells: CellMeasure, atoms: Atoms):
        self.cells = cells
        self.atoms = atoms

    def edge_le(self, v) -> np.ndarray:
        """X-edge e with  Y <= v  <=>  X < e  (zeros compare equal)."""
        cells = self.cells
        v = np.asarray(v, dtype=np.float64)
        f = cells.floor(v)
        f = np.where(f == 0, 0.0, f)
        e = cells.cells(f)[1]
        e = np.where(np.isnan(f) & ~np.isnan(v), cells.x_bottom, e)
        return e

    def edge_ge(self, v) -> np.ndarray:
        """X-edge e with  Y >= v  <=>  X > e  (zeros compare equal)."""
        cells = self.cells
        v = np.asarray(v, dtype=np.float64)
        c = cells.ceil(v)
        c = np.where(c == 0, -0.0 if cells.fmt.has_neg_zero else 0.0, c)
        e = cells.cells(c)[0]
        e = np.where(np.isnan(c) & ~np.isnan(v), cells.x_top, e)
        return e

    def prob_le(self, v) -> np.ndarray:
        """P(Y <= v), from the X-mass left of the edge (accurate in the left tail); NaN for NaN
        v."""
        return _nan_in(v, self.cells.mass(self.cells.x_bottom, self.edge_le(v)))

    def prob_gt(self, v) -> np.ndarray:
        """P(Y > v), from the X-mass right of the edge (accurate in the right tail)."""
        return _nan_in(v, self.cells.mass(self.edge_le(v), self.cells.x_top))

    def prob_ge(self, v) -> np.ndarray:
        """P(Y >= v), from the X-mass right of the edge."""
        return _nan_in(v, self.cells.mass(self.edge_ge(v), self.cells.x_top))

    def prob_lt(self, v) -> np.ndarray:
        """P(Y < v), from the X-mass left of the edge."""
        return _nan_in(v, self.cells.mass(self.cells.x_bottom, self.edge_ge(v)))

    def prob_le_gt(self, v) -> tuple[np.ndarray, np.ndarray]:
        """(P(Y <= v), P(Y > v)) for one X-mass evaluation per value instead of two: the side of the
        edge holding at most half of the law is computed, the other is its complement (>= 1/2, so
        1 - p loses nothing). NaN for NaN v. Same values as prob_le / prob_gt to ~1e-16 relative."""
        return self._split_mass(v, self.edge_le(v))

    def prob_lt_ge(self, v) -> tuple[np.ndarray, np.ndarray]:
        """(P(Y < v), P(Y >= v)), as `prob_le_gt`."""
        return self._split_mass(v, self.edge_ge(v))

    def _split_mass(self, v, edge) -> tuple[np.ndarray, np.ndarray]:
        cells = self.cells
        x_bottom, x_top = cells.x_bottom, cells.x_top
        edge = np.asarray(edge, dtype=np.float64)
        if not (x_bottom <= cells.a and cells.b <= x_top):
            # Part of the law rounds to NaN (a fnuz/fn format's overflow): the sides do not add
            # up to one, so each is evaluated on its own.
            return (_nan_in(v, cells.mass(x_bottom, edge)), _nan_in(v, cells.mass(edge, x_top)))
        left = edge <= self._x_median
        below, above = np.empty(edge.shape), np.empty(edge.shape)
        below[left] = cells.mass(x_bottom, edge[left])
        above[~left] = cells.mass(edge[~left], x_top)
        above[left], below[~left] = 1.0 - below[left], 1.0 - above[~left]
        return _nan_in(v, below), _nan_in(v, above)

    @functools.cached_property
    def _x_median(self) -> float:
        return float(self.cells.centred.ppf(0.5))

    def bin_probs(self, lo_values, hi_values) -> np.ndarray:
        """P(lo <= Y <= hi), vectorized, any dtype. Ends are lattice values (others are moved
        inwards to the lattice); a zero end keeps its sign, as ordered keys do: [+0, x] excludes
        -0."""
        lo, hi = np.broadcast_arrays(np.asarray(lo_values, dtype=np.float64),
                                     np.asarray(hi_values, dtype=np.float64))
        out = np.zeros(lo.shape)
        # Ranges that miss the support have no mass: skip their edges (half of a 2**20-bin
        # histogram).
        m = (hi >= self.atoms.support_lo) & (lo <= self.atoms.support_hi)
        if m.any():
            out[m] = self.cells.mass(self.end_edge(lo[m], -1), self.end_edge(hi[m], +1))
        return out

    def end_edge(self, v, side: int) -> np.ndarray:
        """X-edge of a bin end: lower edge of the first lattice value >= v (side=-1) or upper edge
        of the last one <= v (side=+1). Works on keys; ends off the finite lattice take the slow
        path."""
        cells = self.cells
        fmt = cells.fmt
        v = np.asarray(v, dtype=np.float64)
        u = fmt.encode(v)
        r = fmt.decode(u)
        k = fmt.keys_from_bits(u)
        move = (r < v) if side < 0 else (r > v)
        k = np.where(move, fmt.step_key(k, -side)[0], k)
        klo, khi = (np.uint64(x) for x in fmt.finite_key_range)
        fast = np.isfinite(r) & (k >= klo) & (k <= khi)
        edge = cells.key_edge(np.where(fast, k, klo), side)
        if not fast.all():
            slow = ~fast
            w = cells.ceil(v[slow]) if side < 0 else cells.floor(v[slow])
            edge[slow] = cells.cells(w)[0 if side < 0 else 1]
        return edge

    # ------------------------------------------------------------------ tail quantiles
    @functools.cached_property
    def bulk_keys(self) -> tuple[int, int]:
        """Keys of the 1e-30 quantile values (`ENUMERATE_TAIL`), lower and upper (32/64-bit)."""
        return (self.quantile_key(ENUMERATE_TAIL, lower=True),
                self.quantile_key(ENUMERATE_TAIL, lower=False))

    def quantile_key(self, eps: float, lower: bool) -> int:
        """Key of the last lattice value with P(Y < v) <= eps (lower) / first with P(Y > v) <= eps.

        What a bisection over the support's keys finds (`bisect_key`), in a handful of vectorized
        evaluations: a bracket around the key of the quantile of X, then 64-way sections
        (`first_true`); a bisection proper where the probabilities are not monotone in the key."""
        fmt = self.cells.fmt
        k0 = int(fmt.ordered_keys(np.array([self.atoms.support_lo]))[0])
        k1 = int(fmt.ordered_keys(np.array([self.atoms.support_hi]))[0])
        if k1 - k0 <= 1:
            return k0 if lower else k1
        val = lambda ks: fmt.values_from_keys(np.array(ks, dtype=np.uint64))
        dist = self.cells.dist
        with np.errstate(all="ignore"):
            x = float(dist.ppf(eps) if lower else dist.isf(eps))
        guess = int(fmt.ordered_keys(np.array([x]))[0]) if np.isfinite(x) else (k0 + k1) // 2
        if lower:  # first key with P(Y < v) > eps, minus one
            state = lambda ks: self.prob_lt(val(ks)) > eps
        else:  # first key with P(Y > v) <= eps
            state = lambda ks: self.prob_gt(val(ks)) <= eps
        t = first_true(state, k0, k1, guess)
        if t is None:  # not monotone: the bisection itself
            t = self.bisect_key(eps, lower, k0, k1)
            return t
        return t - 1 if lower else t

    def bisect_key(self, eps: float, lower: bool, k0: int, k1: int) -> int:
        """`quantile_key` by a bisection over keys k0..k1."""
        fmt = self.cells.fmt
        val = lambda k: fmt.values_from_keys(np.array([k], dtype=np.uint64))
        lo, hi = k0, k1
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if lower:
                ok = float(self.prob_lt(val(mid))[0]) <= eps  # invariant: P(Y < value(lo)) <= eps
                lo, hi = (mid, hi) if ok else (lo, mid)
            else:
                ok = float(self.prob_gt(val(mid))[0]) <= eps  # invariant: P(Y > value(hi)) <= eps
                lo, hi = (lo, mid) if ok else (mid, hi)
        return lo if lower else hi


def _nan_in(v, p):
    return np.where(np.isnan(np.asarray(v, dtype=np.float64)), np.nan, p)
