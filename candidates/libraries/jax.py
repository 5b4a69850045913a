"""Adapters for JAX's truncated normals: ``jax`` and ``jax-init``.

``jax`` — ``jax.random.truncated_normal(key, lower, upper, shape, dtype)`` draws a *standard*
truncated normal on (lower, upper), bounds in σ units. JAX has no mean/std parameter, so the
adapter does what every JAX user (and ``jax.nn.initializers``, flax, keras' jax backend) does
after it: ``x * std + mean`` with jax.numpy in the output dtype (exact when std = 1 and mean = 0).
Bounds: (a - mean) / std and (b - mean) / std in float64, infinite bounds stay infinite.

``jax-init`` — ``jax.nn.initializers.truncated_normal(stddev, lower=, upper=)(key, shape, dtype)``
(flax.linen.initializers re-exports the same function). It returns
``jax.random.truncated_normal(key, lower, upper, shape, dtype) * jnp.array(stddev, dtype)``:
bounds are applied *before* the stddev, in σ units (defaults ±2), and ``stddev`` is the std of
the untruncated normal — it does **not** rescale by 0.87962566 (only ``variance_scaling(...,
"truncated_normal")`` does that, to make the *output* std match). With the bounds passed as σ
units this is TN(0, stddev, lower·stddev, upper·stddev) exactly as the harness asks for it; it
has no mean, so only cases with mean 0 can be asked for (the others are skipped with the reason).
Note that ``jnp.array(stddev, dtype)`` rounds stddev to the output dtype first (0.02 in bfloat16
is 0.0200195...): part of what the library writes, so part of what is judged.

Both: the key is ``jax.random.key(seed)`` with a fresh 63-bit seed drawn from the harness's
generator on every call; the library computes in the requested dtype (``jax_enable_x64`` is
switched on at first use, as JAX requires for float64 — without it JAX answers a float64 request
in float32); the array is copied bit for bit into the torch tensor. CPU only (jax[cpu]).
"""

from __future__ import annotations

from candidates.libraries.common import (distribution_version, draw_seed,
                                         missing_reason, to_torch, zero_mean)
from candidates.protocol import Candidate
from reference.dtypes import dtype_name

__all__ = ["CANDIDATES", "jax_truncated_normal", "jax_init_truncated_normal"]

_JAX: list = []


def _jax():
    """(jax, jax.numpy), imported on first use with float64 enabled."""
    if not _JAX:
        import jax
        import jax.numpy as jnp

        # Without x64 JAX silently answers a float64 request in float32.
        jax.config.update("jax_enable_x64", True)
        _JAX.extend((jax, jnp))
    return _JAX


def _jax_dtype(dtype):
    _, jnp = _jax()
    return jnp.dtype(dtype_name(dtype))


def jax_truncated_normal(shape, mean, std, lower, upper, *, dtype, device, generator):
    """jax.random.truncated_normal(key, lower, upper, shape, dtype) * std + mean, in the dtype."""
    jax, _ = _jax()
    key = jax.random.key(draw_seed(generator))
    x = jax.random.truncated_normal(key, lower, upper, shape, _jax_dtype(dtype))
    out = x * std + mean  # the user's affine step, in the output dtype (Python floats are weak-typed)
    return to_torch(out, dtype, shape, "jax.random.truncated_normal").to(device)


def jax_init_truncated_normal(shape, mean, std, lower, upper, *, dtype, device, generator):
    """jax.nn.initializers.truncated_normal(std, lower=, upper=)(key, shape, dtype); mean 0 only."""
    reason = zero_mean(mean, std, lower, upper)
    if reason is not None:
        raise ValueError(f"jax.nn.initializers.truncated_normal cannot express this: {reason}")
    jax, _ = _jax()
    init = jax.nn.initializers.truncated_normal(stddev=std, lower=lower, upper=upper)
    out = init(jax.random.key(draw_seed(generator)), shape, _jax_dtype(dtype))
    return to_torch(out, dtype, shape, "jax.nn.initializers.truncated_normal").to(device)


def _make(name: str, fn, expresses=None):
    def factory() -> Candidate:
        return Candidate(fn, name=name, spec=name, version=distribution_version("jax"),
                         convention="functional-sigma", devices=("cpu",),
                         torch_init_semantics=False, accepts_generator=True,
                         expresses=expresses, unavailable=missing_reason("jax", "'jax[cpu]'"),
                         prepare=_jax)

    return factory


CANDIDATES = {
    "jax": _make("jax", jax_truncated_normal),
    "jax-init": _make("jax-init", jax_init_truncated_normal, expresses=zero_mean),
}
