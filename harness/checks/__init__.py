"""The checks: each one `Check` declaration (`harness.declaration`) next to its math, all listed
once in `CHECKS`. The statistical checks are declared in their statistic family's module
(`harness.families`); the ones here need no state of their own beyond the support family's.

* `harness.checks.registry` — `CHECKS`, the ordered list everything else derives from (the
  pytest tests, the runner's dispatch, the families the engine folds, the API's check list,
  xfails, reproduce lines, MDEs), and `summarize_samples`, the fold of a run for samples in
  memory;
* `harness.checks.hard` — finite, written, bounds, hang, inplace: no statistics, any violation
  fails at once;
* `harness.checks.contract` — contract, generator, threads (tensors of their own, per case) and
  arguments (per candidate);
* `harness.checks.sharded` — the checks only sharded parameters can fail;
* `harness.checks.power` — minimum detectable effects as functions of the law and n.

May import: `harness.families`, `harness.engine`, `harness.declaration` and the floors below them
(summary, bins, group, cases, seeds, result), `reference`, `record`.
"""

from ..declaration import Check
from .contract import check_arguments, check_contract, check_generator, check_threads
from .hard import check_bounds, check_finite, check_inplace, check_written
from .registry import CHECKS, Registry, summarize_samples

__all__ = [
    "CHECKS", "Check", "Registry", "check_arguments", "check_bounds",
    "check_contract", "check_finite", "check_generator", "check_inplace", "check_threads",
    "check_written", "summarize_samples",
]
