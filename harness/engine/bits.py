"""The tensor a candidate fills and its bits: how the tensor of a case is made (contiguous,
channels_last, or a view of a bigger base), the integer view of each float width, and the poison
written before every call so that elements a candidate never wrote show
(`harness.key_bins.POISON_PATTERNS`)."""

from __future__ import annotations

import torch

from reference.dtypes import dtype_name

from ..key_bins import poison_pattern

INT_VIEW = {8: torch.int8, 16: torch.int16, 32: torch.int32, 64: torch.int64}


def dtype_bits(dtype: torch.dtype) -> int:
    return torch.finfo(dtype).bits


def hist_bits_for(dtype: torch.dtype) -> int:
    bits = dtype_bits(dtype)
    return bits if bits <= 16 else 20


def poison_value(dtype: torch.dtype) -> int:
    """The poison bit pattern as the signed integer of the dtype's width."""
    return poison_pattern(dtype_name(dtype))


def poison_(tensor: torch.Tensor) -> torch.Tensor:
    """Fill with the poison pattern (works for non-contiguous views too)."""
    bits = dtype_bits(tensor.dtype)
    tensor.view(INT_VIEW[bits]).fill_(poison_value(tensor.dtype))
    return tensor


#: How the base of a view is made from the view's shape (rows, cols): the view's place in it.
VIEWS = ("", "channels_last", "transposed", "stepped", "column-block")


def make_target(case, dtype: torch.dtype, device) -> tuple[torch.Tensor, torch.Tensor, tuple]:
    """(the tensor the candidate fills, the base it is part of, the base's other elements as
    strided views) for `case` (`Case.view`): a new contiguous tensor (its own base), a
    channels_last one, or a view of a bigger base: the transpose of a (cols, rows) tensor (all of
    it), every other column of a (rows, 2 cols) tensor, or the second block of columns of a
    (rows, 4 cols) tensor. Poisoning the base before each call shows both what the candidate did
    not write and, in the other elements, what it wrote outside the view."""
    shape, view = tuple(case.shape), getattr(case, "view", "")
    if view not in VIEWS:
        raise ValueError(f"unknown view {view!r}; known: {', '.join(v or 'plain' for v in VIEWS)}")
    if view == "":
        t = torch.empty(shape, dtype=dtype, device=device)
        return t, t, ()
    if view == "channels_last":
        t = torch.empty(shape, dtype=dtype, device=device, memory_format=torch.channels_last)
        return t, t, ()
    rows, cols = shape
    if view == "transposed":
        base = torch.empty((cols, rows), dtype=dtype, device=device)
        return base.t(), base, ()
    if view == "stepped":
        base = torch.empty((rows, 2 * cols), dtype=dtype, device=device)
        return base[:, ::2], base, (base[:, 1::2],)
    base = torch.empty((rows, 4 * cols), dtype=dtype, device=device)
    return base[:, cols:2 * cols], base, (base[:, :cols], base[:, 2 * cols:])
