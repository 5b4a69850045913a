"""Shrinking over the run's workers (harness.runner.shrink.run_tasks): spawned processes give the
boundaries one process gives, in task order, and a candidate that kills its process ends its
tasks with a reason, not the run."""

import dataclasses

import pytest
import torch

from candidates import resolve
from harness.cases import parse_case_spec
from harness.explore import explored_cases
from harness.runner import CaseRunner, RunConfig
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


def test_a_probe_reads_the_verdicts_a_run_gives_without_their_diagnosis():
    """A shrink's probes read verdicts only (`shrink.fails`): their runner leaves the mechanism
    catalog out, and every verdict, p-value and n is the full runner's. Deterministic: both
    runners derive the same seeds, so they draw the same samples."""
    case = parse_case_spec("mean=0,std=1,a=-6,b=-4")  # below-mean-window writes RN(b) here
    cand = resolve("below-mean-window")
    full = CaseRunner(cand, case, torch.float32, "cpu", CONFIG)
    probe = CaseRunner(cand, case, torch.float32, "cpu", CONFIG, verdicts_only=True)
    checks = [c.name for c in full.checks() if c.kind != "api"]
    rows = {name: (full.run(name), probe.run(name)) for name in checks}
    failing = [name for name, (row, _) in rows.items() if row.verdict == "fail"]
    assert failing and all(rows[name][0].mechanism for name in failing)
    for name, (row, quick) in rows.items():
        assert (quick.verdict, quick.p_value, quick.n) == (row.verdict, row.p_value, row.n), name
        assert (quick.level, quick.mechanism) == ("", ""), name
