"""Per-rank folding of a sharded parameter, and the facts only sharding can break.

`PartFold` is the engine's fold (`harness.engine.fold.Fold`) for one rank's box of each call:
counts, histograms and power sums as the engine builds them, rows by *global* slot (so that a row
cut across ranks by Shard(last dim) is one row again after `Summary.merge`), partial row hashes
that add across parts, and the lag-1 pairs across a shard boundary (the "halo": the previous
rank's last slice along the sharded dim); the extremes and independence families keep those
(`harness.families.extremes.PartExtremesFold`, `harness.families.independence`). ``Summary.merge(parts) == fold of the whole`` (counts
and histograms bit for bit; float sums up to summation order): tests/unit/harness/test_shardfold.py.

`ShardingStats` holds what `replicas`, `shards` and `sharding` (harness/checks/sharded.py) judge:

* replicas: with Replicate, each rank's tensor against rank 0's, call by call;
* pairs: for every pair of non-empty shards (i < j), call by call, at the same local index: equal
  elements, whole shards equal, the correlation of z; and rows of i equal to some row of j;
* reference: the first calls of the sharded tensor against the unsharded (W = 1) tensor from the
  same seed, element by element (the layout's "differences").

The comparison functions are pure torch on tensors that are already where they are needed;
`harness.sharded.ranks` moves them between ranks (and `fold_layout` does it in one process for the
self-tests, with the very same functions).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch

from ..checks import CHECKS
from ..engine import (INT_VIEW, Box, Fold, dtype_bits, fixed_sum, new_summary,
                      row_hash_coefficients, standard_scale)
from ..families.independence import LagSums, hash_rows
from ..summary import Summary
from .layout import Layout, boxes, comparison_pairs, global_row_ids, is_sharded


# ------------------------------------------------------------------------------------------------
# The per-rank fold


class PartFold(Fold):
    """Folds one rank's box of every call into a part Summary (see `Summary.merge`): the
    engine's fold with the box, which the families that keep rows or pairs across the box's edge
    (extremes, independence) read; no position classes, no repetition windows."""

    def __init__(self, summary: Summary, dtype: torch.dtype, device, offsets: tuple,
                 local_shape: tuple, shard_dim: int | None, law=None, *, families=None,
                 watch: tuple | None = None):
        # With the law, a 32/64-bit part counts its mass bins (and tallies the watched ones'
        # values) as the engine does, so spikes and scan judge the merged whole.
        shape = tuple(summary.shape)
        box = Box(tuple(offsets), tuple(local_shape), shard_dim,
                  np.asarray(global_row_ids(shape, tuple(offsets), tuple(local_shape))))
        super().__init__(summary, dtype, torch.device(device), law,
                         families=CHECKS.families("sharded") if families is None else families,
                         watch=watch, box=box)
        self.local_numel = math.prod(box.local_shape)
        summary.box = (box.offsets, box.local_shape)

    def fold(self, batch: torch.Tensor, halo: torch.Tensor | None = None) -> None:
        """batch: (calls, *local_shape); halo: (calls, *slice) the previous rank's last slice
        along the sharded dim for each of those calls (None: no neighbour before this box)."""
        calls = batch.shape[0]
        if calls == 0:
            return
        if self.local_numel == 0:  # the calls happened; the part holds none of their elements
            self.s.n_calls += calls
            for accumulator in self.accumulators.values():
                if hasattr(accumulator, "fold_empty"):
                    accumulator.fold_empty(calls)
            return
        super().fold(batch, halo if self.box.shard_dim is not None else None)


# ------------------------------------------------------------------------------------------------
# What only sharding can break


@dataclass
class PairStats:
    """Shards i < j compared call by call (see the module docstring)."""

    i: int
    j: int
    calls: int = 0
    box_numel: int = 0  # elements of the common box (same local index) per call
    elements: int = 0
    equal: int = 0  # bit-identical elements at the same local index
    calls_equal: int = 0  # calls whose common boxes were bit-identical
    corr: LagSums = field(default_factory=LagSums)  # z of shard i vs z of shard j
    row_len: int = 0  # local row length (0: rows of different lengths, not compared)
    rows: int = 0  # rows of shard i compared (calls x its rows)
    row_pairs: int = 0  # (row of i, row of j) pairs compared
    dup_rows: int = 0  # rows of shard i equal to some row of shard j in the same call

    def add(self, other: "PairStats") -> None:
        for name in ("calls", "elements", "equal", "calls_equal", "rows", "row_pairs", "dup_rows"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.box_numel = self.box_numel or other.box_numel
        self.row_len = self.row_len or other.row_len
        self.corr.add(other.corr)


@dataclass
class ShardingStats:
    layout: Layout
    shape: tuple
    boxes: list  # (offsets, local shape) per rank
    rank_seeds: list  # the seed each rank used
    declared_invariant: bool = False
    pairs: list = field(default_factory=list)  # PairStats
    # replicas (Replicate only): rank r > 0 against rank 0
    replica_calls: int = 0
    replica_elements: int = 0
    replica_differing: int = 0
    replica_calls_differing: int = 0
    replica_first: str = ""  # where the first difference was seen
    # the first calls against the unsharded tensor from the same seed
    reference_calls: int = 0
    reference_elements: int = 0
    reference_differing: int = 0
    reference_per_call: list = field(default_factory=list)  # differing elements of each call
    reference_error: str = ""  # why there is no reference (the plain call failed)
    notes: list = field(default_factory=list)

    @property
    def reference_calls_identical(self) -> int:
        return sum(1 for d in self.reference_per_call if d == 0)

    @classmethod
    def merge(cls, parts: list["ShardingStats"]) -> "ShardingStats":
        """One rank's stats per part -> the layout's."""
        first = parts[0]
        out = cls(layout=first.layout, shape=first.shape, boxes=first.boxes,
                  rank_seeds=first.rank_seeds, declared_invariant=first.declared_invariant)
        by_pair: dict = {}
        for p in parts:
            for pair in p.pairs:
                key = (pair.i, pair.j)
                if key not in by_pair:
                    by_pair[key] = PairStats(pair.i, pair.j)
                by_pair[key].add(pair)
            for name in ("replica_calls", "replica_elements", "replica_differing",
                         "replica_calls_differing", "reference_elements", "reference_differing"):
                setattr(out, name, getattr(out, name) + getattr(p, name))
            out.replica_first = out.replica_first or p.replica_first
            out.reference_error = out.reference_error or p.reference_error
            out.reference_calls = max(out.reference_calls, p.reference_calls)
            if len(p.reference_per_call) > len(out.reference_per_call):
                out.reference_per_call += [0] * (len(p.reference_per_call) - len(out.reference_per_call))
            for k, d in enumerate(p.reference_per_call):
                out.reference_per_call[k] += d
            out.notes += [n for n in p.notes if n not in out.notes]
        out.pairs = [by_pair[k] for k in sorted(by_pair)]
        return out


def _ints(x: torch.Tensor) -> torch.Tensor:
    return x.view(INT_VIEW[dtype_bits(x.dtype)])


def _z(x: torch.Tensor, center: float, scale: float) -> torch.Tensor:
    work = torch.float64 if x.dtype == torch.float64 else torch.float32
    z = (x.to(work) - center) * (1.0 / scale)
    return torch.where(torch.isfinite(x), z, torch.zeros((), dtype=work, device=x.device))


def common_box(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The parts of two (calls, *local) batches at the same local index (the smaller extent in
    every dim: uneven shards are compared where both have elements)."""
    sl = (slice(None),) + tuple(slice(0, min(x, y)) for x, y in zip(a.shape[1:], b.shape[1:]))
    return a[sl], b[sl]


def row_hashes(batch: torch.Tensor) -> torch.Tensor:
    """(calls, rows) hashes of the rows (along the last dim) of a (calls, *local) batch; equal rows
    have equal hashes, different ones collide with probability ~2^-64, on a coarse lattice too
    (the elements' bits spread first, as the independence family's row hashes)."""
    m = batch.shape[-1]
    calls = batch.shape[0]
    bits = _ints(batch).reshape(calls, -1, m).to(torch.int64, copy=True)
    return hash_rows(bits, row_hash_coefficients(m, batch.device))


def compare_pair(i: int, j: int, mine: torch.Tensor, theirs: torch.Tensor, center: float,
                 scale: float) -> PairStats:
    """Shard i (`mine`) against shard j (`theirs`), both (calls, *local) of the same calls."""
    calls = mine.shape[0]
    out = PairStats(i, j, calls=calls)
    a, b = common_box(mine, theirs)
    per_call = a[0].numel() if calls else 0
    out.box_numel = per_call
    out.elements = calls * per_call
    if per_call:
        same = _ints(a) == _ints(b)
        out.equal = int(torch.count_nonzero(same))
        out.calls_equal = int(torch.count_nonzero(same.reshape(calls, -1).all(dim=1)))
        za, zb = _z(a, center, scale), _z(b, center, scale)
        out.corr = LagSums(za.numel(), fixed_sum(za), fixed_sum(zb), fixed_sum(za * za),
                           fixed_sum(zb * zb), fixed_sum(za * zb))
    if mine.dim() >= 2 and mine.shape[-1] == theirs.shape[-1] and mine.shape[-1] >= 1 \
            and mine[0].numel() and theirs[0].numel():
        hi, hj = row_hashes(mine), row_hashes(theirs)
        sorted_j, _ = torch.sort(hj, dim=1)
        pos = torch.searchsorted(sorted_j, hi).clamp_(max=sorted_j.shape[1] - 1)
        found = torch.gather(sorted_j, 1, pos) == hi
        out.row_len = int(mine.shape[-1])
        out.rows = int(hi.numel())
        out.row_pairs = int(calls * hi.shape[1] * hj.shape[1])
        out.dup_rows = int(torch.count_nonzero(found))
    return out


def count_differing(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Per call, elements whose bit patterns differ, of two (calls, *shape) batches."""
    calls = a.shape[0]
    if a[0].numel() == 0 if calls else True:
        return torch.zeros(calls, dtype=torch.int64)
    return (_ints(a) != _ints(b)).reshape(calls, -1).sum(dim=1).cpu()


def box_slices(offsets: tuple, local_shape: tuple) -> tuple:
    return tuple(slice(o, o + n) for o, n in zip(offsets, local_shape))


# ------------------------------------------------------------------------------------------------
# The same in one process (self-tests): a whole batch cut into the layout's boxes


def summary_facts(law) -> dict:
    """What `new_summary` reads of a law, as plain data (ranks build their Summary from it)."""
    dist = law.dist
    return {"std": float(law.std), "mean": float(law.mean), "rn_a": float(law.rn_a),
            "rn_b": float(law.rn_b), "dist_std": float(dist.std), "a": float(dist.a),
            "b": float(dist.b)}


class _Facts:
    """Stands in for a law in `new_summary`."""

    def __init__(self, facts: dict):
        self.std, self.mean = facts["std"], facts["mean"]
        self.rn_a, self.rn_b = facts["rn_a"], facts["rn_b"]

        class _D:
            std, a, b = facts["dist_std"], facts["a"], facts["b"]

        self.dist = _D


def part_summary(facts: dict, shape: tuple, dtype: torch.dtype) -> Summary:
    return new_summary(_Facts(facts), tuple(shape), dtype)


def fold_layout(batch: torch.Tensor, law, layout: Layout, *, locals_: list | None = None,
                chunk_calls: int | None = None,
                watch: tuple | None = None) -> tuple[list[Summary], ShardingStats]:
    """Fold a (calls, *shape) batch as the ranks of `layout` would: one part per rank (only rank 0
    for replicate), and the layout's ShardingStats. `locals_` replaces what each rank holds (a
    list of (calls, *local) batches: a sampler that writes different shards, or replicas that
    differ); by default each rank holds its box of `batch`."""
    shape = tuple(batch.shape[1:])
    dtype = batch.dtype
    facts = summary_facts(law)
    bx = boxes(shape, layout)
    if locals_ is None:
        locals_ = [batch[(slice(None),) + box_slices(*b)] for b in bx]
    stats = ShardingStats(layout=layout, shape=shape, boxes=bx,
                          rank_seeds=[0] * layout.world_size)
    calls = batch.shape[0]
    step = chunk_calls or calls
    parts = []
    folders = []
    for r, (offsets, local) in enumerate(bx):
        if not is_sharded(layout) and r > 0:
            break
        s = part_summary(facts, shape, dtype)
        folders.append(PartFold(s, dtype, batch.device, offsets, local, layout.shard_dim,
                                law=law, watch=watch))
    pairs = comparison_pairs(layout, shape)
    for start in range(0, calls, step):
        sl = slice(start, min(calls, start + step))
        for r, folder in enumerate(folders):
            halo = None
            if (r - 1, r) in pairs:
                d = layout.shard_dim
                prev = locals_[r - 1][sl]
                halo = prev.select(d + 1, prev.shape[d + 1] - 1)
            folder.fold(locals_[r][sl], halo=halo)
        for i, j in pairs:
            stats.pairs.append(compare_pair(i, j, locals_[i][sl], locals_[j][sl], law.mean,
                                            standard_scale(law)))
        if layout.placement == "replicate":
            for r in range(1, layout.world_size):
                diff = count_differing(locals_[r][sl], locals_[0][sl])
                record_replicas(stats, r, start, diff, locals_[r][0].numel())
    parts = [f.finish() for f in folders]
    return parts, ShardingStats.merge([stats])


def record_replicas(stats: ShardingStats, rank: int, first_call: int, differing: torch.Tensor,
                    numel: int) -> None:
    """Add one rank's per-call differing counts against rank 0 (calls from `first_call` on)."""
    diff = differing.tolist()
    stats.replica_calls += len(diff)
    stats.replica_elements += len(diff) * numel
    stats.replica_differing += int(sum(diff))
    bad = [k for k, d in enumerate(diff) if d]
    stats.replica_calls_differing += len(bad)
    if bad and not stats.replica_first:
        k = bad[0]
        stats.replica_first = (f"rank {rank}, call {first_call + k + 1}: {diff[k]} of {numel} "
                               f"elements differ from rank 0")
