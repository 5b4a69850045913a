"""The independence family: lag-1 sums along every dimension of the filled tensor and between
successive calls, bit-identical elements between successive calls, duplicate rows; and
`check_independence` over them.

State (`IndependenceState`): ``lag1`` (dim of the filled tensor -> `LagSums`), ``successive``
(element of call t vs the same element of call t+1), ``n_equal_successive`` of
``n_pairs_successive``, and ``n_duplicate_rows`` (rows equal to another row of the same call,
counted beyond the first) of ``n_rows_compared``, over the first `ROW_EXTREMES_CAP` rows. A
sharded part keeps, instead of its duplicate rows, the unmixed partial hash of each row slot
(``row_hash``; 0 where it has none of the row): the hash is linear in the columns, so the parts'
hashes add up to the whole row's, and `Summary.merge` counts the duplicates on the sums.

Under H0 every element is an independent draw of the law, so for each correlation component
sqrt(pairs) * r -> N(0, 1) (Bartlett: overlapping lag-1 pairs of an iid sequence have the same
asymptotic variance as independent pairs). An element equals the same element of the previous call
with probability q = sum p_v^2 over the values v; the count is binomial up to the weak dependence of
overlapping pairs (call t-1, t) and (t, t+1), whose variance term 2 (sum p^3 - q^2) is added when
the per-value masses are known and it matters. Two rows of m elements are equal with probability
q^m, so a call with R rows has C(R, 2) q^m duplicate pairs on average; the count of rows equal to an
earlier row of their call is then Poisson (tested one-sided: duplicates are the defect).

q is that of the candidate's own marginal, so these components test dependence, not the
marginal (a wrong marginal is the business of gof, atoms, collisions and the others: a float32
sampler whose values lie on a coarser lattice repeats values across calls as often as within a
call, which against the law's q would read as dependence). `marginal_rate`:

* where the Summary counts every value apart (<= 16-bit dtypes; narrow 32/64-bit laws with
  single-value fine bins), the unbiased estimate sum c(c-1) / (n(n-1)); its noise is negligible
  next to the count's (relative 2 sqrt((sum p^3 - q^2) / n) / q against 1 / sqrt(n q));
* elsewhere (32/64-bit), from the resolution scan's equal pairs within blocks of the draw's
  first values: P equal of C compared, so q ~ P / C. The equal successive elements K of N pairs
  are then tested against the scan's count: both are counts of rare coincidences of iid values
  of one marginal, of means N q and C q, so given K + P, K is Bin(K + P, N / (N + C)) whatever q
  is. Each count is first divided by a bound on its dispersion that holds for every marginal
  (`dispersion_bound`: pairs of pairs sharing a value add 2 (sum p^3 - q^2), and sum p^3 <=
  q^1.5), which leaves the test conservative. One-sided: an excess of repeats is the defect.
  The duplicate rows (and `harness.families.repetition`'s windows), whose mean is a power of q,
  are priced at q's upper confidence bound at `RATE_BOUND_LEVEL`, which adds that much to their
  size at most;
* a Summary folded without the scan: the law's q, its boundary atoms (the usual suspects)
  replaced by their observed frequencies.
"""

from __future__ import annotations

import math

import dataclasses
from dataclasses import dataclass, field

import numpy as np
import torch
from scipy import special, stats

from ..declaration import statistical
from ..engine import SLICE_ELEMENTS, Family, fixed_sum, fixed_sum_each, row_hash_coefficients
from ..result import Outcome
from ..summary import Summary
from . import atoms, binned, resolution
from .extremes import ROW_EXTREMES_CAP, part_rows_kept, part_slots
from .common import (binom_mde_ratio, binom_two_sided, binom_upper, bonferroni, clip_p,
                          norm_two_sided, not_applicable, quiet, z_crit)

#: A pair variance below this fraction of its second moment is not resolved by the sums.
RESOLVABLE_VARIANCE = 1e-6


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


def lag_sums(u: torch.Tensor, v: torch.Tensor) -> LagSums:
    return LagSums(u.numel(), fixed_sum(u), fixed_sum(v), fixed_sum(u * u), fixed_sum(v * v),
                   fixed_sum(u * v))


#: The low half of an int64 (a logical shift by 32 is an arithmetic one masked to it).
LOW_HALF = (1 << 32) - 1


def spread_bits(bits: torch.Tensor, scratch: torch.Tensor | None = None) -> torch.Tensor:
    """`bits` (int64 bit patterns), in place, with their high half folded into their low half
    (x ^ (x >>> 32): invertible, so equal elements stay equal and different ones different).
    A row's or window's hash multiplies each element by an odd coefficient, which keeps the
    element's trailing zero bits: values on a coarse lattice (a float64 holding float16 values
    ends in 42 zero bits) would hash into a space of a few bits and collide as if repeated.
    `scratch` (the shape of `bits`): where the high halves are written, instead of a new tensor
    (a fresh 8 MB one costs its page faults, more than the shift)."""
    high = torch.bitwise_right_shift(bits, 32, out=scratch) if scratch is not None \
        else bits.bitwise_right_shift(32)
    return bits.bitwise_xor_(high.bitwise_and_(LOW_HALF))


def hash_rows(bits: torch.Tensor, coefficients: torch.Tensor,
              scratch: torch.Tensor | None = None) -> torch.Tensor:
    """The hashes of the rows (along the last dim) of int64 bit patterns `bits` (spread in
    place, `spread_bits`, with `scratch` for the high halves where given): linear in the
    columns, so a part's columns' hashes add up to the row's; equal rows hash equal, different
    ones collide with probability ~2^-64."""
    return spread_bits(bits, scratch).mul_(coefficients).sum(dim=-1)


def _as_lag(sums) -> LagSums:
    return sums if isinstance(sums, LagSums) else LagSums(**sums)


@dataclass
class IndependenceState:
    """Lag-1 and successive-call sums, equal successive elements, duplicate rows."""

    lag1: dict = field(default_factory=dict)  # dim (int, of the filled tensor) -> LagSums
    successive: LagSums = field(default_factory=LagSums)
    n_equal_successive: int = 0  # elements bit-identical to the same element of the previous call
    n_pairs_successive: int = 0
    n_duplicate_rows: int = 0  # rows equal to another row of the same call (beyond the first)
    n_rows_compared: int = 0  # rows that took part in the duplicate-row search
    rows_kept: int = 0  # rows looked at (the first ROW_EXTREMES_CAP)
    row_hash: np.ndarray | None = None  # a sharded part's partial row hashes, by global slot

    @classmethod
    def merge(cls, parts, whole) -> "IndependenceState":
        out = cls()
        for p in parts:
            for dim, sums in p.lag1.items():
                out.lag1.setdefault(dim, LagSums()).add(_as_lag(sums))
            out.successive.add(_as_lag(p.successive))
        out.n_equal_successive = sum(int(p.n_equal_successive) for p in parts)
        out.n_pairs_successive = sum(int(p.n_pairs_successive) for p in parts)
        _merge_rows(out, parts, whole)
        return out


def _merge_rows(out: IndependenceState, parts, whole) -> None:
    """Duplicate rows of the whole from the parts' partial row hashes, as the fold counts them
    on the whole rows."""
    kept = max(len(p.row_hash) if p.row_hash is not None else int(p.rows_kept) for p in parts)
    out.rows_kept = kept
    if kept == 0:
        return
    if any(p.row_hash is None for p in parts):
        if len(parts) == 1:  # a whole Summary: nothing to combine
            p = parts[0]
            out.n_duplicate_rows, out.n_rows_compared = p.n_duplicate_rows, p.n_rows_compared
            return
        raise ValueError("Summary.merge: rows of parts need their partial row hashes")
    if any(len(p.row_hash) != kept for p in parts):
        raise ValueError("Summary.merge: parts kept different numbers of row slots")
    hashes = np.sum([np.asarray(p.row_hash, dtype=np.int64) for p in parts], axis=0,
                    dtype=np.int64)  # wraps modulo 2^64, as the fold's int64 sums do
    rows_per_call = int(np.prod(whole.shape[:-1])) if len(whole.shape) >= 1 else 1
    whole_calls = kept // rows_per_call if rows_per_call else 0
    if whole.row_len >= 2 and rows_per_call >= 2 and whole_calls:
        h = np.sort(hashes[: whole_calls * rows_per_call].reshape(whole_calls, rows_per_call),
                    axis=1)
        out.n_duplicate_rows = int(np.count_nonzero(h[:, 1:] == h[:, :-1]))
        out.n_rows_compared = whole_calls * rows_per_call


class IndependenceFold:
    """Lag-1 pairs along each dim, successive calls (across chunk boundaries too), and the
    duplicate-row search over the first ROW_EXTREMES_CAP rows."""

    @classmethod
    def start(cls, law, shape: tuple, fold):
        return cls(fold) if fold.box is None else PartIndependenceFold(fold)

    def __init__(self, fold):
        self.owner = fold
        self.state = IndependenceState()
        self.prev_z: torch.Tensor | None = None  # last call of the previous chunk
        self.prev_ints: torch.Tensor | None = None
        self.prev_sums: tuple = ()  # fixed_sum of prev_z and of its square

    def fold(self, chunk) -> None:
        shape = (chunk.calls, *chunk.shape)
        zb, ib, z2b = chunk.z.view(shape), chunk.ints.view(shape), chunk.z2.view(shape)
        self._fold_lags(zb, z2b, chunk.total, chunk.total_sq)
        self._fold_successive(zb, z2b, ib, chunk.total, chunk.total_sq)
        self._fold_rows(chunk.batch, ib)

    def _end_sums(self, zb: torch.Tensor, z2b: torch.Tensor, dim: int) -> list[float]:
        """`fixed_sum` of the last and the first slice along `dim` of z and of z^2, in that
        order."""
        length = zb.shape[dim]
        ends = (zb.select(dim, length - 1), zb.select(dim, 0), z2b.select(dim, length - 1),
                z2b.select(dim, 0))
        scratch = self.owner.buffer("ends", (4 * ends[0].numel(),), zb.dtype)
        return fixed_sum_each(ends, scratch)

    def _fold_lags(self, zb: torch.Tensor, z2b: torch.Tensor, total: float, total_sq: float) -> None:
        """Lag-1 pairs along each dim of the filled tensor; only the cross products need a pass."""
        for dim in range(1, zb.dim()):
            length = zb.shape[dim]
            if length < 2:
                continue
            u = zb.narrow(dim, 0, length - 1)
            v = zb.narrow(dim, 1, length - 1)
            product = torch.mul(u, v, out=self.owner.buffer("scratch", tuple(u.shape), zb.dtype))
            sum_last, sum_first, sq_last, sq_first = self._end_sums(zb, z2b, dim)
            sums = LagSums(u.numel(), total - sum_last, total - sum_first, total_sq - sq_last,
                           total_sq - sq_first, fixed_sum(product))
            self.state.lag1.setdefault(dim - 1, LagSums()).add(sums)

    def _fold_successive(self, zb: torch.Tensor, z2b: torch.Tensor, ib: torch.Tensor,
                         total: float, total_sq: float) -> None:
        """Element of call t vs the same element of call t+1, across chunk boundaries too."""
        s, f = self.state, self.owner
        calls = zb.shape[0]
        first, last = zb[0], zb[-1]
        # Each call's sums are taken once: the last call's serve the next chunk's first pair.
        if calls == 1:
            # The one call is the whole chunk, and `fixed_sum` of a contiguous run is the same
            # bit for bit however it is reached: stacking a call of 2^24 elements four times to
            # sum it again would cost more than the rest of its fold.
            sum_last = sum_first = total
            sq_last = sq_first = total_sq
        else:
            sum_last, sum_first, sq_last, sq_first = self._end_sums(zb, z2b, 0)
        if calls > 1:
            product = torch.mul(zb[:-1], zb[1:],
                                out=f.buffer("scratch", tuple(zb[1:].shape), zb.dtype))
            differ = torch.bitwise_xor(ib[:-1], ib[1:],
                                       out=f.buffer("ints", tuple(ib[1:].shape), ib.dtype))
            s.successive.add(LagSums(zb[1:].numel(), total - sum_last, total - sum_first,
                                     total_sq - sq_last, total_sq - sq_first, fixed_sum(product)))
            s.n_equal_successive += differ.numel() - int(torch.count_nonzero(differ))
            s.n_pairs_successive += ib[1:].numel()
        if self.prev_z is not None:
            prev_sum, prev_sq = self.prev_sums
            cross = torch.mul(self.prev_z, first, out=f.buffer("scratch", tuple(first.shape),
                                                                 first.dtype))
            s.successive.add(LagSums(first.numel(), prev_sum, sum_first, prev_sq, sq_first,
                                     fixed_sum(cross)))
            s.n_equal_successive += int(torch.count_nonzero(self.prev_ints == ib[0]))
            s.n_pairs_successive += ib[0].numel()
            self.prev_z.copy_(last)
            self.prev_ints.copy_(ib[-1])
        else:
            self.prev_z = last.clone(memory_format=torch.contiguous_format)
            self.prev_ints = ib[-1].clone(memory_format=torch.contiguous_format)
        self.prev_sums = (sum_last, sq_last)

    def _fold_rows(self, batch: torch.Tensor, ib: torch.Tensor) -> None:
        """Rows equal to another row of their call, among the first ROW_EXTREMES_CAP rows: each
        row hashed (wrapping int64 arithmetic), sorted per call, equal neighbours counted; a
        false match needs a 64-bit hash collision."""
        s, f = self.state, self.owner
        m = f.s.row_len
        if m < 1 or batch[0].numel() == 0:
            return
        room = ROW_EXTREMES_CAP - s.rows_kept
        if room <= 0:
            return
        rows_per_call = batch[0].numel() // m
        taken = min(room, batch.shape[0] * rows_per_call)
        s.rows_kept += taken
        whole_calls = taken // rows_per_call
        if m >= 2 and rows_per_call >= 2 and whole_calls:
            rows = ib[:whole_calls].reshape(whole_calls * rows_per_call, m)
            coef = row_hash_coefficients(m, rows.device)
            h = torch.empty(rows.shape[0], dtype=torch.int64, device=rows.device)
            # A slice of rows at a time: the int64 scratch of a whole big call would take 16
            # bytes an element and leave the cache; a row's hash reads its own row only.
            step = max(1, SLICE_ELEMENTS // m)
            for start in range(0, rows.shape[0], step):
                part = rows[start:start + step]
                r = f.buffer("row_bits", tuple(part.shape), torch.int64).copy_(part)
                h[start:start + part.shape[0]] = hash_rows(
                    r, coef, f.buffer("row_high", tuple(part.shape), torch.int64))
            h = h.view(whole_calls, rows_per_call)
            h = (h ^ (h >> 29)) * 0x5851F42D4C957F2D
            hs, _ = torch.sort(h, dim=1)
            s.n_duplicate_rows += int(torch.count_nonzero(hs[:, 1:] == hs[:, :-1]))
            s.n_rows_compared += whole_calls * rows_per_call
        if s.rows_kept >= ROW_EXTREMES_CAP:  # done with rows: give their scratch back
            f.release("row_bits", torch.int64)
            f.release("row_high", torch.int64)

    def finish(self, whole: Summary) -> IndependenceState:
        return self.state


class PartIndependenceFold(IndependenceFold):
    """A sharded part: the lag-1 pairs across the box's lower edge too (the previous rank's last
    slice along the sharded dim, the chunk's halo), and partial row hashes by global slot
    instead of duplicate rows (counted by `Summary.merge` on the sums)."""

    def __init__(self, fold):
        super().__init__(fold)
        self.row_hash = np.zeros(ROW_EXTREMES_CAP, dtype=np.int64)
        shape = tuple(fold.s.shape)
        self.whole_numel = math.prod(shape)
        self.rows_per_call = math.prod(shape[:-1]) if shape else 1

    def fold(self, chunk) -> None:
        super().fold(chunk)
        if chunk.halo is not None and self.owner.box.shard_dim is not None:
            self._fold_halo(chunk.batch, chunk.halo)

    def _z(self, x: torch.Tensor) -> torch.Tensor:
        """z as the fold computes it (non-finite values count as z = 0)."""
        f = self.owner
        z = x.to(f.work) if x.dtype != f.work else x.clone()
        z.sub_(f.center_work).mul_(1.0 / f.s.scale)
        return torch.where(torch.isfinite(x), z, torch.zeros((), dtype=f.work, device=z.device))

    def _fold_halo(self, batch: torch.Tensor, halo: torch.Tensor) -> None:
        """Lag-1 pairs along the sharded dim across the box's lower edge: u = the previous rank's
        last slice, v = this box's first slice."""
        d = self.owner.box.shard_dim
        u = self._z(halo)
        v = self._z(batch.select(d + 1, 0))
        self.state.lag1.setdefault(d, LagSums()).add(lag_sums(u, v))

    def _fold_rows(self, batch: torch.Tensor, ib: torch.Tensor) -> None:
        f = self.owner
        m = f.s.row_len
        if m < 1 or self.whole_numel == 0 or m < 2 or self.rows_per_call < 2:
            return
        taken = part_slots(f, batch.shape[0])
        if taken is None:
            return
        take, slots, keep = taken
        local_m = f.box.local_shape[-1]
        c0 = f.box.offsets[-1]
        coef = row_hash_coefficients(m, f.device)[c0:c0 + local_m]
        bits = ib[:take].reshape(take, -1, local_m).to(torch.int64, copy=True)
        h = hash_rows(bits, coef).cpu().numpy()
        self.row_hash[slots[keep]] = h[keep]

    def finish(self, whole: Summary) -> IndependenceState:
        s = self.state
        s.row_hash = self.row_hash[:part_rows_kept(self.owner)].copy()
        s.n_duplicate_rows = s.n_rows_compared = 0  # counted by Summary.merge on the sums
        return s


FAMILY = Family("independence", IndependenceFold.start)


#: The Poisson approximation for duplicate rows is used while a call expects at most this many
#: duplicate pairs (beyond it, triples and the q^m approximation of "equal to an earlier row" drift).
DUP_POISSON_MAX_PER_CALL = 0.05


#: The level of the upper confidence bound on q at which a count whose mean is a high power of
#: q (duplicate rows, `harness.families.repetition`'s windows) is priced where q is estimated
#: from the resolution scan: the test's size is then at most its level plus this, whatever q is
#: (Berger and Boos 1994: the p-value at the bound, and the bound's miss chance).
RATE_BOUND_LEVEL = 1e-12


def observed_collisions(counts: np.ndarray) -> tuple[float, float] | None:
    """Unbiased estimates of (sum p^2, sum p^3) from per-value counts."""
    n = float(counts.sum())
    if n < 3:
        return None
    c = counts[counts > 1].astype(np.float64)
    q = float(np.sum(c * (c - 1))) / (n * (n - 1))
    s3 = float(np.sum(c * (c - 1) * (c - 2))) / (n * (n - 1) * (n - 2))
    return q, s3


def dispersion_bound(slots: float, shared: float, q: float) -> float:
    """A bound on variance / mean of a count of equal pairs among `slots` pairs of iid values of
    collision rate q, `shared` of whose pairs of pairs share one value: 1 + 2 (shared / slots)
    (sum p^3 - q^2) / q, with sum p^3 <= q^1.5 (the 3-norm of p is at most its 2-norm), which
    holds whatever the marginal."""
    if slots <= 0:
        return 1.0
    return 1.0 + 2.0 * shared / slots * max(math.sqrt(max(q, 0.0)) - q, 0.0)


@dataclass(frozen=True)
class MarginalRate:
    """q = sum_v p_v^2, the chance that two independent elements are equal, of the output's own
    marginal, as the Summary tells it (the module docstring):

    * counted value by value (16-bit dtypes; narrow laws on single-value fine bins): the unbiased
      estimate from the counts, with sum p^3 (`s3`); its noise is negligible;
    * estimated from the equal pairs of the resolution scan (32/64-bit dtypes): `pairs` equal
      pairs among `compared`, both divided by `dispersion_bound`, so that `pairs` is a count of
      mean `compared` q whose variance is at most its mean (quasi-Poisson);
    * else the law's, its boundary atoms as observed (a Summary folded without the scan).
    """

    q: float
    s3: float | None
    source: str
    pairs: float = 0.0
    compared: float = 0.0

    @property
    def scanned(self) -> bool:
        return self.compared > 0

    def upper(self, level: float = RATE_BOUND_LEVEL) -> float:
        """An upper confidence bound on q at `level` (q itself where it is not estimated from
        the scan): the exact Poisson limit of the scaled count."""
        if not self.scanned:
            return self.q
        return min(1.0, float(stats.chi2.ppf(1.0 - level, 2.0 * self.pairs + 2.0))
                   / (2.0 * self.compared))


def scanned_rate(state) -> MarginalRate | None:
    """q from the resolution scan's equal pairs (None where it compared none)."""
    if state is None or not state.collision_block or float(state.collision_compared) <= 0:
        return None
    compared, pairs = float(state.collision_compared), int(state.collision_pairs)
    q = pairs / compared
    d = dispersion_bound(compared, float(state.collision_triples), q)
    return MarginalRate(q, None, f"the output's own marginal: {pairs} equal pairs among "
                                 f"{compared:.4g} of the resolution scan",
                        pairs / d, compared / d)


def marginal_rate(summary: Summary, law) -> MarginalRate:
    """The collision rate of the output's own marginal (`MarginalRate`)."""
    states = summary.states
    bins = states.get(binned.FAMILY.name)
    fine = bins.fine_bins if bins is not None else None
    if bins is not None and summary.hist_bits <= 16:
        est = observed_collisions(np.asarray(bins.hist, dtype=np.int64))
    elif fine is not None and fine[1] == 0 and bins.fine_hist is not None:
        est = observed_collisions(np.asarray(bins.fine_hist, dtype=np.int64)[1:-1])
    else:
        est = None
    if est is not None:
        return MarginalRate(est[0], est[1], "the output's own marginal")
    scanned = scanned_rate(states.get(resolution.FAMILY.name))
    if scanned is not None:
        return scanned
    q = float(law.collision_prob)
    n = int(summary.n)
    found = states.get(atoms.FAMILY.name)
    if found is not None and n > 0 and 0 < q < 1:
        bounds = {(float(law.rn_a), float(law.atom_a), int(found.n_at_rn_a)),
                  (float(law.rn_b), float(law.atom_b), int(found.n_at_rn_b))}
        for _, mass, count in bounds:
            q += (count / n) ** 2 - mass**2
        q = min(max(q, 0.0), 1.0)
    return MarginalRate(q, None, "the law, boundary atoms as observed")


def collision_rates(summary: Summary, law) -> tuple[float, float | None, str]:
    """(q, sum p^3 or None, where q comes from) of `marginal_rate`."""
    rate = marginal_rate(summary, law)
    return rate.q, rate.s3, rate.source


def equal_count_p(k: int, n: int, rate: MarginalRate, overlapping: int = 0) -> float:
    """The p-value of k equal pairs among n pairs of elements, each pair equal with chance q
    under independence (`overlapping` of them followed by a pair that shares an element):

    * q counted value by value: two-sided, exact binomial, or normal with the overlapping
      pairs' variance term 2 overlapping (sum p^3 - q^2) where it matters;
    * q from the resolution scan: one-sided (an excess of repeats is the defect), k against the
      scan's count: two Poisson counts of means n q and `compared` q, so that given their sum t
      the first is Bin(t, n / (n + compared)) whatever q is; each count divided by its
      dispersion bound (quasi-Poisson), the binomial's tail through the incomplete beta;
    * q the law's: one-sided exact binomial.
    """
    q = rate.q
    if rate.s3 is not None:
        var = n * q * (1 - q) + 2.0 * overlapping * (rate.s3 - q * q)
        if var > 1.01 * n * q * (1 - q):
            return float(norm_two_sided((k - n * q) / math.sqrt(var)))
        return float(binom_two_sided(k, n, q))
    if not rate.scanned:
        return float(binom_upper(k, n, q))
    if k <= 0:
        return 1.0
    d = dispersion_bound(n, overlapping, q)
    own, slots = k / d, n / d
    share = slots / (slots + rate.compared)
    # P(Bin(t, share) >= own), t = own + the scan's scaled count
    return clip_p(special.betainc(own, rate.pairs + 1.0, share))


def _components(summary: Summary, law, alpha: float):
    """[(name, p, effect, unit, mde, text)] of every applicable component."""
    comps = []
    degenerate = not (float(law.std) > 0)
    shape = tuple(summary.shape)

    # -- correlations
    corr = [(f"lag-1 along dim {d}", s) for d, s in sorted(summary.independence.lag1.items())]
    corr.append(("successive calls", summary.independence.successive))
    if not degenerate:
        for name, s in corr:
            s = _as_lag(s)
            r = s.correlation()
            if s.count < 3 or not math.isfinite(r):
                continue
            z = math.sqrt(s.count) * r
            comps.append([name, float(norm_two_sided(z)), r, "correlation r", s.count,
                          f"{name}: r {r:+.4g} over {s.count} pairs (z {z:+.2f})"])

    # -- bit-identical elements in successive calls
    rate = marginal_rate(summary, law)
    q = rate.q
    n_pairs, k_eq = int(summary.independence.n_pairs_successive), int(summary.independence.n_equal_successive)
    if n_pairs > 0 and q < 1.0:
        numel = max(1, math.prod(shape)) if shape else 1
        overlapping = max(0, n_pairs - numel)  # pairs (t-1, t) followed by (t, t+1)
        p_eq = equal_count_p(k_eq, n_pairs, rate, overlapping)
        exp = n_pairs * q
        ratio = k_eq / exp if exp > 0 else (math.inf if k_eq else 1.0)
        comps.append(["equal elements in successive calls", p_eq, ratio, "obs/exp", ("binom", n_pairs, q),
                      f"equal elements in successive calls: {k_eq} of {n_pairs} vs {exp:.4g} "
                      f"expected (q from {rate.source})"])

    # -- duplicate rows within a call
    m = int(summary.row_len)
    rows_per_call = math.prod(shape[:-1]) if len(shape) >= 2 else 1
    n_rows = int(summary.independence.n_rows_compared)
    # priced at q's upper bound where q is estimated (q^m magnifies its error m-fold)
    q_rows = rate.upper()
    if m >= 2 and rows_per_call >= 2 and n_rows > 0 and 0 < q_rows < 1.0:
        calls = n_rows / rows_per_call
        log_qm = m * math.log(q_rows)
        per_call = rows_per_call * (rows_per_call - 1) / 2 * math.exp(log_qm)
        if per_call <= DUP_POISSON_MAX_PER_CALL:
            lam = calls * per_call
            k_dup = int(summary.independence.n_duplicate_rows)
            comps.append(poisson_count_component(
                "duplicate rows", k_dup, lam,
                f"duplicate rows: {k_dup} of {n_rows} rows vs {lam:.3g} expected"))
    elif m >= 2 and rows_per_call >= 2 and n_rows > 0 and q_rows <= 0:
        k_dup = int(summary.independence.n_duplicate_rows)
        comps.append(["duplicate rows", 0.0 if k_dup else 1.0, math.inf if k_dup else 1.0,
                      "obs/exp", ("poisson", 0.0),
                      f"duplicate rows: {k_dup} of {n_rows} rows vs 0 expected"])
    return comps


def poisson_count_component(name: str, k: int, lam: float, text: str) -> tuple:
    """A component for a count that is Poisson(lam) under the null (rare coincidences): exact
    upper-tail p, obs/exp effect; (name, p, effect, unit, MDE spec, message)."""
    p = clip_p(stats.poisson.sf(k - 1, lam)) if k > 0 else 1.0
    ratio = k / lam if lam > 0 else (math.inf if k else 1.0)
    return (name, p, ratio, "obs/exp", ("poisson", lam), text)


def component_mde(spec, level: float) -> float:
    """The effect detectable with power 0.5 at `level` by one component: a count ("binom", n, q)
    or ("poisson", lam) as an obs/exp ratio, or a correlation over `spec` pairs as |r|."""
    if isinstance(spec, tuple):
        if spec[0] == "binom":
            return binom_mde_ratio(spec[1], spec[2], level, upward=True)
        lam = spec[1]
        if lam <= 0:
            return math.inf
        k = stats.poisson.isf(level, lam) + 1  # smallest k with P(N >= k) <= level
        return float(k / lam)
    return z_crit(level) / math.sqrt(spec)  # |r| at the critical value


def independence_mde(law, n: int, shape: tuple, alpha: float) -> float:
    """|r| of a lag-1 correlation along the last dim detectable with power 0.5 (n samples of a
    tensor of `shape`; Bonferroni over the correlation components: one per dim of length >= 2,
    successive calls, equal elements, duplicate rows)."""
    if not (float(law.std) > 0) or n <= 0 or not shape or shape[-1] < 2:
        return math.nan
    k = sum(1 for s in shape if s >= 2) + 3
    pairs = n // shape[-1] * (shape[-1] - 1)
    return z_crit(alpha / k) / math.sqrt(pairs) if pairs > 0 else math.nan


@quiet
def check_independence(summary: Summary, law, *, alpha: float = 1e-3) -> Outcome:
    comps = _components(summary, law, alpha)
    if not comps:
        if not (float(law.std) > 0):
            why = "the law is a single atom"
        elif summary.independence.n_pairs_successive > 0 and collision_rates(summary, law)[0] >= 1.0:
            why = "the output is one value throughout (nothing varies to correlate; gof, atoms judge it)"
        else:
            why = "no pairs to compare"
        return not_applicable(why, "correlation r")
    ps = [c[1] for c in comps]
    p, j = bonferroni(ps)
    name, pj, eff, unit, spec, text = comps[j]
    level = alpha / len(comps)
    if unit == "obs/exp" and isinstance(spec, tuple) and spec[0] == "binom" and eff < 1:
        mde = binom_mde_ratio(spec[1], spec[2], level, upward=False)
    else:
        mde = component_mde(spec, level)
    corr_effects = [abs(c[2]) for c in comps if c[3] == "correlation r"]
    others = "; ".join(c[5] for i, c in enumerate(comps) if i != j and c[1] < 1e-3)
    msg = f"worst: {text}" + (f"; also {others}" if others else "") + f" ({len(comps)} components)"
    details = {f"p[{c[0]}]": c[1] for c in comps}
    details["max_abs_r"] = max(corr_effects) if corr_effects else math.nan
    return Outcome(statistic=float(eff), p_value=p, effect=float(eff), effect_unit=unit, mde=mde,
                   message=msg, details=details)


INDEPENDENCE = statistical(
    "independence", check_independence,
    families=(FAMILY, binned.FAMILY, atoms.FAMILY, resolution.FAMILY),
    doc='Lag-1 correlation along every dim and across calls; duplicate rows.',
    method=(
        "Lag-1 Pearson correlation along every dimension of the filled tensor and between the same "
        "element of successive calls (z = sqrt(pairs) r ~ N(0, 1) under independence), bit-identical "
        "elements between successive calls against the collision rate q of the output's own "
        "marginal (16-bit: counted value by value, exact binomial with the overlapping-pair "
        "variance term when it matters; 32/64-bit: estimated from the resolution scan's equal "
        "pairs, the two counts compared given their sum, one-sided), and rows equal to an earlier "
        "row of their call "
        "(Poisson with mean calls * C(R, 2) * q^m, one-sided, while that is small). Bonferroni over "
        "the applicable components; correlations not applicable for a one-atom law. False-alarm "
        "rate <= alpha (asymptotic for the correlations). Effect: the worst component's r (or "
        "obs/exp for the counts); message names the dimension/component. MDE: |r| = "
        "z_(alpha/2K) / sqrt(pairs) (for counts: the obs/exp ratio on the critical count)."
    ),
    unit="abs(r), lag-1 last dim",
    mde=independence_mde,
)
