"""What a failure means: how far it moves the values (severity), how much that matters (level),
and which mechanism explains it; filled into each failing Result by the runner.

The catalog and the machinery that tests a mechanism stand here; the rest is in three rooms:

* `harness.diagnosis.annotate` — `annotate` (a row and its Summary) and `annotate_failure` (a row
  with none), which `harness.runner.CaseRunner` calls on every row it makes;
* `harness.diagnosis.mechanism_catalog` — the catalog of mechanisms (`diagnose` a Summary,
  `explain` a row), each a prediction of the reference tested against the data;
* `harness.diagnosis.match` — `Mechanism`, the contract of one catalog row, and `Match`;
  `harness.diagnosis.evidence` — what a mechanism's test reads from one Summary, and the two
  tests (departure, agreement) every match is made of; `harness.diagnosis.scope` — the checks a
  mechanism explains, from the check registry;
* `harness.diagnosis.mechanisms` — the mechanisms, one module each (or one per few that read the
  same statistics): a new mechanism is one module there and one row of the catalog;
* `harness.diagnosis.library_ops` — the libraries' arithmetic repeated op by op (XLA, MLX, torch,
  the C library, NumPyro, Paddle, TensorFlow) and the laws pushed through it, which the
  mechanisms enumerate;
* `harness.diagnosis.grading` — the severity figures against their noise floors, the effect
  figures with their confidence bounds, the thresholds of harm, and the level.

The floors inside (`.importlinter`): annotate > mechanism_catalog > mechanisms > evidence |
match | scope > grading > library_ops.

May import: `harness.checks`, `harness.families`, `harness.engine` and the floors below them,
`reference`.
"""

from .annotate import annotate, annotate_failure, figures_and_matches, level_at
from .evidence import OWN_STAGE_FAMILIES
from .mechanism_catalog import MECHANISMS, NAMES as MECHANISM_NAMES, diagnose, explain
from .grading.effects import effects
from .grading.levels import grade, level_of
from .grading.severity import DELTA, NAMES, beyond_floor, severity
from .grading.thresholds import (DEFAULT_THRESHOLDS, HarmThresholds, ThresholdsError,
                                 parse_thresholds)

__all__ = ["annotate", "annotate_failure", "figures_and_matches", "level_at", "level_of", "grade", "DELTA",
           "NAMES", "beyond_floor", "severity", "effects", "DEFAULT_THRESHOLDS", "HarmThresholds",
           "ThresholdsError", "parse_thresholds", "MECHANISMS", "MECHANISM_NAMES", "diagnose",
           "explain", "OWN_STAGE_FAMILIES"]
