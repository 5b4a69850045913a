"""The samplers under test: protocol, loader (``--candidate``), built-ins (good and known-bad).

::

    from candidates import Candidate, resolve, REGISTRY, CandidateNotFound
    cand = resolve("exact")            # or "pkg.mod:fn", or "path/to/file.py:fn"
    cand(tensor, mean, std, a, b, generator)   # in place, absolute bounds, returns the tensor

* `candidates.protocol` — `Candidate`, the ``@candidate(...)`` declaration decorator, the adapters
  `functional` and `sigma_bounds`; its docstring documents the conventions and declarations.
* `candidates.loader` — `resolve` and `CandidateNotFound` (one-line messages).
* `candidates.builtin` — ``REGISTRY`` (name -> zero-argument factory) and the built-in samplers.
* `candidates.libraries` — adapters for other libraries' samplers (jax, keras-*, tensorflow*, timm*,
  paddle): ``LIBRARIES`` lists them without importing anything; each module is imported when named.
* `candidates.selftest` — ``selftest-*`` candidates for the harness's own tests (resolvable by name,
  not listed in ``REGISTRY``).
* `candidates.rounding` — correct float64 -> dtype casts (torch's own rounds twice for 16-bit).

Importing this package does not import `reference`; the exact-based samplers import it on first use.
"""

from candidates.builtin import REGISTRY
from candidates.loader import CandidateNotFound, registered_names, resolve
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
from candidates.selftest import SELFTEST_REGISTRY

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
