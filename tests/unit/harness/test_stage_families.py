"""What stage 2 folds: every family the group's checks read, but the independence, repetition and
position families only where one of their checks went to stage 2 (`CaseRunner.stage_families`);
the diagnosis then reads those from the stage-1 Summary that judged their checks
(`Evidence.holder`)."""

from __future__ import annotations

import numpy as np
import torch

from candidates import resolve
from harness.cases import case_by_id
from harness.diagnosis import OWN_STAGE_FAMILIES
from harness.diagnosis.evidence import FALSE_MATCH, Evidence
from harness.engine import summarize_samples
from harness.families import independence, moments
from harness.families.independence import INDEPENDENCE
from harness.runner import CaseRunner, RunConfig


def run_group(candidate: str, samples: int) -> tuple[CaseRunner, list]:
    runner = CaseRunner(resolve(candidate), case_by_id("normal-2sigma"), torch.float32, "cpu",
                        RunConfig(profile="smoke", samples=samples))
    return runner, [runner.run(check) for check in runner.check_names()]


def folded(summary) -> set:
    return set(summary.states)


def test_stage_two_folds_own_stage_families_only_for_their_suspects():
    # A shift of 0.02 sigma at n = 2^20 is 20 sds of the mean: moments and gof go to stage 2
    # but with a chance below 1e-80. Repetition and position do not see a shift: each is
    # suspect with chance alpha_suspect = 1e-3, both (the last assertion's failure) 1e-6.
    # Deterministic at the fixed run seed, as every draw here.
    # Stage 1 decides those verdicts alone (p below 1e-7); the stage 2 a group draws where a
    # verdict or a level needs it folds the same families, drawn here as the runner draws it.
    runner, rows = run_group("shift-0.02sigma", 1 << 20)
    s1, s2 = runner.cached_summary(1), runner.summary(2)
    suspects = runner.suspects()
    assert suspects and all(r.verdict == "fail" for r in rows if r.check in
                            {c.name for c in suspects})
    read = {f.name for check in suspects for f in check.families}
    assert folded(s2) == folded(s1) - (OWN_STAGE_FAMILIES - read)
    assert OWN_STAGE_FAMILIES - folded(s2), "no own-stage family was left out of this stage 2"
    # every row that stage 2 decided is judged on families stage 2 folded
    by_name = {c.name: c for c in runner.checks()}
    for r in rows:
        if r.n_stage2:
            assert {f.name for f in by_name[r.check].families} <= folded(s2)


def test_a_suspect_dependence_check_gets_its_family_at_stage_two_and_its_mechanism():
    # every odd element mirrors its even neighbour (correlation -1 in quantile space): the lag-1
    # statistic at 2^15 pairs is over 100 sds out (chance of a pass < 1e-100)
    runner, rows = run_group("antithetic-neighbours", 1 << 16)
    row = next(r for r in rows if r.check == INDEPENDENCE.name)
    assert row.verdict == "fail" and row.mechanism == "dependence"
    assert INDEPENDENCE in runner.suspects()
    assert runner.summary(2).has(independence.FAMILY.name)


def test_evidence_reads_an_own_stage_family_from_the_first_stage():
    law = CaseRunner(resolve("exact"), case_by_id("normal-2sigma"), torch.float32, "cpu",
                     RunConfig(profile="smoke")).law
    x = torch.from_numpy(np.random.default_rng(7).standard_normal((64, 256)).clip(-2, 2)
                         .astype(np.float32))
    first = summarize_samples(x, law, INDEPENDENCE.families + (moments.FAMILY,))
    second = summarize_samples(x, law, (moments.FAMILY,))
    ev = Evidence(second, law, first)
    assert ev.has("independence") and ev.holder("independence") is first
    assert ev.state("independence") is first.independence
    assert ev.holder("moments") is second  # not an own-stage family: the deciding stage's
    expected = INDEPENDENCE.outcome(first, law, alpha=FALSE_MATCH)
    assert ev.outcome(INDEPENDENCE).p_value == expected.p_value
    alone = Evidence(second, law)
    assert not alone.has("independence") and alone.holder("independence") is second
