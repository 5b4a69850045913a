"""The n each profile asks of a case at each stage: fixed by the profile and the case alone."""

from __future__ import annotations

import pytest

from harness.cases import PROFILES, SLOW_DRAW, STAGE2_FACTOR, case_by_id
from harness.runner import RunConfig


def test_stage_two_draws_four_times_stage_one():
    case = case_by_id("normal-2sigma")
    for name in ("smoke", "pr", "nightly"):
        profile = PROFILES[name]
        assert profile.stage_samples(1, "cpu", case) == profile.n
        assert profile.stage_samples(2, "cpu", case) == STAGE2_FACTOR * profile.n


def test_a_slow_draw_case_draws_its_n_at_both_stages_at_pr():
    """deep-window-10-1000 (torch's rejection loop: seconds per call) draws 2^18 at each stage at
    pr, so its group spends 8 calls, not 20; nightly draws it in full."""
    case = case_by_id("deep-window-10-1000")
    assert SLOW_DRAW in case.tags
    pr = PROFILES["pr"]
    assert pr.stage_samples(1, "cpu", case) == pr.stage_samples(2, "cpu", case) == 1 << 18
    assert RunConfig().n(2, "cpu", case) == 1 << 18
    nightly = PROFILES["nightly"]
    assert nightly.stage_samples(2, "cpu", case) == STAGE2_FACTOR * nightly.n


@pytest.mark.parametrize("case_id", ["deep-window-10-1000", "normal-2sigma"])
def test_samples_given_draws_four_times_them_at_stage_two(case_id):
    """--samples N is the stage-1 n of every case, and stage 2 draws 4 N: a reproduce line with
    --samples gives both stages of a budget-limited group back."""
    cfg = RunConfig(samples=1 << 12)
    case = case_by_id(case_id)
    assert (cfg.n(1, "cpu", case), cfg.n(2, "cpu", case)) == (1 << 12, STAGE2_FACTOR << 12)
