"""Adapters for ``keras.random.truncated_normal``: ``keras-torch``, ``keras-jax``, ``keras-numpy``.

``keras.random.truncated_normal(shape, mean, stddev, dtype, seed)`` has no bounds parameter: it
always truncates at mean ± 2·stddev. So each keras candidate can be asked only for cases whose
bounds are exactly mean ± 2·std (normal-2sigma, vit-pos-embed, tiny-std, large-mean); the others
are skipped with that reason (`common.fixed_two_sigma`), and so are the invalid-argument probes of
`arguments` (none of them has bounds mean ± 2·std).

What each backend computes (keras 3, read from its source; the harness judges the result):

* torch — draws 4 standard normals per element *in the output dtype*, keeps the first with
  -2 < x < 2 (if none of the 4 is, the first one, out of bounds), then ``mul_(stddev).add_(mean)``
  in the dtype.
* jax — ``jax.random.truncated_normal(seed, -2, 2, shape, dtype) * stddev + mean`` in the dtype.
* numpy — ``rng.normal(mean, stddev)`` in float64, keeps values in [mean - 2 stddev, mean + 2
  stddev], then ``astype(dtype)`` (ml_dtypes for bfloat16).

Keras picks its backend once, at import, from ``KERAS_BACKEND``; backends cannot share a process.
Each candidate therefore draws in a persistent child process of its own (`candidates.libraries.child`
running `library_server.py`: one per backend per harness process, started on the first draw, killed
at exit or when a call fails or times out, restarted on the next call). Only the parameters and the
raw bytes of keras' result cross the pipe: bits are unchanged.

Seeds: keras seeds are 32-bit (``keras.random`` turns an int seed into a uint32 pair, and the torch
backend seeds a ``torch.Generator`` with 32 bits), so each call passes a fresh 32-bit seed drawn
from the harness's generator. CPU only (the child sees no CUDA device).
"""

from __future__ import annotations

from candidates.libraries.common import (distribution_version, draw_seed,
                                         fixed_two_sigma, missing_reason, to_torch)
from candidates.protocol import Candidate
from reference.dtypes import dtype_name

__all__ = ["CANDIDATES"]

BACKEND_MODULE = {"torch": "torch", "jax": "jax", "numpy": "numpy"}


def _sampler(backend: str):
    def keras_truncated_normal(shape, mean, std, a, b, *, dtype, device, generator):
        """keras.random.truncated_normal(shape, mean, stddev, dtype, seed): fixed mean ± 2 stddev."""
        reason = fixed_two_sigma(mean, std, a, b)
        if reason is not None:
            raise ValueError(f"keras.random.truncated_normal cannot express this: {reason}")
        from candidates.libraries.child import server

        what = f"keras.random.truncated_normal ({backend} backend)"
        request = {"shape": tuple(shape), "mean": float(mean), "stddev": float(std),
                   "dtype": dtype_name(dtype), "seed": draw_seed(generator, bits=32)}
        arr = server(f"keras-{backend}").draw(request, what)
        return to_torch(arr, dtype, tuple(shape), what).to(device)

    keras_truncated_normal.__name__ = f"keras_{backend}_truncated_normal"
    keras_truncated_normal.__qualname__ = keras_truncated_normal.__name__
    return keras_truncated_normal


def _unavailable(backend: str) -> str | None:
    return missing_reason("keras", "keras") or (
        missing_reason(BACKEND_MODULE[backend], "'jax[cpu]'" if backend == "jax" else backend))


def _starter(kind: str):
    """The candidate's ``prepare``: start the child before the timed calls (keras' import)."""
    def start() -> None:
        from candidates.libraries.child import server

        server(kind).ensure_started()

    return start


def _version(backend: str) -> str:
    """keras' version and the backend's, e.g. ``3.15.1 (jax 0.10.2)`` (read without importing)."""
    dist = {"torch": "torch", "jax": "jax", "numpy": "numpy"}[backend]
    return f"{distribution_version('keras')} ({backend} {distribution_version(dist)})"


def _make(backend: str):
    name = f"keras-{backend}"

    def factory() -> Candidate:
        return Candidate(_sampler(backend), name=name, spec=name,
                         version=_version(backend), convention="functional",
                         devices=("cpu",), torch_init_semantics=False, accepts_generator=True,
                         expresses=fixed_two_sigma, unavailable=_unavailable(backend),
                         prepare=_starter(f"keras-{backend}"))

    return factory


CANDIDATES = {f"keras-{b}": _make(b) for b in ("torch", "jax", "numpy")}
