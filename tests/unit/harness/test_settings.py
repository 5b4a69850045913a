"""torch's process-wide settings: a candidate that changes one and leaves it so fails `contract`
naming it, and neither a draw nor a probe leaves it changed for what runs next."""

from __future__ import annotations

import functools

import pytest
import torch

from candidates import resolve
from harness import engine
from harness.cases import case_by_id
from harness.checks import CHECKS
from harness.checks.contract import check_contract
from harness.engine import changed_settings, restore_settings, torch_settings
from reference import TruncatedNormal, rounded_law

run_engine = functools.partial(engine.run_engine, families=CHECKS.families())
EXACT = resolve("exact")
CASE = case_by_id("normal-2sigma")

#: (what the sampler does, what `changed_settings` says of it)
LEAVES = [
    (lambda: torch.set_grad_enabled(False), "grad mode on -> off"),
    (lambda: torch.set_default_dtype(torch.float64),
     "default dtype torch.float32 -> torch.float64"),
    (lambda: torch.use_deterministic_algorithms(True), "deterministic algorithms off -> on"),
    (lambda: torch.set_num_threads(1 if torch.get_num_threads() > 1 else 2), "threads "),
]


def leaving(change):
    def sampler(tensor, mean, std, a, b, generator=None):
        change()
        return EXACT(tensor, mean, std, a, b, generator)

    return sampler


@pytest.fixture(autouse=True)
def settings_as_they_were():
    before = torch_settings()
    yield
    restore_settings(before)
    assert torch_settings() == before


@pytest.mark.parametrize("change, says", LEAVES)
def test_a_changed_setting_is_named_and_set_back(change, says):
    before = torch_settings()
    change()
    assert says in changed_settings(before)
    restore_settings(before)
    assert changed_settings(before) is None


@pytest.mark.parametrize("change, says", LEAVES)
def test_contract_fails_a_candidate_that_leaves_a_setting_changed(change, says):
    before = torch_settings()
    result = check_contract(leaving(change), CASE, torch.float32, "cpu", 5, timeout=10.0)
    assert result.verdict == "fail", result.message
    assert "changed torch's settings and left them so (" + says in result.message
    assert torch_settings() == before  # set back after each probe


@pytest.mark.parametrize("change, says", LEAVES)
def test_a_draw_sets_them_back_for_whatever_runs_next(change, says):
    before = torch_settings()
    law = rounded_law(TruncatedNormal(CASE.mean, CASE.std, CASE.a, CASE.b), torch.float32)
    run_engine(leaving(change), CASE, torch.float32, "cpu", law, 4 * 65536, 1)
    assert torch_settings() == before


def test_the_exact_sampler_changes_none():
    result = check_contract(EXACT, CASE, torch.float32, "cpu", 5, timeout=10.0)
    assert result.verdict == "pass", result.message
