"""The run's throughput line (`harness.session.rows.throughput`) counts each group's samples from
a column of their own, `samples_drawn`, which every row of a case group carries (not from the
row of one particular check)."""

from __future__ import annotations

import pytest
import torch

from candidates import resolve
from harness.cases import case_by_id
from harness.session.rows import throughput
from harness.runner import CaseRunner, RunConfig


def test_every_row_of_a_group_carries_what_the_group_has_drawn():
    runner = CaseRunner(resolve("exact"), case_by_id("normal-2sigma"), torch.float32, "cpu",
                        RunConfig(profile="smoke"))
    assert runner.case_columns()["samples_drawn"] == 0
    n1 = runner.summary(1).n
    assert n1 >= RunConfig(profile="smoke").n(1) and runner.case_columns()["samples_drawn"] == n1
    n2 = runner.summary(2).n
    assert runner.case_columns()["samples_drawn"] == n1 + n2


def test_throughput_takes_each_groups_largest_figure_and_all_its_time():
    group = dict(candidate="c", case="x", dtype="float32", device="cpu")
    rows = [group | dict(check="finite", candidate_s=1.0, samples_drawn=100),
            group | dict(check="moments", candidate_s=0.5, samples_drawn=500),
            group | dict(check="ks", candidate_s=0.0, samples_drawn=500),
            group | dict(case="y", check="finite", candidate_s=0.25, samples_drawn=7),
            dict(candidate="c", case="api", dtype="float32", device="cpu", check="arguments",
                 candidate_s=0.25)]
    samples, seconds = throughput(rows)["c"]
    assert samples == 507 and seconds == pytest.approx(2.0)
