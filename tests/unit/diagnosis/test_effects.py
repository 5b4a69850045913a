"""The effect figures' confidence bounds hold the truth, and the known-bads read the levels their
effects give.

Failure chances: `test_exact_sampler_bounds_hold_the_truth` draws the exact sampler, whose true
figures are all 0 (its law is the law), S times on G groups and computes every bound at
delta = 1e-6 / (E S G), E = `EVENTS` the bound events per Summary (one DKW event for the moved
shares and the W1 bound, one Clopper-Pearson interval per tail, far, the repeat shares, one
Bernstein interval for the mean, one for the std, one Fisher family for the correlations): by a
union bound over them it fails with probability <= 1e-6 (the correlations' bounds are
asymptotic, at >= 2^16 pairs). The draws are deterministic for the seeds. The known-bad tests run
the default run seed through `CaseRunner` (deterministic too); each asserted figure sits far from
its threshold (the margins are in the comments), so no last-bit change of a draw moves a level.
"""

from __future__ import annotations


import pytest
import torch

from candidates import resolve
from harness.cases import case_by_id
from harness.diagnosis import effects, grade, parse_thresholds
from harness.diagnosis.grading.effects import MOVED_NAMES, NAMES, TAIL_NAMES
from harness.engine import summarize_samples
from harness.families import binned, independence, moments, support
from harness.runner import CaseRunner, RunConfig
from reference import TruncatedNormal, rounded_law

#: (case, dtype): a bounded window in bf16, the trap's bounds at +-100 sigma, no bounds (tails
#: beyond 4 and 6 sigma), a lattice coarser than sigma / 2 (large-mean bf16).
EXACT_GROUPS = (("normal-2sigma", torch.bfloat16), ("abs-bounds-trap", torch.bfloat16),
                ("untruncated", torch.float16), ("large-mean", torch.bfloat16))
SEEDS = 4
SHAPE = (256, 256)
CALLS = 4
EVENTS = 16
TEST_DELTA = 1e-6 / (EVENTS * SEEDS * len(EXACT_GROUPS))
FAMILIES = (binned.FAMILY, moments.FAMILY, support.FAMILY, independence.FAMILY)


def _exact_summary(case, dtype, seed: int):
    law = rounded_law(TruncatedNormal(case.mean, case.std, case.a, case.b), dtype)
    g = torch.Generator().manual_seed(seed)
    x = resolve("exact")(torch.empty(CALLS, *SHAPE, dtype=dtype), case.mean, case.std, case.a,
                         case.b, g)
    return summarize_samples(x, law, FAMILIES), law


@pytest.mark.parametrize("case_id,dtype", EXACT_GROUPS)
def test_exact_sampler_bounds_hold_the_truth(case_id, dtype):
    case = case_by_id(case_id)
    for seed in range(SEEDS):
        summary, law = _exact_summary(case, dtype, seed)
        f = effects(summary, law, delta=TEST_DELTA)
        assert set(f) == set(NAMES)
        for name in MOVED_NAMES:
            assert f[f"{name}_lo"] == 0.0 and f[f"{name}_hi"] >= 0.0, (seed, name, f)
        for name in (*TAIL_NAMES, "mean_off", "equal_successive"):
            assert f[f"{name}_lo"] <= 0.0 <= f[f"{name}_hi"], (seed, name, f)
        assert f["std_off_lo"] == 0.0 and f["w1_lo"] == 0.0, (seed, f)
        assert f["dep_r_lo"] == 0.0 and f["duplicate_rows_lo"] <= 0.0, (seed, f)
        assert not f["far_lo"] > 0.0, (seed, f)  # NaN where the law has values that far
        assert f["nonfinite"] == 0 and f["off_support"] == 0, (seed, f)
        # no false harmful, whatever check had failed on this Summary
        for check in ("gof", "independence", "collisions"):
            assert grade(check, "fail", f).level != "harmful", (seed, check, f)


def test_exact_sampler_reads_fine_once_n_rules_out_the_far_tail():
    """At 2^18 values on +-2 sigma in bf16 every bound is within its threshold but the far
    tails' (tail@64's upper bound 5.5e-5 at a zero count, threshold 1e-5; tail@10's): a
    failing row would read undetermined, with the n that decides it (~1.45e6: the count's bound
    scales as 1 / n there); the same shares at 16x the n read fine."""
    case = case_by_id("normal-2sigma")
    summary, law = _exact_summary(case, torch.bfloat16, 0)
    small = grade("gof", "fail", effects(summary, law), n=summary.n)
    assert small.level == "undetermined" and "tail_64" in small.deciding, small
    assert 1e6 < small.decide_n < 4e6, small
    summary.binned.hist *= 16  # the same shares at 16x the n: only n changes in the bounds
    summary.moments.power_sums *= 16
    f = effects(summary, law)
    assert grade("gof", "fail", f, n=summary.n * 16).level == "fine", f


def _row(candidate: str, case_id: str, dtype, check: str, samples: int, thresholds=None):
    config = RunConfig(profile="smoke", samples=samples,
                       harm_thresholds=parse_thresholds(thresholds))
    return CaseRunner(resolve(candidate), case_by_id(case_id), dtype, "cpu", config).run(check)


def test_clamp_is_harmful():
    """normal_ then clamp_ on +-2 sigma: 4.6 % of the values on the bounds. The moved shares stay
    under theirs (3.9 % by 0.25 sigma, threshold 10 %); the std is 9 % wide (lower bound 0.066 at
    2^20 values against 0.02) and W1 0.066 sigma (lower bound 0.05 against 0.02)."""
    r = _row("clamp", "normal-2sigma", torch.float32, "atoms", 1 << 20)
    assert r.verdict == "fail" and r.level == "harmful", (r.level, r.severity)
    s = r.severity
    assert s["std_off_lo"] > 2 * 0.02 and s["w1_lo"] > 2 * 0.02, s
    assert s["moved_0p25_hi"] < 0.10, s
    # the thresholds in force decide: with the std's and W1's lifted, nothing else passes its own
    # (the level, open at stage 1's n there, is decided on stage 2's: the same std, 9 % wide)
    lifted = _row("clamp", "normal-2sigma", torch.float32, "atoms", 1 << 20, "std=0.2,w1=0.2")
    assert lifted.level == "fine" and lifted.severity["std_off"] == pytest.approx(s["std_off"],
                                                                                 abs=1e-3)


def test_point_mass_far_out_is_harmful():
    """1e-4 of the values on RN(a) = -100 sigma (the trap): ~100 far values at 2^20, 6.8e4 per
    large tensor (lower bound 4e4, threshold 1), and tail@64's lower bound 6.7e-5 (1e-5)."""
    r = _row("point-mass-1e-4-at-a", "abs-bounds-trap", torch.bfloat16, "atoms", 1 << 20)
    assert r.verdict == "fail" and r.level == "harmful", (r.level, r.severity)
    assert r.severity["far_lo"] > 1e3 and r.severity["tail_64_lo"] > 2e-5, r.severity


def test_round_toward_zero_is_fine_where_an_ulp_is_small():
    """Chopping into bf16 on +-2 sigma moves values by an ulp, <= sigma / 56: nothing moves by
    0.25 sigma, and at stage 2's 2^22 values every bound is inside its threshold."""
    r = _row("round-toward-zero", "normal-2sigma", torch.bfloat16, "gof", 1 << 20)
    assert r.verdict == "fail" and r.level == "fine", (r.level, r.n, r.severity)
    assert r.severity["moved_0p25_hi"] == 0.0, r.severity


def test_round_toward_zero_is_harmful_where_an_ulp_is_half_a_sigma():
    """large-mean bf16: an ulp at 100 is 0.5 = 0.56 sigma, and chopping moves about half the
    values by it: moved@0.5's lower bound (0.48) far above its 3 %."""
    r = _row("round-toward-zero", "large-mean", torch.bfloat16, "gof", 1 << 18)
    assert r.verdict == "fail" and r.level == "harmful", (r.level, r.severity)
    assert r.severity["moved_0p5_lo"] > 0.2, r.severity
