"""The histograms of a rounded law: the mass of each main bin (the top ``hist_bits`` bits of the
ordered key, `harness.key_bins`), and for a narrow 32/64-bit law a second, finer histogram over its
support (`FineBins`).

Only the main bins that can hold mass are evaluated (beyond ``dist.bulk(-800)`` every float64 mass
is exactly 0), in one ``prob_cells`` call over consecutive bins."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from .atoms import Atoms
from .cell_tables import hist_cells, main_layout
from .cells import CellMeasure
from .intervals import IntervalMasses

__all__ = ["FINE_BINS_BELOW", "FINE_BINS_MAX", "FineBins", "Histogram"]

#: A 32/64-bit law whose support covers fewer main histogram bins than this gets fine bins too.
FINE_BINS_BELOW = 256
#: At most this many fine bins (each 2**shift consecutive keys).
FINE_BINS_MAX = 1 << 16


@dataclass(frozen=True)
class FineBins:
    """A second histogram for a 32/64-bit law whose support is narrow next to the main bins (2**20
    bins keep 11 mantissa bits of float32 and 8 of float64, so [8, 8.01] is one float64 bin).

    Fine bin ``i`` holds the ordered keys
    ``[key_lo + (i << shift), key_lo + ((i + 1) << shift) - 1]`` for ``i in 0..n_bins-1``,
    starting at the key of ``support_lo`` and covering ``support_hi``; the engine counts everything
    below and above in two extra bins. Which laws get fine bins, and how, depends on the law alone,
    so the engine and the checks agree without talking."""

    key_lo: int
    shift: int
    n_bins: int

    @property
    def key_end(self) -> int:
        """One past the last key of the last bin."""
        return self.key_lo + (self.n_bins << self.shift)


class Histogram:
    """The main histogram's bin masses (`hist_bin_probs`), which bins can hold mass (`live_bins`,
    `hist_span`), and the fine bins (`fine_bins`, `fine_bin_probs`, `fine_bin_bounds`,
    `fine_edges`)."""

    def __init__(self, cells: CellMeasure, atoms: Atoms, intervals: IntervalMasses):
        self.cells = cells
        self.atoms = atoms
        self.intervals = intervals

    def main_bin_edges(self, bins, lo: np.ndarray, hi: np.ndarray):
        """X-edges (minus the origin) of main bins (32/64-bit; `lo`, `hi`: `hist_cells`; bins: an
        index array or a slice): from the format's table (a slice: views of it), or from the
        bins' end keys when measured from an origin, where the table's float64 midpoints would not
        be exact."""
        cells = self.cells
        if cells.origin == 0.0:
            return lo[bins], hi[bins]
        fmt = cells.fmt
        shift = np.uint64(fmt.bits - fmt.hist_bits)
        klo, khi = (np.uint64(k) for k in fmt.finite_key_range)
        if isinstance(bins, slice):
            bins = np.arange(bins.start, bins.stop)
        first = np.asarray(bins).astype(np.uint64) << shift
        last = first + ((np.uint64(1) << shift) - np.uint64(1))
        first, last = np.clip(first, klo, khi), np.clip(last, klo, khi)
        return cells.key_edge(first, -1), cells.key_edge(last, +1)

    def hist_bin_probs(self) -> np.ndarray:
        """Mass of each ordered-key histogram bin (float64[2**hist_bits]); cached."""
        return self._hist

    @functools.cached_property
    def _hist(self) -> np.ndarray:
        cells, atoms = self.cells, self.atoms
        fmt = cells.fmt
        out = np.zeros(1 << fmt.hist_bits)
        shift = np.uint64(fmt.bits - fmt.hist_bits)
        if atoms.enumerated:
            out[(atoms.keys >> shift).astype(np.intp)] = atoms.probs
        else:
            lo, hi, _ = hist_cells(fmt)
            i0, i1 = self.live_bins
            if i0 <= i1:
                cells.mass(*self.main_bin_edges(slice(i0, i1 + 1), lo, hi), out=out[i0:i1 + 1],
                           ordered=True)
            for key, olo, ohi in fmt.overflow_cells(cells.via_float32):
                out[int(np.uint64(key) >> shift)] += cells.overflow_mass(olo, ohi)
        out.setflags(write=False)
        return out

    @functools.cached_property
    def live_bins(self) -> tuple[int, int]:
        """(i0, i1): the main bins whose cells meet the bulk of [a, b] (32/64-bit); the others have
        mass exactly 0. Cells run in key order over the finite bins, so this is one index range."""
        lo, hi, _ = hist_cells(self.cells.fmt)
        layout = main_layout(self.cells.fmt)
        f0, f1 = layout.f0, layout.f1
        x_lo, x_hi = self.cells.bulk
        i0 = f0 + int(np.searchsorted(hi[f0:f1 + 1], x_lo, side="right"))
        i1 = f0 + int(np.searchsorted(lo[f0:f1 + 1], x_hi, side="left")) - 1
        return i0, i1

    @functools.cached_property
    def hist_span(self) -> tuple[int, int]:
        """(r0, r1) for 32/64-bit: every main bin outside holds mass exactly 0 (the live bins and
        the bins of the overflow patterns that get mass); (1, 0) when none has mass."""
        fmt = self.cells.fmt
        i0, i1 = self.live_bins
        h = self.hist_bin_probs()
        shift = np.uint64(fmt.bits - fmt.hist_bits)
        idx = [int(np.uint64(k) >> shift) for k, _, _ in fmt.overflow_cells(self.cells.via_float32)]
        idx = [i for i in idx if h[i] > 0]
        if i0 <= i1:
            idx += [i0, i1]
        return (min(idx), max(idx)) if idx else (1, 0)

    # ------------------------------------------------------------------ fine bins
    @functools.cached_property
    def fine_bins(self) -> FineBins | None:
        """The fine histogram of a narrow 32/64-bit law (see `FineBins`); None where the main
        histogram already resolves the support (or the format has one bin per value)."""
        cells, atoms = self.cells, self.atoms
        fmt = cells.fmt
        support_lo, support_hi = atoms.support_lo, atoms.support_hi
        if fmt.bits <= 16 or not (np.isfinite(support_lo) and np.isfinite(support_hi)):
            return None
        if np.count_nonzero(self.hist_bin_probs() > 0) >= FINE_BINS_BELOW:
            return None
        # From the first to the last value that can hold mass: a half-infinite window's support
        # reaches the end of the format, its mass only a few std beyond the mean.
        x_lo, x_hi = cells.bulk
        lo = max(support_lo, float(cells.floor(np.array([x_lo]))[0]))
        hi = min(support_hi, float(cells.ceil(np.array([x_hi]))[0]))
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
        return self.cells.fmt.values_from_keys(first), self.cells.fmt.values_from_keys(last)

    @functools.cached_property
    def fine_edges(self) -> tuple[np.ndarray, np.ndarray]:
        """X cell edges of each fine bin: lower edge of its first key, upper edge of its last key
        (`FloatFormat.key_cell_edge`); a bin's upper edge is the next one's lower edge."""
        fb = self.fine_bins
        cells = self.cells
        fmt = cells.fmt
        first = fb.key_lo + (np.arange(fb.n_bins + 1, dtype=np.uint64) << np.uint64(fb.shift))
        lo_ext = cells.key_edge(first, -1)
        hi = lo_ext[1:].copy()
        klo, khi = fmt.finite_key_range
        nxt = first[1:]
        # the upper edge of key k - 1 is the lower edge of key k for klo < k <= khi only
        odd = (nxt <= np.uint64(klo)) | (nxt > np.uint64(khi))
        if odd.any():
            hi[odd] = cells.key_edge(nxt[odd] - np.uint64(1), +1)
        lo = lo_ext[:-1]
        for arr in (lo, hi):
            arr.setflags(write=False)
        return lo, hi

    @functools.cached_property
    def _fine_probs(self) -> np.ndarray:
        lo, hi = self.fine_bin_bounds()
        # = bin_probs(lo, hi): for bins with finite lattice ends bin_probs' edges are these, and
        # bins off the support get 0 from the clipping to [a, b] as they do from bin_probs' mask.
        out = self.cells.mass(*self.fine_edges)
        odd = ~(np.isfinite(lo) & np.isfinite(hi))
        if odd.any():
            out[odd] = self.intervals.bin_probs(lo[odd], hi[odd])
        out.setflags(write=False)
        return out

    def fine_bin_probs(self) -> np.ndarray:
        """Mass of each fine bin (float64[n_bins]); cached. Sums to 1 up to rounding."""
        return self._fine_probs
