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
  contiguous key ranges each holding about 2**-20 of the law or less (a single value may hold more);
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
from dataclasses import dataclass, field

import numpy as np

#: A pair variance below this fraction of its second moment is not resolved by the sums.
RESOLVABLE_VARIANCE = 1e-6

#: How many row extremes (per-slice minima/maxima along the last dim) a Summary keeps at most.
ROW_EXTREMES_CAP = 1 << 16


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
    # ranges of about equal mass, <= 2**-20 each), for the localized checks (spikes, scan).
    mass_hist: np.ndarray | None = None
    # Stage 2 of a case whose stage 1 flagged mass bins (harness.run): those bins' exact values,
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

    # Timing (seconds): inside the candidate vs in the engine's folding.
    candidate_s: float = 0.0
    engine_s: float = 0.0
    # Extra facts the engine wants to pass on (e.g. which seed was used, a captured warning).
    notes: dict = field(default_factory=dict)

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
