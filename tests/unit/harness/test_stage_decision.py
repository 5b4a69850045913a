"""Stage 2 only where it changes an answer (`harness.error_control`, `CaseRunner.two_stage`): a
stage-1 p-value below alpha_decide fails without a redraw, one between alpha_decide and
alpha_suspect draws stage 2 for the verdict, and a group whose verdicts stage 1 decided draws
stage 2 only where a failing row's level is undetermined at stage 1's n.

The outcome functions below stand for a statistical check with a chosen p-value at each stage:
what is tested is the runner's rule, on the exact sampler's real draws.
"""

from __future__ import annotations

import pytest
import torch

from candidates import resolve
from harness.cases import case_by_id
from harness.error_control import alpha_decide, alpha_fail_for, per_check_rate
from harness.result import Outcome
from harness.runner import CaseRunner, RunConfig

CASE = case_by_id("normal-2sigma")


def runner(candidate="exact", samples=1 << 17, dtype=torch.float32) -> CaseRunner:
    return CaseRunner(resolve(candidate), CASE, dtype, "cpu", RunConfig(samples=samples))


def staged(p1: float, p2: float):
    """A check whose p-value is `p1` on the stage-1 Summary and `p2` on stage 2's."""
    def outcome(summary, law, *, alpha):
        first = summary.n == (1 << 17)
        return Outcome(statistic=0.0, p_value=p1 if first else p2, message="planted")
    return outcome


def test_the_default_levels_hold_one_check_at_one_in_a_million():
    cfg = RunConfig()
    assert alpha_decide(cfg.alpha_suspect, cfg.alpha_fail) == pytest.approx(1e-7)
    assert per_check_rate(cfg.alpha_suspect, cfg.alpha_fail) == pytest.approx(1e-6)
    assert alpha_fail_for(1e-6, cfg.alpha_suspect) == pytest.approx(cfg.alpha_fail)


def test_a_stage_one_p_below_alpha_decide_fails_without_a_redraw():
    r = runner()
    row = r.two_stage("planted", staged(1e-8, 0.5))
    assert row.verdict == "fail" and row.n == row.n_stage1 == 1 << 17
    assert row.n_stage2 == 0 and row.stage2_reason == "" and r.cached_summary(2) is None
    assert "decides (< 1e-07)" in row.message


@pytest.mark.parametrize("p2, verdict", [(1e-4, "fail"), (2e-3, "pass")])
def test_a_suspect_stage_one_p_draws_stage_two_for_the_verdict(p2, verdict):
    r = runner()
    row = r.two_stage("planted", staged(1e-5, p2))
    assert row.verdict == verdict and row.stage2_reason == "verdict"
    assert row.n == row.n_stage2 == 4 << 17 and row.p_value == p2


def test_a_stage_one_p_at_or_above_alpha_suspect_passes():
    r = runner()
    row = r.two_stage("planted", staged(1e-3, 0.0))
    assert row.verdict == "pass" and r.cached_summary(2) is None


def test_the_exact_sampler_never_draws_stage_two_for_a_level():
    # a level is drawn for only where a check failed at stage 1: for the exact sampler each of
    # the 12 statistical checks does with chance <= 1e-7 (the assertion's failure chance
    # <= 1.2e-6); a suspect check (chance 1e-3 each) may still draw stage 2 for its verdict
    r = runner()
    rows = [r.run(check) for check in r.check_names()]
    assert all(x.verdict != "fail" for x in rows)
    assert r.stage2_reason() in ("", "verdict")


def test_a_level_undetermined_at_stage_one_draws_stage_two_for_the_level():
    # torch's +-2 sigma bfloat16 (rounds first): at 2^19 each failing check's p1 is below 1e-30
    # and its level open at 2^19 (the far tail's upper bound), decided fine at 2^21
    r = runner("torch", samples=1 << 19, dtype=torch.bfloat16)
    rows = [r.run(check) for check in r.check_names()]
    failing = [x for x in rows if x.verdict == "fail"]
    assert failing and r.stage2_reason() == "level"
    for x in failing:
        assert x.p_value_stage1 < r.alpha_decide and x.n == x.n_stage1 == 1 << 19
        assert x.n_stage2 == 1 << 21 and x.stage2_reason == "level" and x.level == "fine"
