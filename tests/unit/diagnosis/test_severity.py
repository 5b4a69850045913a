"""The severity figures against their noise floors: the exact sampler sits under them, the
known-bads' coarse defects cross them (detectable), and their levels follow their effects, not
their floors: the clamp and a shifted mean harmful; a 2 % wider scale, a missing 4 sigma tail and
the single-value defects fine.

Failure chances: `test_exact_sampler_stays_under_every_floor` compares each figure of S
Summaries with its floor at delta = 1e-6 / (5 S) (`severity(..., delta)`: five figures with a
floor each, shift_share's being 0): by the floors' bounds (`harness.diagnosis.grading`) it fails
with probability <= 1e-6, and the figures it draws are deterministic for the seeds (the exact
sampler's float64 uniforms are the same bits on every x86 CPU). The known-bad tests run the
default run seed through `CaseRunner` (deterministic too); each asserted figure sits many floors
away (the margins are in the comments), so no last-bit change of a draw moves a verdict.
"""

from __future__ import annotations

import math

import pytest
import torch

from candidates import resolve
from harness.cases import case_by_id
from harness.diagnosis import NAMES, beyond_floor, level_of, severity
from harness.engine import summarize_samples
from harness.families import binned
from harness.result import Result
from harness.runner import CaseRunner, RunConfig
from reference import TruncatedNormal, rounded_law

#: (case, dtype) the exact sampler is drawn on: a bounded window, the trap's far bounds in a
#: 16-bit lattice, no bounds (the 4 and 6 sigma tails hold mass), a one-sided deep tail.
EXACT_GROUPS = (("normal-2sigma", torch.float32), ("abs-bounds-trap", torch.bfloat16),
                ("untruncated", torch.float16), ("tail-5", torch.float32))
SEEDS = 8
N = 1 << 18
FIGURES_WITH_FLOORS = 5
TEST_DELTA = 1e-6 / (FIGURES_WITH_FLOORS * SEEDS * len(EXACT_GROUPS))


def _law(case, dtype):
    return rounded_law(TruncatedNormal(case.mean, case.std, case.a, case.b), dtype)


def _exact_summary(case, dtype, seed: int):
    law = _law(case, dtype)
    g = torch.Generator().manual_seed(seed)
    x = resolve("exact")(torch.empty(N, dtype=dtype), case.mean, case.std, case.a, case.b, g)
    return summarize_samples(x.reshape(1, -1), law, (binned.FAMILY,)), law


@pytest.mark.parametrize("case_id,dtype", EXACT_GROUPS)
def test_exact_sampler_stays_under_every_floor(case_id, dtype):
    case = case_by_id(case_id)
    for seed in range(SEEDS):
        summary, law = _exact_summary(case, dtype, seed)
        f = severity(summary, law, delta=TEST_DELTA)
        assert set(f) == set(NAMES)
        assert not beyond_floor(f), (seed, f)
        assert f["shift_share"] == 0.0 and f["shift_sigma"] == 0.0, (seed, f)
        assert all(math.isfinite(v) for v in f.values()), (seed, f)


def test_floors_shrink_with_n_like_noise():
    """W1's and misplaced's floors are noise: ~1/sqrt(n) (x4 the n, about half the floor)."""
    case = case_by_id("normal-2sigma")
    summary, law = _exact_summary(case, torch.float32, 0)
    small = severity(summary, law)
    summary.binned.hist *= 4  # the same shape at 4x the n: only n changes in the floors
    large = severity(summary, law)
    for name in ("w1_floor", "misplaced_floor"):
        assert 0.45 < large[name] / small[name] < 0.55, (name, small[name], large[name])
    assert large["w1_sigma"] == pytest.approx(small["w1_sigma"])


def _row(candidate: str, case_id: str, dtype, check: str, samples: int | None = None):
    config = RunConfig(profile="smoke", samples=samples)
    return CaseRunner(resolve(candidate), case_by_id(case_id), dtype, "cpu", config).run(check)


def test_torch_legacy_bfloat16_trap_is_harmful():
    """0.2 % of the values on a = -100 sigma, decisive at stage 1 (smoke n, 70 000 values):
    measured shift_share 2.2e-3 moved by 95.6 sigma (the DKW band reaches ~4 sigma from the
    law's quantiles there), beyond6 2.2e-3 vs floor 1.4e-5, W1 0.22 vs floor 0.029."""
    r = _row("torch-legacy", "abs-bounds-trap", torch.bfloat16, "atoms")
    assert r.verdict == "fail" and r.level == "harmful", (r.verdict, r.level, r.severity)
    s = r.severity
    assert 1.5e-3 < s["shift_share"] < 3e-3 and 90 < s["shift_sigma"] < 100, s
    assert s["beyond6"] > 10 * s["beyond6_floor"] and s["w1_sigma"] > 5 * s["w1_floor"], s
    row = r.as_row()
    assert row["level"] == "harmful" and row["severity_shift_sigma"] == s["shift_sigma"]


@pytest.mark.parametrize("candidate,case_id,check,figure,level", [
    # measured at stage 2 (n 2^22): W1 0.018 vs floor 0.0034 (x5.3); harmful by its mean,
    # +0.018 sigma with lower bound 0.015 against the threshold 0.01
    ("shift-0.02sigma", "normal-2sigma", "moments", "w1_sigma", "harmful"),
    # W1 0.0097 vs floor 0.0034 (x2.9); fine: std +1.0 % (threshold 2 %), W1 0.0097 (0.02),
    # nothing moved by 0.25 sigma
    ("scale-2pct-wide", "normal-2sigma", "moments", "w1_sigma", "fine"),
    # 4.6 % of the values on the bounds: misplaced 0.045 vs its floor 0.0053 (x8.6); harmful by
    # its std (+9 %, lower bound 0.079 against 0.02) and W1 (0.066, lower bound 0.060)
    ("clamp", "normal-2sigma", "atoms", "misplaced", "harmful"),
    # no value beyond 4 sigma where the law has 6.3e-5: beyond4 -6.3e-5 vs floor 2.0e-5 (x3.2);
    # fine: a deficit of 6.3e-5 beyond 4 sigma (threshold 1e-3), 0.03 % moved by 0.25 sigma
    ("no-tail-beyond-3.5sigma", "untruncated", "tails", "beyond4", "fine"),
])
def test_coarse_defects_cross_their_floors_and_read_their_effect(candidate, case_id, check,
                                                                 figure, level):
    """A coarse figure beyond its floor says the defect is detectable; the level says whether
    its effect passes a threshold of harm (`harness.diagnosis.grading.levels`)."""
    r = _row(candidate, case_id, torch.float32, check, samples=1 << 20)
    assert r.verdict == "fail" and r.level == level, (r.verdict, r.level, r.severity)
    assert figure in beyond_floor(r.severity), r.severity


@pytest.mark.parametrize("candidate,case_id,dtype,check", [
    # z * 0.02 in float64: one last-4-bit class at x0.64; W1 0.00084 vs floor 0.0035
    ("torch", "abs-bounds-trap", torch.float64, "low_bits"),
    # 2^24 values at most where the law has 2^26: ~4x the pairs; W1 0.00075 vs floor 0.0034
    ("uniform-24-bits", "normal-2sigma", torch.float32, "collisions"),
])
def test_single_value_defects_are_fine(candidate, case_id, dtype, check):
    r = _row(candidate, case_id, dtype, check, samples=1 << 20)
    assert r.verdict == "fail" and r.level == "fine", (r.verdict, r.level, r.severity)
    assert not beyond_floor(r.severity), r.severity


def test_rows_without_a_summary_are_api_and_pass_rows_carry_nothing():
    r = _row("selftest-raises", "normal-2sigma", torch.float32, "gof")
    assert r.verdict in ("fail", "error") and r.level == "api" and r.severity == {}
    assert r.mechanism  # the catalog's word, or "unexplained"
    ok = _row("exact", "normal-2sigma", torch.float32, "gof")
    assert ok.verdict == "pass" and ok.level == "" and ok.severity == {} and ok.mechanism == ""


def test_level_of_follows_the_declaration():
    """The figures' bounds against their thresholds (`harness.diagnosis.grading.levels`)."""
    quiet = {f"moved_{r}{end}": 0.0 for r in ("0p25", "0p5", "1", "2")
             for end in ("", "_lo", "_hi")}
    harmful = dict(quiet, moved_0p5=0.06, moved_0p5_lo=0.04, moved_0p5_hi=0.08)
    open_ = dict(quiet, moved_0p5=0.01, moved_0p5_lo=0.0, moved_0p5_hi=0.04)
    assert level_of("gof", "pass", harmful) == ""
    assert level_of("gof", "fail", harmful) == "harmful"
    assert level_of("gof", "xfail", quiet) == "fine"
    assert level_of("gof", "fail", open_) == "undetermined"
    assert level_of("gof", "fail", {}) == "api"  # the draw did not complete
    assert level_of("collisions", "fail", harmful) == "harmful"  # the group's figures
    assert level_of("collisions", "fail", dict(quiet, equal_values=0.01, equal_values_lo=0.005,
                                               equal_values_hi=0.02)) == "harmful"
    assert level_of("gof", "fail", dict(quiet, equal_values=0.01, equal_values_lo=0.005,
                                        equal_values_hi=0.02)) == "fine"  # not gof's figure
    assert level_of("bounds", "fail", dict(quiet, off_support=1.0)) == "harmful"
    assert level_of("gof", "fail", dict(quiet, std_off=0.05, std_off_lo=0.0)) == "undetermined"
    assert level_of("gof", "fail", dict(quiet, std_off=0.05, std_off_lo=0.03)) == "harmful"
    assert level_of("written", "fail", harmful) == "api"
    assert level_of("arguments", "fail", {}) == "api"
    assert level_of("gof", "error", harmful) == "api"
    assert level_of("gof", "fail", {"w1_sigma": 0.0}) == "undetermined"  # no moved figure
    Result("gof", "fail", level=level_of("gof", "fail", open_))  # a valid level
