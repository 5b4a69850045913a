"""Built-in candidates for other libraries' truncated-normal samplers.

``LIBRARIES`` maps each registered name to a `LibraryEntry`: which module of this package adapts it,
which distribution it needs and what to ``pip install``. Nothing here imports a library, or even an
adapter module: `make` imports the adapter module only when its name is asked for (by
`candidates.resolve`), and the adapter imports its library only on the first draw, so listing the
names costs nothing and a missing library is found without a traceback.

When the library is missing the candidate still resolves: its ``unavailable`` reason (one line
naming the package to install) makes every test of it a skip.

=====================  =================================================  ============================
name                   sampler                                            convention
=====================  =================================================  ============================
``jax``                ``jax.random.truncated_normal``                    σ-unit bounds, then
                                                                          ``x * std + mean`` in dtype
``jax-init``           ``jax.nn.initializers.truncated_normal``           σ-unit bounds, mean 0 only
``keras-torch``        ``keras.random.truncated_normal`` (torch backend)  fixed ±2σ, child process
``keras-jax``          ``keras.random.truncated_normal`` (jax backend)    fixed ±2σ, child process
``keras-numpy``        ``keras.random.truncated_normal`` (numpy backend)  fixed ±2σ, child process
``tensorflow``         ``tf.random.truncated_normal``                     fixed ±2σ
``tensorflow-param``   ``tf.random.stateless_parameterized_truncated_     absolute bounds
                       normal``
``timm``               ``timm.layers.trunc_normal_``                      torch.nn.init (absolute)
``timm-tf``            ``timm.layers.trunc_normal_tf_``                   σ-unit bounds
``paddle``             ``paddle.nn.init.trunc_normal_``                   absolute bounds
``mlx``                ``mlx.core.random.truncated_normal``               σ-unit bounds, then
                                                                          ``x * std + mean`` in dtype
``numpyro``            ``numpyro.distributions.TruncatedNormal.sample``   absolute bounds
=====================  =================================================  ============================

Each adapter module's docstring says what its library computes and how the adapter calls it.

May import: `candidates.protocol`, `candidates.rounding`, `reference`, and each adapter its
own library on first use; never `harness`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["LIBRARIES", "LibraryEntry", "make"]


@dataclass(frozen=True)
class LibraryEntry:
    module: str  # adapter module inside candidates.libraries
    sampler: str  # what is tested, for listings
    install: str  # what to pip install when it is missing


LIBRARIES: dict[str, LibraryEntry] = {
    "jax": LibraryEntry("jax", "jax.random.truncated_normal", "jax[cpu]"),
    "jax-init": LibraryEntry("jax", "jax.nn.initializers.truncated_normal", "jax[cpu]"),
    "keras-torch": LibraryEntry("keras", "keras.random.truncated_normal (torch backend)", "keras"),
    "keras-jax": LibraryEntry("keras", "keras.random.truncated_normal (jax backend)", "keras jax[cpu]"),
    "keras-numpy": LibraryEntry("keras", "keras.random.truncated_normal (numpy backend)", "keras"),
    "tensorflow": LibraryEntry("tensorflow", "tf.random.truncated_normal", "tensorflow-cpu"),
    "tensorflow-param": LibraryEntry("tensorflow", "tf.random.stateless_parameterized_truncated_normal",
                                     "tensorflow-cpu"),
    "timm": LibraryEntry("timm", "timm.layers.trunc_normal_", "timm"),
    "timm-tf": LibraryEntry("timm", "timm.layers.trunc_normal_tf_", "timm"),
    "paddle": LibraryEntry("paddle", "paddle.nn.init.trunc_normal_", "paddlepaddle"),
    "mlx": LibraryEntry("mlx", "mlx.core.random.truncated_normal", "'mlx[cpu]'"),
    "numpyro": LibraryEntry("numpyro", "numpyro.distributions.TruncatedNormal.sample",
                            "numpyro 'jax[cpu]'"),
}


def make(name: str):
    """The `Candidate` registered as ``name``: imports its adapter module (not its library)."""
    entry = LIBRARIES[name]
    module = importlib.import_module(f"candidates.libraries.{entry.module}")
    factory: Callable = module.CANDIDATES[name]
    return factory()
