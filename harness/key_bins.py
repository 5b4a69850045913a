"""Ordered-key bins of a dtype's bit patterns: the arithmetic the engine folds with and the Summary
recounts from, shared so that a merge of parts recounts exactly as the engine counts.

Plain numpy on `reference.dtypes.FloatFormat`: no torch tensors, no engine. The poison patterns
(NaNs with a payload a sampler is unlikely to compute, written before every call so unwritten
elements show) live here too, by dtype name, because a per-pattern histogram finds them by key.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import numpy as np

from reference.dtypes import float_format

#: Poison patterns (unsigned bit patterns) by dtype name: NaNs with an unlikely payload; the
#: float8 formats have too few NaNs for a payload (e4m3fn: a written NaN reads as unwritten).
POISON_PATTERNS = {
    "float64": 0x7FF4A5A5A5A5A5A5,
    "float32": 0x7FA5A5A5,
    "float16": 0x7E5A,
    "bfloat16": 0x7FA5,
    "float8_e4m3fn": 0x7F,
    "float8_e5m2": 0x7D,
}


def signed(pattern: int, bits: int) -> int:
    """An unsigned `bits`-wide pattern as the signed integer of that width."""
    return pattern - (1 << bits) if pattern >= 1 << (bits - 1) else pattern


def poison_pattern(dtype_name: str) -> int:
    """The poison bit pattern of a dtype (by name) as the signed integer of the dtype's width."""
    return signed(POISON_PATTERNS[dtype_name], float_format(dtype_name).bits)


@functools.lru_cache(maxsize=None)
def raw_to_ordered(hist_bits: int):
    """Ordered-key bin of each raw top-bits bin: taking the top bits commutes with the key's
    bit flips, so the key's top bits are the raw top bits with the same flips."""
    raw = np.arange(1 << hist_bits, dtype=np.int64)
    sign, mask = 1 << (hist_bits - 1), (1 << hist_bits) - 1
    order = np.where(raw & sign, ~raw & mask, raw | sign)
    order.setflags(write=False)  # cached: shared by every fold
    return order


def ordered_from_raw(raw_hist: np.ndarray) -> np.ndarray:
    """A histogram over raw top-bits bins in ordered-key bins (``hist[raw_to_ordered(b)] = raw``)
    by two contiguous copies instead of a scatter over 2^20 bins: the bins of non-negative values
    move up by half unchanged, the negative half lands below them reversed."""
    half = raw_hist.size // 2
    return np.concatenate([raw_hist[half:][::-1], raw_hist[:half]])


def raw_nonfinite_bins(fmt):
    """Boolean mask over raw bins holding no finite value (all inf/NaN patterns).

    For every supported format the exponent lies inside the top hist_bits bits, so a bin is
    either all finite or all non-finite. Cached per format (both arrays are 2^20 long for 32/64-bit
    formats: recomputing them cost more than folding a small sharded draw)."""
    return _nonfinite_mask(fmt.name, fmt)


_NONFINITE: dict = {}


def _nonfinite_mask(name: str, fmt):
    if name in _NONFINITE:
        return _NONFINITE[name]
    lo, _ = fmt.hist_bin_bounds()
    ordered_nonfinite = np.isnan(lo)
    mask = ordered_nonfinite[raw_to_ordered(fmt.hist_bits)]
    mask.setflags(write=False)
    _NONFINITE[name] = mask
    return mask


def farthest_outside(values, a: float, b: float) -> float:
    """Of `values`, the one farthest outside [a, b] (NaN when none lies outside; NaNs ignored)."""
    def distance(v: float) -> float:
        return max(a - v, v - b, 0.0)

    options = [float(v) for v in values if not math.isnan(v) and distance(float(v)) > 0]
    return max(options, key=distance) if options else math.nan


# ------------------------------------------------------------------------------------------------
# Position in a tensor: which elements a vectorized kernel treats apart, and the coarse bins the
# engine counts them in (the `position` check)

#: Groups of consecutive values of about equal mass the position classes are counted in.
POSITION_GROUPS = 16
#: Vector widths whose remainder loop writes the last (numel mod width) elements.
TAIL_WIDTHS = (2, 4, 8, 16, 32)
#: Row-remainder widths: the last (row length mod width) elements of every row.
ROW_TAIL_WIDTHS = (8, 32)


class PositionClass(NamedTuple):
    """One position class of a tensor, as arithmetic on the flat row-major index i of its
    elements rather than a list of them (a 2^31-element tensor would need 16 GiB of indices):
    ``flat[0] <= i < flat[1]``, or, where `cols` is set instead, ``cols[0] <= i % row < cols[1]``
    in every row (row: the last dim's length)."""

    name: str
    size: int  # elements of one tensor in the class
    flat: tuple[int, int] | None = None  # a run of flat indices, [start, stop): < 32 of them
    cols: tuple[int, int] | None = None  # a run of columns of every row, [start, stop)


def position_classes(shape: tuple) -> list[PositionClass]:
    """The position classes of a tensor of `shape`, by flat row-major index: the first and last
    element, the remainder of numel modulo 2, 4, 8, 16 and 32 (vector-loop tails), the first and
    the last element of every row, and the row remainders modulo 8 and 32. Empty classes, a class
    holding the whole tensor (the marginal checks see that one) and duplicates (the same size,
    first and last index) are dropped. Constant time and memory, whatever the shape."""
    numel = math.prod(int(d) for d in shape) if len(shape) else 1
    if numel < 2:
        return []
    row = int(shape[-1]) if len(shape) else 1
    candidates = [PositionClass("first", 1, flat=(0, 1)),
                  PositionClass("last", 1, flat=(numel - 1, numel))]
    candidates += [PositionClass(f"tail-{w}", numel % w, flat=(numel - numel % w, numel))
                   for w in TAIL_WIDTHS]
    if numel > row > 1:
        rows = numel // row
        candidates += [PositionClass("row-first", rows, cols=(0, 1)),
                       PositionClass("row-last", rows, cols=(row - 1, row))]
        candidates += [PositionClass(f"row-tail-{w}", rows * (row % w), cols=(row - row % w, row))
                       for w in ROW_TAIL_WIDTHS]
    out, seen = [], set()
    for c in candidates:
        if c.flat is not None:
            first, last = c.flat[0], c.flat[1] - 1
        else:
            first, last = c.cols[0], (numel - row) + c.cols[1] - 1
        key = (c.size, first, last)
        if 0 < c.size < numel and key not in seen:
            seen.add(key)
            out.append(c)
    return out


def position_bins(law, groups: int = POSITION_GROUPS) -> tuple[np.ndarray, np.ndarray]:
    """(upper edges, masses): the rounded law cut into about `groups` runs of consecutive values
    of about equal mass, at histogram-bin boundaries (the fine bins of a narrow law), so every
    mass is exact. A value v is in group ``searchsorted(edges, v, side="left")``: the first group
    whose upper edge is >= v (the last group holds everything above). One group: nothing to
    compare positions by."""
    if law.fine_bins is not None:
        _, hi = law.fine_bin_bounds()
        probs = np.asarray(law.fine_bin_probs(), dtype=np.float64)
    else:
        _, hi = law.fmt.hist_bin_bounds()
        probs = np.asarray(law.hist_bin_probs(), dtype=np.float64)
    keep = (probs > 0) & np.isfinite(hi)
    hi, probs = np.asarray(hi, dtype=np.float64)[keep], probs[keep]
    if probs.size < 2:
        return np.zeros(0), np.ones(1)
    cum = np.cumsum(probs)
    cuts = np.unique(np.searchsorted(cum, cum[-1] * np.arange(1, groups) / groups, side="left"))
    cuts = cuts[cuts < probs.size - 1]  # the last bin closes the last group
    edges = hi[cuts]
    masses = np.maximum(np.diff(np.concatenate([[0.0], cum[cuts], [cum[-1]]])), 0.0)
    return edges, masses / masses.sum()


# -- resolution: the law at the scale of single values (32/64-bit dtypes) -----------------------

#: Elements of one draw whose equal-value pairs and coarse-lattice membership are counted (the
#: first ones, pooled across calls): a fixed cost per draw whatever n is. At the law's float32
#: resolution (~2^-26 per pair) blocks of 2^18 values expect ~1000 equal pairs over 2^19 values;
#: the pairs a sort finds grow as m per value while its cost grows as log m, so the blocks are
#: as long as the law allows (below).
RESOLUTION_SCAN = 1 << 19
#: Values per collision block at most, and at least (a law that needs smaller blocks is judged
#: by its bins value by value already: fine bins, spikes' tallies).
COLLISION_BLOCK_MAX = 1 << 18
COLLISION_BLOCK_MIN = 1 << 8
#: A block of m values is at most this many times 1/q long (q: the law's collision probability),
#: so a block's equal pairs stay nearly Poisson (pairs sharing a value: ~m q of them).
COLLISION_BLOCK_LOAD = 2.0 ** -8
#: Coarser formats whose values a 32/64-bit law's values are counted on (a tensor computed in
#: them and written wider holds nothing else).
COARSE_LATTICES = {"float32": ("bfloat16", "float16"), "float64": ("float32",)}


def block_pair_slots(sizes) -> tuple[float, float]:
    """(sum of C(m, 2), sum of C(m, 2) (m - 2)) over blocks of the given sizes: the pairs a
    block compares, and the pairs of its pairs that share one value (the variance's term)."""
    m = np.asarray(sizes, dtype=np.float64)
    pairs = m * (m - 1) / 2.0
    return float(pairs.sum()), float((pairs * np.maximum(m - 2, 0)).sum())


def collision_block(collision_prob: float, bits: int) -> int:
    """Values per collision block for a law of collision probability q in a `bits`-wide dtype:
    the largest power of two <= COLLISION_BLOCK_MAX with m q <= COLLISION_BLOCK_LOAD; 0 where
    the check does not apply (16-bit dtypes, whose histogram counts every value, or a law so
    concentrated that m would be below COLLISION_BLOCK_MIN)."""
    if bits < 32 or not collision_prob > 0 or not math.isfinite(collision_prob):
        return 0
    m = COLLISION_BLOCK_MAX
    while m >= COLLISION_BLOCK_MIN and m * collision_prob > COLLISION_BLOCK_LOAD:
        m //= 2
    return m if m >= COLLISION_BLOCK_MIN else 0
