"""How much a failure matters: `level_of` puts a failing row on one of `harness.result.LEVELS`.

Each check declares what its failure is about (`harness.declaration.Check.about`):

* ``api``: the failure is no statement about the values: the API checks (contract, generator,
  threads, arguments) and the hard checks of the draw that are not about values (written, hang,
  inplace, the sharded layout's replicas and sharding); and, for any check, a draw that did not
  complete (a timeout, a hang, a raise, a crash: the row has no Summary, hence no severity) and
  an ``error`` row.
* ``harmful``: a failing row about the values (``about="values"``: the statistical checks, and
  the hard checks finite and bounds, whose values a model reads) whose group has a coarse
  severity figure beyond its noise floor (`harness.diagnosis.grading.severity.beyond_floor`):
  w1_sigma > w1_floor, misplaced > misplaced_floor, shift_share > 0 (a share displaced beyond the
  DKW band), |beyond4| > beyond4_floor or |beyond6| > beyond6_floor. The threshold is each
  figure's floor, with no margin above it: a floor is what an exact sampler exceeds with
  probability <= 1e-6 at this n, so a figure beyond it is a change of the values, moments or
  tails that the coarse resolution (sigma / 64 cells, the 4 and 6 sigma tails) sees; an exact
  sampler's failing row (itself a false alarm at the checks' alpha) reads harmful with
  probability <= 5e-6 more (5 figures).
* ``fine``: a failing row about the values whose coarse figures all sit within their floors: the
  defect is visible only at the resolution of single values. The checks of that resolution
  (``about="single-values"``: collisions, lattices, low_bits) are ``fine`` whatever the figures
  say: they judge a property of single values (repeats, lattice membership, last bits) that no
  coarse figure is about, and the group's coarse figures belong to whatever other defect it has,
  whose own rows carry it.
"""

from __future__ import annotations

from ...checks import CHECKS
from .severity import beyond_floor

#: Verdicts that carry a level.
FAILING = ("fail", "xfail", "error")


def level_of(check: str, verdict: str, severity: dict) -> str:
    """The level of one row (module docstring): "" for pass and skip rows, else one of
    `harness.result.LEVELS`. `severity`: the group's figures (`harness.diagnosis.grading`),
    empty where the row has no Summary (a draw that did not complete)."""
    if verdict not in FAILING:
        return ""
    if verdict == "error" or check not in CHECKS:
        return "api"
    about = CHECKS[check].about
    if about == "api" or not severity:
        return "api"
    if about == "single-values":
        return "fine"
    return "harmful" if beyond_floor(severity) else "fine"
