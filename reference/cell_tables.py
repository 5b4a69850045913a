"""Per-format tables of rounding cells, built once per process and shared by every law of the
format: the cells of every finite value of a <=16-bit format (`finite_cells`), the X-interval and
spacing of every main histogram bin of a 32/64-bit one (`hist_cells`), and where the bins of one
spacing run (`main_layout`)."""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np

from .dtypes import FloatFormat

__all__ = ["MainLayout", "finite_cells", "hist_cells", "main_layout"]


@functools.lru_cache(maxsize=None)
def finite_cells(fmt: FloatFormat, via_float32: bool):
    """Every finite lattice value of a <=16-bit format in key order, with its cell edges."""
    klo, khi = fmt.finite_key_range
    keys = np.arange(klo, khi + 1, dtype=np.uint64)
    vals = fmt.values_from_keys(keys)
    keep = ~np.isnan(vals)  # the fnuz NaN sits inside the finite key range
    keys, vals = keys[keep], vals[keep]
    lo, hi = fmt.cell_edges(vals, via_float32)
    for arr in (keys, vals, lo, hi):
        arr.setflags(write=False)
    return keys, vals, lo, hi


@functools.lru_cache(maxsize=None)
def hist_cells(fmt: FloatFormat):
    """X-interval [lo, hi] covered by each histogram bin's finite values, and the bin's lattice
    spacing (NaN where the bin has no finite value); for the 32/64-bit formats, whose finite keys
    are one contiguous range and whose bins each lie inside one binade."""
    shift = np.uint64(fmt.bits - fmt.hist_bits)
    first = np.arange(1 << fmt.hist_bits, dtype=np.uint64) << shift
    klo, khi = (np.uint64(k) for k in fmt.finite_key_range)
    kl = np.maximum(first, klo)
    kh = np.minimum(first + ((np.uint64(1) << shift) - np.uint64(1)), khi)
    empty = kl > kh
    kl = np.where(empty, klo, kl)
    v = fmt.values_from_keys(kl)
    below = fmt.values_from_keys(np.maximum(kl, klo + np.uint64(1)) - np.uint64(1))
    # Adjacent bins share an edge: the midpoint below a bin's first value is the top of the bin
    # below.
    edge = below + (v - below) * 0.5
    outer = fmt.overflow_threshold
    lo = np.where(kl == klo, -outer, edge)
    hi = np.append(lo[1:], outer)
    hi = np.where(kh == khi, outer, hi)
    spacing = fmt.spacing(v)
    lo, hi, spacing = (np.where(empty, np.nan, x) for x in (lo, hi, spacing))
    for arr in (lo, hi, spacing):
        arr.setflags(write=False)
    return lo, hi, spacing


class MainLayout(NamedTuple):
    """Where a 32/64-bit format's main bins lie (`main_layout`)."""

    v_first: np.ndarray  # each bin's first finite value (NaN where none)
    splittable: np.ndarray  # bool: the bin holds finite values (a mass bin may cut it)
    f0: int  # the first bin with a finite value
    f1: int  # the last one
    run_starts: np.ndarray  # the first bin of every run of bins of one spacing in [f0, f1]


@functools.lru_cache(maxsize=None)
def main_layout(fmt: FloatFormat) -> MainLayout:
    """Per format (32/64-bit): the main bins' first finite values, which bins can be split (finite
    values only), the finite bin range [f0, f1], and the first bin of every run of bins of equal
    spacing inside it (runs of bins of one binade; the subnormals join the smallest normals)."""
    lo, hi, spacing = hist_cells(fmt)
    v_first = fmt.hist_bin_bounds()[0]
    splittable = ~np.isnan(v_first)
    fin = np.flatnonzero(~np.isnan(lo))
    f0, f1 = int(fin[0]), int(fin[-1])
    h = spacing[f0:f1 + 1]
    run_starts = f0 + np.concatenate([[0], np.flatnonzero(h[1:] != h[:-1]) + 1])
    for arr in (splittable, run_starts):
        arr.setflags(write=False)
    return MainLayout(v_first, splittable, f0, f1, run_starts)
