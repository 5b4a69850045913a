"""A reproduce line carries the harm thresholds in force where they are not the defaults, in
text ``--harm-thresholds`` reads back to the same thresholds, so the rerun grades the row at the
same level (tests/e2e/test_plugin.py reruns such a line)."""

from __future__ import annotations

import shlex

import torch

from candidates import resolve
from harness.diagnosis import DEFAULT_THRESHOLDS, parse_thresholds
from harness.runner import RunConfig
from harness.session.repro import ReproLines, changed_thresholds


def _line(thresholds) -> list[str]:
    lines = ReproLines(RunConfig(harm_thresholds=thresholds), (1,), {})
    return shlex.split(lines.line(resolve("exact"), None, torch.float32, "cpu", "contract"))


def test_the_default_thresholds_add_nothing():
    assert "--harm-thresholds" not in _line(DEFAULT_THRESHOLDS)
    assert changed_thresholds(DEFAULT_THRESHOLDS) == ""
    assert "--harm-thresholds" not in _line(parse_thresholds("moved@0.5=0.03"))  # the default


def test_other_thresholds_ride_on_the_line_and_read_back_the_same(parse):
    given = parse_thresholds("moved@0.5=0.05,tail@64=1e-6,std=inf,w1=0.0123456789")
    line = _line(given)
    text = line[line.index("--harm-thresholds") + 1]
    # only those not at their default, in the option's order, every digit kept
    assert text == "moved@0.5=0.05,tail@64=1e-06,std=inf,w1=0.0123456789"
    assert parse_thresholds(text) == given
    assert parse(harm_thresholds=text).harm_thresholds == given  # as the rerun's options read it
    assert line[-2:] == ["-k", "test_contract"]
