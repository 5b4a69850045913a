"""What the diagnosis tests share: a candidate's stage-1 Summary on a case, drawn by the real
runner, and one match of the catalog by name."""

from __future__ import annotations

from candidates import resolve
from harness.cases import case_by_label
from harness.runner import CaseRunner, RunConfig


def stage_one(name: str, case: str, dtype, n: int, run_seed: int | None = None, **settings):
    """(runner, its stage-1 Summary) of `name` on `case` (`settings`: more of RunConfig)."""
    if run_seed is not None:
        settings["run_seed"] = run_seed
    config = RunConfig(samples=n, **settings)
    runner = CaseRunner(resolve(name), case_by_label(case), dtype, "cpu", config)
    summary = runner.summary(1)
    assert not isinstance(summary, Exception), summary
    return runner, summary


def named(matches, name):
    """The match called `name` among `matches` (a failed assertion listing them where none)."""
    found = [m for m in matches if m.name == name]
    assert found, f"{name} not among {[(m.name, m.note) for m in matches]}"
    return found[0]
