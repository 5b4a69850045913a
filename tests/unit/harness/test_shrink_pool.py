"""Shrinking over the run's workers (harness.runner.shrink.run_tasks): spawned processes give the
boundaries one process gives, in task order, and a candidate that kills its process ends its
tasks with a reason, not the run."""

import dataclasses

import pytest

from candidates import resolve
from harness.explore import explored_cases
from harness.runner import RunConfig
from harness.runner.shrink import PARAMETERS, ShrinkTask, run_tasks

CONFIG = RunConfig(profile="smoke", samples=1 << 12)


def _tasks(spec: str, dtype: str = "float32"):
    case = explored_cases(4, seed=7)[0]
    return [ShrinkTask(resolve(spec), case, dtype, "cpu", CONFIG, p) for p in PARAMETERS]


def test_a_pool_gives_what_one_process_gives_in_task_order():
    # clamp puts the mass outside [a, b] on its bounds: it fails at every anchor too, so each
    # task ends after one probe. Deterministic: every probe's seeds come from its id and the
    # run seed, so both calls draw the same samples (and the anchors' bound atoms hold >= 2% of
    # the mass, p ~ 0 at 4096 samples, so "fails" is not a near thing).
    tasks = _tasks("clamp")[:2]
    here = run_tasks(tasks, workers=1)
    pooled = run_tasks(tasks, workers=2)
    assert pooled == here
    assert all(r is None for r in here)  # clamp fails at the textbook anchors too


def test_a_candidate_that_kills_its_process_ends_its_tasks_not_the_run():
    tasks = _tasks("selftest-crash")[:2]
    out = run_tasks(tasks, workers=2)
    assert len(out) == 2
    assert all(isinstance(r, str) and "a shrinking process died" in r for r in out), out


@pytest.mark.parametrize("workers", [0, 1])
def test_no_pool_without_workers(workers, monkeypatch):
    import harness.runner.shrink as shrink_module

    def no_pool(*args, **kwargs):
        raise AssertionError("a pool was started")

    monkeypatch.setattr(shrink_module, "ProcessPoolExecutor", no_pool)
    task = dataclasses.replace(_tasks("clamp")[0])
    assert run_tasks([task], workers=workers) == [None]
