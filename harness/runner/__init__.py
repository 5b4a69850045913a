"""Running the checks of a case: the two-stage `CaseRunner` over the engine's Summaries, and the
in-flight leases (`reports.leases`) that tell a crashed neighbour from a busy one.

* `harness.runner.case_runner` — `RunConfig`, `CaseRunner` (one (candidate, case, dtype, device):
  its Summaries, drawn once and shared, and the two-stage error control; `DrawRequest`, what one
  stage's draw asks for, which a sharded runner draws its own way), `RunnerCache`,
  `run_candidate_check` (the candidate-level `arguments` check);
* `harness.runner.paths` — execution paths (eager, compile, deterministic): wrappers around the
  candidate.
"""

from reports.leases import LeaseHeld, lease

from .case_runner import (CASE_CHECKS, CaseRunner, DrawRequest, RunConfig, RunnerCache,
                          all_check_names, checks_for, crash_guarded, failure_from_lease,
                          inflight_marker, on_device, run_candidate_check, runs_on_sharded_group)
from .paths import PATHS, candidate_on_path

__all__ = ["CASE_CHECKS", "CaseRunner", "DrawRequest", "RunConfig", "RunnerCache", "all_check_names",
           "checks_for", "crash_guarded", "failure_from_lease", "inflight_marker", "on_device",
           "run_candidate_check", "runs_on_sharded_group", "LeaseHeld", "lease", "PATHS",
           "candidate_on_path"]
