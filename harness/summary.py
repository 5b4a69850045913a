"""The Summary: everything the checks may know about a candidate's output, in memory that does not grow with n.

The engine (`harness.engine`) folds every chunk of samples, on the chunk's device, into one Summary;
the checks (`harness.checks`) read only the Summary and the reference law. A Summary is plain data
(numpy arrays and Python scalars) so it pickles across xdist workers and can be built from any
array of samples in the self-tests.

Conventions
-----------
* Histogram bins are indexed by the *ordered key* of a value's bit pattern (see
  `reference.dtypes.FloatFormat.ordered_keys`): keys increase with the numeric value, -NaNs sit
  below -inf and +NaNs above +inf. Bin ``k`` holds keys ``[k << shift, ((k + 1) << shift) - 1]``
  with ``shift = bits - hist_bits``: an exact, contiguous interval of representable values, whose
  probability under the rounded law is ``RoundedLaw.hist_bin_probs()[k]``. The histogram counts every
  examined element (poisoned, NaN and Inf included): ``hist.sum() == n``.
* A 32/64-bit law also gets ``mass_hist``: counts over its mass bins (``RoundedLaw.mass_bins``),
  contiguous key ranges each holding about 2**-18.5 of the law or less (a single value may hold more);
  ``mass_hist.sum() == n``. With a watch list (stage 2), ``watch_keys``/``watch_counts`` tally the
  exact values seen in the watched mass bins.
* A narrow 32/64-bit law (one whose support covers few of those bins, e.g. [8, 8.01] in float64)
  also gets ``fine_hist``: the same ordered keys in up to 2**16 bins over its support, plus one
  bin below and one above (``RoundedLaw.fine_bin_probs()``); ``fine_hist.sum() == n`` too.
* Standardized values are ``z = (x - center) / scale`` in float64 with ``center``/``scale`` the
  rounded law's mean and std (the continuous law's std where the rounded one is 0), so that under the
  null ``E z = 0`` and ``E z^2 = 1``. Non-finite elements enter the sums as ``z = 0``; any of them
  fails the run anyway.
* Counts are Python ints, sums float64.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np

from reference.dtypes import float_format

from .bins import farthest_outside, poison_pattern

#: A pair variance below this fraction of its second moment is not resolved by the sums.
RESOLVABLE_VARIANCE = 1e-6

#: How many row extremes (per-slice minima/maxima along the last dim) a Summary keeps at most.
ROW_EXTREMES_CAP = 1 << 16

#: The last bits of each scanned value's bit pattern counted by class (32/64-bit dtypes): 16 classes.
LOW_BITS = 4


@dataclass
class LagSums:
    """Sums for the lag-1 correlation of pairs (u, v): u = element, v = its successor."""

    count: int = 0
    sum_u: float = 0.0
    sum_v: float = 0.0
    sum_uu: float = 0.0
    sum_vv: float = 0.0
    sum_uv: float = 0.0

    def add(self, other: "LagSums") -> None:
        for f in dataclasses.fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    def correlation(self) -> float:
        """Pearson correlation of the pairs; NaN when undefined.

        Also NaN when a variance is below `RESOLVABLE_VARIANCE` of its second moment: the sums
        come from float32 block sums (~1e-7 relative), so such a variance (an output that hardly
        varies: under the law z has variance 1 and mean 0) is rounding noise, and so would r be."""
        if self.count < 2:
            return float("nan")
        n = self.count
        cov = self.sum_uv / n - (self.sum_u / n) * (self.sum_v / n)
        var_u = self.sum_uu / n - (self.sum_u / n) ** 2
        var_v = self.sum_vv / n - (self.sum_v / n) ** 2
        if (var_u <= RESOLVABLE_VARIANCE * self.sum_uu / n
                or var_v <= RESOLVABLE_VARIANCE * self.sum_vv / n):
            return float("nan")
        return cov / np.sqrt(var_u * var_v)


@dataclass
class Summary:
    """Streaming summary of a candidate's output for one (candidate, case, dtype, device, stage)."""

    dtype: str  # torch dtype name without the "torch." prefix, e.g. "bfloat16"
    shape: tuple  # the shape of the tensor the candidate fills on each call
    hist_bits: int  # 16 for 16-bit dtypes (8 for 8-bit), 20 for 32/64-bit
    center: float  # z = (x - center) / scale
    scale: float
    rn_a: float  # the rounded bounds used for the counts below (float64; may be +-inf)
    rn_b: float
    a: float  # the exact bounds of the case
    b: float

    n: int = 0  # elements examined (all calls)
    n_calls: int = 0
    hist: np.ndarray = field(default=None)  # int64[2**hist_bits]
    n_nan: int = 0  # written NaN (not the poison pattern)
    n_posinf: int = 0
    n_neginf: int = 0
    n_unwritten: int = 0  # elements still holding the poison pattern
    n_outside_rounded: int = 0  # finite, outside [rn_a, rn_b]
    n_outside_strict: int = 0  # finite, outside [a, b]
    n_at_rn_a: int = 0
    n_at_rn_b: int = 0
    n_at_zero: int = 0  # +0 and -0, counted where RN(a) < 0 < RN(b)
    worst_outside: float = float("nan")  # finite value farthest outside [rn_a, rn_b] (absolute units)
    worst_outside_strict: float = float("nan")  # same for [a, b]
    min: float = float("inf")  # over finite written values
    max: float = float("-inf")
    power_sums: np.ndarray = field(default=None)  # float64[5]: sum z^k, k = 0..4 (k = 0 is the count)
    # Narrow 32/64-bit laws only (`reference.rounded.FineBins`): (key_lo, shift, n_bins) and the
    # counts int64[n_bins + 2]: [below key_lo, fine bin 0 .. n_bins-1, at or above the end].
    fine_bins: tuple | None = None
    fine_hist: np.ndarray | None = None
    # 32/64-bit laws: counts over the law's mass bins (`reference.rounded.MassBins`: contiguous key
    # ranges of about equal mass, ~2**-18.5 each at most), for the localized checks (spikes, scan).
    mass_hist: np.ndarray | None = None
    # Stage 2 of a case whose stage 1 flagged mass bins (harness.runner): those bins' exact values,
    # ordered keys (uint64) and counts, sorted by key.
    watch_bins: tuple = ()
    watch_keys: np.ndarray | None = None
    watch_counts: np.ndarray | None = None

    # Per-slice extremes along the last dimension (first ROW_EXTREMES_CAP rows), float64.
    row_len: int = 0
    row_min: np.ndarray = field(default=None)
    row_max: np.ndarray = field(default=None)
    n_rows_total: int = 0  # rows seen (may exceed the number kept)

    # Independence.
    lag1: dict = field(default_factory=dict)  # dim (int, of the filled tensor) -> LagSums
    successive: LagSums = field(default_factory=LagSums)  # element of call t vs same element of call t+1
    n_equal_successive: int = 0  # elements bit-identical to the same element of the previous call
    n_pairs_successive: int = 0
    n_duplicate_rows: int = 0  # rows equal to another row of the same call (counted beyond the first)
    n_rows_compared: int = 0  # rows that took part in the duplicate-row search

    # Position in the tensor (harness.bins.position_classes): counts of each class's elements over
    # the law's coarse groups of equal mass (`position_bins`), int64[classes, groups].
    position_classes: tuple = ()
    position_groups: int = 0
    position_counts: np.ndarray | None = None
    # Repetition: windows hashed at content-defined anchors, pairs of windows compared, equal pairs.
    rep_windows: int = 0
    rep_pairs: float = 0.0
    rep_equal: int = 0
    # Resolution (32/64-bit dtypes; `harness.bins.RESOLUTION_SCAN`): the draw's first finite
    # values, pooled across calls. Blocks of `collision_block` consecutive ones (the last one
    # shorter), sorted, give the equal-value pairs (no block where the law makes the check n/a):
    # `collision_compared` = sum of C(m, 2) over the blocks, `collision_triples` = sum of
    # C(m, 2) (m - 2) (`harness.bins.block_pair_slots`). `lattice_counts[i]` is how many of the
    # `resolution_scanned` values are representable in `lattice_names[i]`. A merge adds the
    # parts' blocks: each part pools its own values (the same law per block).
    collision_block: int = 0
    collision_blocks: int = 0
    collision_pairs: int = 0
    collision_compared: float = 0.0
    collision_triples: float = 0.0
    resolution_scanned: int = 0
    lattice_names: tuple = ()
    lattice_counts: np.ndarray | None = None
    # The same scanned values by the last `low_bits` bits of their bit patterns (the significand's
    # last bits): `low_bit_counts[j]` of them end in j (`RoundedLaw.low_bit_masses` is its law).
    low_bits: int = 0
    low_bit_counts: np.ndarray | None = None
    # The shape axis: elements of a view's base written outside the view, and calls that returned
    # something other than the tensor they were given (both zero for a sampler working in place).
    n_written_outside: int = 0
    n_returned_other: int = 0

    # Timing (seconds): inside the candidate vs in the engine's folding.
    candidate_s: float = 0.0
    engine_s: float = 0.0
    # Extra facts the engine wants to pass on (e.g. which seed was used, a captured warning).
    notes: dict = field(default_factory=dict)

    # Sharded parameters (harness.sharded.fold, harness.sharded.ranks). A *part* folds one rank's box
    # of each call: `box` is (global offsets, local shape), `shape` stays the whole tensor's, and
    # its rows are kept by global slot (call * rows_per_call + global row, the first
    # ROW_EXTREMES_CAP slots): row_min/row_max hold +inf/-inf (the identities of min/max) where the
    # part has no element of the row, and `row_hash` the unmixed partial row hashes (0 where none;
    # the hash is linear in the columns, so parts add). `Summary.merge` of the parts is the
    # Summary of the whole. `sharding`: the layout facts only sharding can break
    # (harness.sharded.fold.ShardingStats), read by the checks `replicas`, `shards`, `sharding`.
    box: tuple | None = None
    row_hash: np.ndarray | None = None
    sharding: object | None = None

    def __post_init__(self) -> None:
        if self.hist is None:
            self.hist = np.zeros(1 << self.hist_bits, dtype=np.int64)
        if self.power_sums is None:
            self.power_sums = np.zeros(5, dtype=np.float64)
        if self.row_min is None:
            self.row_min = np.empty(0, dtype=np.float64)
        if self.row_max is None:
            self.row_max = np.empty(0, dtype=np.float64)
        if self.fine_bins is not None and self.fine_hist is None:
            self.fine_hist = np.zeros(self.fine_bins[2] + 2, dtype=np.int64)

    @property
    def n_nonfinite(self) -> int:
        return self.n_nan + self.n_posinf + self.n_neginf

    @property
    def n_finite_written(self) -> int:
        return self.n - self.n_nonfinite - self.n_unwritten

    @classmethod
    def merge(cls, parts) -> "Summary":
        """The Summary of the whole tensor from the Summaries of disjoint parts of the same calls
        (one per rank of a sharded parameter; see the fields' comment above).

        Counts and histograms add; power sums, lag and successive-call sums add (float64: equal to
        the whole's up to summation order); min/max and row extremes take the extreme over the
        parts; row hashes add (wrapping int64) and the duplicate rows are counted on the sums, as
        the engine counts them on the whole rows. For dtypes whose histogram has a bin per bit
        pattern (16/8-bit) counts, extremes and power sums are recomputed from the merged
        histogram, exactly as the engine's own finish does, so they equal the whole's bit for bit.
        The parts keep their own data; the result shares none of it."""
        parts = list(parts)
        if not parts:
            raise ValueError("Summary.merge: no parts")
        first = parts[0]
        for p in parts[1:]:
            same = (p.dtype, tuple(p.shape), p.hist_bits, p.center, p.scale, p.fine_bins)
            if same != (first.dtype, tuple(first.shape), first.hist_bits, first.center,
                        first.scale, first.fine_bins):
                raise ValueError("Summary.merge: parts of different tensors or laws")
            if p.n_calls != first.n_calls:
                raise ValueError(f"Summary.merge: parts saw different numbers of calls "
                                 f"({first.n_calls} and {p.n_calls})")
        out = cls(dtype=first.dtype, shape=tuple(first.shape), hist_bits=first.hist_bits,
                  center=first.center, scale=first.scale, rn_a=first.rn_a, rn_b=first.rn_b,
                  a=first.a, b=first.b, row_len=first.row_len, fine_bins=first.fine_bins)
        out.n_calls = first.n_calls
        for name in ("n", "n_nan", "n_posinf", "n_neginf", "n_unwritten", "n_outside_rounded",
                     "n_outside_strict", "n_at_rn_a", "n_at_rn_b", "n_at_zero", "n_equal_successive",
                     "n_pairs_successive", "rep_windows", "rep_equal", "n_written_outside",
                     "n_returned_other", "collision_blocks", "collision_pairs",
                     "resolution_scanned"):
            setattr(out, name, sum(int(getattr(p, name)) for p in parts))
        out.collision_compared = sum(float(p.collision_compared) for p in parts)
        out.collision_triples = sum(float(p.collision_triples) for p in parts)
        _merge_resolution(out, parts)
        out.hist = np.sum([np.asarray(p.hist, dtype=np.int64) for p in parts], axis=0)
        if first.fine_hist is not None:
            out.fine_hist = np.sum([np.asarray(p.fine_hist, dtype=np.int64) for p in parts], axis=0)
        if all(p.mass_hist is not None for p in parts):
            out.mass_hist = np.sum([np.asarray(p.mass_hist, dtype=np.int64) for p in parts], axis=0)
        _merge_watch(out, parts)
        out.rep_pairs = sum(float(p.rep_pairs) for p in parts)
        if all(p.position_counts is not None for p in parts) and len(
                {(tuple(p.position_classes), p.position_groups) for p in parts}) == 1:
            out.position_classes, out.position_groups = first.position_classes, first.position_groups
            out.position_counts = np.sum([np.asarray(p.position_counts) for p in parts], axis=0)
        out.power_sums = np.sum([np.asarray(p.power_sums, dtype=np.float64) for p in parts], axis=0)
        out.min = min(float(p.min) for p in parts)
        out.max = max(float(p.max) for p in parts)
        out.worst_outside = farthest_outside([p.worst_outside for p in parts], out.rn_a, out.rn_b)
        out.worst_outside_strict = farthest_outside([p.worst_outside_strict for p in parts], out.a, out.b)
        for p in parts:
            for dim, sums in p.lag1.items():
                out.lag1.setdefault(dim, LagSums()).add(
                    sums if isinstance(sums, LagSums) else LagSums(**sums))
            out.successive.add(p.successive if isinstance(p.successive, LagSums)
                               else LagSums(**p.successive))
        _merge_rows(out, parts)
        out.candidate_s = max(float(p.candidate_s) for p in parts)
        out.engine_s = max(float(p.engine_s) for p in parts)
        out.notes = dict(first.notes)
        out.notes["parts"] = len(parts)
        out.notes["candidate_s_all_parts"] = sum(float(p.candidate_s) for p in parts)
        if any(p.notes.get("stopped_by_budget") for p in parts):
            out.notes["stopped_by_budget"] = True
        if out.hist_bits <= 16 and 1 << out.hist_bits == out.hist.size:
            _recount_from_exact_histogram(out)
        return out


def _merge_resolution(out: "Summary", parts) -> None:
    """Collision blocks, lattice and low-bit counts add when every part used the same block size,
    lattices and bits (parts of one law do); otherwise the whole has none."""
    first = parts[0]
    same = all((p.collision_block, tuple(p.lattice_names)) == (first.collision_block,
                                                               tuple(first.lattice_names))
               for p in parts)
    if not same:
        out.collision_block = out.collision_blocks = out.collision_pairs = 0
        out.collision_compared = out.collision_triples = 0.0
        out.resolution_scanned = 0
        return
    out.collision_block = first.collision_block
    out.lattice_names = tuple(first.lattice_names)
    if all(p.lattice_counts is not None for p in parts) and out.lattice_names:
        out.lattice_counts = np.sum([np.asarray(p.lattice_counts, dtype=np.int64) for p in parts],
                                    axis=0)
    if all(p.low_bit_counts is not None and p.low_bits == first.low_bits for p in parts):
        out.low_bits = first.low_bits
        out.low_bit_counts = np.sum([np.asarray(p.low_bit_counts, dtype=np.int64) for p in parts],
                                    axis=0)


def _merge_watch(out: "Summary", parts) -> None:
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
    all_keys = np.concatenate(keys)
    unique, inverse = np.unique(all_keys, return_inverse=True)
    out.watch_keys = unique
    out.watch_counts = np.bincount(inverse, weights=np.concatenate(counts),
                                   minlength=unique.size).astype(np.int64)


def _merge_rows(out: "Summary", parts) -> None:
    """Row extremes, row counts and duplicate rows of the whole from the parts' rows."""
    out.n_rows_total = max(int(p.n_rows_total) for p in parts)
    kept = max(len(p.row_min) for p in parts)
    if kept == 0:
        return
    if any(p.row_hash is None for p in parts):
        if len(parts) == 1:  # a whole Summary: nothing to combine
            p = parts[0]
            out.row_min, out.row_max = p.row_min.copy(), p.row_max.copy()
            out.n_duplicate_rows, out.n_rows_compared = p.n_duplicate_rows, p.n_rows_compared
            return
        raise ValueError("Summary.merge: rows of parts need their partial row hashes")
    if any(len(p.row_min) != kept for p in parts):
        raise ValueError("Summary.merge: parts kept different numbers of row slots")
    out.row_min = np.minimum.reduce([np.asarray(p.row_min, dtype=np.float64) for p in parts])
    out.row_max = np.maximum.reduce([np.asarray(p.row_max, dtype=np.float64) for p in parts])
    hashes = np.sum([np.asarray(p.row_hash, dtype=np.int64) for p in parts], axis=0,
                    dtype=np.int64)  # wraps modulo 2^64, as the engine's int64 sums do
    rows_per_call = int(np.prod(out.shape[:-1])) if len(out.shape) >= 1 else 1
    whole_calls = kept // rows_per_call if rows_per_call else 0
    if out.row_len >= 2 and rows_per_call >= 2 and whole_calls:
        h = np.sort(hashes[: whole_calls * rows_per_call].reshape(whole_calls, rows_per_call), axis=1)
        out.n_duplicate_rows = int(np.count_nonzero(h[:, 1:] == h[:, :-1]))
        out.n_rows_compared = whole_calls * rows_per_call


def _recount_from_exact_histogram(out: "Summary") -> None:
    counts_from_exact_histogram(out, float_format(out.dtype), poison_pattern(out.dtype))


def counts_from_exact_histogram(s: "Summary", fmt, poison: int) -> None:
    """Everything a per-pattern histogram knows: counts, extremes, exact float64 power sums."""
    values = pattern_values(fmt)
    hist = s.hist
    finite = np.isfinite(values)
    poison_key = int(fmt.keys_from_bits(np.array([poison % (1 << fmt.bits)], dtype=np.uint64))[0])
    s.n_unwritten = int(hist[poison_key])
    s.n_posinf = int(hist[values == np.inf].sum())
    s.n_neginf = int(hist[values == -np.inf].sum())
    s.n_nan = int(hist[np.isnan(values)].sum()) - s.n_unwritten
    seen = finite & (hist > 0)
    if not seen.any():
        return
    v, c = values[seen], hist[seen]
    s.min, s.max = float(v.min()), float(v.max())
    out = (v < s.rn_a) | (v > s.rn_b)
    s.n_outside_rounded = int(c[out].sum())
    s.worst_outside = farthest_outside((s.min, s.max), s.rn_a, s.rn_b) if out.any() else math.nan
    out_strict = (v < s.a) | (v > s.b)
    s.n_outside_strict = int(c[out_strict].sum())
    s.worst_outside_strict = (farthest_outside((s.min, s.max), s.a, s.b)
                              if out_strict.any() else math.nan)
    s.n_at_rn_a = int(c[v == s.rn_a].sum())
    s.n_at_rn_b = int(c[v == s.rn_b].sum())
    s.n_at_zero = int(c[v == 0].sum()) if s.rn_a < 0 < s.rn_b else 0
    z = (v - s.center) / s.scale
    cf = c.astype(np.float64)
    s.power_sums = np.array([cf.sum(), (cf * z).sum(), (cf * z**2).sum(), (cf * z**3).sum(),
                             (cf * z**4).sum()])


_VALUES_CACHE: dict = {}


def pattern_values(fmt):
    """float64 value of every ordered key of a <= 16-bit format (NaN for NaN patterns)."""
    if fmt.name not in _VALUES_CACHE:
        _VALUES_CACHE[fmt.name] = fmt.values_from_keys(np.arange(1 << fmt.bits, dtype=np.uint64))
    return _VALUES_CACHE[fmt.name]
