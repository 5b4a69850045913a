"""The law at the scale of single values: how often two or three draws agree (`collision_prob`,
`collision_cube`), the mass on a coarser format's values (`lattice_mass`), and the law of the last
bits of the bit pattern (`low_bit_masses`): what the resolution checks compare a sampler with."""

from __future__ import annotations

import functools
import math

import numpy as np

from .atoms import Atoms
from .cell_tables import hist_cells, main_layout
from .cells import CellMeasure
from .dtypes import FloatFormat, float_format
from .hist_bins import Histogram
from .intervals import IntervalMasses
from .moments import ENUMERATE_MAX, LATTICE_MIN, LawMoments

__all__ = ["LOW_BITS_RUN_ENDS", "LOW_BITS_RUN_ENUMERATE", "LOW_BITS_RUN_NEGLIGIBLE",
           "ResolutionMasses"]

#: `ResolutionMasses.low_bit_masses`: a run of one binade with at most this many keys between the
#: 1e-30 quantiles is summed atom by atom; a longer one has this many keys at each end summed so.
LOW_BITS_RUN_ENUMERATE = 1 << 16
LOW_BITS_RUN_ENDS = 64
#: ... and a run holding less of the law than this is left out.
LOW_BITS_RUN_NEGLIGIBLE = 1e-34


class ResolutionMasses:
    """Collision sums, coarse-lattice mass and low-bit class masses of one law."""

    def __init__(self, cells: CellMeasure, atoms: Atoms, intervals: IntervalMasses,
                 histogram: Histogram, moments: LawMoments):
        self.cells = cells
        self.atoms = atoms
        self.intervals = intervals
        self.histogram = histogram
        self.moments = moments

    # ------------------------------------------------------------------ collisions
    @functools.cached_property
    def collision_prob(self) -> float:
        """sum_v P(Y = v)**2: exact from the atoms where they are enumerated (<=16-bit, and
        32/64-bit laws with few atoms in the bulk). Otherwise each histogram bin, whose cells share
        one width h, contributes h * integral of f**2 over it (f the density of X): sum p_v**2 with
        p_v = h f(v), relative error O((h / std)**2). The atoms whose cells are not a full h -- the
        two bound atoms, the zeros and the powers of two (wider spacing above than below) -- are
        taken exactly."""
        stats = self.moments.atom_stats
        if stats is not None:
            return stats[2]
        return self.collision_from_bins()

    @functools.cached_property
    def collision_cube(self) -> float:
        """sum_v P(Y = v)**3, the chance that three draws agree (the variance of a count of equal
        pairs needs it: two pairs that share a draw are correlated through it). Exact from the
        atoms where few enough are enumerated (<=16-bit; 32/64-bit laws with at most LATTICE_MIN
        atoms between the 1e-30 quantiles), else h**2 * integral of f**3 per bin as in
        `collision_from_bins` (relative error O((h / std)**2))."""
        if self.atoms.enumerated:
            return float(np.sum(self.atoms.probs ** 3))
        klo, khi = self.intervals.bulk_keys
        if khi - klo + 1 <= LATTICE_MIN:
            _, p = self.cells.enumerate_keys(klo, khi)
            return float(np.sum(p ** 3))
        return self.collision_from_bins(power=3)

    def density_power_integral(self, lo, hi, power: int = 2) -> np.ndarray:
        """integral of f**k over [lo, hi] (inside [a, b]), f the density of X, in log space:
        f**k is a normal density of std sigma / sqrt(k) times
        (2 pi)**((1 - k) / 2) sigma**(1 - k) / (sqrt(k) Z**k)
        (k = 2: 1 / (2 sqrt(pi) sigma Z**2))."""
        d = self.cells.centred
        cls = type(d)
        k = float(power)
        log_z = float(np.asarray(cls(d.loc, d.scale, -np.inf, np.inf).log_prob(d.a, d.b)))
        with np.errstate(over="ignore"):  # float64 bins near the largest double: +-inf is right
            wl = math.sqrt(k) * (np.asarray(lo) - d.loc) / d.scale
            wh = math.sqrt(k) * (np.asarray(hi) - d.loc) / d.scale
        lp = np.asarray(cls(0.0, 1.0, -np.inf, np.inf).log_prob(wl, wh))
        log_c = ((1.0 - k) * (0.5 * math.log(2.0 * math.pi) + np.log(d.scale)) - 0.5 * math.log(k)
                 - k * log_z)
        return np.exp(lp + log_c)

    def collision_from_bins(self, power: int = 2) -> float:
        """sum_v P(Y = v)**power by bins (power 2: the collision probability; 3: `collision_cube`):
        h**(power - 1) * integral of f**power over the bins of one spacing h, the atoms whose
        cells are not one full h taken exactly."""
        k = int(power)
        cells = self.cells
        fmt = cells.fmt
        lo, hi, h = hist_cells(fmt)
        # Sum over the live bins of h * int f**2 over the bin: bins of one run of equal spacing h
        # share h, so each run contributes h * int f**2 over its cells' union (one interval).
        run_starts = main_layout(fmt).run_starts
        i0, i1 = self.histogram.live_bins
        total = 0.0
        if i0 <= i1:
            cut = run_starts[(run_starts > i0) & (run_starts <= i1)]
            first = np.concatenate([[i0], cut])
            last = np.concatenate([cut - 1, [i1]])
            rlo = np.maximum(lo[first] - cells.origin, cells.a)
            rhi = np.minimum(hi[last] - cells.origin, cells.b)
            ok = rhi > rlo
            total = float(np.sum(h[first[ok]] ** (k - 1)
                                 * self.density_power_integral(rlo[ok], rhi[ok], k)))
        # Exact terms for the atoms the bin rule gets wrong by a fraction of one atom.
        e = np.arange(1 - fmt.bias, fmt.bias + 1)
        pow2 = np.ldexp(1.0, e)
        support_lo, support_hi = self.atoms.support_lo, self.atoms.support_hi
        special = np.concatenate([pow2, -pow2, [0.0, -0.0, support_lo, support_hi]])
        special = special[(special >= support_lo) & (special <= support_hi)]
        special = np.unique(fmt.ordered_keys(special))
        special = fmt.values_from_keys(special)
        special = special[np.isfinite(special)]
        clo, chi = cells.cells(special)
        clo, chi = np.maximum(clo, cells.a), np.minimum(chi, cells.b)
        ok = chi > clo
        special, clo, chi = special[ok], clo[ok], chi[ok]
        bin_of = fmt.ordered_keys(special) >> np.uint64(fmt.bits - fmt.hist_bits)
        bin_h = h[bin_of.astype(np.intp)]
        p = cells.mass(clo, chi)
        total += float(np.sum(p ** k)
                       - np.sum(bin_h ** (k - 1) * self.density_power_integral(clo, chi, k)))
        for _, olo, ohi in fmt.overflow_cells(cells.via_float32):
            total += cells.overflow_mass(olo, ohi) ** k
        return total

    # ------------------------------------------------------------------ coarser lattices
    def lattice_mass(self, coarse) -> float:
        """P(Y is a value of the coarser format `coarse`), computed once per format: each
        stage's lattices check and the diagnosis read it."""
        name = float_format(coarse).name
        held = self.__dict__.setdefault("_lattice_masses", {})
        if name not in held:
            held[name] = self._uncached_lattice_mass(coarse)
        return held[name]

    def _uncached_lattice_mass(self, coarse) -> float:
        """P(Y is a value of the coarser format `coarse`): the law's mass on the values this
        format shares with `coarse` (float32 values in a float64 law, bfloat16 or float16 values
        in a float32 one). Exact (atom by atom) where the support holds at most ENUMERATE_MAX
        coarse values: always for a 16-bit coarse format. Otherwise (float32 in a wide float64
        law) each float32 value owns a float64 cell 2**-29 times its float32 cell, so the mass is
        2**-29 P(2**-126 <= |X| <= float32's largest): relative error ~2**-23 (the cells at
        powers of two and at the bounds), and the float32 subnormals' share (< 1e-37) left out."""
        cf = float_format(coarse)
        fmt = self.cells.fmt
        if cf.bits >= fmt.bits:
            raise ValueError(f"lattice_mass: {cf.name} is not coarser than {fmt.name}")
        lo = max(float(self.atoms.support_lo), -cf.max_finite)
        hi = min(float(self.atoms.support_hi), cf.max_finite)
        if not lo <= hi:
            return 0.0
        k0, k1 = (int(k) for k in cf.ordered_keys(np.array([lo, hi])))
        if cf.values_from_keys(np.array([k0], dtype=np.uint64))[0] < lo:
            k0 += 1
        if cf.values_from_keys(np.array([k1], dtype=np.uint64))[0] > hi:
            k1 -= 1
        if k1 < k0:
            return 0.0
        if k1 - k0 + 1 <= ENUMERATE_MAX:
            values = cf.values_from_keys(np.arange(k0, k1 + 1, dtype=np.uint64))
            values = values[np.isfinite(values)]
            return float(math.fsum(self.cells.atom_probs(values)))
        ratio = 2.0 ** (cf.man_bits - fmt.man_bits)
        d = self.cells.dist
        tiny, top = cf.min_normal, cf.max_finite
        mass = 0.0
        for a, b in ((-top, -tiny), (tiny, top)):
            a, b = max(a, float(d.a)), min(b, float(d.b))
            if b > a:
                mass += float(d.prob(a, b))
        return ratio * mass

    # ------------------------------------------------------------------ low-order bits
    def low_bit_masses(self, k: int = 4) -> np.ndarray:
        """P(Y is finite and the last k bits of its bit pattern are j), j = 0 .. 2**k - 1
        (float64[2**k]; the low bits of the significand, whatever the sign). Cached per k.

        <=16-bit formats: summed over the enumerated atoms. 32/64-bit formats: over the keys
        between the 1e-30 quantiles (`ENUMERATE_TAIL`), cut into runs of one sign and exponent
        (the lattice spacing h is constant in a run and the class of a key steps by one, up or
        down, from key to key); runs holding below LOW_BITS_RUN_NEGLIGIBLE of the law are left
        out (float64's binades near 0). A run with at most LOW_BITS_RUN_ENUMERATE keys there is
        summed atom by atom. Otherwise LOW_BITS_RUN_ENDS keys at each end are (the atoms at
        powers of two, the bounds and the zeros, whose cells are not one full h, are there), and
        the middle, whole groups of 2**k consecutive keys, by the midpoint rule at the groups'
        scale: class j's atoms v_j + m 2**k h own 2**-k of X's mass over
        [v_j - 2**(k-1) h, last v_j + 2**(k-1) h], with relative error ~ (2**k h / std)**2 / 24
        alike for every class (the run has > 2**16 keys in ~24 std: below 1e-6), and a
        difference between classes smaller still. Exact to far below what a count of any
        feasible number of draws resolves (tests/unit/reference: against every atom, and mpmath)."""
        k = int(k)
        if k not in self._low_bits:
            masses = self._low_bit_masses(k)
            masses.setflags(write=False)
            self._low_bits[k] = masses
        return self._low_bits[k]

    @functools.cached_property
    def _low_bits(self) -> dict:
        return {}

    def _low_bit_masses(self, k: int) -> np.ndarray:
        mask = (1 << k) - 1
        cells = self.cells
        fmt = cells.fmt
        out = np.zeros(mask + 1)
        if self.atoms.enumerated:
            values, probs = self.atoms.values, self.atoms.probs
            fin = np.isfinite(values)
            classes = (fmt.encode(values[fin]) & np.uint64(mask)).astype(np.intp)
            return out + np.bincount(classes, weights=probs[fin], minlength=mask + 1)
        klo, khi = self.intervals.bulk_keys
        kf_lo, kf_hi = fmt.finite_key_range
        klo, khi = max(klo, kf_lo), min(khi, kf_hi)
        if khi < klo:
            return out
        mb = fmt.man_bits
        runs = [(max(r << mb, klo), min(((r + 1) << mb) - 1, khi))  # Python ints: keys pass 2**63
                for r in range(klo >> mb, (khi >> mb) + 1)]
        first = np.array([r[0] for r in runs], dtype=np.uint64)
        last = np.array([r[1] for r in runs], dtype=np.uint64)
        run_mass = cells.mass(cells.key_edge(first, -1), cells.key_edge(last, +1))
        ends, mid_keys, mid_groups = [], [], []  # ends: key ranges summed atom by atom
        for (a0, a1), mass in zip(runs, run_mass.tolist()):
            if not mass > LOW_BITS_RUN_NEGLIGIBLE:
                continue
            if a1 - a0 + 1 <= LOW_BITS_RUN_ENUMERATE:
                ends.append((a0, a1))
                continue
            m0 = -(-(a0 + LOW_BITS_RUN_ENDS) // (mask + 1)) * (mask + 1)
            m1 = (a1 + 1 - LOW_BITS_RUN_ENDS) // (mask + 1) * (mask + 1)
            ends += [(a0, m0 - 1), (m1, a1)]
            mid_keys.append(np.uint64(m0) + np.arange(mask + 1, dtype=np.uint64))
            mid_groups.append(np.full(mask + 1, float((m1 - m0) // (mask + 1))))
        if ends:
            keys = np.concatenate([np.uint64(a0) + np.arange(a1 - a0 + 1, dtype=np.uint64)
                                   for a0, a1 in ends if a1 >= a0])
            lo, hi = cells.key_edges(keys)
            out += np.bincount(_key_classes(fmt, keys, mask), weights=cells.mass(lo, hi),
                               minlength=mask + 1)
        if mid_keys:
            out += self._run_middle_class_masses(np.concatenate(mid_keys),
                                                 np.concatenate(mid_groups), mask)
        return out

    def _run_middle_class_masses(self, keys, groups, mask: int) -> np.ndarray:
        """The class masses of the runs' middles: each of `keys` stands for `groups` aligned
        blocks of mask + 1 keys, whose mass is spread evenly over the classes (the law is linear
        in the key across a block, to O((block h / std)^2))."""
        cells = self.cells
        fmt = cells.fmt
        v = fmt.values_from_keys(keys)
        h = fmt.spacing(v)
        # v - origin is exact here (see `reference.cells.law_origin`); the span's ends are
        # lattice points
        lo = (v - cells.origin) - h * (mask + 1) / 2.0
        hi = lo + h * (mask + 1) * groups
        mass = cells.mass(lo, hi) / (mask + 1)
        return np.bincount(_key_classes(fmt, keys, mask), weights=mass, minlength=mask + 1)


def _key_classes(fmt: FloatFormat, keys: np.ndarray, mask: int) -> np.ndarray:
    """The last bits (``& mask``) of the bit patterns of ordered keys: a positive value's key is
    its pattern plus the sign bit, a negative one's the complement of its pattern."""
    keys = np.asarray(keys, dtype=np.uint64)
    positive = keys >= np.uint64(1 << (fmt.bits - 1))
    patterns = np.where(positive, keys, ~keys).astype(np.uint64)
    return patterns.__and__(np.uint64(mask)).astype(np.intp)
