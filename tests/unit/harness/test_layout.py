"""Layouts as arithmetic: the boxes are torch.chunk's split (real DTensors agree: see
tests/unit/harness/test_distributed.py), global row and element indices, labels, pairs, rank seeds."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from harness.sharded.layout import (PLACEMENTS, Layout, boxes, chunk_sizes, comparison_pairs,
                            global_flat_index, global_row_ids, layout_applicable,
                            rank_seed)


@pytest.mark.parametrize("size", [0, 1, 2, 5, 6, 7, 10, 144, 256, 500])
@pytest.mark.parametrize("world", [1, 2, 3, 4, 8])
def test_chunk_sizes_are_torch_chunk_padded_with_empty_chunks(size, world):
    chunks = [c.numel() for c in torch.arange(size).chunk(world)] if size else []
    assert chunk_sizes(size, world) == chunks + [0] * (world - len(chunks))


@pytest.mark.parametrize("layout", [Layout(w, p) for w in (1, 2, 3, 4) for p in PLACEMENTS],
                         ids=lambda l: l.label)
@pytest.mark.parametrize("shape", [(10, 7), (1, 144, 64), (8, 6)])
def test_boxes_tile_the_tensor_and_indices_are_global(shape, layout):
    whole = torch.arange(int(np.prod(shape))).reshape(shape)
    seen = []
    for offsets, local in boxes(shape, layout):
        part = whole[tuple(slice(o, o + n) for o, n in zip(offsets, local))]
        assert tuple(part.shape) == local
        flat = global_flat_index(shape, offsets, local)
        assert np.array_equal(flat, part.reshape(-1).numpy())
        rows = global_row_ids(shape, offsets, local)
        if part.numel():
            assert np.array_equal(rows, (part[..., 0] // shape[-1]).reshape(-1).numpy())
        seen.append(flat)
    allidx = np.concatenate(seen)
    if layout.placement == "replicate":
        assert np.array_equal(np.sort(allidx), np.sort(np.tile(np.arange(whole.numel()), layout.world_size)))
    else:
        assert np.array_equal(np.sort(allidx), np.arange(whole.numel()))


def test_labels_pairs_and_seeds():
    layouts = [Layout(w, p, r) for w in (2, 4) for p in PLACEMENTS for r in ("same", "per-rank")]
    assert len({layout.label for layout in layouts}) == len(layouts)  # a label names one layout
    assert Layout(2, "shard0").label == "w2-shard0"
    assert Layout(4, "replicate", "per-rank").label == "w4-replicate-perrank"
    with pytest.raises(ValueError):
        Layout(2, "shard9")
    # 1 row over 4 ranks: only rank 0 holds it, nothing to compare
    assert comparison_pairs(Layout(4, "shard0"), (1, 144, 64)) == []
    assert comparison_pairs(Layout(4, "shard0"), (10, 5)) == [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
    assert comparison_pairs(Layout(2, "replicate"), (8, 6)) == []
    assert layout_applicable((8,), Layout(2, "shard1"))
    assert layout_applicable((8, 6), Layout(2, "shard1")) is None
    same = Layout(4, "shard0")
    assert {rank_seed(7, same, r) for r in range(4)} == {7}
    per = Layout(4, "shard0", "per-rank")
    seeds = [rank_seed(7, per, r) for r in range(4)]
    assert seeds[0] == 7 and len(set(seeds)) == 4
