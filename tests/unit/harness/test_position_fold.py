"""The position family's fold: its classes are arithmetic on the flat index, and what it counts
is what a table of every element's flat index counts, for every shape and layout; its state does
not grow with the shape.

The reference here is the table method the fold once used (every class as an array of flat
indices, the batch gathered through them), kept in this file only: it costs an int64 per element
of the shape, which is fine for the small shapes it is run on.
"""

from __future__ import annotations

import functools
import time
import tracemalloc

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.key_bins import ROW_TAIL_WIDTHS, TAIL_WIDTHS, position_bins, position_classes
from harness.engine import Fold, new_summary, summarize_samples
from harness.families import position
from reference import TruncatedNormal, rounded_law

DTYPES = (torch.bfloat16, torch.float32, torch.float64)


@functools.lru_cache(maxsize=None)
def _law(dtype):
    return rounded_law(TruncatedNormal(0.0, 1.0, -2.0, 2.0), dtype)


def _table_classes(shape: tuple) -> list[tuple[str, np.ndarray]]:
    """The classes as arrays of flat row-major indices (the table method)."""
    numel = int(np.prod(shape)) if len(shape) else 1
    if numel < 2:
        return []
    row = int(shape[-1]) if len(shape) else 1
    flat = np.arange(numel, dtype=np.int64)
    col = flat % max(1, row)
    candidates = [("first", flat[:1]), ("last", flat[-1:])]
    candidates += [(f"tail-{w}", flat[numel - numel % w:]) for w in TAIL_WIDTHS]
    if numel > row > 1:
        candidates += [("row-first", flat[col == 0]), ("row-last", flat[col == row - 1])]
        candidates += [(f"row-tail-{w}", flat[col >= row - row % w]) for w in ROW_TAIL_WIDTHS]
    out, seen = [], set()
    for name, idx in candidates:
        key = (idx.size, int(idx[0]) if idx.size else -1, int(idx[-1]) if idx.size else -1)
        if 0 < idx.size < numel and key not in seen:
            seen.add(key)
            out.append((name, idx))
    return out


def _table_counts(batch: torch.Tensor, shape: tuple, law) -> tuple[tuple, np.ndarray]:
    """(class names, int64[classes, groups]) by the table method."""
    classes = _table_classes(shape)
    edges, masses = position_bins(law)
    edge_dtype = torch.float64 if batch.dtype == torch.float64 else torch.float32
    edges = torch.as_tensor(edges, dtype=edge_dtype)
    flat = batch.reshape(batch.shape[0], -1)
    counts = np.zeros((len(classes), masses.size), dtype=np.int64)
    for c, (_, idx) in enumerate(classes):
        values = flat.index_select(1, torch.as_tensor(idx)).to(edge_dtype).reshape(-1)
        counts[c] = torch.bincount(torch.searchsorted(edges, values),
                                   minlength=masses.size).numpy()
    return tuple(name for name, _ in classes), counts


def _members(cls, shape: tuple) -> np.ndarray:
    """The flat indices a class's arithmetic names (small shapes only)."""
    numel = int(np.prod(shape))
    flat = np.arange(numel, dtype=np.int64)
    if cls.flat is not None:
        keep = (flat >= cls.flat[0]) & (flat < cls.flat[1])
    else:
        col = flat % int(shape[-1])
        keep = (col >= cls.cols[0]) & (col < cls.cols[1])
    return flat[keep]


def _batch(shape: tuple, calls: int, dtype, seed: int) -> torch.Tensor:
    """(calls, *shape) values of the law, with a few beyond the bounds, NaN and infinities (they
    are counted in the first or last group, and must be counted the same way)."""
    law = _law(dtype)
    rng = np.random.default_rng(seed)
    numel = calls * int(np.prod(shape)) if len(shape) else calls
    x = law.fmt.round(law.dist.ppf(rng.random(numel)))
    odd = rng.random(numel) < 0.02
    x[odd] = rng.choice([np.nan, np.inf, -np.inf, 3.0, -3.0], size=int(odd.sum()))
    return torch.from_numpy(x).to(dtype).reshape(calls, *shape)


def _folded(batch: torch.Tensor, shape: tuple, law, pieces: int = 1):
    """The position state of `batch` folded in `pieces` chunks of calls (None: no classes)."""
    fold = Fold(new_summary(law, shape, batch.dtype), batch.dtype, "cpu", law,
                families=(position.FAMILY,))
    for part in torch.tensor_split(batch, pieces):
        fold.fold(part)
    return fold.finish().states.get(position.FAMILY.name)


def _assert_same(shape: tuple, dtype, calls: int = 3, seed: int = 0, layout=None) -> None:
    law = _law(dtype)
    batch = _batch(shape, calls, dtype, seed)
    names, want = _table_counts(batch, shape, law)
    if layout is not None:
        batch = layout(batch)
    state = _folded(batch, shape, law, pieces=min(2, calls))
    if not names:
        assert state is None
        return
    assert state.classes == names
    assert np.asarray(state.counts).dtype == np.int64
    np.testing.assert_array_equal(state.counts, want)


SHAPES = [(), (1,), (1, 1), (2,), (3,), (31,), (33,), (61, 67), (7, 1), (1, 33), (33, 1),
          (2, 2), (5, 40), (3, 5, 7), (4, 9, 8), (2, 3, 1, 65), (384, 256), (64, 3, 7, 7),
          (11, 32), (17, 8), (9, 39)]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)) or "scalar")
def test_classes_are_the_table_classes(shape):
    """Names, order, sizes and members of every class, as the table of flat indices has them."""
    table = _table_classes(shape)
    classes = position_classes(shape)
    assert [c.name for c in classes] == [name for name, _ in table]
    for cls, (_, idx) in zip(classes, table):
        assert cls.size == idx.size
        np.testing.assert_array_equal(_members(cls, shape), idx)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)) or "scalar")
def test_counts_are_the_table_counts(shape, dtype):
    _assert_same(shape, dtype)


def _channels_last(batch):
    # each call stored as a channels_last tensor: (N, H, W, C) in memory
    return batch.permute(0, 1, 3, 4, 2).contiguous().permute(0, 1, 4, 2, 3)


def _transposed(batch):
    # the same logical values, stored column-major in each call
    return batch.transpose(1, 2).contiguous().transpose(1, 2)


def _stepped(batch):
    # every other column of a wider base
    base = torch.empty(*batch.shape[:-1], 2 * batch.shape[-1], dtype=batch.dtype)
    base[..., ::2] = batch
    return base[..., ::2]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape, layout", [((64, 3, 7, 7), _channels_last),
                                           ((2, 3, 5, 3), _channels_last),
                                           ((384, 256), _transposed), ((61, 67), _transposed),
                                           ((61, 67), _stepped), ((5, 3), _stepped)],
                         ids=["64x3x7x7-cl", "2x3x5x3-cl", "transposed", "61x67-t",
                              "61x67-stepped", "5x3-stepped"])
def test_counts_do_not_depend_on_the_layout(shape, layout, dtype):
    """A batch whose calls are not stored in row-major order is counted by logical position."""
    _assert_same(shape, dtype, layout=layout)


@settings(max_examples=150, deadline=None)
@given(shape=st.lists(st.integers(1, 40), min_size=0, max_size=4).filter(
           lambda s: int(np.prod(s)) <= 4096).map(tuple),
       calls=st.integers(1, 3), seed=st.integers(0, 2**16),
       dtype=st.sampled_from(DTYPES))
def test_counts_are_the_table_counts_for_any_shape(shape, calls, seed, dtype):
    _assert_same(shape, dtype, calls=calls, seed=seed)


def test_summarize_samples_keeps_the_table_counts():
    """Through the engine's own entry point, beside the other families."""
    from harness.checks import summarize_samples as summarize_all

    shape, dtype = (61, 67), torch.bfloat16
    law = _law(dtype)
    batch = _batch(shape, 4, dtype, 5)
    names, want = _table_counts(batch, shape, law)
    state = summarize_all(batch, law, shape).states[position.FAMILY.name]
    assert state.classes == names
    np.testing.assert_array_equal(state.counts, want)
    state = summarize_samples(batch, law, (position.FAMILY,), shape).states[position.FAMILY.name]
    np.testing.assert_array_equal(state.counts, want)


def _held(obj, seen=None) -> int:
    """Elements of every tensor and array an object holds (through its attributes, lists,
    tuples and dicts)."""
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return 0
    seen.add(id(obj))
    if isinstance(obj, (torch.Tensor, np.ndarray)):
        return int(obj.numel() if isinstance(obj, torch.Tensor) else obj.size)
    if isinstance(obj, dict):
        return sum(_held(v, seen) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(_held(v, seen) for v in obj)
    if hasattr(obj, "__dict__") and type(obj).__module__.startswith("harness.families"):
        return sum(_held(v, seen) for v in vars(obj).values())
    return 0


@pytest.mark.parametrize("shape", [(1 << 15, 1 << 15), ((1 << 31) + 1,), (151936, 4096),
                                   (1 << 10, 1 << 10, 1 << 10)],
                         ids=["2^15x2^15", "2^31+1", "151936x4096", "2^10x2^10x2^10"])
def test_a_huge_shape_starts_in_constant_memory(shape):
    """start holds nothing the size of the shape: its classes are arithmetic, its state
    int64[classes, groups] (a table of flat indices was 8 GiB at 2^30 elements)."""
    dtype = torch.bfloat16
    law = _law(dtype)
    position_bins(law)  # the law's own bins, computed before memory is measured
    summary = new_summary(law, shape, dtype)
    tracemalloc.start()
    try:
        began = time.perf_counter()
        fold = Fold(summary, dtype, "cpu", law, families=(position.FAMILY,))
        took = time.perf_counter() - began
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    accumulator = fold.accumulator(position.FAMILY.name)
    assert accumulator is not None
    assert peak < 1 << 20, peak  # numpy's allocations: a table of the shape would be GiBs
    assert _held(accumulator) < 4096  # torch's: edges, < 32 indices per run, counts
    assert took < 5.0, took
    assert tuple(accumulator.counts.shape) == (len(accumulator.classes), accumulator.groups)
    # and the position check's MDE, which sizes the same classes, is as cheap
    assert np.isfinite(position.position_mde(law, 1 << 42, shape, 1e-3))
