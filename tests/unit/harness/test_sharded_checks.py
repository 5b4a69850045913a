"""The shard-only checks prove they can fail and that they do not cry wolf.

Two levels:

* In one process (`harness.sharded.part_fold.fold_layout`, the folding code the ranks run): each component
  of `shards` is driven by a defect of its own, the hard checks `replicas` and `sharding` by one
  differing element, and the false-alarm rate of `shards` is measured on honest splits of exact
  draws over many seeds (stage-1 p < 1e-3 at most at the rate 1e-3 allows; the correlation
  component's p-values uniform).
* On real ranks (gloo, DTensor, `harness.sharded.ranks`): every known-bad sharded sampler fails the
  check it names, through `ShardedCaseRunner` exactly as a run does; `exact-counter` passes every
  check on every layout. (tests/calibration/test_sharded_calibration.py runs it over 20 seeds.)
"""

from __future__ import annotations


import numpy as np
import pytest
import torch
from scipy import stats

from candidates import resolve
from harness.cases import Case, case_by_id
from harness.checks.sharded import check_replicas, check_shards, check_sharding
from harness.sharded.dtensor_runner import ShardedCaseRunner
from harness.engine import CandidateFailure
from harness.sharded.layout import Layout, boxes
from harness.runner import RunConfig
from harness.sharded.part_fold import ShardingStats, box_slices, fold_layout
from harness.summary import Summary
from reference import TruncatedNormal, rounded_law

CASE = Case("c", 0.0, 1.0, -2.0, 2.0, (16, 32))


def _law(case, dtype):
    return rounded_law(TruncatedNormal(case.mean, case.std, case.a, case.b), dtype)


def _exact(case, dtype, calls, seed):
    g = torch.Generator().manual_seed(seed)
    out = torch.empty((calls, *case.shape), dtype=dtype)
    exact = resolve("exact")
    for k in range(calls):
        exact(out[k], case.mean, case.std, case.a, case.b, g)
    return out


def _judge(batch, law, layout, locals_=None):
    parts, st = fold_layout(batch, law, layout, locals_=locals_)
    s = Summary.merge(parts)
    s.sharding = st
    return s


def _locals(batch, layout):
    return [batch[(slice(None),) + box_slices(*b)].clone() for b in boxes(batch.shape[1:], layout)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_each_shards_component_catches_its_own_defect(dtype):
    law = _law(CASE, dtype)
    batch = _exact(CASE, dtype, 40, seed=1)
    layout = Layout(2, "shard0")

    honest = check_shards(_judge(batch, law, layout), law)
    if honest.p_value < 1e-3:  # exact draws: a second look on a fresh seed, P(both) <= 1e-6
        again = check_shards(_judge(_exact(CASE, dtype, 40, seed=1001), law, layout), law)
        assert again.p_value >= 1e-3, (honest.message, again.message)

    same = _locals(batch, layout)
    same[1] = same[0].clone()
    out = check_shards(_judge(batch, law, layout, same), law)
    # deterministic: 40 x 256 elements equal, and every row, in two shards (p ~ 0 for any draw)
    assert out.p_value < 1e-12 and "bit-identical" in out.message
    for component in ("equal elements", "correlation", "repeated rows", "equal shards"):
        assert out.details[f"p[shards 0 and 1: {component}]"] < 1e-6, component

    def shift(b):  # shard 1's row k is shard 0's row k + 1: rows repeat
        shifted = _locals(b, layout)
        shifted[1][:, :-1] = shifted[0][:, 1:]
        return check_shards(_judge(b, law, layout, shifted), law)

    out = shift(batch)
    assert out.details["p[shards 0 and 1: repeated rows]"] < 1e-12  # 7 of 8 rows, every call
    # element k of shard 0 against shard 0's next row's: independent draws, correlation's null
    # holds; a second look on a fresh seed: P(both < 1e-3) <= 1e-6
    corr = out.details["p[shards 0 and 1: correlation]"]
    if corr <= 1e-3:
        corr = shift(_exact(CASE, dtype, 40, seed=1002)).details["p[shards 0 and 1: correlation]"]
    assert corr > 1e-3
    assert out.details["p[shards 0 and 1: equal shards]"] == 1.0
    assert "repeat a row of shard 1" in out.message

    mirrored = _locals(batch, layout)  # shard 1 = -shard 0 (the law is symmetric): r = -1
    mirrored[1] = -mirrored[0]
    out = check_shards(_judge(batch, law, layout, mirrored), law)
    # deterministic: r = -1 exactly, over 40 x 256 pairs; no row of -x equals a row of x (no 0)
    assert out.details["p[shards 0 and 1: correlation]"] < 1e-12 and out.effect < -0.99
    assert out.details["p[shards 0 and 1: repeated rows]"] == 1.0


def test_replicas_and_sharding_fail_on_one_differing_element():
    law = _law(CASE, torch.float32)
    batch = _exact(CASE, torch.float32, 5, seed=2)
    layout = Layout(3, "replicate")
    reps = [batch, batch.clone(), batch.clone()]
    assert check_replicas(_judge(batch, law, layout, reps), law).p_value == 1.0
    reps[2][3, 4, 5] = -reps[2][3, 4, 5]
    out = check_replicas(_judge(batch, law, layout, reps), law)
    assert out.decisive and "rank 2, call 4: 1 of 512 elements differ" in out.message

    s = _judge(batch, law, Layout(2, "shard1"))
    st: ShardingStats = s.sharding
    st.reference_calls, st.reference_per_call = 4, [0, 0, 0, 0]
    st.reference_elements, st.reference_differing = 4 * 512, 0
    st.declared_invariant = True
    assert check_sharding(s, law).p_value == 1.0
    st.reference_per_call[2] = st.reference_differing = 1
    out = check_sharding(s, law)
    assert out.decisive and "1 of 2048 elements differ" in out.message
    st.declared_invariant = False  # recorded, not held
    out = check_sharding(s, law)
    assert not out.decisive and out.p_value == 1.0 and "recorded" in out.message


def test_the_checks_say_why_they_do_not_apply():
    law = _law(CASE, torch.float32)
    batch = _exact(CASE, torch.float32, 3, seed=3)
    plain = _judge(batch, law, Layout(2, "shard0"))
    plain.sharding = None
    for check in (check_replicas, check_shards, check_sharding):
        assert not check(plain, law).applicable
    assert "no replicas" in check_replicas(_judge(batch, law, Layout(2, "shard0")), law).message
    assert "see replicas" in check_shards(_judge(batch, law, Layout(2, "replicate")), law).message
    one_row = Case("one-row", 0.0, 1.0, -2.0, 2.0, (1, 8, 4))
    b1 = _exact(one_row, torch.float32, 3, seed=3)
    out = check_shards(_judge(b1, _law(one_row, torch.float32), Layout(2, "shard0")), law)
    assert not out.applicable and "fewer than two ranks hold elements" in out.message


@pytest.mark.parametrize("dtype,layout,seeds", [(torch.bfloat16, Layout(2, "shard0"), 450),
                                                (torch.float16, Layout(4, "shard1"), 225),
                                                (torch.float32, Layout(3, "shard0"), 150)],
                         ids=lambda v: v.label if isinstance(v, Layout) else str(v))
def test_shards_does_not_cry_wolf_on_honest_splits(dtype, layout, seeds):
    """Exact draws over many seeds cut into the layout's shards: stage-1 p < 1e-3 no more often
    than the rate 1e-3 allows (one-sided binomial at 1e-6), the correlation p-values (one per shard
    pair and seed: 450, 1350, 450) uniform (KS at 1e-6): the false-alarm rate is <= alpha per
    stage, <= 1e-6 with two stages.

    Each assertion fails for a right check with probability <= 1e-6. The seeds are 1.5x those
    that tested at 1e-4 before: KS's critical distance is the same as then (sqrt(ln(2 / level) /
    2N) grows by 1.47 from 1e-4 to 1e-6)."""
    law = _law(CASE, dtype)
    ps, corr = [], []
    for seed in range(seeds):
        batch = _exact(CASE, dtype, 8, seed=10_000 + seed)
        out = check_shards(_judge(batch, law, layout), law)
        ps.append(out.p_value)
        corr += [v for k, v in out.details.items() if k.endswith("correlation]")]
    suspicious = int(np.sum(np.asarray(ps) < 1e-3))
    # a rate <= 1e-3: P(binomial tail <= 1e-6) <= 1e-6 (fails at >= 7, 6, 5 of 450, 225, 150)
    assert stats.binom.sf(suspicious - 1, len(ps), 1e-3) > 1e-6, suspicious
    assert stats.kstest(corr, "uniform").pvalue > 1e-6  # uniform p-values: P = 1e-6


# ------------------------------------------------------------------------------ real ranks

RUN = RunConfig(samples=2**15, case_timeout=20.0)


def _verdict(spec, layout, check, case=None, dtype=torch.bfloat16):
    runner = ShardedCaseRunner(resolve(spec), case or case_by_id("abs-bounds-trap"), dtype, "cpu",
                               RUN, layout)
    assert not isinstance(runner.summary(1), CandidateFailure), runner.summary(1)
    return runner.run(check)


@pytest.mark.parametrize("spec,layout,check,says", [
    ("local-shard", Layout(2, "shard0"), "shards", "bit-identical"),
    ("local-shard", Layout(4, "shard1"), "shards", "bit-identical"),
    ("selftest-shifted-shards", Layout(2, "shard0"), "shards", "repeat a row"),
    ("selftest-mirrored-shards", Layout(2, "shard1"), "shards", "r -1"),
    ("selftest-replica-drift", Layout(2, "replicate"), "replicas", "differ from rank 0"),
    ("selftest-layout-dependent", Layout(2, "shard0"), "sharding", "declares itself"),
    ("local-shard", Layout(2, "replicate", "per-rank"), "replicas", "differ from rank 0"),
], ids=lambda v: v.label if isinstance(v, Layout) else str(v))
def test_known_bad_sharded_samplers_fail_their_check_on_real_ranks(spec, layout, check, says):
    result = _verdict(spec, layout, check)
    assert result.verdict == "fail", result.message
    assert says in result.message


def test_the_saboteurs_break_only_what_they_name():
    """Each saboteur is exact-counter except for its one defect: the other shard checks pass.

    shards and gof are statistical: a pass verdict is the harness's two-stage rule, false alarm
    <= 1e-6 each (fixed run seed besides); sharding is exact (bit equality)."""
    assert _verdict("selftest-layout-dependent", Layout(2, "shard0"), "shards").verdict == "pass"
    assert _verdict("selftest-replica-drift", Layout(2, "replicate"), "gof").verdict == "pass"
    assert _verdict("selftest-mirrored-shards", Layout(2, "shard1"), "sharding").verdict == "pass"
