"""The fold: one pass over each chunk of a candidate's output, on its device, through the
accumulators of the statistic families that apply.

A statistic family (`harness.families`) is one module: its accumulator, the law's side of it
and its checks. The fold knows none of them by name. It is given the families of the checks
that apply (`harness.checks.CHECKS.families`), asks each for an accumulator
(``family.init(law, shape, fold)``, None where the family has nothing to fold for this law,
dtype or part), hands every chunk to each accumulator in turn (``fold(chunk)``) and, once, asks
each for its state (``finish(summary)``), which it files in the Summary under the family's name.
Only the accumulators' small totals cross to the host, so memory does not grow with n.

What several families read of a chunk (its integer view, its main bins, its finite values,
z = (x - centre) / scale and its sums) is computed once, when first asked, by `Chunk`; the fold
also holds the scratch tensors they reuse (`Fold.buffer`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import torch

from reference import float_format
from reference.dtypes import dtype_name

from ..key_bins import raw_nonfinite_bins
from ..summary import Summary
from .bits import INT_VIEW, dtype_bits, hist_bits_for, poison_value
from .family import Family

#: Below this share of the continuous law's std, the rounded law's std (a law that is one atom
#: up to masses like 1e-127) would make z astronomically large: z is scaled by the continuous std.
MIN_SCALE_SHARE = 1e-6
#: Elements a family's scratch covers at a time where its work is element by element or row by
#: row: a big call (2^24 elements and more) is then worked a slice at a time, its scratch stays in
#: the cache, and the fold's memory grows with the call by what it keeps, not by its scratch.
SLICE_ELEMENTS = 1 << 18


def fold_order(families) -> tuple:
    """The families with everything they need, each after what it needs (otherwise in the
    order given)."""
    out: list = []
    seen: set = set()

    def visit(family, path=()):
        if family.name in seen:
            return
        if family.name in path:
            raise ValueError(f"families need each other: {' -> '.join(path + (family.name,))}")
        for need in family.needs:
            visit(need, path + (family.name,))
        seen.add(family.name)
        out.append(family)

    for family in families:
        visit(family)
    return tuple(out)


@dataclass(frozen=True)
class Box:
    """A sharded part's box of each call: its offsets in the whole tensor, its local shape, the
    sharded dim (None: replicated) and the global row of each of its local rows."""

    offsets: tuple
    local_shape: tuple
    shard_dim: int | None
    row_ids: np.ndarray


def standard_scale(law) -> float:
    """The scale values are standardized by (z = (x - mean) / scale), wherever the harness does
    it: the rounded law's std, or the continuous law's where the rounded one is below
    `MIN_SCALE_SHARE` of it, zero or not finite."""
    scale = float(law.std)
    if not (math.isfinite(scale) and scale >= MIN_SCALE_SHARE * float(law.dist.std)):
        scale = float(law.dist.std)
    return scale


def new_summary(law, shape: tuple, dtype: torch.dtype) -> Summary:
    """The common core of a Summary of `law` in `dtype` for tensors of `shape`; no state yet."""
    dist = law.dist
    return Summary(
        dtype=dtype_name(dtype),
        shape=tuple(shape),
        hist_bits=hist_bits_for(dtype),
        center=float(law.mean),
        scale=standard_scale(law),
        rn_a=float(law.rn_a),
        rn_b=float(law.rn_b),
        a=float(dist.a),
        b=float(dist.b),
        row_len=int(shape[-1]) if len(shape) else 0,
    )


class Fold:
    """The accumulators of one Summary's families; `finish` files their states once.

    Cost model (what keeps the harness cheaper than the samplers it tests): for 16-bit and 8-bit
    dtypes every bit pattern has its own histogram bin, so counts, extremes and exact float64 power
    sums all come from the histogram at the end; per chunk only the bincount and the correlation
    sums touch the samples. For 32/64-bit dtypes the boundary counts are computed only when the
    chunk's min/max says a bound was reached, and non-finite bookkeeping only when one is present.
    """

    def __init__(self, summary: Summary, dtype: torch.dtype, device, law=None, *,
                 families, watch: tuple | None = None, box: Box | None = None):
        self.s = summary
        self.law = law
        self.dtype = dtype
        self.device = torch.device(device)
        self.fmt = float_format(dtype)
        self.bits = dtype_bits(dtype)
        self.exact_hist = summary.hist_bits == self.bits  # one bin per bit pattern
        self.int_dtype = INT_VIEW[self.bits]
        self.poison = poison_value(dtype)
        self.watch = watch
        self.box = box
        # One bin per bit pattern: non-finite values are counted by their bins.
        self.raw_nonfinite = (torch.as_tensor(raw_nonfinite_bins(self.fmt).nonzero()[0],
                                              device=self.device) if self.exact_hist else None)
        # Work dtype for z and its sums: float64 for float64 samples, float32 otherwise (exact for
        # every 16-bit value). Per-chunk sums are float32 cascade sums, folded into float64
        # accumulators: ~1e-7 relative, far below any statistic's standard error.
        self.work = torch.float64 if dtype == torch.float64 else torch.float32
        self.center_work = float(torch.tensor(summary.center, dtype=self.work))
        self.center_shift = (self.center_work - summary.center) / summary.scale
        self._buffers: dict = {}
        self.accumulators: dict = {}
        for family in fold_order(families):
            accumulator = family.init(law, tuple(summary.shape), self)
            if accumulator is not None:
                self.accumulators[family.name] = accumulator

    @property
    def positional(self) -> bool:
        """Whether the folded elements are the whole tensor in row-major order (a sharded part
        folds a box of it: no position classes, no repetition windows)."""
        return self.box is None

    def accumulator(self, name: str):
        """The accumulator of family `name` in this fold, or None (not folded, or nothing to fold)."""
        return self.accumulators.get(name)

    def buffer(self, name: str, shape: tuple, dtype: torch.dtype) -> torch.Tensor:
        """A reused scratch tensor of `shape`: fresh 16 MB allocations cost more (page faults) than
        the math. Uses that do not overlap share a name (and its memory)."""
        key = (name, dtype)
        numel = math.prod(shape)
        buf = self._buffers.get(key)
        if buf is None or buf.numel() < numel:
            buf = self._buffers[key] = torch.empty(numel, dtype=dtype, device=self.device)
        return buf[:numel].view(shape)

    def release(self, name: str, dtype: torch.dtype) -> None:
        """Give a scratch tensor back (its user is done with it for the rest of the draw)."""
        self._buffers.pop((name, dtype), None)

    def fold(self, batch: torch.Tensor, halo: torch.Tensor | None = None) -> None:
        """batch: (calls, *shape) outputs of successive calls, in call order; `halo` (sharded
        parts): the previous rank's last slice along the sharded dim for each call."""
        calls = batch.shape[0]
        if calls == 0:
            return
        chunk = Chunk(self, batch, halo)
        self.s.n += chunk.numel
        self.s.n_calls += calls
        for accumulator in self.accumulators.values():
            accumulator.fold(chunk)

    def finish(self) -> Summary:
        """The Summary with each family's state, in fold order (a state may read the earlier ones)."""
        for name, accumulator in self.accumulators.items():
            state = accumulator.finish(self.s)
            if state is not None:
                self.s.states[name] = state
        return self.s


class Chunk:
    """One chunk of calls as the accumulators see it: the batch, its flat and integer views, and
    what several families read, computed once when first asked."""

    def __init__(self, fold: Fold, batch: torch.Tensor, halo: torch.Tensor | None = None):
        self.fold = fold
        self.batch = batch
        self.halo = halo
        self.calls = batch.shape[0]
        self.shape = tuple(batch.shape[1:])
        self.flat = batch.reshape(-1)
        self.ints = self.flat.view(fold.int_dtype)
        self.numel = self.flat.numel()
        #: the chunk's raw per-pattern histogram (one bin per bit pattern; set by its counter)
        self.pattern_hist: torch.Tensor | None = None

    @cached_property
    def bins(self) -> torch.Tensor:
        """Each element's main histogram bin in raw bit-pattern order: the top hist_bits bits of
        the pattern (a shift and a mask; `harness.key_bins.raw_to_ordered` puts them in key order)."""
        f = self.fold
        bins = f.buffer("bins", (self.numel,), torch.int32 if f.bits <= 32 else torch.int64)
        return raw_main_bins(self.ints, f.bits, f.s.hist_bits, out=bins)

    @cached_property
    def fine_keys(self) -> torch.Tensor:
        """A narrow law's fine-bin key of each element, minus the first fine bin's: below 0 for a
        value below the fine bins, clamped to one key beyond each end.

        v ^ ((v >> (bits-1)) & INT_MAX) maps the signed integer view of a float to a signed
        integer that increases with the value (negative floats get their magnitude bits flipped):
        the ordered key minus 2**(bits-1). Clamping to one key beyond each end first keeps the
        subtraction inside the integer type."""
        f = self.fold
        key_lo, shift, n_fine = f.law.fine_bins.key_lo, f.law.fine_bins.shift, f.law.fine_bins.n_bins
        lo = key_lo - (1 << (f.bits - 1))
        end = lo + (n_fine << shift)
        top = (1 << (f.bits - 1)) - 1
        keys = torch.bitwise_right_shift(self.ints, f.bits - 1,
                                         out=f.buffer("keys", (self.numel,), f.int_dtype))
        keys.bitwise_and_(top).bitwise_xor_(self.ints)
        keys.clamp_(lo - 1, end).sub_(lo)
        return keys

    @cached_property
    def minmax(self) -> tuple:
        """(min, max) over the chunk: min/max propagate NaN and keep +-inf, so a finite pair means
        every element is finite (32/64-bit dtypes)."""
        return tuple(float(v) for v in torch.aminmax(self.flat))

    @cached_property
    def n_nonfinite(self) -> int:
        f = self.fold
        if f.exact_hist:
            hist = self.pattern_hist
            if hist is None:
                hist = torch.bincount(self.bins, minlength=1 << f.s.hist_bits)
            return int(hist.index_select(0, f.raw_nonfinite).sum())
        if all(math.isfinite(v) for v in self.minmax):
            return 0
        return self.numel - int(torch.count_nonzero(torch.isfinite(self.flat)))

    @cached_property
    def finite(self) -> torch.Tensor | None:
        """The finite elements' mask, None when every element is finite."""
        return torch.isfinite(self.flat) if self.n_nonfinite else None

    @cached_property
    def finite_values(self) -> tuple | None:
        """(flat, ints, min, max) of the finite elements (32/64-bit dtypes); None when none is."""
        if self.n_nonfinite == self.numel:
            return None
        if self.finite is None:
            lo, hi = self.minmax
            return self.flat, self.ints, lo, hi
        flat = self.flat[self.finite]
        lo, hi = (float(v) for v in torch.aminmax(flat))
        return flat, self.ints[self.finite], lo, hi

    @cached_property
    def z(self) -> torch.Tensor:
        """z = (x - centre) / scale in the work dtype, 0 where x is not finite.

        z is computed around the centre as the work dtype holds it (x - c_work is exact for x
        near the centre); the power sums are then shifted by delta = (c_work - centre) / scale
        in float64 (`Fold.center_shift`), since rounding the centre to float32 would bias every
        z alike (0.005 sigma on the sub-ulp window). Correlations do not depend on a common
        shift."""
        f = self.fold
        flat = self.flat
        z = f.buffer("z", (self.numel,), f.work)
        if flat.dtype == f.work and f.center_work == 0:
            torch.mul(flat, 1.0 / f.s.scale, out=z)  # x - 0 is x: one pass, the same bits
        else:
            if flat.dtype == f.work:
                torch.sub(flat, f.center_work, out=z)
            else:
                z.copy_(flat).sub_(f.center_work)
            z.mul_(1.0 / f.s.scale)
        if self.n_nonfinite:
            z.masked_fill_(~self.finite, 0.0)
        return z

    @cached_property
    def z2(self) -> torch.Tensor:
        f = self.fold
        return torch.mul(self.z, self.z, out=f.buffer("z2", (self.numel,), f.work))

    @cached_property
    def total(self) -> float:
        return fixed_sum(self.z)

    @cached_property
    def total_sq(self) -> float:
        return fixed_sum(self.z2)


def raw_main_bins(ints: torch.Tensor, bits: int, hist_bits: int, out: torch.Tensor) -> torch.Tensor:
    """The main histogram bin of each bit pattern in `ints` (of a `bits`-bit format), in raw
    bit-pattern order, written to `out`: the top `hist_bits` bits of the pattern (all of them for
    16-bit and narrower formats)."""
    if bits <= 16:
        return out.copy_(ints).bitwise_and_((1 << bits) - 1)
    shifted = torch.bitwise_right_shift(ints, bits - hist_bits, out=out)
    return shifted.bitwise_and_((1 << hist_bits) - 1)


_COEF_CACHE: dict = {}


def row_hash_coefficients(m: int, device: torch.device) -> torch.Tensor:
    """The odd int64 coefficients of the linear hash of m consecutive bit patterns (rows,
    windows): fixed per length, so equal stretches hash alike everywhere."""
    key = (m, str(device))
    if key not in _COEF_CACHE:
        g = torch.Generator().manual_seed(0x5EED + m)
        coef = torch.randint(1, 2**62, (m,), generator=g, dtype=torch.int64) | 1
        _COEF_CACHE[key] = coef.to(device)
    return _COEF_CACHE[key]


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


def fixed_sums(rows: torch.Tensor) -> list[float]:
    """`fixed_sum` of each row of a contiguous 2-D tensor, bit for bit, in one reduction for all
    of them: a block's float32 sum reads its own 4096 elements only, and each row's block sums
    and its tail are summed in float64 as a row of their own, in the order `fixed_sum` sums them."""
    n_rows, length = rows.shape
    whole = length // _BLOCK * _BLOCK
    totals = [0.0] * n_rows
    if whole:
        blocks = rows[:, :whole].reshape(n_rows, -1, _BLOCK).sum(dim=2)
        totals = blocks.sum(dim=1, dtype=torch.float64).tolist()
    if whole < length:
        tails = rows[:, whole:].sum(dim=1, dtype=torch.float64).tolist()
        totals = [total + tail for total, tail in zip(totals, tails)]
    return totals


def fixed_sum_each(tensors, scratch: torch.Tensor | None = None) -> list[float]:
    """`fixed_sum` of each of `tensors` (of one shape), bit for bit, with one reduction for those
    whose flat view is a contiguous run (a few dozen small sums per chunk cost more in calls
    than in adding), stacked into `scratch` where given (1-D, room for all of them). A tensor
    whose flat view is strided (a column of a batch) is summed on its own: `fixed_sum` adds a
    strided block up in another order than a contiguous one."""
    together = [i for i, t in enumerate(tensors) if not flat_view_is_strided(t)]
    sums: dict = {}
    if len(together) > 1:
        shape = (len(together), *tensors[together[0]].shape)
        out = None if scratch is None else scratch[:math.prod(shape)].view(shape)
        rows = torch.stack([tensors[i] for i in together], out=out).view(len(together), -1)
        sums.update(zip(together, fixed_sums(rows)))
    return [sums[i] if i in sums else fixed_sum(t) for i, t in enumerate(tensors)]


def flat_view_is_strided(t: torch.Tensor) -> bool:
    """Whether ``t.reshape(-1)`` is a view with a step other than 1: t is not contiguous, but
    its dims (those longer than 1) merge into one."""
    if t.is_contiguous():
        return False
    dims = [(size, stride) for size, stride in zip(t.shape, t.stride()) if size != 1]
    return all(outer == inner * inner_size
               for (_, outer), (inner_size, inner) in zip(dims, dims[1:]))


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


def summarize_samples(samples: torch.Tensor, law, families, shape: tuple | None = None,
                      watch: tuple | None = None) -> Summary:
    """Fold samples shaped (calls, *shape) — or flat, with `shape` given — into a Summary through
    `families` (`watch`: mass bins whose values are tallied exactly, as at stage 2 of a run).
    `harness.checks.summarize_samples` folds through every family of `CHECKS`."""
    if shape is None:
        shape = tuple(samples.shape[1:])
    samples = samples.reshape(-1, *shape) if len(shape) else samples.reshape(-1)
    summary = new_summary(law, shape, samples.dtype)
    fold = Fold(summary, samples.dtype, samples.device, law, families=families, watch=watch)
    fold.fold(samples)
    return fold.finish()
