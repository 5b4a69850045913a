"""A draw's warnings: each distinct text once, the first KEPT_WARNINGS of them, heard in every
group, whatever ran before it in the process."""

from __future__ import annotations

import textwrap
import warnings

import torch

from candidates import resolve
from harness.cases import Case
from harness.engine.caught import KEPT_WARNINGS, caught_warnings
from harness.runner import RunConfig
from harness.runner.case_runner import CaseRunner


def test_a_warning_on_every_call_is_one_line():
    with caught_warnings() as heard:
        for _ in range(10_000):
            warnings.warn("the same thing", UserWarning)
    assert heard.lines() == ["UserWarning: the same thing"]


def test_warnings_worded_differently_each_time_keep_the_first_and_count_the_rest():
    with caught_warnings() as heard:
        for i in range(1000):
            warnings.warn(f"call {i}", RuntimeWarning)
    lines = heard.lines()
    assert lines[:KEPT_WARNINGS] == [f"RuntimeWarning: call {i}" for i in range(KEPT_WARNINGS)]
    assert lines[KEPT_WARNINGS:] == [f"and {1000 - KEPT_WARNINGS} more warnings with other texts"]
    assert len(heard.texts) == KEPT_WARNINGS  # what is held does not grow with the calls


def test_the_filters_and_the_display_are_restored():
    show, filters = warnings.showwarning, list(warnings.filters)
    with caught_warnings():
        warnings.warn("inside")
    assert warnings.showwarning is show and warnings.filters == filters


def test_every_group_row_names_its_candidates_warning(tmp_path):
    """Two groups of one process hear the same warning from the same line: Python's
    once-per-location registry would hide it from the second."""
    (tmp_path / "warner.py").write_text(textwrap.dedent('''
        import warnings
        from candidates.builtin import exact_trunc_normal_

        def fn(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
            warnings.warn("this sampler is deprecated", DeprecationWarning)
            return exact_trunc_normal_(tensor, mean, std, a, b, generator)
    '''))
    candidate = resolve(f"{tmp_path}/warner.py:fn")
    config = RunConfig(samples=4096)
    for case_id in ("first", "second"):
        runner = CaseRunner(candidate, Case(case_id, 0.0, 1.0, -2.0, 2.0, (64,)), torch.float32,
                            "cpu", config)
        row = runner.run("finite")
        assert row.details["warnings"] == "DeprecationWarning: this sampler is deprecated"
