"""Sharded-parameter layouts: which part of the whole tensor each rank holds, as plain arithmetic.

A `Layout` is one (world size, placement, rank seeding) of a parameter sharded the way FSDP2 and
tensor parallelism hold it: a 1-D DeviceMesh of W ranks and one placement, ``shard0`` / ``shard1``
(`Shard(dim)`: the tensor cut along that dim) or ``replicate`` (every rank holds all of it). Rank
seeding ``same`` is how training scripts seed (every rank ``torch.manual_seed(s)``); ``per-rank``
is the variant where each rank gets its own seed (rank 0 keeps s, so a sharding-invariant sampler
that takes its stream from rank 0 still reproduces the unsharded tensor).

Everything here is pure (no torch.distributed): the boxes follow DTensor's own split, which is
``torch.chunk``'s (chunks of ceil(size / W), empty ones at the end: 10 rows over 4 ranks are
3, 3, 3, 1; 1 row over 2 ranks is 1, 0): tests/unit/harness/test_layout.py checks them against torch.chunk,
tests/unit/harness/test_distributed.py against the local shapes and offsets of real DTensors. `harness.sharded.ranks` runs layouts; `harness.sharded.part_fold` folds
each rank's box into a part of the engine's Summary.

Names (part of test ids, case labels and report rows; never rename): a layout's label is
``w<W>-<placement>`` plus ``-perrank`` for per-rank seeds, e.g. ``w2-shard0``; a sharded case
group is ``<candidate>-<case>-<dtype>-<device>-<label>`` and its case label in reports
``<case>@<label>``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..seeds import derive_seed

PLACEMENTS = ("shard0", "shard1", "replicate")
RANK_SEEDS = ("same", "per-rank")
#: The suffix a per-rank-seeded layout's label carries.
PER_RANK_SUFFIX = "-perrank"


@dataclass(frozen=True)
class Layout:
    world_size: int
    placement: str  # one of PLACEMENTS
    rank_seeds: str = "same"  # one of RANK_SEEDS

    def __post_init__(self) -> None:
        if self.world_size < 1:
            raise ValueError(f"world size must be >= 1, got {self.world_size}")
        if self.placement not in PLACEMENTS:
            raise ValueError(f"unknown placement {self.placement!r}; known: {', '.join(PLACEMENTS)}")
        if self.rank_seeds not in RANK_SEEDS:
            raise ValueError(f"unknown rank seeding {self.rank_seeds!r}; known: {', '.join(RANK_SEEDS)}")

    @property
    def label(self) -> str:
        suffix = PER_RANK_SUFFIX if self.rank_seeds == "per-rank" else ""
        return f"w{self.world_size}-{self.placement}{suffix}"

    @property
    def shard_dim(self) -> int | None:
        """The dim the tensor is cut along (None for replicate)."""
        return int(self.placement[len("shard"):]) if self.placement.startswith("shard") else None


def chunk_sizes(size: int, world_size: int) -> list[int]:
    """Sizes along a sharded dim, rank by rank: torch.chunk's split, padded with empty chunks."""
    if world_size < 1:
        raise ValueError("world size must be >= 1")
    step = math.ceil(size / world_size) if size else 0
    sizes = []
    left = size
    for _ in range(world_size):
        take = min(step, left)
        sizes.append(take)
        left -= take
    return sizes


def local_box(shape: tuple, layout: Layout, rank: int) -> tuple[tuple, tuple]:
    """(global offsets, local shape) of what `rank` holds of a tensor of `shape`."""
    shape = tuple(int(s) for s in shape)
    offsets = [0] * len(shape)
    local = list(shape)
    dim = layout.shard_dim
    if dim is not None:
        if dim >= len(shape):
            raise ValueError(f"placement {layout.placement} needs a tensor of at least {dim + 1} "
                             f"dims, got shape {shape}")
        sizes = chunk_sizes(shape[dim], layout.world_size)
        offsets[dim] = sum(sizes[:rank])
        local[dim] = sizes[rank]
    return tuple(offsets), tuple(local)


def boxes(shape: tuple, layout: Layout) -> list[tuple[tuple, tuple]]:
    return [local_box(shape, layout, r) for r in range(layout.world_size)]


def is_sharded(layout: Layout) -> bool:
    return layout.shard_dim is not None and layout.world_size > 1


def layout_applicable(shape: tuple, layout: Layout) -> str | None:
    """Why a case's tensor cannot take this layout (None when it can)."""
    dim = layout.shard_dim
    if dim is not None and dim >= len(shape):
        return (f"placement {layout.placement} cuts dim {dim}, the tensor of shape "
                f"{'x'.join(map(str, shape))} has {len(shape)} dims")
    return None


def global_row_ids(shape: tuple, offsets: tuple, local_shape: tuple) -> np.ndarray:
    """Global row index (rows: slices along the last dim, row-major over the leading dims) of each
    local row of the box, in the box's own row-major order."""
    lead = tuple(shape[:-1])
    if not lead:
        return np.zeros(1 if local_shape and local_shape[-1] else 0, dtype=np.int64)
    grids = np.meshgrid(*[np.arange(o, o + n, dtype=np.int64)
                          for o, n in zip(offsets[:-1], local_shape[:-1])], indexing="ij")
    if not grids or any(g.size == 0 for g in grids):
        return np.zeros(0, dtype=np.int64)
    return np.ravel_multi_index(tuple(g.ravel() for g in grids), lead).astype(np.int64)


def global_flat_index(shape: tuple, offsets: tuple, local_shape: tuple) -> np.ndarray:
    """Row-major flat index in the whole tensor of every element of the box (box row-major)."""
    if math.prod(local_shape) == 0:
        return np.zeros(0, dtype=np.int64)
    if not shape:
        return np.zeros(1, dtype=np.int64)
    grids = np.meshgrid(*[np.arange(o, o + n, dtype=np.int64)
                          for o, n in zip(offsets, local_shape)], indexing="ij")
    return np.ravel_multi_index(tuple(g.ravel() for g in grids), tuple(shape)).astype(np.int64)


def rank_seed(seed: int, layout: Layout, rank: int) -> int:
    """The seed rank `rank` uses: the run's for every rank (``same``), else rank 0 the run's and
    each other rank its own, derived from it."""
    if layout.rank_seeds == "same" or rank == 0:
        return int(seed)
    return derive_seed(int(seed) % (1 << 63), "rank", rank)


def comparison_pairs(layout: Layout, shape: tuple) -> list[tuple[int, int]]:
    """Rank pairs (i, j), i < j, whose shards `shards` compares: every pair of non-empty shards of
    a Shard placement (rank i sends its shard to rank j, which compares). Empty for replicate."""
    if not is_sharded(layout):
        return []
    held = [r for r, (_, local) in enumerate(boxes(shape, layout)) if math.prod(local) > 0]
    return [(i, j) for k, i in enumerate(held) for j in held[k + 1:]]
