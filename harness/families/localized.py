"""The localized family: the law's mass bins, and the defects the omnibus checks average away,
`check_spikes` (a point mass on one value) and `check_scan` (bumps and holes at every scale).

State (`LocalizedState`, 32/64-bit laws): ``mass_hist``, counts over the law's mass bins
(`reference.rounded.MassBins`: contiguous key ranges of about equal mass, ~2**-18.5 each at
most), ``mass_hist.sum() == n``; with a watch list (stage 2), ``watch_keys``/``watch_counts``
tally the exact values seen in the watched mass bins (`watch_bins`), sorted by key.

Both read the finest exact histogram the Summary holds (`LocalBins`): for 16-bit (and 8-bit)
dtypes the histogram of every bit pattern, one bin per value; for 32/64-bit dtypes the law's *mass
bins* (``summary.localized.mass_hist``, `reference.rounded.MassBins`): contiguous key ranges that each hold at
most about 2**-18.5 = 2.7e-6 of the law (a single value may hold more), where a main histogram bin near 1 holds
1e-4 of float32 N(0, 1) and one extra value, or a narrow hole, moves its count by a few units in
hundreds. Every bin is a contiguous range of values with an exact mass under the rounded law.

Error control (both checks; the proof is the union bound). Under the null the samples are iid
draws of the rounded law, so the count of any fixed set of values S is Bin(n, P(Y in S)), and an
exact binomial tail p_S satisfies P(p_S <= t) <= t for every t (doubling the smaller tail for a
two-sided test keeps that). A check's family of sets is fixed before the data (by the law and n
alone); each set gets a share w_S of the level, sum w_S <= 1, and the check's p-value is
min(1, min_S p_S / w_S). Then P(p <= alpha) <= sum_S P(p_S <= alpha w_S) <= alpha. Only sets whose
count is unusual are priced exactly (a z-screen picks them); skipping the others can only make the
reported p larger, never smaller, so the bound holds for the p that is reported.

Stage 2 of `spikes` (see `spike_watch` and `harness.runner`): the mass bins stage 1 found most
over-represented are *watched* in stage 2's fresh draw: the engine tallies the exact values that
fall in them, and each value is judged against its own mass P(Y = v). The watch list depends only on
stage 1, whose data are independent of stage 2's, so conditional on it the stage-2 family (every
bit pattern in the watched bins) is fixed and the union bound holds again.
"""

from __future__ import annotations

import math

from dataclasses import dataclass

import numpy as np
import torch
from scipy import stats

from ..declaration import statistical
from ..engine import Family, new_summary, raw_main_bins
from ..engine.mass_bin_counters import SHIFT_BITS, MassCounters
from ..result import Outcome
from ..summary import Summary
from . import binned
from .binned import BinnedState
from .common import (binom_two_sided, binom_upper, bins_label, cached_on_law, clip_p, fmt_value,
                     not_applicable, quiet)

#: Counts at most this many standard deviations from their expectation are not priced exactly
#: (their tail probability is far above any Bonferroni-adjusted level; see the module docstring).
SCREEN_Z = 3.0
#: At most this many mass bins are watched at stage 2.
WATCH_MAX = 8
#: Scan windows: at pyramid level 0 (single bins) these lengths, at every level these numbers of
#: consecutive blocks of 2**level bins (lengths 1, 2, 3, 4, 6, 8, 12, 16, 24, ...: each at most 1.5x
#: the previous, starts every 2**level bins, i.e. every 1/4 or 1/6 of the length).
SCAN_LEVEL0_WINDOWS = (1, 2, 3)
SCAN_WINDOWS = (4, 6)

SPIKES_UNIT = "point mass (share of samples)"
SCAN_UNIT = "share of samples (+ bump, - hole)"


#: Mass-bin counters of chunks are counted by one bincount once this many are pending (or a chunk
#: more would not fit; see `LocalizedFold.flush`): the bincount's zero-filled output (a few MB),
#: its min and max and its addition into the totals then cost little next to the counting.
#: Measured on float32 N(0, 1): 2^23 (32 MB of counters) folds ~5% faster than 2^22, and 2^24
#: no faster than 2^23.
PENDING_ELEMENTS = 1 << 23
#: Main layout: a chunk's counters are worked out this many elements at a time, so that the
#: scratch tensors of one step are still in cache at the next (a whole chunk's are not).
COUNTER_SLICE = 1 << 18
#: A draw whose flushes hold at most this many counters in all keeps them as (counter, count)
#: pairs: the dense counters (~1.6 M for float32 N(0, 1) on +-2) would cost a small draw more to
#: zero, add up and put in order than its fold.
SPARSE_ELEMENTS = 1 << 18


# ------------------------------------------------------------------------- the state and its fold


@dataclass
class LocalizedState:
    """Counts over the law's mass bins, and (stage 2) the watched bins' exact values."""

    mass_hist: np.ndarray  # int64[law.mass_bins.n_bins]
    watch_bins: tuple = ()
    watch_keys: np.ndarray | None = None  # ordered keys (uint64), sorted
    watch_counts: np.ndarray | None = None

    @classmethod
    def merge(cls, parts, whole) -> "LocalizedState":
        out = cls(np.sum([np.asarray(p.mass_hist, dtype=np.int64) for p in parts], axis=0))
        _merge_watch(out, parts)
        return out


def _merge_watch(out: LocalizedState, parts) -> None:
    """The exact-value tallies of watched mass bins add key by key, when every part watched the
    same bins (otherwise the whole has none: a tally of some parts would undercount)."""
    watch = {tuple(p.watch_bins) for p in parts}
    if len(watch) != 1 or not parts[0].watch_bins:
        return
    out.watch_bins = tuple(parts[0].watch_bins)
    if any(p.watch_keys is None or p.watch_counts is None for p in parts):
        return  # a part without its tally: no tally of the whole (spikes judges the bins alone)
    keys = [np.asarray(p.watch_keys, dtype=np.uint64) for p in parts]
    counts = [np.asarray(p.watch_counts, dtype=np.int64) for p in parts]
    unique, inverse = np.unique(np.concatenate(keys), return_inverse=True)
    out.watch_keys = unique
    out.watch_counts = np.bincount(inverse, weights=np.concatenate(counts),
                                   minlength=unique.size).astype(np.int64)


class LocalizedFold:
    """The mass-bin counters of a 32/64-bit law (`harness.engine.mass_bin_counters`), and the
    optional watch list: mass bins whose values are tallied exactly (stage 2 of `spikes`, see
    harness.runner)."""

    @classmethod
    def start(cls, law, shape: tuple, fold) -> "LocalizedFold | None":
        mb = getattr(law, "mass_bins", None) if law is not None else None
        if mb is None or fold.exact_hist:
            return None
        return cls(mb, fold)

    def __init__(self, mb, fold):
        self.owner = fold
        self.mass = mb
        self.counters = MassCounters.of(mb)
        self.table = torch.from_numpy(self.counters.table).to(fold.device)
        self.low_mask = (1 << mb.low_bits) - 1  # main-bin layout
        self.ordered = None  # the counters in part order, once finished
        # The counters refine the main bins: the main histogram comes from them (one bincount
        # for a few chunks, instead of two per chunk).
        self.covers_main = mb.fine is None
        # Main layout: dense counters once a flush is too big for (counter, count) pairs.
        self.raw = None if self.covers_main else self._zeros()
        self.sparse: list = []  # the small flushes' (distinct counters, counts), on the device
        self.sparse_used = 0
        self.sparse_bins = None  # their coarse and mass bins' counts, once finished
        self.pending = None  # main layout: the last chunks' counters, not yet counted
        self.pending_used = 0
        if self.covers_main:
            self.pending = torch.empty(0, dtype=torch.int32 if fold.bits <= 32 else torch.int64,
                                       device=fold.device)
            main = fold.accumulator(binned.FAMILY.name)
            if main is not None:
                main.refine(self)
        self.watch_raw = None
        self.watch_bins: tuple = ()
        self.watched: list = []  # (distinct values, counts) of each chunk, on the device
        if fold.watch:
            bins = np.asarray(sorted(set(int(j) for j in fold.watch)), dtype=np.int64)
            watched_ordered = np.zeros(self.counters.n, dtype=bool)
            # mass bin j has parts (counters) mass_first[j] .. mass_first[j + 1] - 1
            ends = np.append(mb.mass_first, self.counters.n)
            first, count = ends[bins], ends[bins + 1] - ends[bins]
            watched_ordered[np.repeat(first - (np.cumsum(count) - count), count)
                            + np.arange(int(count.sum()))] = True
            self.watch_raw = torch.as_tensor(self.counters.order(watched_ordered),
                                             device=fold.device)
            self.watch_bins = tuple(int(j) for j in bins)

    def fold(self, chunk) -> None:
        f = self.owner
        if self.covers_main:
            # Counters over the main bins, written into the pending buffer and counted a few
            # chunks at a time (`flush`).
            slot = self._pending_slot(chunk.numel)
            for start in range(0, chunk.numel, COUNTER_SLICE):
                ints = chunk.ints[start:start + COUNTER_SLICE]
                shape = tuple(ints.shape)
                bins = raw_main_bins(ints, f.bits, f.s.hist_bits,
                                     out=f.buffer("mass_b", shape, self.table.dtype))
                packed = torch.index_select(self.table, 0, bins,
                                            out=f.buffer("mass_t", shape, self.table.dtype))
                low = torch.bitwise_and(ints, self.low_mask, out=slot[start:start + ints.numel()])
                self._count(packed, low, ints)
            return
        # Mass bins over the fine bins: coarse bin = fine bin + 1 (0 below, n + 1 above), low
        # bits = the key's offset inside it (all ones below: the below bin is not split).
        keys = chunk.fine_keys
        fine_shift = f.law.fine_bins.shift
        coarse = torch.bitwise_right_shift(keys, fine_shift,
                                           out=f.buffer("mass_c", tuple(keys.shape), keys.dtype))
        coarse.add_(1)
        packed = torch.index_select(self.table, 0, coarse,
                                    out=f.buffer("mass_t", tuple(keys.shape), self.table.dtype))
        low = torch.bitwise_and(keys, (1 << fine_shift) - 1, out=coarse)
        self._count(packed, low, chunk.ints)

    def _count(self, packed: torch.Tensor, low: torch.Tensor, ints: torch.Tensor) -> None:
        """Mass-bin counters: the coarse bin (raw main bin, or fine bin) of each element gives
        ``packed`` = (first counter, shift) from one table lookup (done by the caller); the
        element's low key bits shifted are the offset. Counted by one bincount per chunk, or (main
        layout) written to the pending buffer that one bincount counts for several chunks.
        ``low`` becomes the counters; ``packed`` is overwritten."""
        shift = torch.bitwise_and(packed, (1 << SHIFT_BITS) - 1,
                                  out=self.owner.buffer("mass_s", tuple(packed.shape), packed.dtype))
        packed.bitwise_right_shift_(SHIFT_BITS)
        counter = low.bitwise_right_shift_(shift).add_(packed)
        if self.pending is None:
            self.raw += torch.bincount(counter, minlength=self.raw.numel())
        if self.watch_raw is not None:
            # Distinct values of the watched bins and their counts stay on the device (at most
            # the watched bins' key count per chunk, whatever n is); finish() adds them up.
            hit = torch.index_select(self.watch_raw, 0, counter)
            values, counts = torch.unique(ints[hit], return_counts=True)
            self.watched.append((values, counts))

    def _pending_slot(self, numel: int) -> torch.Tensor:
        """Room for one chunk's counters in the pending buffer (flushed first when full)."""
        if self.pending_used + numel > self.pending.numel():
            self.flush()
            if numel > self.pending.numel():  # a chunk larger than the first ones
                self.pending = torch.empty(max(numel, PENDING_ELEMENTS), dtype=self.pending.dtype,
                                           device=self.owner.device)
        slot = self.pending[self.pending_used:self.pending_used + numel]
        self.pending_used += numel
        return slot

    def flush(self) -> None:
        """Count the pending counters: one bincount (and one add into the totals) for several
        chunks, whose zero-filled output of a few MB costs as much as the counting; while the
        draw's flushes are small, their distinct counters and counts instead."""
        if self.pending is None or not self.pending_used:
            return
        pending = self.pending[:self.pending_used]
        if self.raw is None and self.sparse_used + pending.numel() <= SPARSE_ELEMENTS:
            self.sparse.append(torch.unique(pending, return_counts=True))
            self.sparse_used += pending.numel()
        else:
            counts = torch.bincount(pending)  # up to the largest counter seen: fewer zeros to add
            self._dense()[:counts.numel()].add_(counts)
        self.pending_used = 0

    def _zeros(self) -> torch.Tensor:
        return torch.zeros(self.counters.n, dtype=torch.int64, device=self.owner.device)

    def _dense(self) -> torch.Tensor:
        """The dense counters, holding the small flushes' counts too."""
        if self.raw is None:
            self.raw = self._zeros()
            for counters, counts in self.sparse:
                self.raw.index_add_(0, counters.to(torch.int64), counts)
            self.sparse, self.sparse_used = [], 0
        return self.raw

    def _sparse(self) -> tuple[np.ndarray, np.ndarray]:
        """The coarse and the mass bins' counts of a draw whose flushes were all small (computed
        once, when every chunk is counted)."""
        if self.sparse_bins is None:
            counters = [c.to(torch.int64) for c, _ in self.sparse]
            counts = [tally for _, tally in self.sparse]
            empty = torch.zeros(0, dtype=torch.int64)
            self.sparse_bins = self.counters.sparse_counts(
                torch.cat(counters).cpu().numpy() if counters else empty.numpy(),
                torch.cat(counts).cpu().numpy() if counts else empty.numpy())
        return self.sparse_bins

    def _ordered(self) -> np.ndarray:
        """The dense counters in part order, once every chunk is counted (computed once)."""
        if self.ordered is None:
            self.ordered = self.counters.order(self.raw.cpu().numpy())
        return self.ordered

    def coarse_hist(self) -> np.ndarray:
        """The main histogram from the counters (main layout; `binned.BinnedFold.refine`)."""
        self.flush()
        if self.raw is None:
            return self._sparse()[0]
        return self.counters.coarse(self._ordered())

    def finish(self, whole: Summary) -> LocalizedState:
        self.flush()
        mass = (self._sparse()[1] if self.raw is None
                else self.mass.parts_to_mass(self._ordered()))
        state = LocalizedState(mass, self.watch_bins)
        if self.watch_raw is not None:
            f = self.owner
            patterns, per_value = _add_tallies(self.watched, f.device)
            unsigned = (patterns & ((1 << f.bits) - 1) if f.bits < 64 else patterns)
            keys = f.fmt.keys_from_bits(unsigned.astype(np.uint64))
            order = np.argsort(keys)
            state.watch_keys = keys[order]
            state.watch_counts = per_value[order]
        return state


def _add_tallies(tallies: list, device) -> tuple[np.ndarray, np.ndarray]:
    """Sum (distinct values, counts) pairs over chunks: the distinct bit patterns (int64) and
    their total counts, one device->host copy."""
    if not tallies:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    values = torch.cat([v for v, _ in tallies])
    counts = torch.cat([c for _, c in tallies])
    distinct, inverse = torch.unique(values, return_inverse=True)
    totals = torch.zeros(distinct.numel(), dtype=torch.int64, device=device)
    totals.index_add_(0, inverse, counts.to(torch.int64))
    return distinct.to(torch.int64).cpu().numpy(), totals.cpu().numpy()


FAMILY = Family("localized", LocalizedFold.start, needs=(binned.FAMILY,))


# ------------------------------------------------------------------------------------ the bins


class LocalBins:
    """The finest exact bins of a Summary: counts, law masses, and a labeller.

    ``exact`` (<= 16-bit): one bin per bit pattern in ordered-key order (``summary.binned.hist``,
    ``law.hist_bin_probs()``). Otherwise the law's mass bins (``summary.localized.mass_hist``,
    ``law.mass_bins.probs``)."""

    def __init__(self, law):
        self.law = law
        self.mass = getattr(law, "mass_bins", None)
        self.exact = self.mass is None
        self.probs = (np.asarray(law.hist_bin_probs(), dtype=np.float64) if self.exact
                      else np.asarray(self.mass.probs, dtype=np.float64))
        pos = np.flatnonzero(self.probs > 0)
        self.first, self.last = (int(pos[0]), int(pos[-1])) if pos.size else (0, -1)
        self.n_positive = int(pos.size)
        self.q_max = float(self.probs.max()) if pos.size else 0.0
        # mass-weighted mean bin mass: the mass of the bin a typical sample falls in
        self.q_typical = float(np.dot(self.probs, self.probs)) if pos.size else 0.0

    @classmethod
    def of(cls, law) -> "LocalBins":
        return cached_on_law(law, "_localized_bins", cls)

    def counts(self, summary) -> np.ndarray | None:
        """The Summary's counts over these bins; None when it was built without mass bins (a
        hand-made Summary: the engine always folds them)."""
        if self.exact:
            return np.asarray(summary.binned.hist, dtype=np.int64)
        if not summary.has(FAMILY.name):
            return None
        return np.asarray(summary.localized.mass_hist, dtype=np.int64)

    def n_values(self, j0: int, j1: int) -> float:
        """How many bit patterns bins j0..j1 hold."""
        if self.exact:
            return float(j1 - j0 + 1)
        lo, _ = self.mass.key_ranges([j0])
        _, hi = self.mass.key_ranges([j1])
        return float(hi[0] - lo[0]) + 1.0

    def label(self, j0: int, j1: int | None = None) -> str:
        """Value range of bins j0..j1 (inclusive), with the number of values it holds."""
        j1 = j0 if j1 is None else j1
        if self.exact:
            return bins_label(self.law, j0, j1)
        fmt = self.law.fmt
        lo, _ = self.mass.key_ranges([j0])
        _, hi = self.mass.key_ranges([j1])
        v0, v1 = (float(fmt.values_from_keys(k)[0]) for k in (lo, hi))
        count = int(hi[0] - lo[0]) + 1
        if math.isnan(v0) or math.isnan(v1):
            return "NaN bit patterns" if math.isnan(v0) and math.isnan(v1) else (
                f"[NaN patterns .. {fmt_value(v1)}]" if math.isnan(v0) else f"[{fmt_value(v0)} .. NaN patterns]")
        if count == 1:
            return f"{v0!r} (one value)"
        return f"[{v0!r}, {v1!r}] ({count:,} values)"


def _impossible(counts: np.ndarray, probs: np.ndarray, bins: LocalBins, unit: str, mde: float):
    """A decisive Outcome when samples sit where the law has no mass, else None."""
    imp = (probs <= 0) & (counts > 0)
    if not imp.any():
        return None
    total = int(counts[imp].sum())
    j = int(np.argmax(np.where(imp, counts, -1)))
    msg = (f"{total} samples where the law has no mass; worst {bins.label(j)}: "
           f"{int(counts[j])} observed vs 0 expected")
    return Outcome(statistic=math.inf, p_value=0.0, effect=math.inf, effect_unit=unit, mde=mde,
                   message=msg, decisive=True, details={"n_impossible": total})


# ------------------------------------------------------------------------------------ spikes


def _spike_bin_pvalues(counts: np.ndarray, probs: np.ndarray, n: int):
    """(candidate bins, their exact upper-tail p-values): bins with positive mass whose count is more
    than SCREEN_Z standard deviations above its expectation."""
    lam = n * probs
    d = counts - lam
    cand = np.flatnonzero((probs > 0) & (d > 0) & (d * d > SCREEN_Z * SCREEN_Z * lam))
    return cand, binom_upper(counts[cand], n, probs[cand])


def critical_excess(n: int, q: float, level: float) -> float:
    """The excess share eps at which Bin(n, q + eps) has its median on the level-`level` upper
    critical count of Bin(n, q): the point mass detected with power 0.5."""
    if not (q > 0) or n <= 0:
        return math.nan
    crit = float(stats.binom.isf(level, n, q)) + 1.0  # smallest k with P(X >= k) <= level
    return max(crit - n * q, 1.0) / n


def spikes_mde(law, n: int, shape: tuple, alpha: float) -> float:
    """Smallest extra point mass (share of samples on one value) detected with power 0.5 at stage 1,
    wherever it sits: in the heaviest bin (worst case; a value of negligible own mass in a light bin
    needs less)."""
    bins = LocalBins.of(law)
    if bins.n_positive < 2 or n <= 0:
        return math.nan
    return critical_excess(n, bins.q_max, alpha / bins.n_positive)


def spike_watch(summary: Summary, law) -> tuple:
    """The mass bins stage 1 found most over-represented (at most WATCH_MAX, those whose
    Bonferroni-adjusted upper-tail p is below 1), for the engine to tally exactly at stage 2; empty
    for dtypes whose histogram already has one bin per value."""
    bins = LocalBins.of(law)
    counts = None if bins.exact else bins.counts(summary)
    if counts is None or bins.n_positive < 2:
        return ()
    n = int(counts.sum())
    if n == 0:
        return ()
    cand, ps = _spike_bin_pvalues(counts, bins.probs, n)
    keep = ps * bins.n_positive < 1.0
    order = np.argsort(ps[keep], kind="stable")[:WATCH_MAX]
    return tuple(int(j) for j in cand[keep][order])


def _watched_values(summary: Summary, law, bins: LocalBins, n: int):
    """(p-value over the watched values, decisive, details, message), or None without a tally.

    The family: every bit pattern of the watched bins (their number is the Bonferroni factor);
    each value's count against Bin(n, P(Y = v)), exact upper tail."""
    state = summary.states.get(FAMILY.name)
    if state is None:
        return None
    keys, watched = state.watch_keys, tuple(state.watch_bins or ())
    if keys is None or not watched or bins.exact:
        return None
    n_patterns = float(sum(bins.n_values(j, j) for j in watched))
    if len(keys) == 0:
        return 1.0, False, {"watched_bins": len(watched), "watched_values": 0}, \
            f"no sample in the {len(watched)} watched bins"
    counts = np.asarray(state.watch_counts, dtype=np.int64)
    values = law.fmt.values_from_keys(np.asarray(keys, dtype=np.uint64))
    mass = value_masses(law, values)
    ps = binom_upper(counts, n, mass)
    i = int(np.argmin(ps))
    decisive = bool(np.any((mass <= 0) & (counts > 0)))
    p = 0.0 if decisive else clip_p(n_patterns * float(ps[i]))
    msg = (f"value {float(values[i])!r}: {int(counts[i])} observed vs {n * mass[i]:.4g} expected "
           f"(its mass {mass[i]:.4g}; {len(keys)} distinct values in the {len(watched)} watched "
           f"bins)")
    details = {"watched_bins": len(watched), "watched_values": int(len(keys)),
               "worst_value": float(values[i]), "worst_value_count": int(counts[i]),
               "worst_value_mass": float(mass[i])}
    return p, decisive, details, msg


def value_masses(law, values: np.ndarray) -> np.ndarray:
    """P(Y = v) of single values. For formats narrower than float64 the law's own atom masses
    (cell edges are exact in float64). A float64 value's cell [v - ulp/2, v + ulp/2] has edges
    float64 cannot hold (the law's cells snap them to the even neighbour, which is fine for bins
    of many values but gives a single value 0 or 2 ulps): its mass is the cell's width inside
    [a, b] times the density at v, exact to O((ulp / std)**2)."""
    values = np.asarray(values, dtype=np.float64)
    fmt = law.fmt
    if fmt.bits < 64:
        return np.asarray(law.atom_probs(values), dtype=np.float64)
    dist = law.dist
    below = (values - fmt.next_down(values)) * 0.5  # exact: a power of two
    above = (fmt.next_up(values) - values) * 0.5
    with np.errstate(invalid="ignore", over="ignore"):
        width = np.minimum(above, dist.b - values) + np.minimum(below, values - dist.a)
        mass = np.maximum(width, 0.0) * dist.pdf(values)
    return np.where(np.isfinite(mass), mass, 0.0)


def _judged_counts(summary: Summary, law, unit: str, mde_of, alpha: float):
    """What spikes and scan judge: (bins, counts, n, mde), or the Outcome that settles the check
    first (no mass-bin counts, no samples, samples where the law has no mass, a one-bin law)."""
    bins = LocalBins.of(law)
    counts = bins.counts(summary)
    if counts is None:
        return not_applicable("the Summary has no mass-bin counts", unit)
    n = int(counts.sum())
    if n == 0:
        return not_applicable("no samples", unit)
    mde = mde_of(law, n, tuple(summary.shape), alpha)
    bad = _impossible(counts, bins.probs, bins, unit, mde)
    if bad is not None:
        return bad
    if bins.n_positive < 2:
        return not_applicable("the law is one value (or one bin)", unit)
    return bins, counts, n, mde


def synthetic_summary(law, dtype, counts: np.ndarray) -> Summary:
    """A Summary holding only the finest-bin counts (`LocalBins`: every value for 16-bit dtypes,
    the mass bins otherwise): what the calibration and the power simulation feed spikes and scan
    in place of the engine's histogram of n draws."""
    s = new_summary(law, (256, 256), dtype)
    s.n = int(counts.sum())
    if law.mass_bins is None:
        s.states[binned.FAMILY.name] = BinnedState(counts)
    else:
        s.states[FAMILY.name] = LocalizedState(counts)
    return s



@quiet
def check_spikes(summary: Summary, law, *, alpha: float = 1e-3) -> Outcome:
    unit = SPIKES_UNIT
    judged = _judged_counts(summary, law, unit, spikes_mde, alpha)
    if isinstance(judged, Outcome):
        return judged
    bins, counts, n, mde = judged
    probs = bins.probs
    k = bins.n_positive
    cand, ps = _spike_bin_pvalues(counts, probs, n)
    if cand.size:
        i = int(np.argmin(ps))
        j, p_bins = int(cand[i]), clip_p(k * float(ps[i]))
    else:  # nothing above the screen: report the largest standardized excess
        lam = n * probs
        z = np.where(probs > 0, (counts - lam) / np.sqrt(np.maximum(lam, 1e-300)), -np.inf)
        j, p_bins = int(np.argmax(z)), 1.0
    lam_j = n * probs[j]
    effect = (counts[j] - lam_j) / n
    details = {"bins": k, "candidates": int(cand.size), "worst_bin": j, "p_bins": p_bins}
    msg = (f"worst bin {bins.label(j)}: {int(counts[j])} observed vs {lam_j:.4g} expected "
           f"(mass {probs[j]:.4g}, excess {effect:.3g} of the samples; {k:,} bins)")
    p = p_bins
    watched = _watched_values(summary, law, bins, n)
    decisive = False
    if watched is not None:  # stage 2: the bins and the watched values, Bonferroni over the two
        p_values, decisive, more, vmsg = watched
        details.update(more, p_values=p_values)
        p = 0.0 if decisive else clip_p(2.0 * min(p_bins, p_values))
        msg = f"{vmsg}; {msg}" if p_values <= p_bins else f"{msg}; watched: {vmsg}"
    return Outcome(statistic=float(counts[j]), p_value=p, effect=float(effect), effect_unit=unit,
                   mde=mde, message=msg, decisive=decisive, details=details)


# ------------------------------------------------------------------------------------ scan


def scan_families(n_bins: int) -> list:
    """The scan's families as (level, window, intervals): windows of `window` consecutive blocks of
    2**level bins, starting at every block, over `n_bins` bins. Depends on the number of bins only."""
    out = []
    level, blocks = 0, n_bins
    while blocks >= 1:
        windows = (SCAN_LEVEL0_WINDOWS if level == 0 else ()) + SCAN_WINDOWS
        for w in windows:
            if blocks >= w:
                out.append((level, w, blocks - w + 1))
        if blocks < 2 * SCAN_WINDOWS[0]:
            break
        level, blocks = level + 1, (blocks + 1) // 2
    return out


def _halve(x: np.ndarray) -> np.ndarray:
    if x.size % 2:
        x = np.append(x, x.dtype.type(0))
    return x[0::2] + x[1::2]


def _window_sums(x: np.ndarray, w: int, cache: dict) -> np.ndarray:
    """Sums of w consecutive entries, from sums of shorter windows (direct sums of shifted
    copies: no cancellation, unlike differences of a running sum)."""
    if w not in cache:
        if w == 1:
            out = x
        elif w % 2 == 0:
            half = _window_sums(x, w // 2, cache)
            out = half[: half.size - w // 2] + half[w // 2:]
        else:
            prev = _window_sums(x, w - 1, cache)
            out = prev[:-1] + x[w - 1:]
        cache[w] = out
    return cache[w]


def _scan(counts: np.ndarray, probs: np.ndarray, n: int, families: list):
    """Best interval of the scan: (adjusted p, level, window, start block, count, expected), and how
    many intervals were priced exactly.

    The screen runs in float32 (half the memory traffic; its rounding, ~1e-7 of a count, is far
    below the 3 sd it looks for); the intervals it keeps are priced from exact int64 counts and
    float64 masses (direct sums over the window's blocks)."""
    n_fam = len(families)
    best = (math.inf, 0, 1, 0, 0.0, 0.0)
    screened = 0
    # The intervals kept by the screen, a block per (level, window), priced in one call at the
    # end: a binomial p-value call costs ~0.2 ms of scipy's argument handling whatever its size.
    kept: list = []
    by_level: dict = {}
    for level, w, size in families:
        by_level.setdefault(level, []).append((w, size))
    c, q = counts.astype(np.int64), probs
    z2 = np.float32(SCREEN_Z * SCREEN_Z)
    for level in range(max(by_level) + 1 if by_level else 0):
        if level:
            c, q = _halve(c), _halve(q)
        if level not in by_level:
            continue
        cf, lf = c.astype(np.float32), (q * n).astype(np.float32)
        cache_c, cache_l = {}, {}
        for w, size in by_level[level]:
            s = _window_sums(cf, w, cache_c)
            lam = _window_sums(lf, w, cache_l)
            dev = s - lam
            np.multiply(dev, dev, out=dev)
            cand = np.flatnonzero(dev > z2 * lam)
            if not cand.size:
                continue
            exact_c = c[cand].copy()
            exact_q = q[cand].copy()
            for t in range(1, w):
                exact_c += c[cand + t]
                exact_q += q[cand + t]
            keep = exact_c != n * exact_q
            cand, exact_c, exact_q = cand[keep], exact_c[keep], exact_q[keep]
            screened += int(cand.size)
            if cand.size:
                kept.append((level, w, size, cand, exact_c, exact_q))
    if not kept:
        return best, screened
    all_ps = binom_two_sided(np.concatenate([k[4] for k in kept]), n,
                             np.concatenate([k[5] for k in kept]))
    offset = 0
    for level, w, size, cand, exact_c, exact_q in kept:
        ps = all_ps[offset:offset + cand.size]
        offset += cand.size
        i = int(np.argmin(ps))
        adj = float(ps[i]) * n_fam * size
        if adj < best[0]:
            best = (adj, level, w, int(cand[i]), float(exact_c[i]), float(n * exact_q[i]))
    return best, screened


def hole_guaranteed(families: list, n_fam: int, q_bin: float, n: int, alpha: float) -> float:
    """Smallest hole (mass of an interval never produced) that contains, at the median alignment
    against the bins, a whole scan interval whose empty count is significant: the hole detected
    with power >= 0.5 (deficits in partly covered intervals only add power)."""
    best = math.inf
    for level, w, size in families:
        length = w << level  # bins
        lam = n * q_bin * length
        if 2.0 * math.exp(-lam) * n_fam * size > alpha:  # 2 P(X = 0) <= 2 exp(-lam)
            continue
        # a hole H bins long holds a whole window of `length` bins starting on a multiple of
        # 2**level for a fraction min(1, (H - length) / 2**level) of its alignments to the bins
        need = length + 0.5 * (1 << level)
        best = min(best, need * q_bin)
    return best


def scan_mde(law, n: int, shape: tuple, alpha: float) -> float:
    """Smallest hole mass (share of the samples that a narrow interval never gets) the scan finds
    with power 0.5, where the bins are typical (mass-weighted mean bin mass)."""
    bins = LocalBins.of(law)
    if bins.n_positive < 2 or n <= 0:
        return math.nan
    families = scan_families(bins.last - bins.first + 1)
    return hole_guaranteed(families, len(families), bins.q_typical, n, alpha)


@quiet
def check_scan(summary: Summary, law, *, alpha: float = 1e-3) -> Outcome:
    unit = SCAN_UNIT
    judged = _judged_counts(summary, law, unit, scan_mde, alpha)
    if isinstance(judged, Outcome):
        return judged
    bins, counts, n, mde = judged
    probs = bins.probs
    lo, hi = bins.first, bins.last
    families = scan_families(hi - lo + 1)
    (adj, level, w, start, obs, lam), screened = _scan(counts[lo:hi + 1], probs[lo:hi + 1], n, families)
    details = {"families": len(families), "screened": screened}
    if not math.isfinite(adj):
        return Outcome(statistic=0.0, p_value=1.0, effect=0.0, effect_unit=unit, mde=mde,
                       message=f"no interval more than {SCREEN_Z:g} sd from its expectation "
                               f"({len(families)} families of intervals)", details=details)
    j0 = lo + (start << level)
    j1 = min(hi, j0 + (w << level) - 1)
    effect = (obs - lam) / n
    kind = "excess" if obs > lam else "deficit"
    msg = (f"worst interval {bins.label(j0, j1)}: {int(obs)} observed vs {lam:.6g} expected "
           f"({kind} {abs(effect):.3g} of the samples; {w << level} bins, "
           f"{len(families)} families of intervals)")
    details.update(worst_bins=(j0, j1), level=level, window=w)
    return Outcome(statistic=obs, p_value=clip_p(adj), effect=float(effect), effect_unit=unit,
                   mde=mde, message=msg, details=details)


SPIKES = statistical(
    "spikes", check_spikes,
    families=(FAMILY, binned.FAMILY),
    doc='No single value over-represented: the finest exact bins, then (stage 2) the values themselves.',
    method=(
        "Point masses: the most over-represented single values. Bins: every bit pattern for "
        "16-bit dtypes; for 32/64-bit dtypes the law's mass bins (contiguous runs of values holding "
        "about 2^-18.5 = 2.7e-6 of the law each at most, a single value where one holds more; exact masses), "
        "where a main histogram bin holds up to 1e-4. Null: iid draws of the rounded law; each bin's count "
        "is Bin(n, its exact mass): exact upper-tail binomial test, Bonferroni over the K bins of "
        "positive mass (a count where the law has no mass is decisive). Stage 2 (4x n, fresh "
        "seed) also tallies the exact values falling in the <= 8 bins stage 1 found most "
        "over-represented and tests each value's count against Bin(n, P(Y = v)), Bonferroni over "
        "every bit pattern of those bins, then over the two components. False-alarm rate <= alpha "
        "per stage (union bound; the watch list depends on stage 1 only). Effect: the worst bin's "
        "excess as a share of the samples (a value written instead of the law's draw 1e-5 of the "
        "time shows as 1e-5). MDE: the extra point mass whose median count reaches the level "
        "alpha/K critical count in the heaviest bin (worst case)."
    ),
    unit=SPIKES_UNIT,
    mde=spikes_mde,
)

SCAN = statistical(
    "scan", check_scan,
    families=(FAMILY, binned.FAMILY),
    doc='No bump or hole at any scale: every interval of a multiscale family, exact binomial tests.',
    method=(
        "Bumps and holes at every scale: a multiscale scan over the same bins as spikes (every "
        "value for 16-bit dtypes, the mass bins for 32/64-bit). Intervals: windows of w "
        "consecutive blocks of 2^l bins starting at every block, w in {4, 6} at every level l and "
        "w in {1, 2, 3} at l = 0 (lengths 1, 2, 3, 4, 6, 8, 12, ...: any run of bins contains an "
        "interval of the family longer than half of it). Null: iid draws of the rounded law; each "
        "interval's count is Bin(n, exact mass): exact two-sided binomial test (doubled smaller "
        "tail); each family (l, w) gets alpha/F, Bonferroni over its intervals (union bound; "
        "only intervals beyond 3 sd are priced, which can only raise p). A count where the law "
        "has no mass is decisive. Finds a narrow excess or an empty interval that chi-square "
        "averages away. False-alarm rate <= alpha. Effect: the worst interval's (observed - "
        "expected) / n, negative for a hole. MDE: the mass of an interval never produced (a "
        "hole) that, at the median alignment with typical bins, contains a whole scan interval "
        "whose empty count is significant (power >= 0.5)."
    ),
    unit="hole mass (share of samples)",
    mde=scan_mde,
)
