"""Calibration of the checks at the resolution of single values: the gold samplers raise no false alarm.

`exact`, `exact-counter` and `scipy` write the rounded law exactly, so their equal-value pairs and
coarse-lattice counts are draws of the checks' null laws. Through `CaseRunner`, as a real run
does, over fixed run seeds per (candidate, case, dtype), three assertions per block:

1. **No fail verdict** beyond one: each run's two-stage false alarm is <= 1e-6 (stage 1 and a
   fresh stage 2 both below 1e-3), so two or more fails of N runs have probability
   <= C(N, 2) 1e-12 (< 1e-8 at N = 24).
2. **Stage-1 suspicious rate**: the count of p1 < 1e-3 out of N at most `max_count(N, 1e-3)`:
   a larger count has probability <= 1e-6 for a test whose rate is <= 1e-3 (both tests are
   (quasi-)exact Poisson / binomial tests, doubled smaller tail: super-uniform).
3. **The law's expectations, pooled**: the equal pairs summed over the seeds against their
   summed expectation (two-sided quasi-Poisson test, `quasi_poisson_p`) and each lattice count
   summed over the seeds against Bin(scanned, mass): p >= 1e-6. This checks the reference's
   sum p^2 and lattice masses against real samplers to ~1-3 % (what one run cannot).

The low-order bits (`check_low_bits`, judged here on each run's stage-1 Summary until the check
is registered) get the same three: no run with p < 1e-8 (one of <= 100 runs: <= 1e-6), the count
of p < 1e-3 at most `max_count(N, 1e-3)`, and the class counts summed over the seeds against
the law's class masses (chi-square, p >= 1e-6), which checks `RoundedLaw.low_bit_masses` against
real samplers to ~0.2 % per class. Blocks in float64 and float32, exact-counter's float64 too.

Each assertion fails a right harness with probability <= 1e-6 a priori; the seeds are fixed and
the float32 samples machine-independent (tests/calibration/test_calibration.py says why), so the
verdicts are deterministic. CI blocks draw 2^18 samples per run (one block of 2^18 values: ~510
equal pairs expected per run in float32); the nightly-size block (-m slow) draws the pr n, whose
first 2^19 values are scanned (~1000 pairs per run), over 100 seeds per case.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from scipy import stats

from candidates import resolve
from harness.cases import case_by_id
from harness.families.resolution import (check_low_bits, low_bit_cells, low_bit_law, pair_law,
                                            quasi_poisson_p)
from harness.runner import CaseRunner, RunConfig

pytestmark = pytest.mark.calibration

ALPHA = 1e-3
LEVEL = 1e-6
CHECKS = ("collisions", "lattices")

#: (candidate, case, dtype): float32 laws with blocks of 2^18 (normal-2sigma, huge-std: nearly
#: uniform) and of 2^10 (large-mean: 2^18.7 values), a float64 law (the law expects ~0 pairs).
CI_BLOCKS = [("exact", "normal-2sigma", "float32"), ("exact", "large-mean", "float32"),
             ("exact", "huge-std", "float32"), ("exact", "normal-2sigma", "float64"),
             ("exact-counter", "normal-2sigma", "float32"), ("scipy", "normal-2sigma", "float32"),
             ("exact-counter", "normal-2sigma", "float64")]
CI_SEEDS = tuple(range(4_200_000, 4_200_024))
CI_SAMPLES = 1 << 18
SLOW_BLOCKS = [("exact", "normal-2sigma", "float32"), ("exact", "large-mean", "float32"),
               ("exact", "vit-pos-embed", "float32"), ("exact", "tail-5", "float32"),
               ("exact", "normal-2sigma", "float64"), ("exact", "tiny-std", "float64"),
               ("exact", "vit-pos-embed", "float64"), ("exact", "tail-5", "float64"),
               ("exact", "huge-std", "float64"),
               ("scipy", "abs-bounds-trap", "float32")]
SLOW_SEEDS = tuple(range(4_300_000, 4_300_100))
SLOW_SAMPLES = 1 << 22


def max_count(n: int, rate: float, level: float = LEVEL) -> int:
    """Largest count k with P(Bin(n, rate) > k) <= level."""
    k = 0
    while stats.binom.sf(k, n, rate) > level:
        k += 1
    return k


def _run_block(cand_name: str, case_id: str, dtype_str: str, seeds, samples: int) -> dict:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        cand, case, dtype = resolve(cand_name), case_by_id(case_id), getattr(torch, dtype_str)
        runs = []
        for seed in seeds:
            runner = CaseRunner(cand, case, dtype, "cpu", RunConfig(samples=samples, run_seed=seed))
            results = {check: runner.run(check) for check in CHECKS}
            s1, law = runner.cached_summary(1), runner.law
            runs.append({"verdicts": {c: r.verdict for c, r in results.items()},
                         "p1": {c: r.p_value_stage1 for c, r in results.items()},
                         "messages": {c: r.message for c, r in results.items()},
                         "block": s1.resolution.collision_block, "compared": s1.resolution.collision_compared,
                         "triples": s1.resolution.collision_triples,
                         "pairs": s1.resolution.collision_pairs, "scanned": s1.resolution.scanned,
                         "lattices": dict(zip(s1.resolution.lattice_names, (int(c) for c in s1.resolution.lattice_counts))),
                         "low_bits": check_low_bits(s1, law, alpha=ALPHA),
                         "low_bit_counts": s1.resolution.low_bit_counts.copy()})
        return {"runs": runs, "q2": float(law.collision_prob), "q3": float(law.collision_cube),
                "masses": {name: float(law.lattice_mass(name)) for name in runs[0]["lattices"]},
                "low_bit_probs": low_bit_law(law)}
    finally:
        torch.set_num_threads(threads)


def _problems(block: dict) -> tuple[list, dict]:
    runs = block["runs"]
    problems, facts = [], {}
    for check in CHECKS:
        verdicts = [r["verdicts"][check] for r in runs]
        errors = [r["messages"][check] for r in runs if r["verdicts"][check] == "error"]
        if errors:
            problems.append(f"{check}: errors: {errors[:2]}")
        fails = [r["messages"][check] for r in runs if r["verdicts"][check] == "fail"]
        if len(fails) > 1:
            problems.append(f"{check}: {len(fails)} fails: {fails[:2]}")
        p1 = [r["p1"][check] for r in runs if r["verdicts"][check] != "skip"]
        k, bound = sum(p < ALPHA for p in p1), max_count(len(p1), ALPHA)
        facts[check] = {"runs": len(p1), "suspicious": k, "bound": bound,
                        "skipped": verdicts.count("skip")}
        if k > bound:
            problems.append(f"{check}: {k} of {len(p1)} stage-1 p < {ALPHA:g} (at most {bound})")
    blocks = [r for r in runs if r["block"]]
    if blocks:
        mean = var = 0.0
        for r in blocks:
            mu, d = pair_law(r["compared"], r["triples"], block["q2"], block["q3"])
            mean, var = mean + mu, var + mu * d
        pairs = sum(r["pairs"] for r in blocks)
        disp = var / mean if mean > 0 else 1.0
        p = quasi_poisson_p(pairs, mean, disp)
        facts["pooled_pairs"] = {"observed": pairs, "expected": mean, "p": p}
        if p < LEVEL:
            problems.append(f"pooled equal pairs {pairs} vs {mean:.6g} expected: p {p:.3g}")
    _low_bit_problems(block, problems, facts)
    scanned = sum(r["scanned"] for r in runs)
    for name, mass in block["masses"].items():
        count = sum(r["lattices"][name] for r in runs)
        p = min(1.0, 2 * min(stats.binom.cdf(count, scanned, mass), stats.binom.sf(count - 1, scanned, mass)))
        facts[f"pooled_{name}"] = {"observed": count, "expected": scanned * mass, "p": p}
        if p < LEVEL:
            problems.append(f"pooled {name} values {count} vs {scanned * mass:.6g}: p {p:.3g}")
    return problems, facts


def _low_bit_problems(block: dict, problems: list, facts: dict) -> None:
    """The low-bits assertions (module docstring): no p < 1e-8, the count of p < ALPHA, and the
    pooled class counts against the law's."""
    outs = [r["low_bits"] for r in block["runs"] if r["low_bits"].applicable]
    if not outs:
        return
    ps = [o.p_value for o in outs]
    k, bound = sum(p < ALPHA for p in ps), max_count(len(ps), ALPHA)
    facts["low_bits"] = {"runs": len(ps), "suspicious": k, "bound": bound, "min_p": min(ps)}
    if min(ps) < 1e-8 or any(o.decisive for o in outs):
        problems.append(f"low_bits: a run with p {min(ps):.3g}: "
                        f"{min(outs, key=lambda o: o.p_value).message}")
    if k > bound:
        problems.append(f"low_bits: {k} of {len(ps)} p < {ALPHA:g} (at most {bound})")
    counts = np.sum([r["low_bit_counts"] for r in block["runs"]], axis=0)
    expected = counts.sum() * np.asarray(block["low_bit_probs"])
    cells = low_bit_cells(expected)
    obs = np.array([counts[c].sum() for c in cells], dtype=np.float64)
    exp = np.array([expected[c].sum() for c in cells])
    chi2 = float(np.sum((obs - exp) ** 2 / exp))
    p = float(stats.chi2.sf(chi2, len(cells) - 1)) if len(cells) > 1 else 1.0
    facts["pooled_low_bits"] = {"chi2": chi2, "df": len(cells) - 1, "p": p}
    if p < LEVEL:
        problems.append(f"pooled last-bit classes: chi2 {chi2:.4g} on {len(cells) - 1} df: p {p:.3g}")


@pytest.mark.parametrize("cand_name,case_id,dtype_str", CI_BLOCKS)
def test_gold_samplers_raise_no_false_alarm(cand_name, case_id, dtype_str, record_property):
    """24 seeds at 2^18 samples (~2-6 s per block on one core); false failure <= 1e-6 per
    assertion a priori, deterministic given the seeds (module docstring)."""
    block = _run_block(cand_name, case_id, dtype_str, CI_SEEDS, CI_SAMPLES)
    problems, facts = _problems(block)
    record_property("resolution_calibration", json.dumps(facts, default=str))
    assert not problems, f"{cand_name}/{case_id}/{dtype_str}:\n" + "\n".join(problems)
    if dtype_str == "float32" and case_id != "large-mean":
        assert facts["collisions"]["runs"] == len(CI_SEEDS)  # applicable: the test is not empty


@pytest.mark.slow
@pytest.mark.parametrize("cand_name,case_id,dtype_str", SLOW_BLOCKS)
def test_gold_samplers_at_the_pr_n(cand_name, case_id, dtype_str, record_property):
    """100 seeds at the pr n (2^22; the first 2^19 values scanned): the same assertions."""
    block = _run_block(cand_name, case_id, dtype_str, SLOW_SEEDS, SLOW_SAMPLES)
    problems, facts = _problems(block)
    record_property("resolution_calibration", json.dumps(facts, default=str))
    assert not problems, f"{cand_name}/{case_id}/{dtype_str}:\n" + "\n".join(problems)
    assert all(math.isfinite(r["p1"]["lattices"]) for r in block["runs"])
