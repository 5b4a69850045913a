"""The fold: device-side accumulators that turn chunks of a candidate's output into a Summary.

The candidate fills the case's tensor; each output is copied into a chunk buffer on the same
device, and each full chunk is folded, on its device, into the Summary's accumulators. Only the
accumulators (a histogram of at most 2**20 bins and a few scalars) and a bounded number of row
extremes cross to the host, so memory does not grow with n.

`summarize_samples` folds samples that are already there (self-tests, offline audits) through the
very same code.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from reference import float_format
from reference.dtypes import dtype_name

from ..bins import (COARSE_LATTICES, RESOLUTION_SCAN, block_pair_slots, collision_block,
                    farthest_outside, position_bins, position_classes, raw_nonfinite_bins,
                    raw_to_ordered, signed)
from ..summary import LOW_BITS, ROW_EXTREMES_CAP, LagSums, Summary, counts_from_exact_histogram
from .bits import INT_VIEW, dtype_bits, hist_bits_for, poison_value
from .mass_counters import SHIFT_BITS, MassCounters

#: Mass-bin counters of chunks are counted by one bincount once this many are pending (or a chunk
#: more would not fit; see `Folder._flush_mass`): the bincount's zero-filled output (a few MB)
#: then costs little next to the counting.
PENDING_ELEMENTS = 1 << 22
#: Elements of a repetition window, and the mean spacing of its content-defined anchors: a
#: repeated stretch of 1024 elements holds no anchor with probability (1 - 1/128)^992 = 4e-4
#: (so it is missed only if all of its ~8 anchors are, i.e. never in practice), and two windows
#: of iid draws agree with probability at most q^32.
REPEAT_WINDOW = 32
REPEAT_SPACING_BITS = 7
REPEAT_SPACING = 1 << REPEAT_SPACING_BITS
#: Elements of one draw the repetition fold scans at most (and always its first two calls).
REPEAT_SCAN = 1 << 24
_ANCHOR_MULT32 = 0x9E3779B1 - (1 << 32)  # Knuth's multiplicative hash, as a signed int32
_ANCHOR_MULT64 = 0x9E3779B97F4A7C15 - (1 << 64)
_MIX = 0x5851F42D4C957F2D


#: Below this share of the continuous law's std, the rounded law's std (a law that is one atom
#: up to masses like 1e-127) would make z astronomically large: z is scaled by the continuous std.
MIN_SCALE_SHARE = 1e-6


def standard_scale(law) -> float:
    """The scale values are standardized by (z = (x - mean) / scale), wherever the harness does
    it: the rounded law's std, or the continuous law's where the rounded one is below
    `MIN_SCALE_SHARE` of it, zero or not finite."""
    scale = float(law.std)
    if not (math.isfinite(scale) and scale >= MIN_SCALE_SHARE * float(law.dist.std)):
        scale = float(law.dist.std)
    return scale


def new_summary(law, shape: tuple, dtype: torch.dtype) -> Summary:
    scale = standard_scale(law)
    dist = law.dist
    return Summary(
        dtype=dtype_name(dtype),
        shape=tuple(shape),
        hist_bits=hist_bits_for(dtype),
        center=float(law.mean),
        scale=scale,
        rn_a=float(law.rn_a),
        rn_b=float(law.rn_b),
        a=float(dist.a),
        b=float(dist.b),
        row_len=int(shape[-1]) if len(shape) else 0,
        fine_bins=(None if law.fine_bins is None else
                   (law.fine_bins.key_lo, law.fine_bins.shift, law.fine_bins.n_bins)),
    )


class Folder:
    """Device-side accumulators for one Summary; `finish` moves them to the host once.

    Cost model (what keeps the harness cheaper than the samplers it tests): for 16-bit and 8-bit
    dtypes every bit pattern has its own histogram bin, so counts, extremes and exact float64 power
    sums all come from the histogram at the end; per chunk only the bincount and the correlation
    sums touch the samples. For 32/64-bit dtypes the boundary counts are computed only when the
    chunk's min/max says a bound was reached, and non-finite bookkeeping only when one is present.
    """

    def __init__(self, summary: Summary, dtype: torch.dtype, device: torch.device, law=None,
                 watch: tuple | None = None):
        self.s = summary
        self.dtype = dtype
        self.device = device
        self.fmt = float_format(dtype)
        self.bits = dtype_bits(dtype)
        self.exact_hist = summary.hist_bits == self.bits  # one bin per bit pattern
        self.int_dtype = INT_VIEW[self.bits]
        self.poison = poison_value(dtype)
        # One bin per bit pattern: non-finite values are counted by their bins.
        self.raw_nonfinite = (torch.as_tensor(raw_nonfinite_bins(self.fmt).nonzero()[0],
                                              device=device) if self.exact_hist else None)
        # Work dtype for the correlation sums: float64 for float64 samples, float32 otherwise
        # (exact for every 16-bit value). Per-chunk sums are float32 cascade sums, folded into
        # float64 accumulators: ~1e-7 relative, far below any statistic's standard error.
        self.work = torch.float64 if dtype == torch.float64 else torch.float32
        self.inner_a, self.inner_b = representable_inside(self.fmt, summary.a, summary.b)
        self.center_work = float(torch.tensor(summary.center, dtype=self.work))
        self.center_shift = (self.center_work - summary.center) / summary.scale
        self.raw_fine = None
        if summary.fine_bins is not None:
            key_lo, fine_shift, n_fine = summary.fine_bins
            # Signed monotone keys (see _fold_fine) are the ordered keys minus 2**(bits-1).
            self.fine_lo = key_lo - (1 << (self.bits - 1))
            self.fine_shift = fine_shift
            self.fine_end = self.fine_lo + (n_fine << fine_shift)
            self.raw_fine = torch.zeros(n_fine + 2, dtype=torch.int64, device=device)
        self._init_mass_bins(law, watch)
        # Bins are counted in raw bit-pattern order (a shift and a mask per element) and put in
        # ordered-key order once, in finish(): the two orders differ by a fixed permutation. With
        # mass bins over the main layout the main histogram comes from their counters instead.
        self.raw_hist = (None if self.pending is not None else
                         torch.zeros(1 << summary.hist_bits, dtype=torch.int64, device=device))
        self.prev_z: torch.Tensor | None = None  # last call of the previous chunk
        self.prev_ints: torch.Tensor | None = None
        self.rows_kept: list = []
        self.n_rows_kept = 0
        self._buffers: dict = {}
        self._init_position(law)
        self.prev_hashes: torch.Tensor | None = None  # repetition: the last call's window hashes
        self.rep_left, self.rep_calls = REPEAT_SCAN, 0
        self._init_resolution(law)

    # -- resolution: equal-value pairs, coarse lattices ---------------------------------------
    def _init_resolution(self, law) -> None:
        """32/64-bit laws: the first RESOLUTION_SCAN finite values of the draw are counted on
        the coarser lattices and by their last LOW_BITS bits and, in blocks of the law's `collision_block` values (pooled
        across calls and chunks: a leftover shorter than one block waits for the next chunk,
        and `finish` sorts the last one as a shorter block), sorted for their equal-value
        pairs."""
        self.res_left = 0
        self.res_pool = None
        if law is None or self.exact_hist or self.bits < 32:
            return
        s = self.s
        s.collision_block = collision_block(float(law.collision_prob), self.bits)
        s.lattice_names = COARSE_LATTICES.get(dtype_name(self.dtype), ())
        s.lattice_counts = np.zeros(len(s.lattice_names), dtype=np.int64)
        s.low_bits = LOW_BITS
        s.low_bit_counts = np.zeros(1 << LOW_BITS, dtype=np.int64)
        self.res_left = RESOLUTION_SCAN

    def _fold_resolution(self, flat: torch.Tensor, ints: torch.Tensor, finite) -> None:
        take = min(self.res_left, flat.numel())
        if take <= 0:
            return
        self.res_left -= take
        flat, ints = flat[:take], ints[:take]
        if finite is not None:
            keep = finite[:take]
            flat, ints = flat[keep], ints[keep]
        s = self.s
        s.resolution_scanned += int(flat.numel())
        for i, name in enumerate(s.lattice_names):
            s.lattice_counts[i] += on_lattice(flat, ints, name)
        s.low_bit_counts += low_bit_classes(ints, s.low_bits)
        m = s.collision_block
        if not m:
            return
        pool = ints if self.res_pool is None else torch.cat([self.res_pool, ints])
        blocks = pool.numel() // m
        self.res_pool = pool[blocks * m:].clone()
        if blocks:
            self._count_block_pairs(pool[:blocks * m].view(blocks, m))

    def _count_block_pairs(self, rows: torch.Tensor) -> None:
        """Sort each row (a block) on the device and add its equal pairs and pair slots."""
        s = self.s
        rows = sort_rows(rows)
        compared, triples = block_pair_slots([rows.shape[1]] * rows.shape[0])
        s.collision_blocks += rows.shape[0]
        s.collision_compared += compared
        s.collision_triples += triples
        s.collision_pairs += equal_pairs_in_sorted_rows(rows)

    def _finish_resolution(self) -> None:
        """The leftover of the last block, a shorter block of its own (two values at least)."""
        pool, self.res_pool = self.res_pool, None
        if pool is not None and pool.numel() >= 2:
            self._count_block_pairs(pool.view(1, -1))

    # -- position in the tensor ------------------------------------------------------------
    def _init_position(self, law) -> None:
        """Counts of each position class (`harness.bins.position_classes`) over the law's coarse
        groups of equal mass (`position_bins`): a kernel whose remainder loop or boundary block
        is wrong shows in its class however small it is."""
        self.pos_index = None
        classes = position_classes(tuple(self.s.shape)) if law is not None and self.positional else []
        if not classes:
            return
        edges, masses = position_bins(law)
        if masses.size < 2:
            return
        groups = masses.size
        self.pos_edges = torch.as_tensor(edges, dtype=self.edge_dtype, device=self.device)
        self.pos_index = torch.as_tensor(np.concatenate([idx for _, idx in classes]), device=self.device)
        self.pos_base = torch.as_tensor(np.concatenate([np.full(idx.size, c * groups) for c, (_, idx)
                                                        in enumerate(classes)]), device=self.device)
        self.pos_counts = torch.zeros(len(classes) * groups, dtype=torch.int64, device=self.device)
        self.s.position_classes = tuple(name for name, _ in classes)
        self.s.position_groups = groups

    @property
    def edge_dtype(self) -> torch.dtype:
        """Values compared with the coarse edges exactly: float64 for float64, else float32."""
        return torch.float64 if self.dtype == torch.float64 else torch.float32

    @property
    def positional(self) -> bool:
        """Whether the folded elements are the whole tensor in row-major order (a sharded part
        folds a box of it: no position classes, no repetition windows)."""
        return True

    def _fold_position(self, batch: torch.Tensor) -> None:
        calls = batch.shape[0]
        values = batch.reshape(calls, -1).index_select(1, self.pos_index).to(self.edge_dtype)
        groups = torch.searchsorted(self.pos_edges, values.reshape(-1))
        codes = self.pos_base.repeat(calls).add_(groups)
        self.pos_counts += torch.bincount(codes, minlength=self.pos_counts.numel())

    # -- repetition of stretches inside and across calls -------------------------------------
    def _fold_repetition(self, ints: torch.Tensor) -> None:
        """Hashes of REPEAT_WINDOW-element windows at content-defined anchors (the elements whose
        bit pattern hashes to 0 modulo REPEAT_SPACING): a stretch that appears twice, at any
        offset of the same tensor or of the next call, has its anchors at the same places of its
        content, so its windows hash alike. Equal hashes are counted inside the chunk and
        against the previous call; under the law two windows are equal with probability at most
        q^W (q: the law's collision probability), what the `repetition` check prices. At most
        REPEAT_SCAN elements of a draw are scanned (but always its first two calls): a defect
        that repeats a stretch does so in every call."""
        numel = ints[0].numel()
        # the calls of this chunk to scan: the first two of the draw, then while REPEAT_SCAN lasts
        calls = min(ints.shape[0], max(2 - self.rep_calls, -(-self.rep_left // max(numel, 1)), 0))
        if numel < REPEAT_WINDOW or calls <= 0:
            return
        self.rep_left -= calls * numel
        self.rep_calls += calls
        x = ints[:calls].reshape(calls, numel)
        if self.bits < 32:
            x = x.to(torch.int32)
        shift = (64 if self.bits == 64 else 32) - REPEAT_SPACING_BITS
        mult = _ANCHOR_MULT64 if self.bits == 64 else _ANCHOR_MULT32
        heads = x[:, : numel - REPEAT_WINDOW + 1]
        key = torch.mul(heads, mult, out=self._buffer("rep_key", tuple(heads.shape), x.dtype))
        # The arithmetic shift leaves the top REPEAT_SPACING_BITS bits of the hash, sign-extended:
        # zero exactly when they all are, i.e. with probability 1 / REPEAT_SPACING.
        key.bitwise_right_shift_(shift)
        anchor = torch.eq(key, 0, out=self._buffer("rep_anchor", tuple(heads.shape), torch.bool))
        call, pos = anchor.nonzero(as_tuple=True)
        if call.numel():
            start = call * numel + pos
            at = (start[:, None] + self._window_offsets()).reshape(-1)
            windows = x.reshape(-1).index_select(0, at).view(-1, REPEAT_WINDOW).to(torch.int64)
            h = (windows * row_hash_coefficients(REPEAT_WINDOW, self.device)).sum(dim=1)
            h = (h ^ (h >> 31)) * _MIX
        else:
            h = torch.zeros(0, dtype=torch.int64, device=self.device)
        s = self.s
        s.rep_windows += int(h.numel())
        s.rep_pairs += h.numel() * (h.numel() - 1) / 2.0
        s.rep_equal += _equal_pairs(h)
        first, last = (h[call == 0], h[call == calls - 1]) if call.numel() else (h, h)
        if self.prev_hashes is not None and first.numel() and self.prev_hashes.numel():
            s.rep_pairs += float(first.numel()) * float(self.prev_hashes.numel())
            s.rep_equal += int(torch.isin(first, self.prev_hashes).sum())
        self.prev_hashes = last if calls == ints.shape[0] else None
        if self.rep_left <= 0 and self.rep_calls >= 2:  # done scanning: give the scratch back
            self._buffers.pop(("rep_key", x.dtype), None)
            self._buffers.pop(("rep_anchor", torch.bool), None)

    def _window_offsets(self) -> torch.Tensor:
        if "window" not in self._buffers:
            self._buffers["window"] = torch.arange(REPEAT_WINDOW, device=self.device)
        return self._buffers["window"]

    def _init_mass_bins(self, law, watch) -> None:
        """Mass bins (`reference.rounded.MassBins`) of a 32/64-bit law, and the optional watch list:
        mass bins whose values are tallied exactly (stage 2 of `spikes`, see harness.runner)."""
        self.mass = None
        self.pending = None  # main layout: the last chunks' counters, not yet counted
        self.pending_used = 0
        self.watch_raw = None
        self.watched: list = []  # (distinct values, counts) of each chunk, on the device
        mb = getattr(law, "mass_bins", None) if law is not None else None
        if mb is None or self.exact_hist:
            return
        self.mass = mb
        self.counters = MassCounters.of(mb)
        self.mass_table = torch.from_numpy(self.counters.table).to(self.device)
        self.mass_low_mask = (1 << mb.low_bits) - 1  # main-bin layout
        self.raw_mass = torch.zeros(self.counters.n, dtype=torch.int64, device=self.device)
        self.s.mass_hist = np.zeros(mb.n_bins, dtype=np.int64)
        if mb.fine is None:
            # The counters refine the main bins: the main histogram comes from them (one bincount
            # for a few chunks, instead of two per chunk); non-finite elements are found by the
            # chunk's min/max instead of by their main bins.
            self.pending = torch.empty(0, dtype=torch.int32 if self.bits <= 32 else torch.int64,
                                       device=self.device)
        if watch:
            bins = np.asarray(sorted(set(int(j) for j in watch)), dtype=np.int64)
            watched_ordered = np.zeros(self.counters.n, dtype=bool)
            # mass bin j has parts (counters) mass_first[j] .. mass_first[j + 1] - 1
            ends = np.append(mb.mass_first, self.counters.n)
            first, count = ends[bins], ends[bins + 1] - ends[bins]
            watched_ordered[np.repeat(first - (np.cumsum(count) - count), count)
                            + np.arange(int(count.sum()))] = True
            self.watch_raw = torch.as_tensor(self.counters.order(watched_ordered), device=self.device)
            self.s.watch_bins = tuple(int(j) for j in bins)

    def _fold_mass(self, packed: torch.Tensor, low: torch.Tensor, ints: torch.Tensor) -> None:
        """Mass-bin counters: the coarse bin (raw main bin, or fine bin) of each element gives
        ``packed`` = (first counter, shift) from one table lookup (done by the caller); the
        element's low key bits shifted are the offset. Counted by one bincount per chunk, or (main
        layout) written to the pending buffer that one bincount counts for several chunks.
        ``low`` becomes the counters; ``packed`` is overwritten."""
        shift = torch.bitwise_and(packed, (1 << SHIFT_BITS) - 1,
                                  out=self._buffer("mass_s", tuple(packed.shape), packed.dtype))
        packed.bitwise_right_shift_(SHIFT_BITS)
        counter = low.bitwise_right_shift_(shift).add_(packed)
        if self.pending is None:
            self.raw_mass += torch.bincount(counter, minlength=self.raw_mass.numel())
        if self.watch_raw is not None:
            # Distinct values of the watched bins and their counts stay on the device (at most
            # the watched bins' key count per chunk, whatever n is); finish() adds them up.
            hit = torch.index_select(self.watch_raw, 0, counter)
            values, counts = torch.unique(ints[hit], return_counts=True)
            self.watched.append((values, counts))

    def _pending_slot(self, numel: int) -> torch.Tensor:
        """Room for one chunk's counters in the pending buffer (flushed first when full)."""
        if self.pending_used + numel > self.pending.numel():
            self._flush_mass()
            if numel > self.pending.numel():  # a chunk larger than the first ones
                self.pending = torch.empty(max(numel, PENDING_ELEMENTS), dtype=self.pending.dtype,
                                           device=self.device)
        slot = self.pending[self.pending_used:self.pending_used + numel]
        self.pending_used += numel
        return slot

    def _flush_mass(self) -> None:
        """Count the pending counters: one bincount (and one add into the totals) for several
        chunks, whose zero-filled output of a few MB costs as much as the counting."""
        if self.pending is not None and self.pending_used:
            self.raw_mass += torch.bincount(self.pending[:self.pending_used],
                                            minlength=self.raw_mass.numel())
            self.pending_used = 0

    def _buffer(self, name: str, shape: tuple, dtype: torch.dtype) -> torch.Tensor:
        """A reused scratch tensor of `shape`: fresh 16 MB allocations cost more (page faults) than
        the math. Uses that do not overlap share a name (and its memory)."""
        key = (name, dtype)
        numel = math.prod(shape)
        buf = self._buffers.get(key)
        if buf is None or buf.numel() < numel:
            buf = self._buffers[key] = torch.empty(numel, dtype=dtype, device=self.device)
        return buf[:numel].view(shape)

    def fold(self, batch: torch.Tensor) -> None:
        """batch: (calls, *shape) outputs of successive calls, in call order."""
        s = self.s
        calls = batch.shape[0]
        if calls == 0:
            return
        shape = tuple(batch.shape[1:])
        flat = batch.reshape(-1)
        ints = flat.view(self.int_dtype)
        s.n += flat.numel()
        s.n_calls += calls

        bins = self._buffer("ints", (flat.numel(),), torch.int32 if self.bits <= 32 else torch.int64)
        shift = self.bits - s.hist_bits
        if self.bits <= 16:
            bins.copy_(ints).bitwise_and_((1 << self.bits) - 1)
        else:
            torch.bitwise_right_shift(ints, shift, out=bins).bitwise_and_((1 << s.hist_bits) - 1)
        if self.raw_hist is not None:
            chunk_hist = torch.bincount(bins, minlength=self.raw_hist.numel())
            self.raw_hist += chunk_hist
        else:
            # Counters over the main bins (mass bins refine them), written into the pending
            # buffer and counted a few chunks at a time (`_flush_mass`).
            packed = torch.index_select(self.mass_table, 0, bins,
                                        out=self._buffer("mass_t", tuple(bins.shape), self.mass_table.dtype))
            self._fold_mass(packed, torch.bitwise_and(ints, self.mass_low_mask,
                                                      out=self._pending_slot(flat.numel())), ints)
        minmax = None
        if self.exact_hist:
            n_nonfinite = int(chunk_hist.index_select(0, self.raw_nonfinite).sum())
        else:
            # min/max propagate NaN and keep +-inf: a finite pair means every element is finite
            minmax = tuple(float(v) for v in torch.aminmax(flat))
            n_nonfinite = 0
            if not all(math.isfinite(v) for v in minmax):
                n_nonfinite = flat.numel() - int(torch.count_nonzero(torch.isfinite(flat)))
        finite = torch.isfinite(flat) if n_nonfinite else None
        if self.raw_fine is not None:
            self._fold_fine(ints)
        if not self.exact_hist:
            self._fold_counts(flat, ints, finite, n_nonfinite, minmax if not n_nonfinite else None)

        # z is computed around the centre as the work dtype holds it (x - c_work is exact for x
        # near the centre); the power sums are then shifted by delta = (c_work - centre) / scale
        # in float64, since rounding the centre to float32 would bias every z alike (0.005 sigma
        # on the sub-ulp window). Correlations do not depend on a common shift.
        z = self._buffer("z", (flat.numel(),), self.work)
        if flat.dtype == self.work and self.center_work == 0:
            torch.mul(flat, 1.0 / s.scale, out=z)  # x - 0 is x: one pass, the same bits
        else:
            if flat.dtype == self.work:
                torch.sub(flat, self.center_work, out=z)
            else:
                z.copy_(flat).sub_(self.center_work)
            z.mul_(1.0 / s.scale)
        if n_nonfinite:
            z.masked_fill_(~finite, 0.0)
        scratch = self._buffer("scratch", (flat.numel(),), self.work)
        z2 = torch.mul(z, z, out=self._buffer("z2", (flat.numel(),), self.work))
        total, total_sq = fixed_sum(z), fixed_sum(z2)
        if not self.exact_hist:
            cube = fixed_sum(torch.mul(z2, z, out=scratch))
            fourth = fixed_sum_squares(z2)
            s.power_sums += _shifted_power_sums(float(flat.numel() - n_nonfinite), total, total_sq,
                                                cube, fourth, self.center_shift)

        zb = z.view(calls, *shape)
        self._fold_lags(zb, z2.view(calls, *shape), total, total_sq)
        self._fold_successive(zb, ints.view(calls, *shape), total, total_sq)
        self._fold_rows(batch, ints.view(calls, *shape))
        if self.pos_index is not None:
            self._fold_position(batch)
        if self.positional:
            self._fold_repetition(ints.view(calls, -1))
        if self.res_left > 0:
            self._fold_resolution(flat, ints, finite)

    def _fold_fine(self, ints: torch.Tensor) -> None:
        """Fine bins of a narrow law: bin (key - key_lo) >> shift, plus one bin below and one above.

        v ^ ((v >> (bits-1)) & INT_MAX) maps the signed integer view of a float to a signed
        integer that increases with the value (negative floats get their magnitude bits flipped):
        the ordered key minus 2**(bits-1). Clamping to one key beyond each end first keeps the
        subtraction inside the integer type."""
        top = (1 << (self.bits - 1)) - 1
        keys = torch.bitwise_right_shift(ints, self.bits - 1,
                                         out=self._buffer("ints", tuple(ints.shape), self.int_dtype))
        keys.bitwise_and_(top).bitwise_xor_(ints)
        keys.clamp_(self.fine_lo - 1, self.fine_end).sub_(self.fine_lo)
        if self.mass is not None and self.mass.fine is not None:
            # Mass bins over the fine bins: coarse bin = fine bin + 1 (0 below, n + 1 above), low
            # bits = the key's offset inside it (all ones below: the below bin is not split).
            coarse = torch.bitwise_right_shift(keys, self.fine_shift,
                                               out=self._buffer("mass_c", tuple(keys.shape), keys.dtype))
            coarse.add_(1)
            packed = torch.index_select(self.mass_table, 0, coarse,
                                        out=self._buffer("mass_t", tuple(keys.shape), self.mass_table.dtype))
            low = torch.bitwise_and(keys, (1 << self.fine_shift) - 1, out=coarse)
            self._fold_mass(packed, low, ints)
        if self.fine_shift:
            keys.bitwise_right_shift_(self.fine_shift)
        keys.add_(1)
        self.raw_fine += torch.bincount(keys, minlength=self.raw_fine.numel())

    def _fold_counts(self, flat, ints, finite, n_nonfinite: int, minmax=None) -> None:
        """Counts for dtypes whose histogram bins hold many values (32/64-bit); `minmax`: the
        chunk's (min, max) when already known and every element is finite."""
        s = self.s
        if n_nonfinite:
            n_unw = int((ints == self.poison).sum())
            n_pinf = int((flat == math.inf).sum())
            n_ninf = int((flat == -math.inf).sum())
            s.n_unwritten += n_unw
            s.n_posinf += n_pinf
            s.n_neginf += n_ninf
            s.n_nan += n_nonfinite - n_unw - n_pinf - n_ninf
            if n_nonfinite == flat.numel():
                return
            flat = flat[finite]
        lo, hi = minmax if minmax is not None else (float(v) for v in torch.aminmax(flat))
        s.min, s.max = min(s.min, lo), max(s.max, hi)
        # Scalars below are representable in the dtype, so comparing in the dtype is exact.
        if finite is not None:
            ints = ints[finite]
        if lo <= s.rn_a <= hi:
            s.n_at_rn_a += self._count_equal(flat, ints, s.rn_a)
        if lo <= s.rn_b <= hi:
            s.n_at_rn_b += self._count_equal(flat, ints, s.rn_b)
        if lo <= 0.0 <= hi and s.rn_a < 0.0 < s.rn_b:
            s.n_at_zero += self._count_equal(flat, ints, 0.0)
        if lo < s.rn_a or hi > s.rn_b:
            out = (flat < s.rn_a) | (flat > s.rn_b)
            s.n_outside_rounded += int(torch.count_nonzero(out))
            s.worst_outside = farthest_outside((s.worst_outside, lo, hi), s.rn_a, s.rn_b)
        if lo < self.inner_a or hi > self.inner_b:
            out = (flat < self.inner_a) | (flat > self.inner_b)
            s.n_outside_strict += int(torch.count_nonzero(out))
            s.worst_outside_strict = farthest_outside((s.worst_outside_strict, lo, hi), s.a, s.b)

    def _count_equal(self, flat: torch.Tensor, ints: torch.Tensor, value: float) -> int:
        """How many elements equal `value` (a finite value of the dtype; +0 and -0 both count).

        Away from zero a value has one bit pattern, so XOR and count_nonzero (two integer passes)
        do it; `(x == v).sum()` costs three times as much on CPU (a bool tensor, then an int64
        copy of it for the sum)."""
        if value == 0:  # -0.0 is not "nonzero" either; no bool tensor is written
            return flat.numel() - int(torch.count_nonzero(flat))
        pattern = signed(int(self.fmt.encode(np.float64(value))), self.bits)
        xored = torch.bitwise_xor(ints, pattern,
                                  out=self._buffer("ints", tuple(ints.shape), self.int_dtype))
        return ints.numel() - int(torch.count_nonzero(xored))

    def _fold_lags(self, zb: torch.Tensor, z2b: torch.Tensor, total: float, total_sq: float) -> None:
        """Lag-1 pairs along each dim of the filled tensor; only the cross products need a pass."""
        for dim in range(1, zb.dim()):
            length = zb.shape[dim]
            if length < 2:
                continue
            u = zb.narrow(dim, 0, length - 1)
            v = zb.narrow(dim, 1, length - 1)
            product = torch.mul(u, v, out=self._buffer("scratch", tuple(u.shape), zb.dtype))
            first, last = zb.select(dim, 0), zb.select(dim, length - 1)
            sq_first, sq_last = z2b.select(dim, 0), z2b.select(dim, length - 1)
            sums = LagSums(u.numel(), total - fixed_sum(last), total - fixed_sum(first),
                           total_sq - fixed_sum(sq_last), total_sq - fixed_sum(sq_first),
                           fixed_sum(product))
            self.s.lag1.setdefault(dim - 1, LagSums()).add(sums)

    def _fold_successive(self, zb: torch.Tensor, ib: torch.Tensor, total: float,
                         total_sq: float) -> None:
        """Element of call t vs the same element of call t+1, across chunk boundaries too."""
        s = self.s
        calls = zb.shape[0]
        first, last = zb[0], zb[-1]
        sum_last, sq_last = fixed_sum(last), fixed_sum(last * last)
        if calls > 1:
            product = torch.mul(zb[:-1], zb[1:],
                                out=self._buffer("scratch", tuple(zb[1:].shape), zb.dtype))
            differ = torch.bitwise_xor(ib[:-1], ib[1:],
                                       out=self._buffer("ints", tuple(ib[1:].shape), ib.dtype))
            s.successive.add(LagSums(zb[1:].numel(), total - sum_last,
                                     total - fixed_sum(first), total_sq - sq_last,
                                     total_sq - fixed_sum(first * first), fixed_sum(product)))
            s.n_equal_successive += differ.numel() - int(torch.count_nonzero(differ))
            s.n_pairs_successive += ib[1:].numel()
        if self.prev_z is not None:
            s.successive.add(lag_sums(self.prev_z, first))
            s.n_equal_successive += int(torch.count_nonzero(self.prev_ints == ib[0]))
            s.n_pairs_successive += ib[0].numel()
        self.prev_z = last.clone()
        self.prev_ints = ib[-1].clone()

    def _fold_rows(self, batch: torch.Tensor, ib: torch.Tensor) -> None:
        s = self.s
        m = s.row_len
        if m < 1 or batch[0].numel() == 0:
            return
        calls = batch.shape[0]
        rows_per_call = batch[0].numel() // m
        s.n_rows_total += calls * rows_per_call
        room = ROW_EXTREMES_CAP - self.n_rows_kept
        if room <= 0:
            return
        # Row extremes and the duplicate-row search cover the first ROW_EXTREMES_CAP rows only:
        # their cost and memory stay fixed whatever n is.
        rows = batch.reshape(-1, m)[:room]
        # Two reductions: aminmax along dim 1 takes a slow path on CPU (6x their time).
        lo, hi = rows.amin(dim=1), rows.amax(dim=1)
        self.rows_kept.append((lo.to(torch.float64).cpu().numpy(), hi.to(torch.float64).cpu().numpy()))
        self.n_rows_kept += rows.shape[0]
        whole_calls = rows.shape[0] // rows_per_call
        if m >= 2 and rows_per_call >= 2 and whole_calls:
            # Hash each row (wrapping int64 arithmetic), sort per call, count equal neighbours;
            # a false match needs a 64-bit hash collision.
            shape = (whole_calls, rows_per_call, m)
            r = self._buffer("row_bits", shape, torch.int64)
            r.copy_(ib[:whole_calls].reshape(shape))
            coef = row_hash_coefficients(m, r.device)
            h = r.mul_(coef).sum(dim=2)
            h = (h ^ (h >> 29)) * 0x5851F42D4C957F2D
            hs, _ = torch.sort(h, dim=1)
            s.n_duplicate_rows += int(torch.count_nonzero(hs[:, 1:] == hs[:, :-1]))
            s.n_rows_compared += whole_calls * rows_per_call
        if self.n_rows_kept >= ROW_EXTREMES_CAP:  # done with rows: give their scratch back
            self._buffers.pop(("row_bits", torch.int64), None)

    def finish(self) -> Summary:
        s = self.s
        counters = None
        self._finish_resolution()
        self._flush_mass()
        if self.mass is not None:
            counters = self.counters.order(self.raw_mass.cpu().numpy())
        if self.raw_hist is not None:
            hist = np.zeros(1 << s.hist_bits, dtype=np.int64)
            hist[raw_to_ordered(s.hist_bits)] = self.raw_hist.cpu().numpy()
            s.hist = hist
        else:
            s.hist = self.mass.parts_to_coarse(counters)
        if self.raw_fine is not None:
            s.fine_hist = self.raw_fine.cpu().numpy()
        if self.mass is not None:
            s.mass_hist = self.mass.parts_to_mass(counters)
            if self.watch_raw is not None:
                patterns, per_value = _add_tallies(self.watched, self.device)
                unsigned = (patterns & ((1 << self.bits) - 1) if self.bits < 64 else patterns)
                keys = self.fmt.keys_from_bits(unsigned.astype(np.uint64))
                order = np.argsort(keys)
                s.watch_keys = keys[order]
                s.watch_counts = per_value[order]
        if self.exact_hist:
            counts_from_exact_histogram(s, self.fmt, self.poison)
        if self.rows_kept:
            s.row_min = np.concatenate([lo for lo, _ in self.rows_kept])
            s.row_max = np.concatenate([hi for _, hi in self.rows_kept])
        if self.pos_index is not None:
            s.position_counts = self.pos_counts.cpu().numpy().reshape(len(s.position_classes), -1)
        return s


def _shifted_power_sums(count: float, s1: float, s2: float, s3: float, s4: float,
                        delta: float) -> list:
    """Sums of (z + delta)^k, k = 0..4, from the sums of z^k (binomial expansion, float64)."""
    d = delta
    return [count,
            s1 + count * d,
            s2 + 2 * d * s1 + count * d**2,
            s3 + 3 * d * s2 + 3 * d**2 * s1 + count * d**3,
            s4 + 4 * d * s3 + 6 * d**2 * s2 + 4 * d**3 * s1 + count * d**4]


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


def representable_inside(fmt, a: float, b: float) -> tuple[float, float]:
    """Smallest representable >= a and largest representable <= b (x < a iff x < the first)."""
    lo, hi = float(fmt.round(np.float64(a))), float(fmt.round(np.float64(b)))
    if math.isfinite(a) and lo < a:
        lo = float(fmt.next_up(np.float64(lo)))
    if math.isfinite(b) and hi > b:
        hi = float(fmt.next_down(np.float64(hi)))
    return lo, hi


_COEF_CACHE: dict = {}


def row_hash_coefficients(m: int, device: torch.device) -> torch.Tensor:
    key = (m, str(device))
    if key not in _COEF_CACHE:
        g = torch.Generator().manual_seed(0x5EED + m)
        coef = torch.randint(1, 2**62, (m,), generator=g, dtype=torch.int64) | 1
        _COEF_CACHE[key] = coef.to(device)
    return _COEF_CACHE[key]


def _equal_pairs(h: torch.Tensor) -> int:
    """Pairs of equal values among `h`."""
    if h.numel() < 2:
        return 0
    _, counts = torch.unique(h, return_counts=True)
    counts = counts[counts > 1].to(torch.int64)
    return int((counts * (counts - 1) // 2).sum())


#: Rows at least this long are sorted one at a time: torch sorts a 1-D integer tensor by radix
#: sort on CPU, but the rows of a 2-D one each by a comparison sort (~10x slower at 2**18).
LONG_ROW = 1 << 12


def sort_rows(rows: torch.Tensor) -> torch.Tensor:
    """Each row of a 2-D tensor in ascending order."""
    if rows.shape[1] < LONG_ROW:
        return torch.sort(rows, dim=1).values
    return torch.stack([torch.sort(row).values for row in rows])


def equal_pairs_in_sorted_rows(rows: torch.Tensor) -> int:
    """Pairs of equal elements within each row of a row-sorted 2-D tensor: sum over runs of c
    equal elements of C(c, 2). A run of c is c - 1 neighbours equal, so it is a run of c - 1
    True flags, and a run of L flags adds L (L + 1) / 2; a False column in front of each row
    keeps runs of different rows apart."""
    n_rows, m = rows.shape
    if m < 2:
        return 0
    flags = torch.zeros((n_rows, m), dtype=torch.bool, device=rows.device)
    torch.eq(rows[:, 1:], rows[:, :-1], out=flags[:, 1:])
    idx = flags.view(-1).nonzero().squeeze(1)
    if idx.numel() == 0:
        return 0
    starts = torch.ones(idx.numel(), dtype=torch.bool, device=rows.device)
    starts[1:] = idx[1:] != idx[:-1] + 1
    first = starts.nonzero().squeeze(1)
    ends = torch.cat([first[1:], torch.tensor([idx.numel()], device=rows.device)])
    runs = (ends - first).to(torch.int64)
    return int((runs * (runs + 1) // 2).sum())


def on_lattice(flat: torch.Tensor, ints: torch.Tensor, coarse: str) -> int:
    """How many of the finite values `flat` (with their integer view `ints`) are representable
    in the coarser format `coarse`: bfloat16 is float32's top 16 bits (its values are the
    float32 patterns whose low 16 bits are 0); float16 and float32 by a round trip through them
    (a value beyond their range comes back infinite, one they cannot hold comes back changed)."""
    if coarse == "bfloat16" and flat.dtype == torch.float32:
        return ints.numel() - int(torch.count_nonzero(torch.bitwise_and(ints, 0xFFFF)))
    target = getattr(torch, coarse)
    return int(torch.count_nonzero(flat.to(target).to(flat.dtype) == flat))


def low_bit_classes(ints: torch.Tensor, bits: int) -> np.ndarray:
    """How many of the values (their integer views `ints`) end in each pattern of `bits` bits:
    int64[2**bits]. The sign bit is the top one, so the last bits are the significand's."""
    low = torch.bitwise_and(ints, (1 << bits) - 1).to(torch.int64)
    return torch.bincount(low, minlength=1 << bits).cpu().numpy()


def lag_sums(u: torch.Tensor, v: torch.Tensor) -> LagSums:
    return LagSums(u.numel(), fixed_sum(u), fixed_sum(v), fixed_sum(u * u), fixed_sum(v * v),
                   fixed_sum(u * v))


_BLOCK = 4096


def fixed_sum(t: torch.Tensor) -> float:
    """Sum in a fixed order whatever the thread count: blocks of 4096 elements summed in the
    tensor's dtype (one thread per block), the block sums in float64. torch's own sum of a large
    float32 tensor splits the work by thread, so -n 0 and -n 2 would differ in the last bits."""
    flat = t.reshape(-1)
    whole = flat.numel() // _BLOCK * _BLOCK
    total = 0.0
    if whole:
        total = float(flat[:whole].view(-1, _BLOCK).sum(dim=1).sum(dtype=torch.float64))
    if whole < flat.numel():
        total += float(flat[whole:].sum(dtype=torch.float64))
    return total


def fixed_sum_squares(t: torch.Tensor) -> float:
    """Sum of squares in the same fixed block order as `fixed_sum`, without writing the squares:
    each block's 2-norm (one pass, a per-row reduction like the block sums), squared in float64."""
    flat = t.reshape(-1)
    whole = flat.numel() // _BLOCK * _BLOCK
    total = 0.0
    if whole:
        norms = torch.linalg.vector_norm(flat[:whole].view(-1, _BLOCK), dim=1)
        total = float(norms.to(torch.float64).square().sum())
    if whole < flat.numel():
        total += float(flat[whole:].to(torch.float64).square().sum())
    return total


def summarize_samples(samples: torch.Tensor, law, shape: tuple | None = None,
                      watch: tuple | None = None) -> Summary:
    """Fold samples shaped (calls, *shape) — or flat, with `shape` given — into a Summary
    (`watch`: mass bins whose values are tallied exactly, as at stage 2 of a run)."""
    if shape is None:
        shape = tuple(samples.shape[1:])
    samples = samples.reshape(-1, *shape) if len(shape) else samples.reshape(-1)
    summary = new_summary(law, shape, samples.dtype)
    folder = Folder(summary, samples.dtype, samples.device, law, watch)
    folder.fold(samples)
    return folder.finish()
