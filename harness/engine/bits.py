"""Bit-level views of a tensor: the integer view of each float width, and the poison written before
every call so that elements a candidate never wrote show (`harness.bins.POISON_PATTERNS`)."""

from __future__ import annotations

import torch

from reference.dtypes import dtype_name

from ..bins import poison_pattern

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
