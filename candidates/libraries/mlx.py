"""Adapter for MLX's truncated normal: ``mlx``.

``mlx.core.random.truncated_normal(lower, upper, shape, dtype, key)`` draws a *standard* truncated
normal on (lower, upper), bounds in σ units. Like JAX's it has no mean/std parameter, so the
adapter does what an MLX user does after it: ``x * std + mean`` in the output dtype (Python
floats are weakly typed in MLX: the arithmetic stays in the dtype). Bounds: (a - mean) / std and
(b - mean) / std in float64, infinite bounds stay infinite.

What MLX computes (``mlx/random.cpp``, 0.32; the harness judges the result): the bounds are cast
to the output dtype, ``erf(bound / sqrt 2)`` gives the uniform's range [l, u), a uniform is drawn
*in the output dtype* (32 random bits divided by 2^32 - 1, capped just below 1, cast to the dtype,
then ``l + (u - l) * v`` in the dtype), and the result is ``sqrt 2 * erfinv(v)``, clipped to the
bounds. That is torch ≤ 2.11's algorithm: in bfloat16 with bounds at ±100σ, ``l + (u - l) * v``
rounds to exactly -1 for about 1 draw in 1 000, ``erfinv(-1) = -inf`` and the clip writes the
lower bound; it rounds to exactly 0 for about 3 in 1 000 (an atom at the mean); and the top
uniform value below 1 caps the upper tail at ~2.7σ.

The key is ``mx.random.key(seed)`` with a fresh 63-bit seed drawn from the harness's generator
on every call; the array is copied bit for bit into the torch tensor (a bfloat16 array through
its uint16 view: numpy has no bfloat16). Dtypes float32, float16, bfloat16 (MLX's uniform has no
float64 on the CPU); CPU only (the mlx-cpu wheel on Linux: ``pip install 'mlx[cpu]'``).
"""

from __future__ import annotations

from candidates.libraries.common import distribution_version, draw_seed, missing_reason, to_torch
from candidates.protocol import Candidate
from reference.dtypes import dtype_name

__all__ = ["CANDIDATES", "mlx_truncated_normal"]

DTYPES = ("float32", "float16", "bfloat16")
_MX: list = []


def _mx():
    """mlx.core, imported on first use."""
    if not _MX:
        import mlx.core as mx

        _MX.append(mx)
    return _MX[0]


def mlx_truncated_normal(shape, mean, std, lower, upper, *, dtype, device, generator):
    """mx.random.truncated_normal(lower, upper, shape, dtype, key) * std + mean, in the dtype."""
    mx = _mx()
    name = dtype_name(dtype)
    key = mx.random.key(draw_seed(generator))
    x = mx.random.truncated_normal(float(lower), float(upper), shape=list(shape),
                                   dtype=getattr(mx, name), key=key)
    out = x * float(std) + float(mean)  # the user's affine step, in the output dtype
    if out.dtype != getattr(mx, name):
        raise TypeError(f"mx.random.truncated_normal returned {out.dtype} when asked for {name}")
    array = out.view(mx.uint16) if name == "bfloat16" else out
    return to_torch(array, dtype, tuple(shape), "mx.random.truncated_normal").to(device)


def _make():
    return Candidate(mlx_truncated_normal, name="mlx", spec="mlx",
                     version=distribution_version("mlx"), convention="functional-sigma",
                     dtypes=DTYPES, devices=("cpu",), torch_init_semantics=False,
                     accepts_generator=True,
                     # mlx.core, not mlx: the mlx-cpu wheel alone installs an ``mlx`` folder of
                     # headers and libraries without the Python bindings.
                     unavailable=missing_reason("mlx.core", "'mlx[cpu]'"), prepare=_mx)


CANDIDATES = {"mlx": _make}
