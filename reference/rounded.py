"""The rounded law: what a perfect sampler writes into a dtype.

A sampler that writes into a floating dtype cannot produce a continuous law; the best it can do is
Y = RN(X): draw X ~ dist exactly and round once to the nearest representable value, ties to even.
Every verdict of the harness is relative to this law. `rounded_law(dist, dtype)` returns it as a
`RoundedLaw` (cached per (dist parameters, dtype, rounding)):

    P(Y = v) = P(X in cell(v) ∩ [a, b]),

where cell(v) is v's rounding cell (`FloatFormat.cell_edges`): the interval between the midpoints to
its lattice neighbours. Midpoints have probability 0 under a continuous X, so tie rules matter only
for which value a bound rounds to; they follow the format exactly (and `FloatFormat.round` agrees
bit for bit with torch's casts from float32). Consequences handled here:

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
closed form per row of atoms (`_lattice_stats`). Per-format tables (`_hist_cells`,
`_main_layout`) are built once per process.

``rounding="torch"`` gives the law of torch's own cast of a float64 X instead: torch converts
float64 -> float32 -> float16/bfloat16/float8, so near each midpoint half a float32 ulp moves to
the even neighbour: an atom gains (even) or loses (odd) 2**-13 (float16), 2**-16 (bfloat16) of its
mass, more for a boundary atom's partial cell.
The canonical law is the single rounding (the default).

float64: a cell [v - ulp/2, v + ulp/2] has edges that float64 cannot hold. The law of a float64
`TruncatedNormal` is therefore integrated in coordinates centred on a lattice value near its window
(`_origin`: X - origin, with the law shifted alike), where v - origin + ulp/2 is exact for every v
within a factor 2 of the origin: every value of a narrow window gets its own cell, odd mantissas
included (tests/unit/reference/test_rounded_law.py checks them against mpmath). Where the
subtraction rounds, the edge is the float64 RN of the midpoint, identically for both cells that
share it; such cells lie in bins of >= 2**24 values (2**44 per main bin), so the relative error of
a bin is <= 2**-25. Values beyond float64's range are treated as having no mass.
"""

from __future__ import annotations

import functools
import math
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from .dtypes import FloatFormat, float_format
from .truncnorm import TruncatedNormal

__all__ = ["FineBins", "MassBins", "RoundedLaw", "rounded_law"]

#: 32/64-bit laws are enumerated atom by atom (exact moments, collision probability) when the
#: lattice values between the 1e-30 and 1 - 1e-30 quantiles are at most this many.
ENUMERATE_MAX = 1 << 22
#: Tail mass ignored when a 32/64-bit law is enumerated (moments change by ~ this times (40 std)^k).
ENUMERATE_TAIL = 1e-30

#: A 32/64-bit law whose support covers fewer main histogram bins than this gets fine bins too.
FINE_BINS_BELOW = 256
#: At most this many fine bins (each 2**shift consecutive keys).
FINE_BINS_MAX = 1 << 16

#: Mass bins (32/64-bit laws): each holds about this much of the law at most, 2.7e-6 (a bin is split
#: into runs of equal key count, so a part may exceed it by a hair; a single value may hold more).
#: Fine enough that one value with an extra 1e-5 of the samples, or a hole holding 1e-5, stands out
#: at the pr n (2**22: <= ~11.3 expected samples per mass bin), and an extra 1e-6 at the nightly n
#: (2**27: <= ~362); coarse enough that the engine's counters (float32 N(0, 1): ~1.1e6 with mass,
#: 1.6e6 in all) stay cheap to hit at random: 2**-19 cost 10% more engine time at 1e8 samples.
MASS_BIN_MASS = 2.0 ** -18.5
#: A main histogram bin is split into at most 2**MASS_BIN_MAX_SPLIT mass bins.
MASS_BIN_MAX_SPLIT = 20

#: `RoundedLaw.low_bit_masses`: a run of one binade with at most this many keys between the
#: 1e-30 quantiles is summed atom by atom; a longer one has this many keys at each end summed so.
LOW_BITS_RUN_ENUMERATE = 1 << 16
LOW_BITS_RUN_ENDS = 64
#: ... and a run holding less of the law than this is left out.
LOW_BITS_RUN_NEGLIGIBLE = 1e-34


@dataclass(frozen=True)
class FineBins:
    """A second histogram for a 32/64-bit law whose support is narrow next to the main bins (2**20
    bins keep 11 mantissa bits of float32 and 8 of float64, so [8, 8.01] is one float64 bin).

    Fine bin ``i`` holds the ordered keys ``[key_lo + (i << shift), key_lo + ((i + 1) << shift) - 1]``
    for ``i in 0..n_bins-1``, starting at the key of ``support_lo`` and covering ``support_hi``;
    the engine counts everything below and above in two extra bins. Which laws get fine bins, and
    how, depends on the law alone, so the engine and the checks agree without talking."""

    key_lo: int
    shift: int
    n_bins: int

    @property
    def key_end(self) -> int:
        """One past the last key of the last bin."""
        return self.key_lo + (self.n_bins << self.shift)


@dataclass(frozen=True, eq=False)
class MassBins:
    """A histogram of a 32/64-bit law whose bins hold about equal mass (at most `MASS_BIN_MASS`,
    unless one value holds more), for the checks that look for localized defects (point masses,
    narrow holes) that the 2**20 main bins average away (a float32 main bin near 1 holds 1e-4).

    Every bin is a contiguous range of ordered keys, so its mass under the rounded law is exact
    (``probs``, from the cell edges of its end keys). The bins refine *coarse bins*: the main
    histogram bins (the key's top ``hist_bits`` bits), or, for a law with `FineBins`, the fine bins
    (below the support, fine bins 0..n-1, above), whose support would otherwise sit in a handful of
    main bins. A coarse bin of mass m > MASS_BIN_MASS is split into ``2**r`` runs of equal key
    count, r = ceil(log2(m / MASS_BIN_MASS)) (at most `MASS_BIN_MAX_SPLIT`, single keys at most);
    runs of consecutive coarse bins lighter than MASS_BIN_MASS / 2 are merged into one bin (within
    one window of MASS_BIN_MASS / 2 of the cumulative mass, never across a zero-mass bin: zero-mass
    runs are bins of their own). Where the density varies inside a coarse bin, its parts differ in
    mass (tails of a narrow window): ``probs`` says by how much.

    A key whose coarse bin is ``c`` and whose low bits (the key bits below the coarse bin, ordered)
    are ``low`` falls in mass bin ``start[c] + (low >> shift[c])``; bins increase with the value.

    Stored as what makes them (``start`` and ``shift`` span all 2**20 main bins, and are built
    when asked): the coarse bins cut into parts (``split_bins``, each into ``split_parts``
    parts of ``2**split_shift`` keys), the others whole. The coarse bins and parts, in key order,
    are the *parts* 0 .. n_parts - 1, and mass bin ``j`` is the run of parts from
    ``mass_first[j]`` to ``mass_first[j + 1] - 1`` (light coarse bins merged: several parts; a
    part of a split bin: one). Counts per part add up to the mass bins (`parts_to_mass`) and to
    the coarse bins (`parts_to_coarse`): the engine counts parts
    (`harness.engine.mass_counters`). It depends on the law alone, so the engine and the checks
    agree without talking. Memory is what a new law costs (a fresh page costs more than the
    arithmetic on it), so a law keeps only the masses, the split bins and the first parts."""

    bits: int  # of the format
    low_bits: int  # key bits below the coarse bin: 12 / 44 (main bins) or the fine bins' shift
    fine: "FineBins | None"  # the coarse bins are these fine bins (else the main bins)
    n_bins: int
    probs: np.ndarray  # float64[n_bins]
    n_coarse: int  # 2**hist_bits main bins, or the fine bins and the two beyond them
    split_bins: np.ndarray  # int64: the coarse bins cut into parts, increasing
    split_shift: np.ndarray  # int64: each part of split_bins[i] holds 2**split_shift[i] keys
    mass_first: np.ndarray  # int32[n_bins]: the first part of each mass bin

    @property
    def split_parts(self) -> np.ndarray:
        """int64: how many parts each split bin is cut into."""
        return np.int64(1) << (self.low_bits - self.split_shift)

    def parts_before_split(self) -> np.ndarray:
        """int64[split bins + 1]: the extra parts (beyond one per coarse bin) before each split
        bin's first part, and (last) in all."""
        return np.concatenate([[0], np.cumsum(self.split_parts - 1)]).astype(np.int64)

    @property
    def n_parts(self) -> int:
        return self.n_coarse + int(self.parts_before_split()[-1])

    def first_parts(self) -> np.ndarray:
        """int64[coarse bins]: each coarse bin's first part (a new array on each call)."""
        first = np.arange(self.n_coarse, dtype=np.int64)
        cs = self.split_bins
        if cs.size:
            extra = self.parts_before_split()
            first[:int(cs[-1]) + 1] += np.repeat(extra[:-1], np.diff(np.r_[0, cs + 1]))
            first[int(cs[-1]) + 1:] += int(extra[-1])
        return first

    @functools.cached_property
    def start(self) -> np.ndarray:
        """int64[coarse bins]: the mass bin of each coarse bin's first key (see the class note)."""
        return np.searchsorted(self.mass_first, self.first_parts(), side="right") - 1

    @functools.cached_property
    def shift(self) -> np.ndarray:
        """int64[coarse bins]: a key's low bits shifted right by this give its part of the bin."""
        shift = np.full(self.n_coarse, self.low_bits, dtype=np.int64)
        shift[self.split_bins] = self.split_shift
        return shift

    @property
    def split(self) -> np.ndarray:
        """bool[coarse bins]: the coarse bins split into parts."""
        return self.shift != self.low_bits

    @property
    def nbytes(self) -> int:
        """Bytes of the tables (the derived ones included once built)."""
        arrays = [self.probs, self.split_bins, self.split_shift, self.mass_first]
        arrays += [vars(self).get(name) for name in ("start", "shift")]
        return sum(a.nbytes for a in arrays if a is not None)

    def parts_to_mass(self, counts: np.ndarray) -> np.ndarray:
        """Mass-bin counts from counts per part."""
        return np.add.reduceat(counts, self.mass_first)

    def parts_to_coarse(self, counts: np.ndarray) -> np.ndarray:
        """Coarse-bin counts (the main histogram, or the fine one with the bins beyond it) from
        counts per part."""
        return np.add.reduceat(counts, self.first_parts())

    def _coarse_first_key(self, c: np.ndarray) -> np.ndarray:
        c = np.asarray(c, dtype=np.int64)
        if self.fine is None:
            return c.astype(np.uint64) << np.uint64(self.low_bits)
        fb = self.fine
        inner = np.uint64(fb.key_lo) + (np.maximum(c - 1, 0).astype(np.uint64) << np.uint64(fb.shift))
        return np.where(c == 0, np.uint64(0), np.where(c > fb.n_bins, np.uint64(fb.key_end), inner))

    def _coarse_last_key(self, c: np.ndarray) -> np.ndarray:
        c = np.asarray(c, dtype=np.int64)
        if self.fine is None:
            return ((c.astype(np.uint64) + np.uint64(1)) << np.uint64(self.low_bits)) - np.uint64(1)
        fb = self.fine
        top = np.uint64((1 << self.bits) - 1)
        inner = np.uint64(fb.key_lo) + (c.astype(np.uint64) << np.uint64(fb.shift)) - np.uint64(1)
        return np.where(c == 0, np.uint64(fb.key_lo - 1), np.where(c > fb.n_bins, top, inner))

    def key_ranges(self, j) -> tuple[np.ndarray, np.ndarray]:
        """First and last ordered key (uint64) of mass bins j (array of ints)."""
        j = np.atleast_1d(np.asarray(j, dtype=np.int64))
        # the coarse bins of j: the last coarse bin starting at or before j (a merged run: its last)
        c_last = np.searchsorted(self.start, j, side="right") - 1
        c_first = np.searchsorted(self.start, j, side="left")
        sh = self.shift[c_last]
        split = sh != self.low_bits
        sh = sh.astype(np.uint64)
        offset = (j - self.start[c_last]).astype(np.uint64)
        lo_split = self._coarse_first_key(c_last) + (offset << sh)
        hi_split = lo_split + (np.uint64(1) << sh) - np.uint64(1)
        lo = np.where(split, lo_split, self._coarse_first_key(c_first))
        hi = np.where(split, hi_split, self._coarse_last_key(c_last))
        return lo, hi

    def n_keys(self, j) -> np.ndarray:
        """How many bit patterns (ordered keys) mass bins j hold, as float64."""
        lo, hi = self.key_ranges(j)
        return (hi - lo).astype(np.float64) + 1.0

    def bin_of_keys(self, keys) -> np.ndarray:
        """Mass bin of each ordered key (uint64 array): the reference the engine's fold must match."""
        keys = np.asarray(keys, dtype=np.uint64)
        if self.fine is None:
            c = (keys >> np.uint64(self.low_bits)).astype(np.int64)
            low = keys & ((np.uint64(1) << np.uint64(self.low_bits)) - np.uint64(1))
        else:
            fb = self.fine
            below, above = keys < np.uint64(fb.key_lo), keys >= np.uint64(fb.key_end)
            rel = np.where(below | above, np.uint64(0), keys - np.uint64(fb.key_lo))
            c = np.where(below, 0, np.where(above, fb.n_bins + 1,
                                            (rel >> np.uint64(fb.shift)).astype(np.int64) + 1))
            low = np.where(below | above, np.uint64(0),
                           rel & ((np.uint64(1) << np.uint64(fb.shift)) - np.uint64(1)))
        return self.start[c] + (low >> self.shift[c].astype(np.uint64)).astype(np.int64)


def _mass_bins(law) -> "MassBins":
    """Build the `MassBins` of a 32/64-bit law (see there).

    Cost: only the coarse bins that can hold mass are looked at (the law's `_hist_span`; every
    other coarse bin has mass exactly 0 and so is merged into the bin before it or after it), the
    cell edges of the parts of a split bin come from its first value and its spacing (every split
    bin lies inside one binade: its values are ``v0 + i h``, and each edge is formed exactly as
    `FloatFormat.key_cell_edge` forms it, bit for bit), and nothing the law keeps spans all 2**20
    main bins."""
    fmt = law.fmt
    fb = law.fine_bins
    if fb is None:
        return _mass_bins_main(law)
    low_bits = fb.shift
    m = np.concatenate([[0.0], law.fine_bin_probs(), [0.0]])
    splittable = np.ones(m.size, dtype=bool)
    splittable[[0, -1]] = False
    layout = _split_and_merge(m, splittable, low_bits)
    n_bins = layout.n_bins
    mb = _keys_only(fmt, low_bits, fb, n_bins, m.size)
    probs = np.empty(n_bins)
    probs[layout.open_start] = np.add.reduceat(m, layout.opens)
    cs = layout.split_bins
    if cs.size:
        lo_e, hi_e = law._fine_edges  # cell edges of fine bin i: [lo_e[i], hi_e[i]]
        v_first, v_last = law.fine_bin_bounds()
        # Fine bins inside one binade (one sign, one exponent) hold values v0 + i h.
        with np.errstate(invalid="ignore"):
            e0, e1 = np.frexp(np.abs(v_first))[1], np.frexp(np.abs(v_last))[1]
        uniform = ((np.signbit(v_first) == np.signbit(v_last)) & (e0 == e1) & (v_first != 0)
                   & (v_last != 0) & np.isfinite(v_first) & np.isfinite(v_last))
        fine_i = cs - 1
        h = fmt.spacing(np.where(uniform, v_first, 1.0))
        _part_probs(law, mb, cs, layout.split_parts, layout.split_shift, v_first[fine_i], h[fine_i],
                    lo_e[fine_i], hi_e[fine_i], uniform[fine_i], probs, layout.split_start)
    return _with_parts(fmt, low_bits, fb, layout, probs, m.size, 0)


def _keys_only(fmt, low_bits: int, fine, n_bins: int, n_coarse: int) -> "MassBins":
    """A `MassBins` that knows its coarse bins' keys only (for `_part_probs` while it is built)."""
    empty = np.empty(0, dtype=np.int64)
    return MassBins(fmt.bits, low_bits, fine, n_bins, np.empty(0), n_coarse, empty, empty,
                    np.empty(0, dtype=np.int32))


def _with_parts(fmt, low_bits: int, fine, layout: "_Layout", probs: np.ndarray, n_coarse: int,
                s0: int) -> "MassBins":
    """The `MassBins` of a layout over coarse bins s0 .. (the window; every coarse bin before it
    joins mass bin 0, every one after it the last): its split bins, and each mass bin's first
    part. Coarse bin c's first part is c + (the extra parts of the split bins before it)."""
    cs = (layout.split_bins + s0).astype(np.int64)
    split_shift = layout.split_shift.astype(np.int64)
    extra = np.concatenate([[0], np.cumsum(layout.split_parts - 1)])
    splits_before = np.cumsum(layout.open_split) - layout.open_split
    open_part = layout.opens + s0 + extra[splits_before]
    mass_first = np.repeat((open_part - layout.open_start).astype(np.int32), layout.open_size)
    mass_first += _arange32(layout.n_bins)
    if s0 > 0:
        mass_first[0] = 0  # mass bin 0 starts at coarse bin 0, left of the window
    for arr in (probs, cs, split_shift, mass_first):
        arr.setflags(write=False)
    return MassBins(fmt.bits, low_bits, fine, layout.n_bins, probs, n_coarse, cs, split_shift,
                    mass_first)


def _expand(base: np.ndarray, counts: np.ndarray, step: int = 1) -> np.ndarray:
    """base[i] + step * j for j in 0..counts[i]-1, concatenated over i."""
    first = np.cumsum(counts) - counts
    j = np.arange(int(counts.sum()), dtype=np.int64)
    if step == 1:
        return np.repeat(base - first, counts) + j
    return np.repeat(base + first, counts) - j


def _runs(cs: np.ndarray, counts: np.ndarray):
    """(coarse bin, offset) of every part: coarse bin cs[i] repeated counts[i] times, 0..counts[i]-1."""
    c_of = np.repeat(cs, counts)
    offset = np.arange(c_of.size, dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
    return c_of, offset


def _part_probs(law, mb, cs, counts, sub_shift, first_value, spacing, lower_edge, upper_edge,
                uniform, out, dest):
    """Masses of the parts of split coarse bins cs (counts[i] parts of 2**sub_shift[i] keys each)
    into out[dest[i] + j], j = 0..counts[i]-1. A bin inside one binade holds values v0 + i h: the lower edge of its
    part j > 0 is below + (v - below) * 0.5 with below = v0 + (j 2**s - 1) h and v - below = h,
    both exact -- the very operations of `FloatFormat.key_cell_edge`, so the same float64 --, and
    parts 1 .. count-2 are a lattice of step 2**s h from part 1's edge (`prob_steps`); parts 0 and
    count-1 run to the bin's own edges, and join the lattice where those edges lie on it. Other
    bins: their parts' edges from `key_cell_edge`."""
    fmt = law.fmt
    first = dest  # position of each bin's part 0 in `out`
    step = np.ldexp(spacing, sub_shift.astype(np.int32))
    edge1 = ((first_value + (np.ldexp(1.0, sub_shift.astype(np.int32)) - 1.0) * spacing) - law._origin) + spacing * 0.5
    last_lo = edge1 + (counts - 2) * step
    u = np.flatnonzero(uniform)
    steps = getattr(law._frame, "prob_steps", None)
    if u.size:
        # Parts 0 and count-1 reach the bin's own edges; where those lie on its parts' lattice
        # (float32: inside a binade; float64: the lower one, of the same parity as part 1's),
        # they join the lattice row, else their masses are taken on their own.
        low_in = lower_edge[u] == edge1[u] - step[u]
        high_in = upper_edge[u] == last_lo[u] + step[u]
        alone = u[~low_in]
        out[first[alone]] = law._mass(lower_edge[alone], edge1[alone])
        alone = u[~high_in]
        out[first[alone] + counts[alone] - 1] = law._mass(last_lo[alone], upper_edge[alone])
        skip_lo, skip_hi = (~low_in).astype(np.int64), (~high_in).astype(np.int64)
        row_parts = counts[u] - skip_lo - skip_hi
        keep = row_parts > 0
        rows, skip_lo, skip_hi, row_parts = u[keep], skip_lo[keep], skip_hi[keep], row_parts[keep]
        row_lo0 = np.where(skip_lo == 1, edge1[rows], lower_edge[rows])
        # Runs of bins of one part count and pattern whose parts follow each other in `out`
        # (neighbours in a binade): their rows are one strided block of it, written in place;
        # the bins of short runs, grouped, are scattered.
        cnt, f = counts[rows], first[rows]
        same = ((cnt[1:] == cnt[:-1]) & (f[1:] == f[:-1] + cnt[:-1]) & (skip_lo[1:] == skip_lo[:-1])
                & (skip_hi[1:] == skip_hi[:-1]))
        cut = np.flatnonzero(~same) + 1
        run_lo, run_hi = np.r_[0, cut], np.r_[cut, rows.size]
        long = (run_hi - run_lo) >= _STRIDED_RUN_MIN
        for r0, r1 in zip(run_lo[long], run_hi[long]):
            c, f0, k0 = int(cnt[r0]), int(f[r0]), int(skip_lo[r0])
            block = out[f0:f0 + (r1 - r0) * c].reshape(r1 - r0, c)[:, k0:k0 + int(row_parts[r0])]
            _lattice_probs(law, steps, row_lo0[r0:r1], step[rows[r0:r1]], block.shape[1], block)
        short = np.flatnonzero(np.repeat(~long, run_hi - run_lo))
        for k0, n in np.unique(np.stack([skip_lo[short], row_parts[short]]), axis=1).T:
            g = short[(skip_lo[short] == k0) & (row_parts[short] == n)]
            pos = f[g, None] + (k0 + np.arange(n))
            out[pos] = _lattice_probs(law, steps, row_lo0[g], step[rows[g]], int(n), None)
    o = np.flatnonzero(~uniform)
    if o.size:
        c_of, offset = _runs(cs[o], counts[o])
        sh = np.repeat(sub_shift[o], counts[o]).astype(np.uint64)
        key_lo = mb._coarse_first_key(c_of) + (offset.astype(np.uint64) << sh)
        lo = fmt.key_cell_edge(key_lo, -1, law._via32, law._origin)
        lo = np.where(offset == 0, np.repeat(lower_edge[o], counts[o]), lo)
        hi = np.empty_like(lo)
        hi[:-1] = lo[1:]
        ends = np.cumsum(counts[o]) - 1
        hi[ends] = upper_edge[o]
        out[_expand(first[o], counts[o])] = law._mass(lo, hi)


#: Runs of at least this many split bins of one part count, next to each other, have their parts'
#: masses written in place (`_part_probs`).
_STRIDED_RUN_MIN = 8


def _lattice_probs(law, steps, lo0, step, n, out):
    """Masses of n parts of `step` from lo0 on, per row (into `out` if given)."""
    if steps is not None:
        return steps(lo0, step, n, out=out)
    k = np.arange(n)
    masses = law._mass(lo0[:, None] + k * step[:, None], lo0[:, None] + (k + 1) * step[:, None])
    if out is None:
        return masses
    out[...] = masses
    return out


@functools.lru_cache(maxsize=None)
def _main_layout(fmt: FloatFormat):
    """Per format (32/64-bit): the main bins' first finite values, which bins can be split (finite
    values only), the finite bin range [f0, f1], and the first bin of every run of bins of equal
    spacing inside it (runs of bins of one binade; the subnormals join the smallest normals)."""
    lo, hi, spacing = _hist_cells(fmt)
    v_first = fmt.hist_bin_bounds()[0]
    splittable = ~np.isnan(v_first)
    fin = np.flatnonzero(~np.isnan(lo))
    f0, f1 = int(fin[0]), int(fin[-1])
    h = spacing[f0:f1 + 1]
    run_starts = f0 + np.concatenate([[0], np.flatnonzero(h[1:] != h[:-1]) + 1])
    half = 1 << (fmt.hist_bits - 1)
    for arr in (splittable, run_starts):
        arr.setflags(write=False)
    return v_first, splittable, f0, f1, run_starts, half


def _mass_bins_main(law) -> "MassBins":
    """`MassBins` over the main bins (see `_mass_bins`)."""
    fmt = law.fmt
    n_main = 1 << fmt.hist_bits
    low_bits = fmt.bits - fmt.hist_bits
    lo_c, hi_c, spacing = _hist_cells(fmt)
    v_first, splittable, _, _, _, _ = _main_layout(fmt)
    m_all = np.asarray(law.hist_bin_probs(), dtype=np.float64)
    r0, r1 = law._hist_span  # m_all == 0 outside [r0, r1]
    # The window: the span and one zero-mass bin either side. Outside it every coarse bin has mass 0
    # and joins the zero-mass bin at the window's edge: the window's bins, numbered from 0, are the
    # mass bins themselves (the cumulative mass outside adds nothing).
    s0, s1 = max(r0 - 1, 0), min(r1 + 1, n_main - 1)
    if r0 > r1:  # no mass anywhere (cannot happen for a law; kept total)
        s0 = s1 = 0
    m = m_all[s0:s1 + 1]
    layout = _split_and_merge(m, splittable[s0:s1 + 1], low_bits)
    n_bins = layout.n_bins
    keys_only = _keys_only(fmt, low_bits, None, n_bins, n_main)

    # (a split bin's mass lands on its first part, which is overwritten below, with its others)
    probs = np.empty(n_bins)
    probs[layout.open_start] = np.add.reduceat(m, layout.opens)
    cs = layout.split_bins + s0
    counts = layout.split_parts
    if cs.size:
        lower, upper = law._main_bin_edges(cs, lo_c, hi_c)
        _part_probs(law, keys_only, cs, counts, layout.split_shift, v_first[cs], spacing[cs], lower,
                    upper, np.ones(cs.size, dtype=bool), probs, layout.split_start)
    return _with_parts(fmt, low_bits, None, layout, probs, n_main, s0)


_ARANGE32: list = [np.arange(0, dtype=np.int32)]


def _arange32(n: int) -> np.ndarray:
    """A read-only view of 0..n-1 (int32), from one table grown by doubling (no array per call)."""
    table = _ARANGE32[0]
    if table.size < n:
        table = np.arange(1 << max(n - 1, 1).bit_length(), dtype=np.int32)
        table.setflags(write=False)
        _ARANGE32[0] = table
    return table[:n]


@dataclass(frozen=True)
class _Layout:
    """Where the mass bins lie over coarse bins 0..size-1 (`_split_and_merge`), compactly: the
    coarse bins that open a mass bin (`opens`, increasing; a merged run of light bins runs to the
    next one), the first mass bin of each and how many it opens (2**r for a split bin, else 1),
    and the split ones again with their part counts, shifts and first mass bins."""

    low_bits: int
    n_bins: int
    opens: np.ndarray  # int64
    open_start: np.ndarray  # int64
    open_size: np.ndarray  # int64
    open_split: np.ndarray  # bool: the opening bin is split
    split_bins: np.ndarray  # int64, a subset of opens
    split_parts: np.ndarray  # int64: 2**r
    split_shift: np.ndarray  # int64: low_bits - r
    split_start: np.ndarray  # int64


_LAYOUT_BLOCK = 1 << 15  # coarse bins per block of `_split_and_merge` (its scratch stays in cache)


def _split_and_merge(m: np.ndarray, splittable: np.ndarray, low_bits: int) -> _Layout:
    """The mass bins over coarse bins of masses m (see `MassBins`): a new bin where the status
    (zero / light / alone / split) changes, at every coarse bin that stands alone or is split,
    and where the cumulative mass enters a new window of MASS_BIN_MASS / 2 (a merged run of light
    bins then holds < MASS_BIN_MASS). One pass in cache-sized blocks (the cumulative mass carried
    from block to block, so it is `np.cumsum(m)` to the bit), keeping only the bins that open a
    mass bin. A split bin's 2**r parts hold > MASS_BIN_MASS / 2 each, so there are fewer than
    2 / MASS_BIN_MASS + (coarse bins) bins: int32 counts them."""
    half = MASS_BIN_MASS / 2
    can_split = low_bits > 0
    opens, splits = [], []
    carry, prev_status, prev_window = 0.0, None, None
    cum = np.empty(min(m.size, _LAYOUT_BLOCK))
    for s in range(0, m.size, _LAYOUT_BLOCK):
        mb = m[s:s + _LAYOUT_BLOCK]
        n = mb.size
        split = (mb > MASS_BIN_MASS) & splittable[s:s + n] if can_split else np.zeros(n, dtype=bool)
        status = (mb > 0).view(np.int8) + (mb > half).view(np.int8)
        status += split.view(np.int8)
        c = cum[:n]
        c[...] = mb
        c[0] += carry
        np.cumsum(c, out=c)
        carry = float(c[-1])
        c /= half
        np.floor(c, out=c)
        new = np.empty(n, dtype=bool)
        s1, s0 = status[1:], status[:-1]
        new[1:] = (s1 != s0) | (s1 >= 2) | ((s1 == 1) & (c[1:] != c[:-1]))
        new[0] = prev_status is None or (
            status[0] != prev_status or status[0] >= 2 or (status[0] == 1 and c[0] != prev_window))
        prev_status, prev_window = int(status[-1]), float(c[-1])
        at = np.flatnonzero(new)
        opens.append(at + s)
        splits.append(split[at])  # (every split bin opens its parts)
    opens = np.concatenate(opens) if opens else np.zeros(1, dtype=np.int64)
    split_open = np.concatenate(splits) if splits else np.zeros(opens.size, dtype=bool)
    at = np.flatnonzero(split_open)
    cs = opens[at]
    with np.errstate(divide="ignore"):
        r = np.ceil(np.log2(m[cs] / MASS_BIN_MASS))
    r = np.clip(r, 1, min(low_bits, MASS_BIN_MAX_SPLIT)).astype(np.int64)
    open_size = np.ones(opens.size, dtype=np.int64)
    open_size[at] = np.int64(1) << r
    open_start = np.cumsum(open_size) - open_size
    n_bins = int(open_size.sum())
    return _Layout(low_bits, n_bins, opens, open_start, open_size, split_open, cs, open_size[at],
                   low_bits - r, open_start[at])


#: 32/64-bit laws with more atoms than this between the 1e-30 quantiles get their moments and
#: collision probability from `_lattice_stats` (rows of atoms summed in closed form).
LATTICE_MIN = 1 << 15
_LAT_RHO = 1.0 / 16.0  # |x s| <= this inside a row (s: offset from the row's centre, standardized)
_LAT_Q = 16  # terms of exp(-x s - s^2/2) kept: the rest is below e^1.5 (1/16)^17 = 4e-20


def _stats_of_atoms(v: np.ndarray, p: np.ndarray):
    """(mean, central moments 0..8, sum p**2, (anchor, offset)) of atoms (values v, masses p):
    mean = anchor + offset, with the offset unrounded by the anchor's ulp."""
    collision = float(np.dot(p, p))
    fin = np.isfinite(v)
    if np.any(p[~fin] > 0):
        return np.nan, np.full(9, np.nan), collision, (np.nan, 0.0)
    keep = fin & (p > 0)
    v, p = v[keep], p[keep]
    total = p.sum()
    # Offsets from the heaviest atom (exact: the atoms are within a factor 2 of each other or far
    # apart), and the mean as an offset from it: a large mean with a tiny spread keeps its digits
    # (v - mean with the mean rounded to float64 would shift every offset by up to half an ulp).
    c = v[np.argmax(p)]
    pw = p / total
    offset = float(np.dot(pw, v - c))
    mean = c + offset
    dv = (v - c) - offset
    cm = np.empty(9)
    for k in range(9):
        cm[k] = float(np.dot(pw, dv**k)) if k else 1.0
    cm[1] = 0.0
    return float(mean), cm, collision, (float(c), offset)


def _first_true(state, lo: int, hi: int, guess: int):
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


def _lattice_stats(law, klo: int, khi: int):
    """`RoundedLaw._atom_stats` of a 32/64-bit law with many atoms, without a pass over them.

    The keys klo..khi are cut into runs of one binade; inside a run the atoms are v0 + k h with
    cells [v - h/2, v + h/2] (measured from the law's origin, exact: `_origin`). Rows of 2K + 1
    such atoms around a centre x_r (standardized, in the law's frame) have masses

        p_k = w e^{l(x_r)} int_{-1/2}^{1/2} exp(-x_r s - s^2/2) dt,  s = k d + w t,

    (l = log density relative to the frame's anchor, d = w = h / std): a polynomial in k from the
    Taylor series of exp(-x s - s^2/2) (Hermite polynomials; |x s| <= 1/16, 16 terms), which the
    law gives (`TruncatedNormal.lattice_series`), so the row's sums of p, p k^m (m <= 8) and p^2
    are closed forms in sum_k k^j. The masses are those of `_mass` to ~1e-16 relative (the same
    integral, the same standardization); the atoms at run ends, the bound atoms and rows'
    leftovers are enumerated (`_enumerate_keys`).
    None where this does not apply (the enumeration then does it all)."""
    fmt = law.fmt
    dist = law._frame
    origin = law._origin
    series = getattr(dist, "lattice_series", None)
    if series is None or law._via32:
        return None
    kf_lo, kf_hi = fmt.finite_key_range
    if not (kf_lo <= klo <= khi <= kf_hi):
        return None
    mb = fmt.man_bits
    cuts = list(range(((klo >> mb) + 1) << mb, khi + 1, 1 << mb))
    if len(cuts) > 64:
        return None
    run_lo = [klo] + cuts
    run_hi = [c - 1 for c in cuts] + [khi]
    q = np.arange(_LAT_Q + 1)
    rows_v, rows_p0, rows_s, rows_c2, rows_n = [], [], [], [], []
    extra = []  # key ranges enumerated atom by atom
    for ka0, kb0 in zip(run_lo, run_hi):
        if kb0 - ka0 < 6:
            extra.append((ka0, kb0))
            continue
        ka = ka0 + 1
        kb = kb0 - 1
        va = float(fmt.values_from_keys(np.array([ka], dtype=np.uint64))[0])
        vb = float(fmt.values_from_keys(np.array([kb], dtype=np.uint64))[0])
        big_h = float(fmt.spacing(np.array([va]))[0])
        # (v - origin is exact in the law's window: `_origin`)
        half, _, log_base, beta = series(va - origin, vb - origin, big_h, _LAT_RHO, _LAT_Q)
        n_rows = log_base.size
        if n_rows == 0:
            extra.append((ka0, kb0))
            continue
        width = 2 * half + 1
        extra.append((ka0, ka - 1))
        done = ka + n_rows * width
        extra.append((done, kb0))
        v_r = va + (np.arange(n_rows) * width + half) * big_h  # the rows' centres
        kappa = np.arange(-half, half + 1) / half
        powers = np.empty(2 * _LAT_Q + 9)
        acc = np.ones(width)
        for j in range(powers.size):
            powers[j] = acc.sum()
            acc *= kappa
        base = np.exp(log_base)
        qm = powers[q[:, None] + np.arange(9)[None, :]]  # (Q+1) x 9: sum kappa^(n+m)
        scale = (big_h * half) ** np.arange(9)
        s_rm = base[:, None] * (beta @ qm) * scale[None, :]  # sum_k p (k H)^m
        qc = powers[q[:, None] + q[None, :]]
        c2 = np.exp(2.0 * log_base) * np.einsum("rn,nm,rm->r", beta, qc, beta)
        rows_v.append(v_r)
        rows_p0.append(s_rm[:, 0])
        rows_s.append(s_rm)
        rows_c2.append(c2)
        rows_n.append(np.full(n_rows, float(width)))
    if not rows_v:
        return None
    ev, ep = [], []
    for k0, k1 in extra:
        if k1 >= k0:
            v, p = law._enumerate_keys(k0, k1)
            ev.append(v)
            ep.append(p)
    ev = np.concatenate(ev) if ev else np.empty(0)
    ep = np.concatenate(ep) if ep else np.empty(0)
    rv = np.concatenate(rows_v)
    rp0 = np.concatenate(rows_p0)
    rs = np.concatenate(rows_s)
    collision = float(np.sum(np.concatenate(rows_c2))) + float(np.dot(ep, ep))
    keep = ep > 0
    ev, ep = ev[keep], ep[keep]
    total = float(rp0.sum()) + float(ep.sum())
    # The centre: the heaviest enumerated atom or the centre of the row heaviest per atom (only
    # the digits of the sums depend on it: any atom near the top will do).
    per_atom = rp0 / np.concatenate(rows_n)
    i_row = int(np.argmax(per_atom))
    if ep.size and ep.max() > per_atom[i_row]:
        c = float(ev[np.argmax(ep)])
    else:
        c = float(rv[i_row])
    offset = (float(np.dot(rp0, rv - c)) + float(rs[:, 1].sum()) + float(np.dot(ep, ev - c))) / total
    mean = c + offset
    d_r = (rv - c) - offset  # offsets from c, not from the rounded mean (see `_stats_of_atoms`)
    dv = (ev - c) - offset
    cm = np.empty(9)
    cm[0], cm[1] = 1.0, 0.0
    for k in range(2, 9):
        acc = np.zeros(rv.size)
        for m in range(k + 1):
            acc += math.comb(k, m) * d_r ** (k - m) * rs[:, m]
        cm[k] = (float(acc.sum()) + float(np.dot(ep, dv**k))) / total
    return float(mean), cm, collision, (c, offset)


_SQRT2 = np.sqrt(2.0)
_LOG_2_SQRT_PI = np.log(2.0 * np.sqrt(np.pi))


@functools.lru_cache(maxsize=None)
def _finite_cells(fmt: FloatFormat, via_float32: bool):
    """Every finite lattice value of a <=16-bit format in key order, with its cell edges."""
    klo, khi = fmt.finite_key_range
    keys = np.arange(klo, khi + 1, dtype=np.uint64)
    vals = fmt.values_from_keys(keys)
    keep = ~np.isnan(vals)  # the fnuz NaN sits inside the finite key range
    keys, vals = keys[keep], vals[keep]
    lo, hi = fmt.cell_edges(vals, via_float32)
    for arr in (keys, vals, lo, hi):
        arr.setflags(write=False)
    return keys, vals, lo, hi


@functools.lru_cache(maxsize=None)
def _hist_cells(fmt: FloatFormat):
    """X-interval [lo, hi] covered by each histogram bin's finite values, and the bin's lattice
    spacing (NaN where the bin has no finite value); for the 32/64-bit formats, whose finite keys are
    one contiguous range and whose bins each lie inside one binade."""
    shift = np.uint64(fmt.bits - fmt.hist_bits)
    first = np.arange(1 << fmt.hist_bits, dtype=np.uint64) << shift
    klo, khi = (np.uint64(k) for k in fmt.finite_key_range)
    kl = np.maximum(first, klo)
    kh = np.minimum(first + ((np.uint64(1) << shift) - np.uint64(1)), khi)
    empty = kl > kh
    kl = np.where(empty, klo, kl)
    v = fmt.values_from_keys(kl)
    below = fmt.values_from_keys(np.maximum(kl, klo + np.uint64(1)) - np.uint64(1))
    # Adjacent bins share an edge: the midpoint below a bin's first value is the top of the bin below.
    edge = below + (v - below) * 0.5
    outer = fmt.overflow_threshold
    lo = np.where(kl == klo, -outer, edge)
    hi = np.append(lo[1:], outer)
    hi = np.where(kh == khi, outer, hi)
    spacing = fmt.spacing(v)
    lo, hi, spacing = (np.where(empty, np.nan, x) for x in (lo, hi, spacing))
    for arr in (lo, hi, spacing):
        arr.setflags(write=False)
    return lo, hi, spacing


def _origin(dist, fmt: FloatFormat, bulk: tuple[float, float]) -> float:
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
    x_lo, x_hi = bulk  # (the law's `_bulk`)
    near = abs(origin) / 4.0
    if not (np.isfinite(origin) and origin - near <= x_lo and x_hi <= origin + near):
        return 0.0
    return origin


def _centred(dist, origin: float):
    """`dist` shifted by -origin (itself for origin 0): the law whose masses `RoundedLaw._mass` takes."""
    if origin == 0.0:
        return dist
    return type(dist)(float(dist.loc) - origin, float(dist.scale), float(dist.a) - origin,
                      float(dist.b) - origin)


class RoundedLaw:
    """Law of Y = RN(X), X ~ dist, in one floating format. Build it with `rounded_law`."""

    def __init__(self, dist, fmt: FloatFormat, rounding: str = "rn"):
        if rounding not in ("rn", "torch"):
            raise ValueError(f"rounding must be 'rn' or 'torch', got {rounding!r}")
        self.dist = dist
        self.fmt = fmt
        self.rounding = rounding
        self._via32 = rounding == "torch"
        # Masses are integrals of the law centred on `_origin` (`_centred`): X-edges below are
        # X - origin, so float64 cells keep their exact midpoints.
        self._origin = _origin(dist, fmt, self._bulk)
        self._frame = _centred(dist, self._origin)
        self._a = float(self._frame.a)
        self._b = float(self._frame.b)
        self.rn_a = self._rn_bound(float(dist.a))
        self.rn_b = self._rn_bound(float(dist.b))
        # Integration limits of "every lattice value": excludes mass the format sends to NaN.
        self._x_bottom = float(self._cells(np.array([-np.inf if fmt.has_inf else -fmt.max_finite]))[0][0])
        self._x_top = float(self._cells(np.array([np.inf if fmt.has_inf else fmt.max_finite]))[1][0])
        self._keys = self._values = self._probs = None
        if fmt.bits <= 16:
            self._enumerate_all()
            real = self._values[~np.isnan(self._values)]
            # Empty only when a fnuz format sends all of [a, b] to NaN.
            self.support_lo = float(real[0]) if real.size else np.nan
            self.support_hi = float(real[-1]) if real.size else np.nan
        else:
            self.support_lo = self._support_end(self.rn_a, +1)
            self.support_hi = self._support_end(self.rn_b, -1)
        self.atom_a = float(self.atom_probs(self.rn_a))
        self.atom_b = float(self.atom_probs(self.rn_b))

    @property
    def origin(self) -> float:
        """Where this law's X-edges (cell edges, `_mass` intervals) are measured from (`_origin`):
        0, or for float64 a lattice value near the window."""
        return self._origin

    # ------------------------------------------------------------------ building blocks
    def _rn(self, x):
        return self.fmt.round_torch(x) if self._via32 else self.fmt.round(x)

    def _rn_bound(self, x: float) -> float:
        r = float(self._rn(np.array([x]))[0])
        # An infinite bound the format cannot hold (fnuz: inf -> NaN) stays infinite; a finite one
        # beyond a fnuz format's range really rounds to NaN.
        return x if np.isnan(r) and np.isinf(x) else r

    def _mass(self, lo, hi, out=None, ordered=False) -> np.ndarray:
        """P(lo <= X <= hi) for X-intervals, clipped to [a, b]; 0 for empty or NaN intervals.
        out: 1-D float64 to write into (1-D intervals only; a `TruncatedNormal` law). ordered:
        the intervals follow each other in increasing order (a hint for `prob_cells`)."""
        cells = getattr(self._frame, "prob_cells", None)
        # Far-tail bins of a wide format make dist.prob's intermediates overflow harmlessly.
        with np.errstate(over="ignore", under="ignore", invalid="ignore"):
            if cells is not None:  # TruncatedNormal: one exp per short interval; it clips itself
                lo, hi = np.broadcast_arrays(np.asarray(lo, dtype=np.float64),
                                             np.asarray(hi, dtype=np.float64))
                if out is not None:
                    return cells(lo, hi, out=out, ordered=ordered)
                return np.asarray(cells(lo, hi), dtype=np.float64).reshape(lo.shape)
            lo = np.maximum(np.asarray(lo, dtype=np.float64), self._a)
            hi = np.minimum(np.asarray(hi, dtype=np.float64), self._b)
            lo, hi = np.broadcast_arrays(lo, hi)
            pos = hi > lo
            res = np.zeros(lo.shape)
            if pos.any():
                res[pos] = self._frame.prob(lo[pos], hi[pos])
        if out is not None:
            out[...] = res
            return out
        return res

    def _log_mass(self, lo, hi) -> np.ndarray:
        lo = np.maximum(np.asarray(lo, dtype=np.float64), self._a)
        hi = np.minimum(np.asarray(hi, dtype=np.float64), self._b)
        lo, hi = np.broadcast_arrays(lo, hi)
        pos = hi > lo
        out = np.full(lo.shape, -np.inf)
        if pos.any():
            with np.errstate(over="ignore", under="ignore"):
                out[pos] = self._frame.log_prob(lo[pos], hi[pos])
        return out

    def _cells(self, v):
        """X-cells (minus the origin) of lattice values."""
        return self.fmt.cell_edges(v, self._via32, self._origin)

    def _support_end(self, start: float, step: int) -> float:
        lo, hi = self._cells(np.array([start]))
        if min(hi[0], self._b) > max(lo[0], self._a):
            return start
        # The bound sits exactly on the far edge of its rounding cell: the neighbour is the first atom.
        nb = self.fmt.next_up(start) if step > 0 else self.fmt.next_down(start)
        return float(nb)

    def _enumerate_all(self) -> None:
        keys, vals, lo, hi = _finite_cells(self.fmt, self._via32)
        i0 = int(np.searchsorted(hi, self._a, side="right"))
        i1 = int(np.searchsorted(lo, self._b, side="left"))
        k, v, cl, ch = keys[i0:i1], vals[i0:i1], lo[i0:i1], hi[i0:i1]
        p = self._mass(cl, ch)
        pos = np.minimum(ch, self._b) > np.maximum(cl, self._a)
        k, v, cl, ch, p = k[pos], v[pos], cl[pos], ch[pos], p[pos]
        extra_k, extra_p, extra_lo, extra_hi = [], [], [], []
        for key, olo, ohi in self.fmt.overflow_cells(self._via32):
            if min(ohi, self._b) > max(olo, self._a):
                extra_k.append(key)
                extra_p.append(float(self._mass(olo, ohi)))
                extra_lo.append(olo)
                extra_hi.append(ohi)
        if extra_k:
            ek = np.array(extra_k, dtype=np.uint64)
            uk, inv = np.unique(ek, return_inverse=True)  # fnuz: both tails share one NaN
            up = np.bincount(inv, weights=extra_p)
            uv = self.fmt.values_from_keys(uk)
            k = np.concatenate([k, uk])
            v = np.concatenate([v, uv])
            p = np.concatenate([p, up])
            order = np.argsort(k, kind="stable")
            k, v, p = k[order], v[order], p[order]
        self._keys, self._values, self._probs = k, v, p
        for arr in (k, v, p):
            arr.setflags(write=False)

    def _need_atoms(self):
        if self._values is None:
            raise ValueError(
                f"{self.fmt.name} has 2**{self.fmt.bits} lattice values: its law is not enumerated; "
                "use bin_probs / hist_bin_probs / atom_probs"
            )

    # ------------------------------------------------------------------ atoms
    @property
    def values(self) -> np.ndarray:
        """Every atom with (mathematically) positive mass, in ordered-key (= increasing) order:
        finite values, +-inf where overflow reaches them, NaN for a format's overflow NaN (fnuz).
        Atoms more than ~37 std out have probs that underflow to 0.0; see `log_probs`."""
        self._need_atoms()
        return self._values

    @property
    def probs(self) -> np.ndarray:
        self._need_atoms()
        return self._probs

    @property
    def keys(self) -> np.ndarray:
        """Ordered keys (uint64) of `values`."""
        self._need_atoms()
        return self._keys

    @functools.cached_property
    def log_probs(self) -> np.ndarray:
        """log P(Y = v) for `values`, finite even where `probs` underflows."""
        self._need_atoms()
        lo, hi = self._cells(self._values)
        out = self._log_mass(lo, hi)
        nan_atoms = np.isnan(self._values)
        if nan_atoms.any():
            out[nan_atoms] = np.log(self._probs[nan_atoms])
        return out

    def atom_probs(self, values) -> np.ndarray:
        """P(Y == v) for float64 values (0 for values not on the lattice), any dtype."""
        lo, hi = self._cells(values)
        return self._mass(lo, hi)

    # ------------------------------------------------------------------ intervals
    def _floor(self, v: np.ndarray) -> np.ndarray:
        """Largest lattice value <= v (NaN below the lattice); keeps the sign of a zero v."""
        r = self.fmt.round(v)
        r = np.where(r > v, self.fmt.next_down(r), r)
        return np.where(np.isnan(r) & (v > 0), self.fmt.max_finite, r)

    def _ceil(self, v: np.ndarray) -> np.ndarray:
        r = self.fmt.round(v)
        r = np.where(r < v, self.fmt.next_up(r), r)
        return np.where(np.isnan(r) & (v < 0), -self.fmt.max_finite, r)

    def _edge_le(self, v) -> np.ndarray:
        """X-edge e with  Y <= v  <=>  X < e  (zeros compare equal)."""
        v = np.asarray(v, dtype=np.float64)
        f = self._floor(v)
        f = np.where(f == 0, 0.0, f)
        e = self._cells(f)[1]
        e = np.where(np.isnan(f) & ~np.isnan(v), self._x_bottom, e)
        return e

    def _edge_ge(self, v) -> np.ndarray:
        """X-edge e with  Y >= v  <=>  X > e  (zeros compare equal)."""
        v = np.asarray(v, dtype=np.float64)
        c = self._ceil(v)
        c = np.where(c == 0, -0.0 if self.fmt.has_neg_zero else 0.0, c)
        e = self._cells(c)[0]
        e = np.where(np.isnan(c) & ~np.isnan(v), self._x_top, e)
        return e

    def prob_le(self, v) -> np.ndarray:
        """P(Y <= v), from the X-mass left of the edge (accurate in the left tail); NaN for NaN v."""
        return self._nan_in(v, self._mass(self._x_bottom, self._edge_le(v)))

    def prob_gt(self, v) -> np.ndarray:
        """P(Y > v), from the X-mass right of the edge (accurate in the right tail)."""
        return self._nan_in(v, self._mass(self._edge_le(v), self._x_top))

    def prob_ge(self, v) -> np.ndarray:
        """P(Y >= v), from the X-mass right of the edge."""
        return self._nan_in(v, self._mass(self._edge_ge(v), self._x_top))

    def prob_lt(self, v) -> np.ndarray:
        """P(Y < v), from the X-mass left of the edge."""
        return self._nan_in(v, self._mass(self._x_bottom, self._edge_ge(v)))

    def prob_le_gt(self, v) -> tuple[np.ndarray, np.ndarray]:
        """(P(Y <= v), P(Y > v)) for one X-mass evaluation per value instead of two: the side of the
        edge holding at most half of the law is computed, the other is its complement (>= 1/2, so
        1 - p loses nothing). NaN for NaN v. Same values as prob_le / prob_gt to ~1e-16 relative."""
        return self._split_mass(v, self._edge_le(v))

    def prob_lt_ge(self, v) -> tuple[np.ndarray, np.ndarray]:
        """(P(Y < v), P(Y >= v)), as `prob_le_gt`."""
        return self._split_mass(v, self._edge_ge(v))

    def _split_mass(self, v, edge) -> tuple[np.ndarray, np.ndarray]:
        edge = np.asarray(edge, dtype=np.float64)
        if not (self._x_bottom <= self._a and self._b <= self._x_top):
            # Part of the law rounds to NaN (a fnuz/fn format's overflow): the sides do not add
            # up to one, so each is evaluated on its own.
            return (self._nan_in(v, self._mass(self._x_bottom, edge)),
                    self._nan_in(v, self._mass(edge, self._x_top)))
        left = edge <= self._x_median
        below, above = np.empty(edge.shape), np.empty(edge.shape)
        below[left] = self._mass(self._x_bottom, edge[left])
        above[~left] = self._mass(edge[~left], self._x_top)
        above[left], below[~left] = 1.0 - below[left], 1.0 - above[~left]
        return self._nan_in(v, below), self._nan_in(v, above)

    @functools.cached_property
    def _x_median(self) -> float:
        return float(self._frame.ppf(0.5))

    @staticmethod
    def _nan_in(v, p):
        return np.where(np.isnan(np.asarray(v, dtype=np.float64)), np.nan, p)

    def bin_probs(self, lo_values, hi_values) -> np.ndarray:
        """P(lo <= Y <= hi), vectorized, any dtype. Ends are lattice values (others are moved inwards
        to the lattice); a zero end keeps its sign, as ordered keys do: [+0, x] excludes -0."""
        lo, hi = np.broadcast_arrays(np.asarray(lo_values, dtype=np.float64), np.asarray(hi_values, dtype=np.float64))
        out = np.zeros(lo.shape)
        # Ranges that miss the support have no mass: skip their edges (half of a 2**20-bin histogram).
        m = (hi >= self.support_lo) & (lo <= self.support_hi)
        if m.any():
            out[m] = self._mass(self._end_edge(lo[m], -1), self._end_edge(hi[m], +1))
        return out

    def _end_edge(self, v, side: int) -> np.ndarray:
        """X-edge of a bin end: lower edge of the first lattice value >= v (side=-1) or upper edge of
        the last one <= v (side=+1). Works on keys; ends off the finite lattice take the slow path."""
        fmt = self.fmt
        v = np.asarray(v, dtype=np.float64)
        u = fmt.encode(v)
        r = fmt.decode(u)
        k = fmt.keys_from_bits(u)
        move = (r < v) if side < 0 else (r > v)
        k = np.where(move, fmt.step_key(k, -side)[0], k)
        klo, khi = (np.uint64(x) for x in fmt.finite_key_range)
        fast = np.isfinite(r) & (k >= klo) & (k <= khi)
        edge = fmt.key_cell_edge(np.where(fast, k, klo), side, self._via32, self._origin)
        if not fast.all():
            slow = ~fast
            w = self._ceil(v[slow]) if side < 0 else self._floor(v[slow])
            edge[slow] = self._cells(w)[0 if side < 0 else 1]
        return edge

    # ------------------------------------------------------------------ histogram
    def _main_bin_edges(self, bins, lo: np.ndarray, hi: np.ndarray):
        """X-edges (minus the origin) of main bins (32/64-bit; `lo`, `hi`: `_hist_cells`; bins: an
        index array or a slice): from the format's table (a slice: views of it), or from the
        bins' end keys when measured from an origin, where the table's float64 midpoints would not
        be exact."""
        if self._origin == 0.0:
            return lo[bins], hi[bins]
        fmt = self.fmt
        shift = np.uint64(fmt.bits - fmt.hist_bits)
        klo, khi = (np.uint64(k) for k in fmt.finite_key_range)
        if isinstance(bins, slice):
            bins = np.arange(bins.start, bins.stop)
        first = np.asarray(bins).astype(np.uint64) << shift
        last = first + ((np.uint64(1) << shift) - np.uint64(1))
        first, last = np.clip(first, klo, khi), np.clip(last, klo, khi)
        return (fmt.key_cell_edge(first, -1, self._via32, self._origin),
                fmt.key_cell_edge(last, +1, self._via32, self._origin))

    def hist_bin_probs(self) -> np.ndarray:
        """Mass of each ordered-key histogram bin (float64[2**hist_bits]); cached."""
        return self._hist

    @functools.cached_property
    def _hist(self) -> np.ndarray:
        fmt = self.fmt
        out = np.zeros(1 << fmt.hist_bits)
        shift = np.uint64(fmt.bits - fmt.hist_bits)
        if self._values is not None:
            out[(self._keys >> shift).astype(np.intp)] = self._probs
        else:
            lo, hi, _ = _hist_cells(fmt)
            i0, i1 = self._live_bins
            if i0 <= i1:
                self._mass(*self._main_bin_edges(slice(i0, i1 + 1), lo, hi), out=out[i0:i1 + 1],
                           ordered=True)
            for key, olo, ohi in fmt.overflow_cells(self._via32):
                out[int(np.uint64(key) >> shift)] += float(self._mass(olo - self._origin, ohi - self._origin))
        out.setflags(write=False)
        return out

    @functools.cached_property
    def _bulk(self) -> tuple[float, float]:
        """X-range (absolute) outside which every interval has mass exactly 0.0 in float64 (beyond
        exp(-800); [a, b] for a dist without `bulk`)."""
        bulk = getattr(self.dist, "bulk", None)
        return (float(self.dist.a), float(self.dist.b)) if bulk is None else tuple(float(x) for x in bulk(-800.0))

    @functools.cached_property
    def _live_bins(self) -> tuple[int, int]:
        """(i0, i1): the main bins whose cells meet the bulk of [a, b] (32/64-bit); the others have
        mass exactly 0. Cells run in key order over the finite bins, so this is one index range."""
        lo, hi, _ = _hist_cells(self.fmt)
        _, _, f0, f1, _, _ = _main_layout(self.fmt)
        x_lo, x_hi = self._bulk
        i0 = f0 + int(np.searchsorted(hi[f0:f1 + 1], x_lo, side="right"))
        i1 = f0 + int(np.searchsorted(lo[f0:f1 + 1], x_hi, side="left")) - 1
        return i0, i1

    @functools.cached_property
    def _hist_span(self) -> tuple[int, int]:
        """(r0, r1) for 32/64-bit: every main bin outside holds mass exactly 0 (the live bins and
        the bins of the overflow patterns that get mass); (1, 0) when none has mass."""
        i0, i1 = self._live_bins
        h = self.hist_bin_probs()
        shift = np.uint64(self.fmt.bits - self.fmt.hist_bits)
        idx = [int(np.uint64(k) >> shift) for k, _, _ in self.fmt.overflow_cells(self._via32)]
        idx = [i for i in idx if h[i] > 0]
        if i0 <= i1:
            idx += [i0, i1]
        return (min(idx), max(idx)) if idx else (1, 0)

    # ------------------------------------------------------------------ fine bins
    @functools.cached_property
    def fine_bins(self) -> FineBins | None:
        """The fine histogram of a narrow 32/64-bit law (see `FineBins`); None where the main
        histogram already resolves the support (or the format has one bin per value)."""
        fmt = self.fmt
        if fmt.bits <= 16 or not (np.isfinite(self.support_lo) and np.isfinite(self.support_hi)):
            return None
        if np.count_nonzero(self.hist_bin_probs() > 0) >= FINE_BINS_BELOW:
            return None
        # From the first to the last value that can hold mass: a half-infinite window's support
        # reaches the end of the format, its mass only a few std beyond the mean.
        x_lo, x_hi = self._bulk
        lo = max(self.support_lo, float(self._floor(np.array([x_lo]))[0]))
        hi = min(self.support_hi, float(self._ceil(np.array([x_hi]))[0]))
        k_lo, k_hi = (int(k) for k in fmt.ordered_keys(np.array([lo, hi])))
        span = k_hi - k_lo + 1
        if span > 1 << (fmt.bits - 2):  # the engine's signed key offsets must not overflow
            return None
        shift = max(0, (span - 1).bit_length() - FINE_BINS_MAX.bit_length() + 1)
        return FineBins(k_lo, shift, ((span - 1) >> shift) + 1)

    def fine_bin_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Smallest and largest value of each fine bin (float64 arrays)."""
        fb = self.fine_bins
        if fb is None:
            raise ValueError("this law has no fine bins")
        first = fb.key_lo + (np.arange(fb.n_bins, dtype=np.uint64) << np.uint64(fb.shift))
        k_max = fb.key_lo + (fb.n_bins << fb.shift) - 1
        last = np.minimum(first + np.uint64((1 << fb.shift) - 1), np.uint64(k_max))
        return self.fmt.values_from_keys(first), self.fmt.values_from_keys(last)

    @functools.cached_property
    def _fine_edges(self) -> tuple[np.ndarray, np.ndarray]:
        """X cell edges of each fine bin: lower edge of its first key, upper edge of its last key
        (`FloatFormat.key_cell_edge`); a bin's upper edge is the next one's lower edge."""
        fb = self.fine_bins
        fmt = self.fmt
        first = fb.key_lo + (np.arange(fb.n_bins + 1, dtype=np.uint64) << np.uint64(fb.shift))
        lo_ext = fmt.key_cell_edge(first, -1, self._via32, self._origin)
        hi = lo_ext[1:].copy()
        klo, khi = fmt.finite_key_range
        nxt = first[1:]
        # the upper edge of key k - 1 is the lower edge of key k for klo < k <= khi only
        odd = (nxt <= np.uint64(klo)) | (nxt > np.uint64(khi))
        if odd.any():
            hi[odd] = fmt.key_cell_edge(nxt[odd] - np.uint64(1), +1, self._via32, self._origin)
        lo = lo_ext[:-1]
        for arr in (lo, hi):
            arr.setflags(write=False)
        return lo, hi

    @functools.cached_property
    def _fine_probs(self) -> np.ndarray:
        lo, hi = self.fine_bin_bounds()
        # = bin_probs(lo, hi): for bins with finite lattice ends bin_probs' edges are these, and
        # bins off the support get 0 from the clipping to [a, b] as they do from bin_probs' mask.
        out = self._mass(*self._fine_edges)
        odd = ~(np.isfinite(lo) & np.isfinite(hi))
        if odd.any():
            out[odd] = self.bin_probs(lo[odd], hi[odd])
        out.setflags(write=False)
        return out

    def fine_bin_probs(self) -> np.ndarray:
        """Mass of each fine bin (float64[n_bins]); cached. Sums to 1 up to rounding."""
        return self._fine_probs

    # ------------------------------------------------------------------ mass bins
    @functools.cached_property
    def mass_bins(self) -> "MassBins | None":
        """Bins of about equal mass over the whole key range of a 32/64-bit law (see `MassBins`);
        None for <= 16-bit formats, whose histogram already has one bin per value."""
        if self.fmt.bits <= 16:
            return None
        return _mass_bins(self)

    # ------------------------------------------------------------------ moments
    @functools.cached_property
    def _bulk_keys(self) -> tuple[int, int]:
        """Keys of the 1e-30 quantile values (`ENUMERATE_TAIL`), lower and upper (32/64-bit)."""
        return (self._quantile_key(ENUMERATE_TAIL, lower=True),
                self._quantile_key(ENUMERATE_TAIL, lower=False))

    @functools.cached_property
    def _atom_stats(self):
        """(mean, central moments 0..8, collision probability) of the atoms: every atom for <=16-bit
        formats; for 32/64-bit the atoms between the 1e-30 quantiles when there are at most
        ENUMERATE_MAX of them (else None). Many atoms: `_lattice_stats` (no per-atom work)."""
        if self._values is not None:
            return _stats_of_atoms(self._values, self._probs)
        klo, khi = self._bulk_keys
        n = khi - klo + 1
        if n > ENUMERATE_MAX:
            return None
        if n > LATTICE_MIN:
            stats = _lattice_stats(self, klo, khi)
            if stats is not None:
                return stats
        return _stats_of_atoms(*self._enumerate_keys(klo, khi))

    def _enumerate_keys(self, klo: int, khi: int) -> tuple[np.ndarray, np.ndarray]:
        """(values, probs) of the lattice values at keys klo..khi (32/64-bit; NaN patterns left out).
        Neighbouring cells share an edge: n + 1 edges for n values, each formed as
        `FloatFormat.key_cell_edge` forms it (the same float64), then one `_mass` call."""
        fmt = self.fmt
        kf_lo, kf_hi = fmt.finite_key_range
        if not (kf_lo <= klo <= khi <= kf_hi):
            keys = np.arange(klo, khi + 1, dtype=np.uint64)
            vals = fmt.values_from_keys(keys)
            vals = vals[~np.isnan(vals)]
            return vals, self.atom_probs(vals)
        e_lo, e_hi = max(klo - 1, kf_lo), min(khi + 1, kf_hi)
        w = fmt.values_from_keys(np.arange(e_lo, e_hi + 1, dtype=np.uint64))
        mid = (w[:-1] - self._origin) + (w[1:] - w[:-1]) * 0.5
        outer = np.inf if fmt.overflow == "saturate" else fmt._thr(self._via32)
        parts = (([[-outer - self._origin]] if klo == kf_lo else []) + [mid]
                 + ([[outer - self._origin]] if khi == kf_hi else []))
        edges = np.concatenate(parts)
        vals = w[klo - e_lo: klo - e_lo + (khi - klo + 1)]
        return vals, self._mass(edges[:-1], edges[1:])

    def _quantile_key(self, eps: float, lower: bool) -> int:
        """Key of the last lattice value with P(Y < v) <= eps (lower) / first with P(Y > v) <= eps.

        What a bisection over the support's keys finds, in a handful of vectorized evaluations: a
        bracket around the key of the quantile of X, then 64-way sections (`_first_true`); a
        bisection proper where the probabilities are not monotone in the key."""
        fmt = self.fmt
        k0 = int(fmt.ordered_keys(np.array([self.support_lo]))[0])
        k1 = int(fmt.ordered_keys(np.array([self.support_hi]))[0])
        if k1 - k0 <= 1:
            return k0 if lower else k1
        val = lambda ks: fmt.values_from_keys(np.array(ks, dtype=np.uint64))
        with np.errstate(all="ignore"):
            x = float(self.dist.ppf(eps) if lower else self.dist.isf(eps))
        guess = int(fmt.ordered_keys(np.array([x]))[0]) if np.isfinite(x) else (k0 + k1) // 2
        if lower:  # first key with P(Y < v) > eps, minus one
            state = lambda ks: self.prob_lt(val(ks)) > eps
        else:  # first key with P(Y > v) <= eps
            state = lambda ks: self.prob_gt(val(ks)) <= eps
        t = _first_true(state, k0, k1, guess)
        if t is None:  # not monotone: the bisection itself
            t = self._bisect_key(eps, lower, k0, k1)
            return t
        return t - 1 if lower else t

    def _bisect_key(self, eps: float, lower: bool, k0: int, k1: int) -> int:
        fmt = self.fmt
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

    @property
    def moments_from_atoms(self) -> bool:
        """True when the moments are those of the atoms; False: the continuous law's (see `sheppard_bound`)."""
        return self._atom_stats is not None

    @functools.cached_property
    def sheppard_bound(self) -> float:
        """For continuous-law moments: h**2 / (12 var) with h the widest lattice spacing between the
        1e-30 quantiles -- Sheppard's relative change of the variance by rounding (0 when exact)."""
        if self._atom_stats is not None:
            return 0.0
        fmt = self.fmt
        v = fmt.values_from_keys(np.array(self._bulk_keys, dtype=np.uint64))
        h = float(np.max(fmt.spacing(v)))
        return h * h / (12.0 * float(self.dist.var))

    @functools.cached_property
    def _moments(self) -> tuple[float, np.ndarray, tuple[float, float]]:
        """(mean, central moments 0..8, (anchor, offset): mean = anchor + offset) of Y."""
        stats = self._atom_stats
        if stats is None:
            # 32/64-bit with >2**22 atoms in the bulk: the lattice is then fine against the spread
            # (spacing <= 2**-23 |x|), and rounding changes the variance by h**2/12 relative to var,
            # below 1e-10 in every case of the grid (`sheppard_bound`), far under any sampling error.
            d = self.dist
            cm = np.array([1.0, 0.0] + [float(d.central_moment(k)) for k in range(2, 9)])
            return float(d.mean), cm, (float(d.mean), 0.0)
        return stats[0], stats[1], stats[3]

    @property
    def mean(self) -> float:
        return self._moments[0]

    def mean_offset(self, center: float) -> float:
        """E[Y] - center, without rounding E[Y] to float64 first: a float64 law a few ulps wide
        has a mean whose own rounding (half an ulp) is many standard errors of a sample mean."""
        anchor, offset = self._moments[2]
        return (anchor - float(center)) + offset

    @property
    def var(self) -> float:
        return float(self._moments[1][2])

    @property
    def std(self) -> float:
        return float(np.sqrt(self.var))

    @property
    def skewness(self) -> float:
        cm = self._moments[1]
        return float(cm[3] / cm[2] ** 1.5) if cm[2] > 0 else np.nan

    @property
    def kurtosis(self) -> float:
        """Excess kurtosis of Y."""
        cm = self._moments[1]
        return float(cm[4] / cm[2] ** 2 - 3.0) if cm[2] > 0 else np.nan

    def central_moment(self, k: int) -> float:
        if not 0 <= int(k) <= 8:
            raise ValueError(f"central_moment: k must be in 0..8, got {k}")
        return float(self._moments[1][int(k)])

    # ------------------------------------------------------------------ collisions
    @functools.cached_property
    def collision_prob(self) -> float:
        """sum_v P(Y = v)**2: exact from the atoms where they are enumerated (<=16-bit, and 32/64-bit
        laws with few atoms in the bulk). Otherwise each histogram bin, whose cells share one width h,
        contributes h * integral of f**2 over it (f the density of X): sum p_v**2 with p_v = h f(v),
        relative error O((h / std)**2). The atoms whose cells are not a full h -- the two bound atoms,
        the zeros and the powers of two (wider spacing above than below) -- are taken exactly."""
        stats = self._atom_stats
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
        if self._values is not None:
            return float(np.sum(self._probs ** 3))
        klo, khi = self._bulk_keys
        if khi - klo + 1 <= LATTICE_MIN:
            _, p = self._enumerate_keys(klo, khi)
            return float(np.sum(p ** 3))
        return self.collision_from_bins(power=3)

    def _int_fk(self, lo, hi, power: int = 2) -> np.ndarray:
        """integral of f**k over [lo, hi] (inside [a, b]), f the density of X, in log space:
        f**k is a normal density of std sigma / sqrt(k) times
        (2 pi)**((1 - k) / 2) sigma**(1 - k) / (sqrt(k) Z**k) (k = 2: 1 / (2 sqrt(pi) sigma Z**2))."""
        d = self._frame
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

    def _int_f2(self, lo, hi) -> np.ndarray:
        return self._int_fk(lo, hi, 2)

    def collision_from_bins(self, power: int = 2) -> float:
        """sum_v P(Y = v)**power by bins (power 2: the collision probability; 3: `collision_cube`):
        h**(power - 1) * integral of f**power over the bins of one spacing h, the atoms whose
        cells are not one full h taken exactly."""
        k = int(power)
        fmt = self.fmt
        lo, hi, h = _hist_cells(fmt)
        # Sum over the live bins of h * int f**2 over the bin: bins of one run of equal spacing h
        # share h, so each run contributes h * int f**2 over its cells' union (one interval).
        _, _, _, _, run_starts, _ = _main_layout(fmt)
        i0, i1 = self._live_bins
        total = 0.0
        if i0 <= i1:
            cut = run_starts[(run_starts > i0) & (run_starts <= i1)]
            first = np.concatenate([[i0], cut])
            last = np.concatenate([cut - 1, [i1]])
            rlo = np.maximum(lo[first] - self._origin, self._a)
            rhi = np.minimum(hi[last] - self._origin, self._b)
            ok = rhi > rlo
            total = float(np.sum(h[first[ok]] ** (k - 1) * self._int_fk(rlo[ok], rhi[ok], k)))
        # Exact terms for the atoms the bin rule gets wrong by a fraction of one atom.
        e = np.arange(1 - fmt.bias, fmt.bias + 1)
        pow2 = np.ldexp(1.0, e)
        special = np.concatenate([pow2, -pow2, [0.0, -0.0, self.support_lo, self.support_hi]])
        special = special[(special >= self.support_lo) & (special <= self.support_hi)]
        special = np.unique(fmt.ordered_keys(special))
        special = fmt.values_from_keys(special)
        special = special[np.isfinite(special)]
        clo, chi = self._cells(special)
        clo, chi = np.maximum(clo, self._a), np.minimum(chi, self._b)
        ok = chi > clo
        special, clo, chi = special[ok], clo[ok], chi[ok]
        bin_h = h[(fmt.ordered_keys(special) >> np.uint64(fmt.bits - fmt.hist_bits)).astype(np.intp)]
        p = self._mass(clo, chi)
        total += float(np.sum(p ** k) - np.sum(bin_h ** (k - 1) * self._int_fk(clo, chi, k)))
        for _, olo, ohi in fmt.overflow_cells(self._via32):
            total += float(self._mass(olo - self._origin, ohi - self._origin)) ** k
        return total

    # ------------------------------------------------------------------ coarser lattices
    def lattice_mass(self, coarse) -> float:
        """P(Y is a value of the coarser format `coarse`): the law's mass on the values this
        format shares with `coarse` (float32 values in a float64 law, bfloat16 or float16 values
        in a float32 one). Exact (atom by atom) where the support holds at most ENUMERATE_MAX
        coarse values: always for a 16-bit coarse format. Otherwise (float32 in a wide float64
        law) each float32 value owns a float64 cell 2**-29 times its float32 cell, so the mass is
        2**-29 P(2**-126 <= |X| <= float32's largest): relative error ~2**-23 (the cells at
        powers of two and at the bounds), and the float32 subnormals' share (< 1e-37) left out."""
        cf = float_format(coarse)
        fmt = self.fmt
        if cf.bits >= fmt.bits:
            raise ValueError(f"lattice_mass: {cf.name} is not coarser than {fmt.name}")
        lo = max(float(self.support_lo), -cf.max_finite)
        hi = min(float(self.support_hi), cf.max_finite)
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
            return float(math.fsum(self.atom_probs(values)))
        ratio = 2.0 ** (cf.man_bits - fmt.man_bits)
        d = self.dist
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
        fmt = self.fmt
        out = np.zeros(mask + 1)
        if self._values is not None:
            fin = np.isfinite(self._values)
            classes = (fmt.encode(self._values[fin]) & np.uint64(mask)).astype(np.intp)
            return out + np.bincount(classes, weights=self._probs[fin], minlength=mask + 1)
        klo, khi = self._bulk_keys
        kf_lo, kf_hi = fmt.finite_key_range
        klo, khi = max(klo, kf_lo), min(khi, kf_hi)
        if khi < klo:
            return out
        mb = fmt.man_bits
        runs = [(max(r << mb, klo), min(((r + 1) << mb) - 1, khi))  # Python ints: keys pass 2**63
                for r in range(klo >> mb, (khi >> mb) + 1)]
        first = np.array([r[0] for r in runs], dtype=np.uint64)
        last = np.array([r[1] for r in runs], dtype=np.uint64)
        run_mass = self._mass(fmt.key_cell_edge(first, -1, self._via32, self._origin),
                              fmt.key_cell_edge(last, +1, self._via32, self._origin))
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
            lo, hi = fmt.key_cell_edges(keys, self._via32, self._origin)
            out += np.bincount(_key_classes(fmt, keys, mask), weights=self._mass(lo, hi),
                               minlength=mask + 1)
        if mid_keys:
            out += self._run_middle_class_masses(np.concatenate(mid_keys),
                                                 np.concatenate(mid_groups), mask)
        return out

    def _run_middle_class_masses(self, keys, groups, mask: int) -> np.ndarray:
        """The class masses of the runs' middles: each of `keys` stands for `groups` aligned
        blocks of mask + 1 keys, whose mass is spread evenly over the classes (the law is linear
        in the key across a block, to O((block h / std)^2))."""
        fmt = self.fmt
        v = fmt.values_from_keys(keys)
        h = fmt.spacing(v)
        # v - origin is exact here (see `_origin`); the span's ends are lattice points
        lo = (v - self._origin) - h * (mask + 1) / 2.0
        hi = lo + h * (mask + 1) * groups
        mass = self._mass(lo, hi) / (mask + 1)
        return np.bincount(_key_classes(fmt, keys, mask), weights=mass, minlength=mask + 1)

    @property
    def nbytes(self) -> int:
        """Bytes of the numpy tables the law holds (the ones built so far)."""
        total = 0
        for v in list(vars(self).values()):
            for x in (v if isinstance(v, tuple) else (v,)):
                if isinstance(x, (np.ndarray, MassBins)):
                    total += x.nbytes
        return total

    def __repr__(self) -> str:
        d = self.dist
        return (
            f"RoundedLaw(TN({d.loc!r}, {d.scale!r}, [{d.a!r}, {d.b!r}]) in {self.fmt.name}"
            f"{', torch rounding' if self._via32 else ''}: rn_a={self.rn_a!r}, rn_b={self.rn_b!r})"
        )


def _key_classes(fmt: FloatFormat, keys: np.ndarray, mask: int) -> np.ndarray:
    """The last bits (``& mask``) of the bit patterns of ordered keys: a positive value's key is
    its pattern plus the sign bit, a negative one's the complement of its pattern."""
    keys = np.asarray(keys, dtype=np.uint64)
    positive = keys >= np.uint64(1 << (fmt.bits - 1))
    return np.where(positive, keys, ~keys).astype(np.uint64).__and__(np.uint64(mask)).astype(np.intp)


_CACHE: "OrderedDict[tuple, RoundedLaw]" = OrderedDict()
_CACHE_SIZE = 256
#: ... and at most this many bytes of law tables (a float32 N(0, 1) law with its 2**20 bin masses and
#: its mass bins holds ~22 MB: 256 of them would not fit in memory; the least recently used go first).
_CACHE_BYTES = 1 << 30


def rounded_law(dist, dtype, rounding: str = "rn") -> RoundedLaw:
    """The law of RN(X), X ~ dist, in `dtype` (torch dtype, name, or FloatFormat); cached.

    rounding="rn" (default): one round-to-nearest-even of the exact X (the canonical law).
    rounding="torch": torch's cast of a float64 X (via float32 for narrower formats).
    """
    fmt = float_format(dtype)
    key = (type(dist), float(dist.loc), float(dist.scale), float(dist.a), float(dist.b), fmt.name, rounding)
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
