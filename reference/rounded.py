"""The rounded law: what a perfect sampler writes into a dtype.

A sampler that writes into a floating dtype cannot produce a continuous law; the best it can do is
Y = RN(X): draw X ~ dist exactly and round once to the nearest representable value, ties to even.
Every verdict of the harness is relative to this law. `rounded_law(dist, dtype)` returns it as a
`RoundedLaw` (cached per (dist parameters, dtype, rounding)):

    P(Y = v) = P(X in cell(v) ∩ [a, b]),

where cell(v) is v's rounding cell (`FloatFormat.cell_edges`): the interval between the midpoints to
its lattice neighbours. Midpoints have probability 0 under a continuous X, so tie rules matter only
for which value a bound rounds to; they follow the format exactly (and `FloatFormat.round` agrees
bit for bit with torch's casts from float32). Consequences, handled by the parts below:

* a representable bound a owns only the half of its cell inside [a, b];
* a bound that is not representable may round to a value outside [a, b] (RN(a) < a), which still
  gets the mass of its cell inside [a, b] -- or none when a is exactly its cell's upper edge, in
  which case `support_lo` is the next value up;
* -0 owns (-min_subnormal/2, 0) and +0 owns (0, min_subnormal/2): tiny negative X round to -0;
* overflow follows the format: +-inf get |X| beyond max_finite + ulp/2 (IEEE formats, float8_e5m2),
  float8_e4m3fn saturates (+-448 own everything beyond), the fnuz formats send it to their NaN.

Every mass comes from ``dist.prob`` on one interval, relatively accurate deep in a tail (never a
difference of two CDF values); complements too (``prob_gt`` integrates the right side). For a
`TruncatedNormal` the many short intervals (cells, bins, parts of bins) go through
``dist.prob_cells`` / ``prob_steps``: the same integral by a one-exp midpoint series, equal to
``prob`` to ~1e-15 relative (<= 5e-13 at 40 sigma, where both carry the rounding of the
standardized point; tests/unit/reference/test_law_build.py).

Cost of a new law (32/64-bit; benchmarks/reference_speed.py): only the main bins that can hold
mass are evaluated (beyond ``dist.bulk(-800)`` every float64 mass is exactly 0), the parts of a
split bin are a lattice of equal steps, the mass bins' layout is worked out over the bins with
mass only, the collision sum over bins runs per binade, the 1e-30 quantile keys come from a few
vectorized rounds instead of a bisection, and the moments of a law with many atoms are summed in
closed form per row of atoms (`reference.moments`). Per-format tables
(`reference.cell_tables`) are built once per process.

``rounding="torch"`` gives the law of torch's own cast of a float64 X instead: torch converts
float64 -> float32 -> float16/bfloat16/float8, so near each midpoint half a float32 ulp moves to
the even neighbour: an atom gains (even) or loses (odd) 2**-13 (float16), 2**-16 (bfloat16) of its
mass, more for a boundary atom's partial cell.
The canonical law is the single rounding (the default).

The law is split by concern, one part per module, each owning its state; `RoundedLaw` is the
facade that builds them and answers for them (its attributes ``cells``, ``atoms``, ...):

* `reference.cells.CellMeasure`: the format, the rounding, the origin, the X-mass of intervals;
* `reference.atoms.Atoms`: the rounded bounds, the support, the bound atoms, every atom of a
  <=16-bit law;
* `reference.intervals.IntervalMasses`: P(Y <= v) and the other sides, bin masses, tail keys;
* `reference.hist_bins.Histogram`: the main bins' masses and the fine bins;
* `reference.mass_bins`: the bins of about equal mass (`MassBins`);
* `reference.moments.LawMoments`: mean, variance, skewness, kurtosis, central moments;
* `reference.resolution.ResolutionMasses`: collision sums, coarse-lattice mass, low-bit classes.
"""

from __future__ import annotations

import functools
from collections import OrderedDict

import numpy as np

from .atoms import Atoms
from .cells import CellMeasure
from .dtypes import FloatFormat, float_format
from .hist_bins import FineBins, Histogram
from .intervals import IntervalMasses
from .mass_bins import MassBins, build_mass_bins
from .moments import LawMoments
from .resolution import ResolutionMasses

__all__ = ["FineBins", "MassBins", "RoundedLaw", "rounded_law"]


def _table_bytes(part) -> int:
    """Bytes of the numpy tables an object holds (directly, or in a tuple)."""
    total = 0
    for v in list(vars(part).values()):
        for x in (v if isinstance(v, tuple) else (v,)):
            if isinstance(x, (np.ndarray, MassBins)):
                total += x.nbytes
    return total


class RoundedLaw:
    """Law of Y = RN(X), X ~ dist, in one floating format. Build it with `rounded_law`.

    Each answer comes from the part that owns it (the module note); the methods and properties
    here are theirs, documented there."""

    def __init__(self, dist, fmt: FloatFormat, rounding: str = "rn"):
        self.cells = CellMeasure(dist, fmt, rounding)
        self.dist = dist
        self.fmt = fmt
        self.rounding = rounding
        self.atoms = Atoms(self.cells)
        self.intervals = IntervalMasses(self.cells, self.atoms)
        self.histogram = Histogram(self.cells, self.atoms, self.intervals)
        self.moments = LawMoments(self.cells, self.atoms, self.intervals)
        self.resolution = ResolutionMasses(self.cells, self.atoms, self.intervals, self.histogram,
                                           self.moments)

    @property
    def origin(self) -> float:
        """Where this law's X-edges (cell edges, masses) are measured from
        (`reference.cells.law_origin`): 0, or for float64 a lattice value near the window."""
        return self.cells.origin

    # ------------------------------------------------------------------ bounds and atoms
    @property
    def rn_a(self) -> float:
        """RN(a): what the lower bound rounds to."""
        return self.atoms.rn_a

    @property
    def rn_b(self) -> float:
        """RN(b)."""
        return self.atoms.rn_b

    @property
    def support_lo(self) -> float:
        """The smallest value with positive mass."""
        return self.atoms.support_lo

    @property
    def support_hi(self) -> float:
        """The largest value with positive mass."""
        return self.atoms.support_hi

    @property
    def atom_a(self) -> float:
        """P(Y = RN(a))."""
        return self.atoms.atom_a

    @property
    def atom_b(self) -> float:
        """P(Y = RN(b))."""
        return self.atoms.atom_b

    @property
    def values(self) -> np.ndarray:
        """Every atom with positive mass (<= 16-bit formats): `Atoms.values`."""
        return self.atoms.values

    @property
    def probs(self) -> np.ndarray:
        """P(Y = v) for `values`."""
        return self.atoms.probs

    @property
    def keys(self) -> np.ndarray:
        """Ordered keys (uint64) of `values`."""
        return self.atoms.keys

    @property
    def log_probs(self) -> np.ndarray:
        """log P(Y = v) for `values`, finite even where `probs` underflows."""
        return self.atoms.log_probs

    def atom_probs(self, values) -> np.ndarray:
        """P(Y == v) for float64 values (0 for values not on the lattice), any dtype."""
        return self.cells.atom_probs(values)

    # ------------------------------------------------------------------ intervals
    def prob_le(self, v) -> np.ndarray:
        """P(Y <= v) (`IntervalMasses.prob_le`)."""
        return self.intervals.prob_le(v)

    def prob_gt(self, v) -> np.ndarray:
        """P(Y > v)."""
        return self.intervals.prob_gt(v)

    def prob_ge(self, v) -> np.ndarray:
        """P(Y >= v)."""
        return self.intervals.prob_ge(v)

    def prob_lt(self, v) -> np.ndarray:
        """P(Y < v)."""
        return self.intervals.prob_lt(v)

    def prob_le_gt(self, v) -> tuple[np.ndarray, np.ndarray]:
        """(P(Y <= v), P(Y > v)) for one mass evaluation per value (`IntervalMasses.prob_le_gt`)."""
        return self.intervals.prob_le_gt(v)

    def prob_lt_ge(self, v) -> tuple[np.ndarray, np.ndarray]:
        """(P(Y < v), P(Y >= v)), as `prob_le_gt`."""
        return self.intervals.prob_lt_ge(v)

    def bin_probs(self, lo_values, hi_values) -> np.ndarray:
        """P(lo <= Y <= hi) for lattice ends, any dtype (`IntervalMasses.bin_probs`)."""
        return self.intervals.bin_probs(lo_values, hi_values)

    # ------------------------------------------------------------------ histograms
    def hist_bin_probs(self) -> np.ndarray:
        """Mass of each ordered-key histogram bin (float64[2**hist_bits]); cached."""
        return self.histogram.hist_bin_probs()

    @property
    def fine_bins(self) -> FineBins | None:
        """The fine histogram of a narrow 32/64-bit law (`FineBins`), else None."""
        return self.histogram.fine_bins

    def fine_bin_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Smallest and largest value of each fine bin (float64 arrays)."""
        return self.histogram.fine_bin_bounds()

    def fine_bin_probs(self) -> np.ndarray:
        """Mass of each fine bin (float64[n_bins]); cached."""
        return self.histogram.fine_bin_probs()

    @functools.cached_property
    def mass_bins(self) -> MassBins | None:
        """Bins of about equal mass over the whole key range of a 32/64-bit law (see `MassBins`);
        None for <= 16-bit formats, whose histogram already has one bin per value."""
        if self.fmt.bits <= 16:
            return None
        return build_mass_bins(self.cells, self.histogram)

    # ------------------------------------------------------------------ moments
    @property
    def mean(self) -> float:
        """E[Y]."""
        return self.moments.mean

    def mean_offset(self, center: float) -> float:
        """E[Y] - center, without rounding E[Y] to float64 first (`LawMoments.mean_offset`)."""
        return self.moments.mean_offset(center)

    @property
    def var(self) -> float:
        """Var[Y]."""
        return self.moments.var

    @property
    def std(self) -> float:
        """The standard deviation of Y."""
        return self.moments.std

    @property
    def skewness(self) -> float:
        """The skewness of Y."""
        return self.moments.skewness

    @property
    def kurtosis(self) -> float:
        """Excess kurtosis of Y."""
        return self.moments.kurtosis

    def central_moment(self, k: int) -> float:
        """E[(Y - E[Y])**k], k in 0..8."""
        return self.moments.central_moment(k)

    @property
    def moments_from_atoms(self) -> bool:
        """True when the moments are those of the atoms; False: the continuous law's."""
        return self.moments.moments_from_atoms

    @property
    def sheppard_bound(self) -> float:
        """Sheppard's relative change of the variance by rounding (`LawMoments.sheppard_bound`)."""
        return self.moments.sheppard_bound

    # ------------------------------------------------------------------ resolution
    @property
    def collision_prob(self) -> float:
        """sum_v P(Y = v)**2 (`ResolutionMasses.collision_prob`)."""
        return self.resolution.collision_prob

    @property
    def collision_cube(self) -> float:
        """sum_v P(Y = v)**3 (`ResolutionMasses.collision_cube`)."""
        return self.resolution.collision_cube

    def collision_from_bins(self, power: int = 2) -> float:
        """sum_v P(Y = v)**power by bins (`ResolutionMasses.collision_from_bins`)."""
        return self.resolution.collision_from_bins(power)

    def lattice_mass(self, coarse) -> float:
        """P(Y is a value of the coarser format `coarse`) (`ResolutionMasses.lattice_mass`)."""
        return self.resolution.lattice_mass(coarse)

    def low_bit_masses(self, k: int = 4) -> np.ndarray:
        """P(Y is finite and the last k bits of its pattern are j)
        (`ResolutionMasses.low_bit_masses`)."""
        return self.resolution.low_bit_masses(k)

    # ------------------------------------------------------------------ the law as a whole
    @property
    def nbytes(self) -> int:
        """Bytes of the numpy tables the law holds (the ones built so far)."""
        parts = (self, self.atoms, self.intervals, self.histogram, self.moments, self.resolution)
        return sum(_table_bytes(part) for part in parts)

    def __repr__(self) -> str:
        d = self.dist
        return (
            f"RoundedLaw(TN({d.loc!r}, {d.scale!r}, [{d.a!r}, {d.b!r}]) in {self.fmt.name}"
            f"{', torch rounding' if self.cells.via_float32 else ''}: rn_a={self.rn_a!r}, "
            f"rn_b={self.rn_b!r})"
        )


_CACHE: "OrderedDict[tuple, RoundedLaw]" = OrderedDict()
_CACHE_SIZE = 256
#: ... and at most this many bytes of law tables (a float32 N(0, 1) law with its 2**20 bin masses
#: and its mass bins holds ~22 MB: 256 of them would not fit in memory; the least recently used go
#: first).
_CACHE_BYTES = 1 << 30


def rounded_law(dist, dtype, rounding: str = "rn") -> RoundedLaw:
    """The law of RN(X), X ~ dist, in `dtype` (torch dtype, name, or FloatFormat); cached.

    rounding="rn" (default): one round-to-nearest-even of the exact X (the canonical law).
    rounding="torch": torch's cast of a float64 X (via float32 for narrower formats).
    """
    fmt = float_format(dtype)
    key = (type(dist), float(dist.loc), float(dist.scale), float(dist.a), float(dist.b), fmt.name,
           rounding)
    law = _CACHE.get(key)
    if law is None:
        law = RoundedLaw(dist, fmt, rounding)
        _CACHE[key] = law
        if len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
        total = sum(x.nbytes for x in _CACHE.values())
        while total > _CACHE_BYTES and len(_CACHE) > 1:
            _, old = _CACHE.popitem(last=False)
            total -= old.nbytes
    else:
        _CACHE.move_to_end(key)
    return law
