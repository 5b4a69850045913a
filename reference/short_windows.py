"""Masses of many short windows at once (lattice cells, histogram bins, rows of equal steps) for
`reference.truncnorm.TruncatedNormal.prob_cells` and ``prob_steps``: one exp per window by a
midpoint series, instead of the Gauss-Legendre rule of `reference.std_normal.log_g`, equal to
``prob`` to ~1e-15 relative; windows outside the series' domain go to ``log_prob`` itself."""

from __future__ import annotations

import functools
import math

import numpy as np

__all__ = ["ShortWindowMasses"]

# Short windows in bulk (`TruncatedNormal.prob_cells`): the mass of [lo, hi] is
# phi(m) * w * I(c, w) with m the window's midpoint, w its width (standardized), c = m w and
# I = int_{-1/2}^{1/2} exp(-c t - w^2 t^2 / 2) dt = sum_{i,j} A^i (-b)^j / ((2i)! j! (2n+1) 4^n),
# A = c^2, b = w^2 / 2, n = i + j: one exp per window instead of the 8 of the Gauss-Legendre rule.
# Used where w <= _SHORT_MAX_W and |c| <= _SHORT_MAX_C; the series is cut where every omitted term
# is below _SHORT_TOL (relative) at the largest A and b of the call (<= 6 orders at the limits).
_SHORT_MAX_W = 1.0 / 16.0
_SHORT_MAX_C = 0.25
_SHORT_TOL = 2.0**-60
_SHORT_MAX_ORDER = 7
_CELL_BLOCK = 1 << 15
#: Windows wider than this (standardized) are never zeroed as "beyond the bulk" from their
#: midpoint and width (`ShortWindowMasses._mid_mass`): the ends' rounding (~1e-16 of the
#: midpoint) stays far below the bulk's edge, 40 std, for any narrower window.
_FAR_TEST_MAX_W = 1e6


def _series_coef(i, j):
    n = i + j
    return (-1.0) ** j / (math.factorial(2 * i) * math.factorial(j) * (2 * n + 1) * 4.0**n)


_SHORT_COEF = [[_series_coef(i, j) for j in range(_SHORT_MAX_ORDER + 1)]
               for i in range(_SHORT_MAX_ORDER + 1)]


def _short_order(a_max, b_max):
    """Smallest order N of the series whose omitted terms (orders > N) are all below _SHORT_TOL."""
    n = 0
    while n < _SHORT_MAX_ORDER:
        nxt = max(abs(_SHORT_COEF[i][n + 1 - i]) * a_max**i * b_max ** (n + 1 - i)
                  for i in range(n + 2))
        if nxt < _SHORT_TOL:
            break
        n += 1
    return n


def _short_series(A, b, order):
    """I(c, w) of the note above, from A = c^2 and b = w^2 / 2, to `order` (Horner in A, then b)."""
    out = None
    for j in range(order, -1, -1):
        deg = order - j
        if deg:
            q = _SHORT_COEF[deg][j] * A
            for i in range(deg - 1, 0, -1):
                q += _SHORT_COEF[i][j]
                q *= A
            q += _SHORT_COEF[0][j]
        else:
            q = _SHORT_COEF[0][j]  # a constant
        if out is None:
            out = q
        else:
            out = out * b
            out = out + q  # (not in place: b may be one column, q the whole block)
    return out


def _short_series_rows(A, b, order):
    """`_short_series` where b is one value per row (a column): the series' coefficients in A are
    then columns, sum_j C[i][j] b^j, and Horner in A takes 2 passes per order over the block
    (A is overwritten)."""
    coef = []
    for i in range(order + 1):
        q = _SHORT_COEF[i][order - i] + 0.0 * b
        for j in range(order - i - 1, -1, -1):
            q = q * b + _SHORT_COEF[i][j]
        coef.append(q)
    if order == 1:
        A *= coef[1]
        A += coef[0]
        return A
    acc = A * coef[order]
    for i in range(order - 1, 0, -1):
        acc += coef[i]
        acc *= A
    acc += coef[0]
    return acc


class ShortWindowMasses:
    """The short-window masses of one `reference.oriented_law.OrientedLaw` (the mean at or left of
    the window), in its coordinates."""

    def __init__(self, law):
        self.law = law
        self.a, self.b, self.mu, self.sigma = law.a, law.b, law.mu, law.sigma
        self.right, self.t0, self.log_z = law.right, law.t0, law.log_z

    def cell_prob(self, lo, hi, out=None, mirrored=False, ordered=False):
        """P(lo <= X <= hi) for many windows (1-D arrays), into `out` (new if None): the midpoint
        series (module note) where a window is short, `log_prob` elsewhere; 0 where lo >= hi
        after clipping or either is NaN. Blocks of _CELL_BLOCK windows (cache-sized; the series'
        order is chosen per block). mirrored: the windows are [-hi, -lo] (negated block by block,
        so a mirrored law takes no whole-array copies). ordered: the windows follow each other
        (lo and hi non-decreasing), so a block's extremes are read off its ends."""
        out = np.empty(lo.shape) if out is None else out
        for s in range(0, lo.size, _CELL_BLOCK):
            block = slice(s, s + _CELL_BLOCK)
            if mirrored:
                self._cell_block(np.negative(hi[block]), np.negative(lo[block]), out[block],
                                 ordered)
            else:
                self._cell_block(lo[block], hi[block], out[block], ordered)
        return out

    @staticmethod
    def _extremes(x, ordered):
        """(min, max) of a 1-D block, NaN if it holds one; from its ends when it is monotone."""
        if ordered:
            ends = x[[0, -1]]
            return float(np.min(ends)), float(np.max(ends))
        return float(np.min(x)), float(np.max(x))

    def _cell_block(self, lo, hi, out, ordered=False):
        with np.errstate(invalid="ignore", over="ignore"):
            if not self._extremes(lo, ordered)[0] >= self.a:  # NaN too
                lo = np.maximum(lo, self.a)
            if not self._extremes(hi, ordered)[1] <= self.b:
                hi = np.minimum(hi, self.b)
            inv = 1.0 / self.sigma
            w = np.subtract(hi, lo)
            # offset of the midpoint from the anchor (a for a right tail, exact; else the mean)
            u = np.subtract(lo, self.a if self.right else self.mu)
            u /= self.sigma  # (not * inv: one rounding, which exp(-u^2/2) magnifies by u^2)
            w *= inv
            u += 0.5 * w
            # (the midpoints of windows that follow each other are monotone, to an ulp of u)
            self._mid_mass(u, w, out, lo, hi, self._extremes(u, True) if ordered else None)

    def _mid_mass(self, u, w, out, lo, hi, u_range=None):
        """Masses of windows of standardized width w whose midpoints sit u from the anchor, into
        out; windows outside the series' domain (or of negative or NaN width) from
        `log_prob(lo, hi)` (lo, hi: callables or arrays giving their absolute ends). u_range:
        (min, max) of u when the caller knows them (rows of a lattice: their ends)."""
        t0 = self.t0
        w_min, w_max = float(np.min(w)), float(np.max(w))
        u_min, u_max = u_range if u_range is not None else (float(np.min(u)), float(np.max(u)))
        cut = self._bulk_u
        # A window's ends as midpoint -+ half its width are exact enough only for widths far
        # below 1/ulp of the midpoint: a window from -1e120 to b has both at ~1e127, and their
        # difference is noise; such windows are not tested for "beyond the bulk" here.
        if (w_min >= 0.0 and w_max <= _FAR_TEST_MAX_W
                and (u_min - 0.5 * w_max > cut or (not self.right and u_max + 0.5 * w_max < -cut))):
            out[...] = 0.0  # the whole block is beyond the bulk: less than exp(-800) each
            return
        x_abs = t0 + u_max if self.right else max(u_max, -u_min)
        c_bound = x_abs * w_max
        fast = None
        u0, w0 = u, w  # (before the slow windows are zeroed below)
        if not (w_min >= 0.0 and w_max <= _SHORT_MAX_W and c_bound <= _SHORT_MAX_C):
            x = u + t0 if self.right else u
            fast = (w >= 0.0) & (w <= _SHORT_MAX_W) & (np.abs(x * w) <= _SHORT_MAX_C)
            u = np.where(fast, u, 0.0)
            w = np.where(fast, w, 0.0)
            w_max = float(np.max(w))
            u_min, u_max = float(np.min(u)), float(np.max(u))
            x_abs = t0 + u_max if self.right else max(u_max, -u_min)
            c_bound = x_abs * w_max
        order = _short_order(c_bound * c_bound, 0.5 * w_max * w_max)
        # log(phi(m) / phi(t0)) - log Z = -u (2 t0 + u) / 2 - log Z, then the mass
        A = None
        if self.right:
            e = u + 2.0 * t0
            e *= u
        else:
            e = u * u
            if order:  # A = (u w)^2 from u^2
                A = e * (w * w)
        e *= -0.5
        column = w.size * 4 <= u.size  # one width per row (`step_prob`): fold 1 / Z into it
        if self.log_z > -600.0:
            if column:
                np.exp(e, out=out)
                out *= w * math.exp(-self.log_z)
            else:
                e -= self.log_z
                np.exp(e, out=out)
                out *= w
        else:  # a window so narrow that exp(-log Z) overflows: stay in logs
            e -= self.log_z
            with np.errstate(divide="ignore"):
                e += np.log(w)
            np.exp(e, out=out)
        if order:
            if A is None:
                A = u + t0
                A *= w
                A *= A
            b = w * w
            b *= 0.5
            if column and A.shape == out.shape:
                out *= _short_series_rows(A, b, order)
            else:
                out *= _short_series(A, b, order)
        if (not self._below_one(u_min, u_max, w_max, c_bound)
                and float(np.max(out, initial=0.0)) > 1.0):
            np.minimum(out, 1.0, out=out)
        if fast is not None:
            slow = ~fast
            # windows wholly beyond the bulk hold less than exp(-800): exactly 0 in float64
            with np.errstate(invalid="ignore"):
                far = (u0 - 0.5 * w0 > cut) | ((u0 + 0.5 * w0 < -cut) if not self.right else False)
                far &= w0 <= _FAR_TEST_MAX_W
            if far.any():
                out[far] = 0.0
                slow &= ~far
            if slow.any():
                lo_s = lo()[slow] if callable(lo) else lo[slow]
                hi_s = hi()[slow] if callable(hi) else hi[slow]
                p = np.exp(self.law.log_prob(lo_s, hi_s))
                out[slow] = np.where(np.isnan(p), 0.0, p)

    def _below_one(self, u_min, u_max, w_max, c_bound) -> bool:
        """Whether every series mass of a block is below 1 (so no clamp is needed): a mass is at
        most phi(m) / phi(t0) / Z * w * I with I <= exp(|c| / 2), |c| <= c_bound."""
        if not (np.isfinite(u_min) and np.isfinite(u_max) and 0.0 <= w_max < np.inf):
            return False
        if self.right:  # -u (u + 2 t0) / 2 is largest at u = -t0, or at an end
            peak = min(max(-self.t0, u_min), u_max)
            e_max = -peak * (peak + 2.0 * self.t0) / 2.0
        else:
            e_max = 0.0 if u_min <= 0.0 <= u_max else -min(u_min * u_min, u_max * u_max) / 2.0
        return w_max == 0.0 or e_max - self.log_z + math.log(w_max) + 0.5 * c_bound < -1e-6

    def step_prob(self, lo0, step, n, sign=1.0, out=None):
        """Masses of the windows with ends lo0 + sign j step and lo0 + sign (j + 1) step,
        j = 0..n-1, for rows (1-D lo0, step) of windows inside [a, b] (frame coordinates):
        (rows, n), into `out` if given (any float64 (rows, n) view). The midpoints' offsets are
        formed per row as (lo0 - anchor) / sigma + sign (j + 1/2) step / sigma: exact lattices of
        windows (cells, bins) give `cell_prob`'s masses to ~1e-16."""
        out = np.empty((lo0.size, n)) if out is None else out
        u0 = (lo0 - (self.a if self.right else self.mu)) / self.sigma
        w0 = step / self.sigma
        j = np.arange(n) + 0.5
        rows = max(1, _CELL_BLOCK // max(n, 1))
        for s in range(0, lo0.size, rows):
            sl = slice(s, s + rows)
            w = w0[sl, None]
            u = w * (sign * j)
            u += u0[sl, None]
            ends = lambda d, sl=sl: lo0[sl, None] + (sign * (j + d)) * step[sl, None]
            lo = (lambda: ends(-0.5)) if sign > 0 else (lambda: ends(0.5))
            hi = (lambda: ends(0.5)) if sign > 0 else (lambda: ends(-0.5))
            row_ends = np.concatenate([u[:, 0], u[:, -1]])  # each row is monotone in j
            with np.errstate(invalid="ignore", over="ignore"):
                u_range = (float(np.min(row_ends)), float(np.max(row_ends)))
                self._mid_mass(u, w, out[sl], lo, hi, u_range)  # w: one column, broadcast
        return out

    @functools.cached_property
    def _bulk_u(self):
        """Offset (from the anchor, in sigmas) beyond which [x, inf) holds less than exp(-800)."""
        lo, hi = self.law.bulk(-800.0)
        return (hi - (self.a if self.right else self.mu)) / self.sigma * (1.0 + 1e-9)
