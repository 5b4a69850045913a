"""Which checks a mechanism explains, derived from the check registry (`harness.checks.CHECKS`):
the checks of the grid that read only given statistic families, and the checks of the API."""

from __future__ import annotations

from ..checks import CHECKS
from ..checks.hard import INPLACE


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
