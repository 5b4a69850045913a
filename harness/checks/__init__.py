"""The checks: hard ones (no statistics; any violation fails at once) and statistical ones
(two-stage, stated false-alarm rate and minimum detectable effect).

* `harness.checks.hard` — `SUMMARY_CHECKS`: finite, written, bounds (read one Summary), and
  `SHAPE_CHECKS` (inplace, on the shape axis);
* `harness.checks.api` — `CASE_API_CHECKS` (contract, generator, threads: tensors of their own,
  per case) and `CANDIDATE_API_CHECKS` (arguments: per candidate);
* `harness.checks.statistical` — `STATISTICAL_CHECKS`: (Summary, RoundedLaw) -> Outcome, through
  the two stages of `harness.runner`; the math in the ``stat_*`` modules, one per family;
* `harness.checks.sharded` — the checks only sharded parameters can fail;
* `harness.checks.power` — minimum detectable effects as functions of the law and n.

The names below are the one list of each kind; everything else (the runner, the plugin, the
reports) reads them from here.
"""

from .api import check_arguments, check_contract, check_generator, check_threads
from .hard import check_bounds, check_finite, check_inplace, check_written
from .statistical import CHECK_DOCS, STATISTICAL_CHECKS

SUMMARY_CHECKS = ("finite", "written", "bounds")
#: Checks of a group on the shape axis only (the grid's groups have `contract` for it).
SHAPE_CHECKS = ("inplace",)
#: Checks of a case that call the candidate on plain tensors of their own (never on a sharded
#: parameter or the shape axis: those groups do not run them).
CASE_API_CHECKS = ("contract", "generator", "threads")
CANDIDATE_API_CHECKS = ("arguments",)

__all__ = [
    "check_arguments", "check_bounds", "check_contract", "check_finite", "check_generator",
    "check_inplace", "check_threads", "check_written", "STATISTICAL_CHECKS", "CHECK_DOCS",
    "SUMMARY_CHECKS", "SHAPE_CHECKS", "CASE_API_CHECKS", "CANDIDATE_API_CHECKS",
]
