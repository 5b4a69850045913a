"""Every candidate the harness knows by name, listed without importing any library.

* ``REGISTRY``: the built-ins (`candidates.builtin`) and the sharded ones
  (`candidates.dtensor_samplers`), name -> zero-argument factory of a `Candidate`;
* ``SELFTEST_REGISTRY``: the ``selftest-*`` saboteurs of the harness's own tests (resolvable by
  name, never listed);
* `registered_names`: the built-in names, then the library adapters' (`candidates.libraries`).
"""

from __future__ import annotations

from collections.abc import Callable

from candidates.builtin import BUILTINS
from candidates.libraries import LIBRARIES
from candidates.protocol import Candidate
from candidates.selftest import SELFTESTS
from candidates.dtensor_samplers import SHARDED_REGISTRY, SHARDED_SELFTESTS

__all__ = ["REGISTRY", "SELFTEST_REGISTRY", "registered_names"]

REGISTRY: dict[str, Callable[[], Candidate]] = {**BUILTINS, **SHARDED_REGISTRY}
SELFTEST_REGISTRY: dict[str, Callable[[], Candidate]] = {**SELFTESTS, **SHARDED_SELFTESTS}


def registered_names() -> list[str]:
    """The built-in names, then the library adapters' names, in registration order (self-test names
    are not listed). Imports no library and no adapter module."""
    return list(REGISTRY) + list(LIBRARIES)
