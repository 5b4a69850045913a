"""The mass bins of a 32/64-bit rounded law (`MassBins`): contiguous key ranges that each hold
about 2**-18.5 of the law at most, for the checks that look for localized defects, and how they
are built from the law's coarse bins (`build_mass_bins`).

Cost: only the coarse bins that can hold mass are looked at (`Histogram.hist_span`; every other
coarse bin has mass exactly 0 and so is merged into the bin before it or after it), the parts of a
split bin are a lattice of equal steps whose cell edges come from its first value and its spacing,
the layout is worked out in one pass over the bins with mass, and nothing the law keeps spans all
2**20 main bins."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from .cell_tables import hist_cells, main_layout
from .cells import CellMeasure
from .hist_bins import FineBins, Histogram

__all__ = ["MASS_BIN_MASS", "MASS_BIN_MAX_SPLIT", "MassBins", "build_mass_bins"]

#: Mass bins (32/64-bit laws): each holds about this much of the law at most, 2.7e-6 (a bin is split
#: into runs of equal key count, so a part may exceed it by a hair; a single value may hold more).
#: Fine enough that one value with an extra 1e-5 of the samples, or a hole holding 1e-5, stands out
#: at the pr n (2**22: <= ~11.3 expected samples per mass bin), and an extra 1e-6 at the nightly n
#: (2**27: <= ~362); coarse enough that the engine's counters (float32 N(0, 1): ~1.1e6 with mass,
#: 1.6e6 in all) stay cheap to hit at random: 2**-19 cost 10% more engine time at 1e8 samples.
MASS_BIN_MASS = 2.0 ** -18.5
#: A main histogram bin is split into at most 2**MASS_BIN_MAX_SPLIT mass bins.
MASS_BIN_MAX_SPLIT = 20


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
    (`harness.engine.mass_bin_counters`). It depends on the law alone, so the engine and the checks
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

    def parts_to_coarse(self, counts: np.ndarray,
                        first_parts: np.ndarray | None = None) -> np.ndarray:
        """Coarse-bin counts (the main histogram, or the fine one with the bins beyond it) from
        counts per part (`first_parts`: this law's, where the caller keeps them)."""
        return np.add.reduceat(counts, self.first_parts() if first_parts is None else first_parts)

    def coarse_first_key(self, c: np.ndarray) -> np.ndarray:
        c = np.asarray(c, dtype=np.int64)
        if self.fine is None:
            return c.astype(np.uint64) << np.uint64(self.low_bits)
        fb = self.fine
        inner = np.uint64(fb.key_lo) + (np.maximum(c - 1, 0).astype(np.uint64)
                                        << np.uint64(fb.shift))
        return np.where(c == 0, np.uint64(0), np.where(c > fb.n_bins, np.uint64(fb.key_end), inner))

    def coarse_last_key(self, c: np.ndarray) -> np.ndarray:
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
        lo_split = self.coarse_first_key(c_last) + (offset << sh)
        hi_split = lo_split + (np.uint64(1) << sh) - np.uint64(1)
        lo = np.where(split, lo_split, self.coarse_first_key(c_first))
        hi = np.where(split, hi_split, self.coarse_last_key(c_last))
        return lo, hi

    def n_keys(self, j) -> np.ndarray:
        """How many bit patterns (ordered keys) mass bins j hold, as float64."""
        lo, hi = self.key_ranges(j)
        return (hi - lo).astype(np.float64) + 1.0

    def bin_of_keys(self, keys) -> np.ndarray:
        """Mass bin of each ordered key (uint64 array): the reference the engine's fold must
        match."""
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
        # low < 2^44: shifted as int64 (numpy shifts uint64 by an array ~20x slower)
        return self.start[c] + (low.astype(np.int64) >> self.shift[c].astype(np.int64))


def build_mass_bins(cells: CellMeasure, histogram: Histogram) -> "MassBins":
    """Build the `MassBins` of a 32/64-bit law (see there).

    Cost: only the coarse bins that can hold mass are looked at (`Histogram.hist_span`; every
    other coarse bin has mass exactly 0 and so is merged into the bin before it or after it), the
    cell edges of the parts of a split bin come from its first value and its spacing (every split
    bin lies inside one binade: its values are ``v0 + i h``, and each edge is formed exactly as
    `FloatFormat.key_cell_edge` forms it, bit for bit), and nothing the law keeps spans all 2**20
    main bins."""
    fmt = cells.fmt
    fb = histogram.fine_bins
    if fb is None:
        return _main_mass_bins(cells, histogram)
    low_bits = fb.shift
    m = np.concatenate([[0.0], histogram.fine_bin_probs(), [0.0]])
    splittable = np.ones(m.size, dtype=bool)
    splittable[[0, -1]] = False
    layout = _split_and_merge(m, splittable, low_bits)
    n_bins = layout.n_bins
    mb = _keys_only(fmt, low_bits, fb, n_bins, m.size)
    probs = np.empty(n_bins)
    probs[layout.open_start] = np.add.reduceat(m, layout.opens)
    cs = layout.split_bins
    if cs.size:
        lo_e, hi_e = histogram.fine_edges  # cell edges of fine bin i: [lo_e[i], hi_e[i]]
        v_first, v_last = histogram.fine_bin_bounds()
        # Fine bins inside one binade (one sign, one exponent) hold values v0 + i h.
        with np.errstate(invalid="ignore"):
            e0, e1 = np.frexp(np.abs(v_first))[1], np.frexp(np.abs(v_last))[1]
        uniform = ((np.signbit(v_first) == np.signbit(v_last)) & (e0 == e1) & (v_first != 0)
                   & (v_last != 0) & np.isfinite(v_first) & np.isfinite(v_last))
        fine_i = cs - 1
        h = fmt.spacing(np.where(uniform, v_first, 1.0))
        _part_probs(cells, mb, cs, layout.split_parts, layout.split_shift, v_first[fine_i],
                    h[fine_i], lo_e[fine_i], hi_e[fine_i], uniform[fine_i], probs,
                    layout.split_start)
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
    """(coarse bin, offset) of every part: coarse bin cs[i] repeated counts[i] times,
    0..counts[i]-1."""
    c_of = np.repeat(cs, counts)
    offset = np.arange(c_of.size, dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
    return c_of, offset


def _part_probs(cells: CellMeasure, mb, cs, counts, sub_shift, first_value, spacing, lower_edge,
                upper_edge, uniform, out, dest):
    """Masses of the parts of split coarse bins cs (counts[i] parts of 2**sub_shift[i] keys each)
    into out[dest[i] + j], j = 0..counts[i]-1. A bin inside one binade holds values v0 + i h: the
    lower edge of its part j > 0 is below + (v - below) * 0.5 with below = v0 + (j 2**s - 1) h
    and v - below = h, both exact -- the very operations of `FloatFormat.key_cell_edge`, so the
    same float64 --, and parts 1 .. count-2 are a lattice of step 2**s h from part 1's edge
    (`prob_steps`); parts 0 and count-1 run to the bin's own edges, and join the lattice where
    those edges lie on it. Other bins: their parts' edges from `key_cell_edge`."""
    fmt = cells.fmt
    first = dest  # position of each bin's part 0 in `out`
    step = np.ldexp(spacing, sub_shift.astype(np.int32))
    below1 = first_value + (np.ldexp(1.0, sub_shift.astype(np.int32)) - 1.0) * spacing
    edge1 = (below1 - cells.origin) + spacing * 0.5
    last_lo = edge1 + (counts - 2) * step
    u = np.flatnonzero(uniform)
    steps = cells.prob_steps
    if u.size:
        # Parts 0 and count-1 reach the bin's own edges; where those lie on its parts' lattice
        # (float32: inside a binade; float64: the lower one, of the same parity as part 1's),
        # they join the lattice row, else their masses are taken on their own.
        low_in = lower_edge[u] == edge1[u] - step[u]
        high_in = upper_edge[u] == last_lo[u] + step[u]
        alone = u[~low_in]
        out[first[alone]] = cells.mass(lower_edge[alone], edge1[alone])
        alone = u[~high_in]
        out[first[alone] + counts[alone] - 1] = cells.mass(last_lo[alone], upper_edge[alone])
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
            _lattice_probs(cells, steps, row_lo0[r0:r1], step[rows[r0:r1]], block.shape[1], block)
        short = np.flatnonzero(np.repeat(~long, run_hi - run_lo))
        for k0, n in np.unique(np.stack([skip_lo[short], row_parts[short]]), axis=1).T:
            g = short[(skip_lo[short] == k0) & (row_parts[short] == n)]
            pos = f[g, None] + (k0 + np.arange(n))
            out[pos] = _lattice_probs(cells, steps, row_lo0[g], step[rows[g]], int(n), None)
    o = np.flatnonzero(~uniform)
    if o.size:
        c_of, offset = _runs(cs[o], counts[o])
        sh = np.repeat(sub_shift[o], counts[o]).astype(np.uint64)
        key_lo = mb.coarse_first_key(c_of) + (offset.astype(np.uint64) << sh)
        lo = cells.key_edge(key_lo, -1)
        lo = np.where(offset == 0, np.repeat(lower_edge[o], counts[o]), lo)
        hi = np.empty_like(lo)
        hi[:-1] = lo[1:]
        ends = np.cumsum(counts[o]) - 1
        hi[ends] = upper_edge[o]
        out[_expand(first[o], counts[o])] = cells.mass(lo, hi)


#: Runs of at least this many split bins of one part count, next to each other, have their parts'
#: masses written in place (`_part_probs`).
_STRIDED_RUN_MIN = 8


def _lattice_probs(cells, steps, lo0, step, n, out):
    """Masses of n parts of `step` from lo0 on, per row (into `out` if given)."""
    if steps is not None:
        return steps(lo0, step, n, out=out)
    k = np.arange(n)
    masses = cells.mass(lo0[:, None] + k * step[:, None], lo0[:, None] + (k + 1) * step[:, None])
    if out is None:
        return masses
    out[...] = masses
    return out


def _main_mass_bins(cells: CellMeasure, histogram: Histogram) -> "MassBins":
    """`MassBins` over the main bins (see `build_mass_bins`)."""
    fmt = cells.fmt
    n_main = 1 << fmt.hist_bits
    low_bits = fmt.bits - fmt.hist_bits
    lo_c, hi_c, spacing = hist_cells(fmt)
    main = main_layout(fmt)
    v_first, splittable = main.v_first, main.splittable
    m_all = np.asarray(histogram.hist_bin_probs(), dtype=np.float64)
    r0, r1 = histogram.hist_span  # m_all == 0 outside [r0, r1]
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
        lower, upper = histogram.main_bin_edges(cs, lo_c, hi_c)
        _part_probs(cells, keys_only, cs, counts, layout.split_shift, v_first[cs], spacing[cs],
                    lower, upper, np.ones(cs.size, dtype=bool), probs, layout.split_start)
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
