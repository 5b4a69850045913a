"""Which checks a mechanism explains, derived from the check registry (`harness.checks.CHECKS`):
the checks of the grid that read only given statistic families, and the checks of the API; and
which candidates a library's kernel may be named for (`candidate_name`, `TORCH_INVERSE_CDF`).

A mechanism that repeats one library's own kernel (`mechanisms.library_laws`,
`mechanisms.coarse_construction`) lists the registered candidates that run it
(`candidates.libraries`, `candidates.builtin`), and the catalog names it only for them: a sampler
no library wrote is told what its values do, never whose kernel it is.
"""

from __future__ import annotations

import torch

from ..checks import CHECKS
from ..checks.hard import INPLACE

#: The first torch release whose trunc_normal_ no longer draws by the inverse CDF in the tensor's
#: dtype (`candidates.builtin`'s torch-legacy repeats the algorithm it replaced).
INVERSE_CDF_REPLACED = (2, 12)


def torch_release(version: str = torch.__version__) -> tuple[int, int]:
    """(major, minor) of a torch version string ('2.13.0+cpu' -> (2, 13))."""
    parts = version.split("+")[0].split(".")
    return int(parts[0]), int("".join(ch for ch in parts[1] if ch.isdigit()) or 0)


#: The candidates that run torch <= 2.11's inverse CDF (timm copies it): torch-legacy repeats it,
#: fp32-upcast runs it in float32, and torch itself where this torch predates its replacement.
TORCH_INVERSE_CDF = frozenset({"torch-legacy", "fp32-upcast"}
                              | ({"torch"} if torch_release() < INVERSE_CDF_REPLACED else set()))


def candidate_name(candidate) -> str:
    """The registered name (or spec) a Result's candidate goes by: a string as given, or a
    `candidates.Candidate`'s spec ('' for none)."""
    if candidate is None:
        return ""
    if isinstance(candidate, str):
        return candidate
    return str(getattr(candidate, "spec", "") or "")


def checks_reading(*families: str) -> frozenset:
    """The statistical checks of the grid whose statistic families are all among `families`."""
    allowed = set(families)
    return frozenset(c.name for c in CHECKS
                     if c.outcome is not None and c.families and c.applies_to("grid")
                     and {f.name for f in c.families} <= allowed)


def api_checks() -> frozenset:
    """The checks whose failures are the candidate's API or contract, not its law: those of kind
    api and the shape axis' in-place check."""
    return frozenset(c.name for c in CHECKS if c.kind == "api") | {INPLACE.name}
