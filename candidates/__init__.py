"""The samplers under test: protocol, loader (``--candidate``), built-ins (good and known-bad).

::

    from candidates import Candidate, resolve, REGISTRY, CandidateNotFound
    cand = resolve("exact")            # or "pkg.mod:fn", or "path/to/file.py:fn"
    cand(tensor, mean, std, a, b, generator)   # in place, absolute bounds, returns the tensor

* `candidates.protocol` — `Candidate`, the ``@candidate(...)`` declaration decorator, the adapters
  `functional` and `sigma_bounds`; its docstring documents the conventions and declarations.
* `candidates.loader` — `resolve` and `CandidateNotFound` (one-line messages).
* `candidates.catalog` — ``REGISTRY`` (name -> zero-argument factory), ``SELFTEST_REGISTRY``.
* `candidates.builtin` — the built-in samplers, good and known-bad;
  `candidates.dtensor_samplers` — the DTensor ones (``exact-counter``, ``local-shard``);
  `candidates.fast_exact` — ``fast-exact``, the proposal (and its known-bad rounds-first twin).
* `candidates.dtensor` — the DTensor plumbing of the sharding-invariant samplers (``fast-exact``,
  ``exact-counter``): the key broadcast from mesh coordinate 0, a rank's box of the whole tensor.
* `candidates.kernels` — what the harness's own samplers share: the exact inverse CDF in float64,
  argument validation, a counter-based uniform stream (computed from `reference` alone).
* `candidates.libraries` — adapters for other libraries' samplers (jax, keras-*, tensorflow*, timm*,
  paddle, mlx, numpyro): ``LIBRARIES`` lists them without importing anything; each module is
  imported when named.
* `candidates.selftest` — ``selftest-*`` candidates for the harness's own tests (resolvable by name,
  not listed in ``REGISTRY``).
* `candidates.rounding` — correct float64 -> dtype casts (torch's own rounds twice for 16-bit).

Layers (checked by the import contract in ``.importlinter``): loader -> catalog -> selftest ->
builtin, dtensor_samplers, libraries -> dtensor -> kernels -> protocol, rounding -> reference
(`fast_exact` sits between builtin and dtensor). Nothing here imports `harness`.

Importing this package imports `reference.dtypes` (the one table of dtype names) but no law; the
exact-based samplers build their laws on first use.

May import: `reference` and the standard scientific stack; never `harness` or `reports`.
"""

from candidates.loader import CandidateNotFound, resolve
from candidates.protocol import (
    DEFAULT_DEVICES,
    DEFAULT_DTYPES,
    Candidate,
    accepts_generator,
    candidate,
    draw_seed,
    functional,
    sigma_bounds,
)
from candidates.catalog import REGISTRY, SELFTEST_REGISTRY, registered_names

__all__ = [
    "Candidate",
    "CandidateNotFound",
    "REGISTRY",
    "SELFTEST_REGISTRY",
    "DEFAULT_DTYPES",
    "DEFAULT_DEVICES",
    "resolve",
    "registered_names",
    "candidate",
    "functional",
    "sigma_bounds",
    "accepts_generator",
    "draw_seed",
]
