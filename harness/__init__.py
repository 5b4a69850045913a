"""The machinery between a candidate and a verdict.

Floors, from the ground up (each imports only the floors below it; `.importlinter` checks it):

* ground floor, plain data: `cases`, `seeds`, `result` (Outcome, Result); `group` (Group,
  ApiGroup: what a row was drawn from); `explore` (the explorer's cases) and `model_calls` (a
  model's recorded init calls as cases); `key_bins` (ordered-key bin arithmetic and the
  position classes); `summary` (the Summary a draw folds into: a common core and one state per family);
  `declaration` (Family, Check: what a statistic family and a check declare);
* `engine`: the streaming draw and the fold, a loop over the families' accumulators
  (`run_engine`, `summarize_samples`);
* `families`: one module per statistic family, its accumulator beside its check(s);
* `checks`: the registry (`CHECKS`) and the hard, contract, sharded and power checks;
* `diagnosis`: what a failure means: the catalog of defect mechanisms (`mechanisms`, the
  libraries' arithmetic they repeat in `library_ops`) and the severity figures with their noise
  floors and the level (`grading`);
* `runner`: the two-stage `CaseRunner` of one case, `CandidateRunner`, shrinking;
* `sharded` (DTensors across ranks) and `fleet` (groups, xdist scheduling, grid partitions);
* `session`: one run without pytest, built in steps (`session.planner.plan_run`: resolve the
  candidates, plan the run; then the session opens its report sink): options, `HarnessSession`,
  the report sink, reproduce lines, xfails, devices;
* `plugin`: the pytest plugin, objects per process role (controller, worker, grid, terminal),
  which builds and drives a session;
* `api`: `harness.check(...)` -> a DataFrame of the rows `pytest suites` gives, built on the same
  session steps, and `harness.law(case, dtype)`, the exact law of what a perfect sampler writes.

``harness.check`` and ``harness.law`` are imported on first use, so ``import harness.cases`` stays
cheap.

May import: `reference`, `candidates`, `record`; each subpackage only the floors below it, and
only the top (`api`, `plugin`, `session`) `reports`, whose views it renders at the end of a run
(`.importlinter`).
"""

__all__ = ["check", "law"]


def __getattr__(name: str):
    if name in __all__:
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module 'harness' has no attribute {name!r}")
