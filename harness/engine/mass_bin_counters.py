"""The engine's counters for a law's mass bins: how the fold finds an element's part with one table
lookup, a shift and an add, and puts its counts back in the law's order.

The law (`reference.rounded.MassBins`) says where the mass bins lie: its coarse bins (the main
histogram bins, or a narrow law's fine bins), some cut into parts of equal key count, are its
*parts* in key order, and a mass bin is a run of consecutive parts. The engine keeps one counter
per part, so one bincount gives the mass bins and (main layout) the main histogram too
(`MassBins.parts_to_mass`, `MassBins.parts_to_coarse`).

The fold indexes `table` by the element's coarse bin as it finds it: the *raw* top bits of the bit
pattern for the main bins (not the ordered key's), the fine bin for a narrow law. An entry packs
(first counter << SHIFT_BITS) | shift; the counter is ``first + (low bits >> shift)``. For a
negative value the ordered key's low bits are the raw ones complemented, so inside a split negative
main bin the raw counters run backwards: `MassCounters.order` puts them in part order once, at the
end of a run.

A law's counters are built once for the last few laws (`MassCounters.of`): the two stages of a
group, and the shapes of one case, draw on one law, and the table (a few MB) and the coarse bins'
first parts cost a draw ~10 ms to rebuild; the bound keeps the memory to a few tables whatever
the run.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from ..key_bins import raw_to_ordered

#: Bits of a table entry that hold the shift (shift <= 44 < 2**6); the first counter above them.
SHIFT_BITS = 6
#: Laws whose counters are kept built (`MassCounters.of`).
KEPT_LAWS = 4


@dataclass(frozen=True, eq=False)
class MassCounters:
    """The engine's view of one law's `MassBins`: its lookup table (a new array, the fold's to
    keep) and the runs of counters the fold sees reversed."""

    bins: object  # reference.rounded.MassBins
    table: np.ndarray  # int32 (<= 32-bit formats) / int64 [coarse bins], as the fold indexes them
    backward: tuple  # ((count, int64[first counters]), ...): runs of `count` counters, reversed
    first_parts: np.ndarray  # int64[coarse bins]: `MassBins.first_parts`, kept

    @classmethod
    def of(cls, mb) -> "MassCounters":
        """The counters of `mb`, shared by every draw on its law while it is among the last
        KEPT_LAWS (their arrays are read, never written)."""
        return _counters_of(mb)

    def coarse(self, ordered: np.ndarray) -> np.ndarray:
        """The coarse bins' counts from the counters in part order (`MassBins.parts_to_coarse`)."""
        return self.bins.parts_to_coarse(ordered, self.first_parts)

    @property
    def n(self) -> int:
        """How many counters: the law's parts."""
        return self.bins.n_parts

    @functools.cached_property
    def raw_bins(self) -> tuple[np.ndarray, np.ndarray]:
        """(coarse bin, mass bin) of each raw counter (int32 arrays, built once per law for the
        draws that count a few counters: `sparse_counts`)."""
        mb = self.bins
        parts = self.order(np.arange(self.n, dtype=np.int64))  # `order` is its own inverse
        coarse = np.repeat(np.arange(mb.n_coarse, dtype=np.int32),
                           np.diff(np.append(self.first_parts, self.n)))
        mass = np.repeat(np.arange(mb.mass_first.size, dtype=np.int32),
                         np.diff(np.append(mb.mass_first, self.n)))
        return coarse[parts], mass[parts]

    def sparse_counts(self, raw_counters: np.ndarray, counts: np.ndarray,
                      ) -> tuple[np.ndarray, np.ndarray]:
        """The coarse bins' and the mass bins' counts from (raw counter, count) pairs (in any
        order, repeats allowed): `coarse` and `MassBins.parts_to_mass` without dense counters."""
        coarse, mass = self.raw_bins
        counts = np.asarray(counts, dtype=np.int64)
        return (_add_at(self.bins.n_coarse, coarse[raw_counters], counts),
                _add_at(self.bins.mass_first.size, mass[raw_counters], counts))

    def order(self, raw: np.ndarray) -> np.ndarray:
        """The counters in part order from the fold's raw counters, as a new array; the same map
        takes part order to raw order (it reverses runs, so it is its own inverse)."""
        out = np.array(raw, copy=True)
        for count, firsts in self.backward:
            idx = firsts[:, None] + np.arange(count)
            out[idx] = raw[idx[:, ::-1]]
        return out


def _add_at(size: int, index: np.ndarray, counts: np.ndarray) -> np.ndarray:
    out = np.zeros(size, dtype=np.int64)
    np.add.at(out, index, counts)
    return out


@functools.lru_cache(maxsize=KEPT_LAWS)
def _counters_of(mb) -> MassCounters:
    first = mb.first_parts()
    if mb.fine is not None:
        return MassCounters(mb, _ordered_table(mb, first), (), first)
    return MassCounters(mb, _raw_main_table(mb), _backward_runs(mb), first)


def _table_dtype(mb):
    return np.int32 if mb.bits <= 32 else np.int64


def _ordered_table(mb, first_parts: np.ndarray) -> np.ndarray:
    """Fine layout: packed entries by coarse (fine) bin, in key order."""
    shift = np.full(mb.n_coarse, mb.low_bits, dtype=np.int64)
    shift[mb.split_bins] = mb.split_shift
    return ((first_parts << SHIFT_BITS) | shift).astype(_table_dtype(mb))


def _raw_main_table(mb) -> np.ndarray:
    """Main layout: packed entries by raw main bin. A law without split bins has main bin c's
    counter c and the shift of all the key bits below it (`_plain_raw_table`, per format); each
    split bin adds its extra parts to the first counter of every main bin above it (a step
    function of the ordered bin) and lowers its own shift."""
    cs = mb.split_bins
    n_main, half = mb.n_coarse, mb.n_coarse // 2
    table = _plain_raw_table(mb.bits, mb.low_bits, n_main.bit_length() - 1).copy()
    if cs.size:
        extra = mb.parts_before_split()
        steps = np.repeat((extra[:-1] << SHIFT_BITS).astype(table.dtype), np.diff(np.r_[0, cs + 1]))
        _add_in_key_order(table, 0, int(cs[-1]) + 1, steps)
        _add_in_key_order(table, int(cs[-1]) + 1, n_main, int(extra[-1]) << SHIFT_BITS)
        raw_of = np.where(cs >= half, cs - half, (n_main - 1) - cs)
        table[raw_of] -= mb.low_bits - mb.split_shift
    return table


@functools.lru_cache(maxsize=None)
def _plain_raw_table(bits: int, low_bits: int, hist_bits: int) -> np.ndarray:
    """The main layout's table of a law without split bins, laid out by raw top bits."""
    ordered = raw_to_ordered(hist_bits)
    table = ((ordered << SHIFT_BITS) | low_bits).astype(np.int32 if bits <= 32 else np.int64)
    table.setflags(write=False)
    return table


def _add_in_key_order(raw_table: np.ndarray, lo: int, hi: int, values) -> None:
    """raw_table[raw bin of ordered bin c] += values[c - lo] (or the scalar) for c in [lo, hi):
    ordered bins half.. are raw bins 0.., ordered bins below half raw bins n-1 down (in place)."""
    half = raw_table.size // 2
    vec = not np.isscalar(values)
    if lo < min(hi, half):  # ordered lo .. min(hi, half) - 1 are raw n-1-lo down to n-min(hi, half)
        top = min(hi, half)
        view = raw_table[raw_table.size - top:raw_table.size - lo][::-1]
        view += values[:top - lo] if vec else values
    if max(lo, half) < hi:
        start = max(lo, half)
        view = raw_table[start - half:hi - half]
        view += values[start - lo:] if vec else values


def _backward_runs(mb) -> tuple:
    """The split negative main bins' counters, grouped by part count: ((count, first counters),
    ...)."""
    cs = mb.split_bins
    counts = mb.split_parts
    negative = cs < mb.n_coarse // 2
    first_counter = cs + mb.parts_before_split()[:-1]
    runs = []
    for count in np.unique(counts[negative]):
        firsts = first_counter[negative & (counts == count)].astype(np.int64)
        firsts.setflags(write=False)
        runs.append((int(count), firsts))
    return tuple(runs)
