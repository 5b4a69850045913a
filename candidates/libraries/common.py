"""What every library adapter shares: finding the library without importing it, seeds from the
harness's generator, bit-exact copies of a library's array into a torch tensor, and the
capability rules (``expresses`` hooks) of samplers that cannot take arbitrary bounds.

Seeds: an adapter draws a fresh seed from the harness's ``torch.Generator`` on every call
(`draw_seed`), so successive calls differ, the generator advances as it would with a torch
sampler, and the same harness seed reproduces the same bits. The library's global RNG is never
left to chance.

Bits: the library is asked for the output dtype itself (never float32-then-cast by the adapter),
and its array is reinterpreted, not converted: `to_torch` refuses an array whose dtype is not the
one asked for, so a library that silently answers in another dtype fails instead of being
rounded by the adapter.

`common` names the shared module of its package, here the library adapters', as
`harness.families.common` is the statistic families'.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util

import numpy as np
import torch

from candidates.protocol import draw_seed
from reference.dtypes import dtype_name

__all__ = [
    "distribution_version",
    "missing_reason",
    "draw_seed",
    "to_torch",
    "fixed_two_sigma",
    "zero_mean",
    "LibraryError",
]

_NUMPY_BITS = {"float64": np.uint64, "float32": np.uint32, "float16": np.uint16, "bfloat16": np.uint16}


class LibraryError(RuntimeError):
    """A library call failed somewhere the original exception cannot travel (a child process);
    the message names the library and the original exception type."""


def distribution_version(*dists: str) -> str:
    """The installed version of the first distribution found (no import), else "not installed"."""
    for dist in dists:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return "not installed"


def missing_reason(module: str, install: str) -> str | None:
    """None when ``module`` can be imported, else one line naming what to pip install.

    Only looks for the module (importlib.util.find_spec): importing a library costs seconds and
    must happen in the process that draws, not in every process that lists candidates."""
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        found = False
    if found:
        return None
    return (f"library {module!r} is not installed: pip install {install} "
            "(or pip install -r requirements-libraries.txt -c constraints.txt)")


def to_torch(array, dtype: torch.dtype, shape: tuple, library: str) -> torch.Tensor:
    """The library's array as a torch tensor of ``dtype``, bit for bit (a copy, on the CPU).

    ``array`` is anything numpy can view without converting (a numpy array, or ml_dtypes'
    bfloat16 array; jax and TF arrays convert through np.asarray without changing bits).
    A dtype other than the one asked for raises TypeError: the adapter never casts for the library.
    """
    arr = np.asarray(array)
    want = dtype_name(dtype)
    if arr.dtype.name != want and not (want == "bfloat16" and arr.dtype == np.uint16):
        raise TypeError(f"{library} returned {arr.dtype.name} when asked for {want}")
    if tuple(arr.shape) != tuple(shape):
        raise TypeError(f"{library} returned shape {tuple(arr.shape)} when asked for {tuple(shape)}")
    if not arr.flags.c_contiguous:
        arr = arr.copy(order="C")  # (np.ascontiguousarray would turn a 0-d array into 1-d)
    bits = arr.view(_NUMPY_BITS[want])
    # torch has no unsigned 16/32/64-bit views everywhere: reinterpret as signed of the same width.
    signed = bits.view(np.dtype(f"int{bits.dtype.itemsize * 8}"))
    return torch.from_numpy(signed.copy()).view(dtype)


def fixed_two_sigma(mean: float, std: float, a: float, b: float) -> str | None:
    """`expresses` hook of a sampler that only draws on [mean - 2 std, mean + 2 std].

    Exact float comparison: a case is this sampler's only when its bounds are exactly
    mean ± 2·std (normal-2sigma, vit-pos-embed, tiny-std, large-mean in the grid). Anything else
    (other bounds, or a std/mean for which mean ± 2·std is not [a, b]) cannot be asked for."""
    try:
        lo, hi = float(mean) - 2.0 * float(std), float(mean) + 2.0 * float(std)
    except (TypeError, ValueError):
        return "bounds are fixed at mean ± 2 std"
    if lo == float(a) and hi == float(b):
        return None
    return (f"bounds are fixed at mean ± 2 std = [{lo:.6g}, {hi:.6g}], "
            f"the case asks for [{float(a):.6g}, {float(b):.6g}]")


def zero_mean(mean: float, std: float, a: float, b: float) -> str | None:
    """`expresses` hook of a sampler with no mean parameter (its output is centred at 0)."""
    m = float(mean)
    if m == 0.0:
        return None
    return f"the sampler has no mean parameter (always 0), the case asks for mean {m:.6g}"
