"""Adapter for NumPyro's truncated normal: ``numpyro``.

``numpyro.distributions.TruncatedNormal(loc, scale, low=, high=).sample(key, sample_shape)``:
absolute bounds, as torch.nn.init takes them. An infinite bound is passed as ``None`` (no
truncation on that side), as a NumPyro user writes it; NumPyro then builds a one-sided
truncated distribution, or the plain Normal when neither side is truncated.

What NumPyro computes (``numpyro/distributions/truncated.py``, 0.22; the harness judges the
result): ``u = jax.random.uniform(key, shape, minval=tiny)`` in the default float dtype, then
the inverse CDF ``Normal.icdf(clamp_probs((1 - u) * Φ(α) + u * Φ(β)))`` (mirrored about the mean
when the window lies below it), where ``clamp_probs`` clips to [tiny, 1 - eps] of the dtype.
In float32 the uniform has 23 random bits, so the output lives on 2^23 values; u = tiny and the
clip send a draw with probability 2^-23 to ``ndtri(1.2e-38) = -13σ`` whatever the bounds, and
u = 1/2 writes exactly the mean (a value the rounded law gives ~0 mass).

The dtype is JAX's default float dtype, switched per call: float32 under
``jax.enable_x64(False)``, float64 under ``jax.enable_x64(True)`` (the ``jax`` adapter turns x64
on for the whole process; NumPyro's float32 users run without it). The key is
``jax.random.key(seed)`` with a fresh 63-bit seed drawn from the harness's generator on every call;
the array is copied bit for bit into the torch tensor. CPU only (jax[cpu]).
"""

from __future__ import annotations

import math

from candidates.libraries.common import distribution_version, draw_seed, missing_reason, to_torch
from candidates.protocol import Candidate
from reference.dtypes import dtype_name

__all__ = ["CANDIDATES", "numpyro_truncated_normal"]

DTYPES = ("float64", "float32")
_MODULES: list = []


def _numpyro():
    """(jax, numpyro.distributions), imported on first use."""
    if not _MODULES:
        import jax
        import numpyro.distributions as dist

        _MODULES.extend((jax, dist))
    return _MODULES


def _start() -> None:
    """The candidate's ``prepare``: import, and one draw in each dtype (JAX's first trace of
    NumPyro's sampler takes seconds, which must not count as a call's time)."""
    jax, dist = _numpyro()
    for x64 in (False, True):
        with jax.enable_x64(x64):
            dist.TruncatedNormal(0.0, 1.0, low=-2.0, high=2.0).sample(
                jax.random.key(0), (2,)).block_until_ready()


def numpyro_truncated_normal(shape, mean, std, a, b, *, dtype, device, generator):
    """TruncatedNormal(mean, std, low=a, high=b).sample(key, shape) in JAX's default float dtype,
    float32 or float64 as asked."""
    jax, dist = _numpyro()
    name = dtype_name(dtype)
    low = None if a == -math.inf else float(a)
    high = None if b == math.inf else float(b)
    key = jax.random.key(draw_seed(generator))
    with jax.enable_x64(name == "float64"):
        sampler = dist.TruncatedNormal(float(mean), float(std), low=low, high=high)
        out = sampler.sample(key, tuple(shape))
        out.block_until_ready()
    return to_torch(out, dtype, tuple(shape), "numpyro TruncatedNormal.sample").to(device)


def _make():
    return Candidate(numpyro_truncated_normal, name="numpyro", spec="numpyro",
                     version=distribution_version("numpyro"), convention="functional",
                     dtypes=DTYPES, devices=("cpu",), torch_init_semantics=False,
                     accepts_generator=True,
                     unavailable=(missing_reason("numpyro", "numpyro")
                                  or missing_reason("jax", "'jax[cpu]'")),
                     prepare=_start)


CANDIDATES = {"numpyro": _make}
