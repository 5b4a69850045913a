"""A failing row's ``level_basis``: the figures that decided its level against the thresholds in
force, by the keys of ``--harm-thresholds`` (`harness.diagnosis.grading.levels.basis_text`).

The formatting is tested on figure sets written out here (the bounds `grade` reads); the last two
tests draw the clamp on the ±2σ case through the real runner at the default run seed
(deterministic: the same bits on every x86 CPU) and hold the row's basis to its own figures.
"""

from __future__ import annotations

import math

import torch

from candidates import resolve
from harness.cases import case_by_id
from harness.diagnosis import DEFAULT_THRESHOLDS, parse_thresholds
from harness.diagnosis.grading.levels import apart, basis_text, grade, short_number
from harness.runner import CaseRunner, RunConfig

N = 1 << 20


def _fine_moved(**figures) -> dict:
    """Every moved share at 0 with an upper bound under its threshold, then `figures`."""
    out = {}
    for name in ("moved_0p25", "moved_0p5", "moved_1", "moved_2"):
        out.update({name: 0.0, f"{name}_lo": 0.0, f"{name}_hi": 0.001})
    return out | figures


def _basis(figures: dict, check: str = "gof", thresholds=DEFAULT_THRESHOLDS) -> tuple:
    graded = grade(check, "fail", figures, N, thresholds)
    return graded, basis_text(check, graded, figures, thresholds, N)


def test_harmful_names_the_figures_furthest_past_their_thresholds_first():
    figures = _fine_moved(moved_0p25=0.35, moved_0p25_lo=0.3, moved_0p25_hi=0.4,
                          moved_0p5=0.06, moved_0p5_lo=0.05, moved_0p5_hi=0.07,
                          mean_off=0.055, mean_off_lo=0.05, mean_off_hi=0.06,
                          std_off=0.04, std_off_lo=0.03, off_support=3.0)
    graded, text = _basis(figures)
    assert graded.level == "harmful"
    # off_support: a count (any is harmful); mean 5x its threshold, moved@0.25 3x, std 1.5x,
    # moved@0.5 1.7x
    assert text == "off_support 3 > 0, mean lo 0.05 > 0.01, moved@0.25 lo 0.3 > 0.1 (+2 more)"


def test_a_signed_figure_below_minus_its_threshold_reads_by_its_upper_bound():
    graded, text = _basis(_fine_moved(mean_off=-0.05, mean_off_lo=-0.06, mean_off_hi=-0.04))
    assert (graded.level, text) == ("harmful", "mean hi -0.04 < -0.01")


def test_the_thresholds_in_force_are_the_ones_named():
    figures = _fine_moved(moved_0p5=0.06, moved_0p5_lo=0.05, moved_0p5_hi=0.07)
    assert _basis(figures)[1] == "moved@0.5 lo 0.05 > 0.03"
    assert _basis(figures, thresholds=parse_thresholds("moved@0.5=0.04"))[1] == \
        "moved@0.5 lo 0.05 > 0.04"
    graded, text = _basis(figures, thresholds=parse_thresholds("moved@0.5=0.1"))
    assert graded.level == "fine" and text == ""


def test_undetermined_names_the_open_figure_that_decides_and_its_n():
    # tail@64: no value out there, but its upper bound is above 1e-5: it heads for fine
    figures = _fine_moved(tail_64=0.0, tail_64_lo=0.0, tail_64_hi=2.1e-4)
    graded, text = _basis(figures)
    assert graded.level == "undetermined" and math.isfinite(graded.decide_n)
    assert text == f"open: tail@64 (hi 0.00021 > 1e-5); decided at n ≈ {short_number(graded.decide_n)}"
    # a figure heading for harmful decides first, and its n is the row's
    figures |= dict(moved_0p5=0.04, moved_0p5_lo=0.02, moved_0p5_hi=0.06)
    graded, text = _basis(figures)
    assert graded.level == "undetermined"
    assert text.startswith("open: moved@0.5 (hi 0.06 > 0.03), tail@64 (hi 0.00021 > 1e-5); ")
    assert text.endswith(f"decided at n ≈ {short_number(graded.decide_n)}")


def test_a_bound_next_to_its_threshold_keeps_the_digits_that_tell_them_apart():
    graded, text = _basis(_fine_moved(moved_2=0.005, moved_2_lo=0.0, moved_2_hi=0.0102))
    assert graded.level == "undetermined" and text.startswith("open: moved@2 (hi 0.0102 > 0.01)")
    assert apart(0.05, 0.03) == "0.05" and apart(0.0100001, 0.01) == "0.0100001"


def test_fine_api_and_passing_rows_have_no_basis():
    assert _basis(_fine_moved()) == (grade("gof", "fail", _fine_moved(), N), "")
    assert _basis({})[1] == ""  # no Summary: api
    graded = grade("gof", "pass", _fine_moved(), N)
    assert basis_text("gof", graded, _fine_moved()) == ""


def _clamp_gof(thresholds):
    config = RunConfig(profile="smoke", harm_thresholds=thresholds)
    return CaseRunner(resolve("clamp"), case_by_id("normal-2sigma"), torch.float32, "cpu",
                      config).run("gof")


def test_a_real_harmful_row_reads_its_own_figures():
    """The clamp puts 4.6 % of the values on the bounds: its std and W1 (lower bounds 0.023 and
    0.035 at stage 1's smoke n, which decides the row alone) lie past their thresholds (0.02);
    the basis names both, the one furthest past its threshold first."""
    r = _clamp_gof(DEFAULT_THRESHOLDS)
    assert r.verdict == "fail" and r.level == "harmful", (r.level, r.level_basis)
    s = r.severity
    parts = sorted([(s["std_off_lo"], f"std lo {apart(s['std_off_lo'], 0.02)} > 0.02"),
                    (s["w1_lo"], f"w1 lo {apart(s['w1_lo'], 0.02)} > 0.02")], reverse=True)
    assert r.level_basis == ", ".join(text for _, text in parts)
    assert r.as_row()["level_basis"] == r.level_basis


def test_a_real_row_at_other_thresholds_names_the_n_that_decides_it():
    """With std and W1 never harmful the clamp's row is open on its deciding figures at smoke n;
    its basis gives the n its severity records."""
    r = _clamp_gof(parse_thresholds("std=inf,w1=inf"))
    assert r.verdict == "fail" and r.level == "undetermined", (r.level, r.level_basis)
    assert r.level_basis.startswith("open: ")
    assert r.level_basis.endswith(f"; decided at n ≈ {short_number(r.severity['decide_n'])}")
