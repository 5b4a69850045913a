"""Running the checks of a case: the two-stage `CaseRunner` over the engine's Summaries, and the
in-flight leases (`record.leases`) that tell a crashed neighbour from a busy one.

* `harness.runner.case_runner` — `RunConfig`, `CaseRunner` (one (candidate, case, dtype, device):
  its Summaries, drawn once and shared, and the two-stage error control; `DrawRequest`, what one
  stage's draw asks for, which a sharded runner draws its own way), `RunnerCache`,
  `CandidateRunner` (the checks of a candidate alone: `arguments`); each runner is the context a
  check's ``run`` is given (`harness.declaration`);
* `harness.runner.paths` — execution paths (eager, compile, compile-fullgraph, deterministic):
  wrappers around the candidate.

May import: `harness.checks` and the floors below it, `reference`, `candidates`, `record`.
"""

from record.leases import LeaseHeld, lease

from .case_runner import (CandidateRunner, CaseRunner, DrawRequest, RunConfig, RunnerCache,
                          crash_guarded, failure_from_lease, inflight_marker, on_device)
from .paths import PATHS, candidate_on_path

__all__ = ["CandidateRunner", "CaseRunner", "DrawRequest", "RunConfig", "RunnerCache",
           "crash_guarded", "failure_from_lease", "inflight_marker", "on_device", "LeaseHeld",
           "lease", "PATHS",
           "candidate_on_path"]
