"""The engine's batched fixed-order sums: `fixed_sums` and `fixed_sum_each` give, bit for bit, the
`fixed_sum` of each row or tensor they sum together, whatever the layout and the thread count
(the independence family's sums, and so the Summary, must not change with how they are taken)."""

from __future__ import annotations

import pytest
import torch

from harness.engine import fixed_sum, fixed_sum_each
from harness.engine.fold import fixed_sums, flat_view_is_strided

#: Shapes of one call, as the grid and the shape classes fill them (rows, columns, channels).
SHAPES = [(256, 256), (10, 500), (1, 144, 64), (3, 5, 5), (61, 67), (7,), ()]
#: Row lengths around the 4096-element block: empty, tails only, whole blocks, both.
LENGTHS = [0, 1, 3, 4, 5, 17, 4095, 4096, 4097, 3 * 4096 + 5, 65280, 65536]


def _bits(values) -> list[str]:
    return [float(v).hex() for v in values]


@pytest.fixture(params=[1, 2], ids=lambda n: f"{n}-threads")
def threads(request):
    before = torch.get_num_threads()
    torch.set_num_threads(request.param)
    yield request.param
    torch.set_num_threads(before)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_fixed_sums_are_each_rows_fixed_sum(dtype, threads):
    g = torch.Generator().manual_seed(11)
    for length in LENGTHS:
        for n_rows in (1, 2, 4, 5):
            rows = (torch.randn(n_rows, length, generator=g, dtype=torch.float64) * 1e3).to(dtype)
            if n_rows > 1:
                rows[1] = -0.0  # a row of negative zeros sums to -0.0, not +0.0
            assert _bits(fixed_sums(rows)) == _bits(fixed_sum(row) for row in rows)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_end_slices_sum_as_fixed_sum_sums_them(shape, dtype, threads):
    """The first and last slice along every dim of a batch of calls, of the batch and of its
    square, contiguous (dim 0), copied by reshape (inner dims) or strided views (the last dim),
    of a plain batch and of a transposed one: the sums of `fixed_sum_each` are those of
    `fixed_sum`, with and without a scratch tensor."""
    g = torch.Generator().manual_seed(12)
    for calls in (1, 2, 3, 14, 16):
        plain = torch.randn((calls, *shape), generator=g, dtype=dtype)
        transposed = torch.randn((calls, *shape[::-1]), generator=g, dtype=dtype).permute(
            0, *range(len(shape), 0, -1))
        for z in (plain, transposed):
            z2 = z * z
            for dim in range(z.dim()):
                last = z.shape[dim] - 1
                ends = (z.select(dim, last), z.select(dim, 0), z2.select(dim, last),
                        z2.select(dim, 0))
                want = _bits(fixed_sum(t) for t in ends)
                scratch = torch.empty(4 * ends[0].numel(), dtype=dtype)
                assert _bits(fixed_sum_each(ends)) == want
                assert _bits(fixed_sum_each(ends, scratch)) == want


@pytest.mark.parametrize("shape", SHAPES + [(4, 1, 6), (1, 1, 8)], ids=str)
def test_a_strided_flat_view_is_told_apart(shape):
    """`flat_view_is_strided` says whether reshape(-1) is a view with a step other than 1."""
    t = torch.zeros((3, *shape))
    for dim in range(t.dim()):
        for part in (t.select(dim, 0), t.narrow(dim, 0, 1), t.transpose(0, dim)):
            flat = part.reshape(-1)
            is_view = flat.data_ptr() == part.data_ptr() and part.numel() > 1
            assert flat_view_is_strided(part) == (is_view and not flat.is_contiguous())
