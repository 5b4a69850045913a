"""The X side of a rounded law: the masses of X ~ dist over the rounding cells of one format.

`CellMeasure` owns what every other part of a `reference.rounded.RoundedLaw` integrates with: the
format and its rounding (``"rn"``, or ``"torch"``: via float32), the law's origin, the law
measured from it, and the X-mass of intervals (`CellMeasure.mass`, one ``dist.prob_cells`` call
for a `TruncatedNormal`). Every X-edge here is X - origin.

float64: a cell [v - ulp/2, v + ulp/2] has edges that float64 cannot hold. The law of a float64
`TruncatedNormal` is therefore integrated in coordinates centred on a lattice value near its window
(`law_origin`: X - origin, with the law shifted alike), where v - origin + ulp/2 is exact for every
v within a factor 2 of the origin: every value of a narrow window gets its own cell, odd mantissas
included (tests/unit/reference/test_rounded_law.py checks them against mpmath). Where the
subtraction rounds, the edge is the float64 RN of the midpoint, identically for both cells that
share it; such cells lie in bins of >= 2**24 values (2**44 per main bin), so the relative error of
a bin is <= 2**-25. Values beyond float64's range are treated as having no mass.
"""

from __future__ import annotations

import numpy as np

from .dtypes import FloatFormat
from .truncnorm import TruncatedNormal

__all__ = ["CellMeasure", "centred", "law_origin"]


def law_origin(dist, fmt: FloatFormat, bulk: tuple[float, float]) -> float:
    """Where a law's X-edges are measured from: 0, except for a float64 `TruncatedNormal` whose
    mass lies within a quarter of its distance from 0 (`bulk`), whose cells are measured from the
    lattice value nearest its mean clipped to [a, b]. float64 cannot hold its own midpoints, but
    (v - origin) + ulp(v)/2 is exact for every v within origin +- |origin|/4 (the difference has
    a smaller exponent than v and the same grain), so each value there gets its own cell, odd
    mantissas included: this is where a window holds few values per std. Elsewhere (mass near 0)
    cells hold so many values per std that the half-ulp rounding of an edge is far below any
    mass the checks resolve, and measuring from an origin would only lose the digits near 0."""
    if fmt.bits != 64 or type(dist) is not TruncatedNormal:
        return 0.0
    centre = min(max(float(dist.loc), float(dist.a)), float(dist.b))
    origin = float(fmt.round(np.array([centre]))[0])
    x_lo, x_hi = bulk  # (`CellMeasure.bulk`)
    near = abs(origin) / 4.0
    if not (np.isfinite(origin) and origin - near <= x_lo and x_hi <= origin + near):
        return 0.0
    return origin


def centred(dist, origin: float):
    """`dist` shifted by -origin (itself for origin 0): the law whose masses `CellMeasure.mass`
    takes."""
    if origin == 0.0:
        return dist
    return type(dist)(float(dist.loc) - origin, float(dist.scale), float(dist.a) - origin,
                      float(dist.b) - origin)


class CellMeasure:
    """The X-masses of one law's rounding cells in one format (see the module note).

    ``dist``, ``fmt``, ``via_float32`` (torch's rounding), ``origin`` and ``centred`` (the law
    measured from it), ``a``, ``b`` (its bounds, minus the origin), ``bulk`` (absolute: outside it
    every interval has mass exactly 0.0), ``x_bottom``, ``x_top`` (the integration limits of
    "every lattice value": mass the format sends to NaN excluded)."""

    def __init__(self, dist, fmt: FloatFormat, rounding: str = "rn"):
        if rounding not in ("rn", "torch"):
            raise ValueError(f"rounding must be 'rn' or 'torch', got {rounding!r}")
        self.dist = dist
        self.fmt = fmt
        self.via_float32 = rounding == "torch"
        bulk = getattr(dist, "bulk", None)
        # beyond exp(-800) every float64 mass is 0; [a, b] for a dist without `bulk`
        self.bulk = ((float(dist.a), float(dist.b)) if bulk is None
                     else tuple(float(x) for x in bulk(-800.0)))
        self.origin = law_origin(dist, fmt, self.bulk)
        self.centred = centred(dist, self.origin)
        self.a = float(self.centred.a)
        self.b = float(self.centred.b)
        top = np.inf if fmt.has_inf else fmt.max_finite
        self.x_bottom = float(self.cells(np.array([-top]))[0][0])
        self.x_top = float(self.cells(np.array([top]))[1][0])

    @property
    def prob_steps(self):
        """The law's `TruncatedNormal.prob_steps` (rows of equal steps), or None."""
        return getattr(self.centred, "prob_steps", None)

    @property
    def lattice_series(self):
        """The law's `TruncatedNormal.lattice_series`, or None."""
        return getattr(self.centred, "lattice_series", None)

    def rn(self, x):
        """RN(x) in the format, as this law rounds."""
        return self.fmt.round_torch(x) if self.via_float32 else self.fmt.round(x)

    def rn_bound(self, x: float) -> float:
        """What a bound rounds to."""
        r = float(self.rn(np.array([x]))[0])
        # An infinite bound the format cannot hold (fnuz: inf -> NaN) stays infinite; a finite one
        # beyond a fnuz format's range really rounds to NaN.
        return x if np.isnan(r) and np.isinf(x) else r

    def mass(self, lo, hi, out=None, ordered=False) -> np.ndarray:
        """P(lo <= X <= hi) for X-intervals, clipped to [a, b]; 0 for empty or NaN intervals.
        out: 1-D float64 to write into (1-D intervals only; a `TruncatedNormal` law). ordered:
        the intervals follow each other in increasing order (a hint for `prob_cells`)."""
        cells = getattr(self.centred, "prob_cells", None)
        # Far-tail bins of a wide format make dist.prob's intermediates overflow harmlessly.
        with np.errstate(over="ignore", under="ignore", invalid="ignore"):
            if cells is not None:  # TruncatedNormal: one exp per short interval; it clips itself
                lo, hi = np.broadcast_arrays(np.asarray(lo, dtype=np.float64),
                                             np.asarray(hi, dtype=np.float64))
                if out is not None:
                    return cells(lo, hi, out=out, ordered=ordered)
                return np.asarray(cells(lo, hi), dtype=np.float64).reshape(lo.shape)
            lo = np.maximum(np.asarray(lo, dtype=np.float64), self.a)
            hi = np.minimum(np.asarray(hi, dtype=np.float64), self.b)
            lo, hi = np.broadcast_arrays(lo, hi)
            pos = hi > lo
            res = np.zeros(lo.shape)
            if pos.any():
                res[pos] = self.centred.prob(lo[pos], hi[pos])
        if out is not None:
            out[...] = res
            return out
        return res

    def log_mass(self, lo, hi) -> np.ndarray:
        """log P(lo <= X <= hi), -inf for empty intervals."""
        lo = np.maximum(np.asarray(lo, dtype=np.float64), self.a)
        hi = np.minimum(np.asarray(hi, dtype=np.float64), self.b)
        lo, hi = np.broadcast_arrays(lo, hi)
        pos = hi > lo
        out = np.full(lo.shape, -np.inf)
        if pos.any():
            with np.errstate(over="ignore", under="ignore"):
                out[pos] = self.centred.log_prob(lo[pos], hi[pos])
        return out

    def cells(self, v):
        """X-cells (minus the origin) of lattice values."""
        return self.fmt.cell_edges(v, self.via_float32, self.origin)

    def key_edge(self, keys, side: int) -> np.ndarray:
        """Lower (side -1) or upper (+1) X-edge (minus the origin) of the values at ordered keys."""
        return self.fmt.key_cell_edge(keys, side, self.via_float32, self.origin)

    def key_edges(self, keys) -> tuple[np.ndarray, np.ndarray]:
        """X-cells (minus the origin) of the values at ordered keys."""
        return self.fmt.key_cell_edges(keys, self.via_float32, self.origin)

    def overflow_mass(self, lo: float, hi: float) -> float:
        """Mass of an absolute X-interval (an overflow cell of `FloatFormat.overflow_cells`)."""
        return float(self.mass(lo - self.origin, hi - self.origin))

    def atom_probs(self, values) -> np.ndarray:
        """P(Y == v) for float64 values (0 for values not on the lattice)."""
        lo, hi = self.cells(values)
        return self.mass(lo, hi)

    def floor(self, v: np.ndarray) -> np.ndarray:
        """Largest lattice value <= v (NaN below the lattice); keeps the sign of a zero v."""
        r = self.fmt.round(v)
        r = np.where(r > v, self.fmt.next_down(r), r)
        return np.where(np.isnan(r) & (v > 0), self.fmt.max_finite, r)

    def ceil(self, v: np.ndarray) -> np.ndarray:
        """Smallest lattice value >= v (NaN above the lattice); keeps the sign of a zero v."""
        r = self.fmt.round(v)
        r = np.where(r < v, self.fmt.next_up(r), r)
        return np.where(np.isnan(r) & (v < 0), -self.fmt.max_finite, r)

    def enumerate_keys(self, klo: int, khi: int) -> tuple[np.ndarray, np.ndarray]:
        """(values, probs) of the lattice values at keys klo..khi (32/64-bit; NaN patterns left
        out). Neighbouring cells share an edge: n + 1 edges for n values, each formed as
        `FloatFormat.key_cell_edge` forms it (the same float64), then one `mass` call."""
        fmt = self.fmt
        kf_lo, kf_hi = fmt.finite_key_range
        if not (kf_lo <= klo <= khi <= kf_hi):
            keys = np.arange(klo, khi + 1, dtype=np.uint64)
            vals = fmt.values_from_keys(keys)
            vals = vals[~np.isnan(vals)]
            return vals, self.atom_probs(vals)
        e_lo, e_hi = max(klo - 1, kf_lo), min(khi + 1, kf_hi)
        w = fmt.values_from_keys(np.arange(e_lo, e_hi + 1, dtype=np.uint64))
        mid = (w[:-1] - self.origin) + (w[1:] - w[:-1]) * 0.5
        outer = np.inf if fmt.overflow == "saturate" else fmt.overflow_edge(self.via_float32)
        parts = (([[-outer - self.origin]] if klo == kf_lo else []) + [mid]
                 + ([[outer - self.origin]] if khi == kf_hi else []))
        edges = np.concatenate(parts)
        vals = w[klo - e_lo: klo - e_lo + (khi - klo + 1)]
        return vals, self.mass(edges[:-1], edges[1:])
