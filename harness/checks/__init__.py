"""The checks: each one `Check` declaration next to its math, all listed once in `CHECKS`.

* `harness.checks.check` — the `Check` type, its scopes (which groups it runs on) and the
  constructors for statistical checks, checks of a draw and API checks;
* `harness.checks.registry` — `CHECKS`, the ordered list everything else derives from (the
  pytest tests, the runner's dispatch, the API's check list, xfails, reproduce lines, MDEs);
* `harness.checks.hard` — finite, written, bounds, hang, inplace: no statistics, any violation
  fails at once;
* `harness.checks.contract` — contract, generator, threads (tensors of their own, per case) and
  arguments (per candidate);
* `harness.checks.statistical` — the statistical checks, ``(Summary, RoundedLaw) -> Outcome``
  through the two stages of `harness.runner`; the math in the ``stat_*`` modules, one per family;
* `harness.checks.sharded` — the checks only sharded parameters can fail;
* `harness.checks.power` — minimum detectable effects as functions of the law and n.

May import: `harness.engine` and the floors below it (summary, bins, group, cases, seeds, result),
`reference`, `reports.leases`.
"""

from .contract import check_arguments, check_contract, check_generator, check_threads
from .check import Check
from .hard import check_bounds, check_finite, check_inplace, check_written
from .registry import CHECKS, Registry

__all__ = [
    "CHECKS", "Check", "Registry", "check_arguments", "check_bounds",
    "check_contract", "check_finite", "check_generator", "check_inplace", "check_threads",
    "check_written",
]
