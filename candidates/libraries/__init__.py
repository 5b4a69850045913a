"""Built-in candidates for other libraries' truncated-normal samplers.

``LIBRARIES`` maps each registered name to a `LibraryEntry`: which module of this package adapts it,
which distribution it needs and what to ``pip install``. Nothing here imports a library, or even an
adapter module: `make` imports the adapter module only when its name is asked for (by
`candidates.resolve`), and the adapter imports its library only on the first draw, so listing the
names costs nothing and a missing library is found without a traceback.

When the library is missing the candidate still resolves: its ``unavailable`` reason (one line
naming the package to install) makes every test of it a skip.

`library_table` renders ``LIBRARIES`` as the table of docs/candidates.md (a test holds the page
to it): the one list of the library candidates, their samplers, conventions, cases and dtypes.

Each adapter module's docstring says what its library computes and how the adapter calls it.

May import: `candidates.protocol`, `candidates.rounding`, `reference`, and each adapter its
own library on first use; never `harness`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["LIBRARIES", "LibraryEntry", "library_table", "make"]


@dataclass(frozen=True)
class LibraryEntry:
    module: str  # adapter module inside candidates.libraries
    sampler: str  # what is tested, for listings
    install: str  # what to pip install when it is missing
    convention: str  # how the library takes its arguments
    cases: str = "all"  # the cases it can be asked for
    dtypes: str = "all four"  # the dtypes it writes
    note: str = ""  # about the sampler, for the docs table


SIGMA_THEN_SCALE = "σ-unit bounds; the user's `x * std + mean` in the dtype"
FIXED_2SIGMA = "`mean`, `stddev`; bounds fixed at mean ± 2 stddev"

LIBRARIES: dict[str, LibraryEntry] = {
    "jax": LibraryEntry("jax", "jax.random.truncated_normal", "jax[cpu]", SIGMA_THEN_SCALE),
    "jax-init": LibraryEntry(
        "jax", "jax.nn.initializers.truncated_normal", "jax[cpu]",
        "σ-unit bounds applied before `stddev`; no mean; `stddev` is the untruncated std (no "
        "0.8796 rescale: that is only in `variance_scaling`)", cases="mean 0",
        note="flax re-exports it"),
    "keras-torch": LibraryEntry("keras", "keras.random.truncated_normal (torch backend)", "keras",
                                FIXED_2SIGMA, cases="±2σ only"),
    "keras-jax": LibraryEntry("keras", "keras.random.truncated_normal (jax backend)",
                              "keras jax[cpu]", FIXED_2SIGMA, cases="±2σ only"),
    "keras-numpy": LibraryEntry("keras", "keras.random.truncated_normal (numpy backend)", "keras",
                                FIXED_2SIGMA, cases="±2σ only"),
    "tensorflow": LibraryEntry("tensorflow", "tf.random.truncated_normal", "tensorflow-cpu",
                               "`mean`, `stddev`; bounds fixed at ±2 stddev", cases="±2σ only"),
    "tensorflow-param": LibraryEntry(
        "tensorflow", "tf.random.stateless_parameterized_truncated_normal", "tensorflow-cpu",
        "absolute bounds", dtypes="no bfloat16 (TF registers half/float/double)"),
    "timm": LibraryEntry("timm", "timm.layers.trunc_normal_", "timm",
                         "torch.nn.init's (absolute)", dtypes="all four, cpu and cuda"),
    "timm-tf": LibraryEntry("timm", "timm.layers.trunc_normal_tf_", "timm", "σ-unit bounds",
                            dtypes="all four, cpu and cuda"),
    "paddle": LibraryEntry("paddle", "paddle.nn.init.trunc_normal_", "paddlepaddle",
                           "absolute bounds, on a paddle tensor"),
    "mlx": LibraryEntry("mlx", "mlx.core.random.truncated_normal", "'mlx[cpu]'", SIGMA_THEN_SCALE,
                        dtypes="float32, float16, bfloat16 (no float64 uniform on the CPU)",
                        note="the mlx-cpu wheel on Linux: `mlx[cpu]`"),
    "numpyro": LibraryEntry(
        "numpyro", "numpyro.distributions.TruncatedNormal.sample", "numpyro 'jax[cpu]'",
        "absolute bounds (an infinite one passed as `None`)",
        dtypes="float32 (`jax.enable_x64(False)`, as NumPyro users run), float64"),
}

LIBRARY_TABLE_HEADER = ("| name | sampler | convention (as the library takes it) | "
                        "cases it can be asked for | dtypes |\n|---|---|---|---|---|")


def library_table() -> str:
    """``LIBRARIES`` as the markdown table of docs/candidates.md, one row per name."""
    rows = [LIBRARY_TABLE_HEADER]
    for name, e in LIBRARIES.items():
        call, _, rest = e.sampler.partition(" ")
        sampler = f"`{call}`" + (f" {rest}" if rest else "") + (f" ({e.note})" if e.note else "")
        rows.append(f"| `{name}` | {sampler} | {e.convention} | {e.cases} | {e.dtypes} |")
    return "\n".join(rows)


def make(name: str):
    """The `Candidate` registered as ``name``: imports its adapter module (not its library)."""
    entry = LIBRARIES[name]
    module = importlib.import_module(f"candidates.libraries.{entry.module}")
    factory: Callable = module.CANDIDATES[name]
    return factory()
