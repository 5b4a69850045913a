"""The machinery between a candidate and a verdict.

Floors, from the ground up (each imports only the floors below it; `.importlinter` checks it):

* ground floor, plain data: `cases` (the grid, profiles), `seeds`, `result` (Outcome, Result),
  `summary` (the Summary a draw folds into), `bins` (ordered-key bin arithmetic);
* `engine`: the streaming draw and fold (`run_engine`, `summarize_samples`);
* `checks`: Summary + law -> Result (hard, API, statistical, sharded, power);
* `runner`: the two-stage `CaseRunner` of one case;
* `sharded` (DTensors across ranks) and `fleet` (groups, xdist scheduling, grid partitions);
* `plugin`: the pytest plugin (hooks, options, the run's session);
* `api`: `harness.check(...)` -> a DataFrame of the rows `pytest suites` gives, and
  `harness.law(case, dtype)`, the exact law of what a perfect sampler writes.

``harness.check`` and ``harness.law`` are imported on first use, so ``import harness.cases`` stays
cheap.

May import: `reference`, `candidates`, `reports`; each subpackage only the floors below it
(`.importlinter`).
"""

__all__ = ["check", "law"]


def __getattr__(name: str):
    if name in __all__:
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module 'harness' has no attribute {name!r}")
