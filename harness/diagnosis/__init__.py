"""What a failure means: how far it moves the values (severity), how much that matters (level),
and which mechanism explains it; filled into each failing Result by the runner.

* `harness.diagnosis.severity` — the severity figures of a Summary against its law (W1 in sigma,
  the share misplaced at sigma / 64, the worst displacement of a share beyond noise, the excess
  beyond 4 and 6 sigma) and their noise floors at the run's n;
* `harness.diagnosis.levels` — `level_of`: harmful, fine or api, with the thresholds;
* `harness.diagnosis.catalog` — the mechanisms (`diagnose` a Summary, `explain` a row), each a
  prediction of the reference tested against the data;
* `harness.diagnosis.annotate` — `annotate` (a row and its Summary) and `annotate_failure` (a row
  with none), which `harness.runner.CaseRunner` calls on every row it makes.

May import: `harness.checks`, `harness.families`, `harness.engine` and the floors below them,
`reference`.
"""

from .annotate import annotate, annotate_failure, figures_and_matches
from .catalog import MECHANISMS, NAMES as MECHANISM_NAMES, diagnose, explain
from .evidence import OWN_STAGE_FAMILIES
from .levels import level_of
from .severity import DELTA, NAMES, beyond_floor, severity

__all__ = ["annotate", "annotate_failure", "figures_and_matches", "level_of", "DELTA", "NAMES",
           "beyond_floor", "severity", "MECHANISMS", "MECHANISM_NAMES", "diagnose", "explain",
           "OWN_STAGE_FAMILIES"]
