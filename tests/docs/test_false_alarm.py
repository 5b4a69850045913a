"""The false-alarm rate of a whole `pr` run, stated in docs/method/calibration.md and the README,
is computed (benchmarks/false_alarm.py, from the run's levels), not copied by hand: the pages'
figures are checked against it for the verdict count they state."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _false_alarm():
    spec = importlib.util.spec_from_file_location("false_alarm", ROOT / "benchmarks" / "false_alarm.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _flat(path: Path) -> str:
    return " ".join(path.read_text(encoding="utf-8").split())


def test_the_method_page_states_the_computed_rate():
    fa = _false_alarm()
    text = _flat(ROOT / "docs" / "method" / "calibration.md")
    counts = re.findall(r"holds ([\d,]+) statistical verdicts", text)
    assert len(counts) == 1, counts
    verdicts = int(counts[0].replace(",", ""))
    assert 1000 <= verdicts <= 4004  # a pr run of torch has 4004 rows, about 2 400 of them judged
    assert fa.sentence(verdicts) in text


def test_the_readme_states_the_same_run_rate():
    fa = _false_alarm()
    counts = re.findall(r"holds ([\d,]+) statistical verdicts",
                        _flat(ROOT / "docs" / "method" / "calibration.md"))
    figures = fa.run_false_alarm(int(counts[0].replace(",", "")))
    readme = _flat(ROOT / "README.md")
    assert figures["per_check"] == pytest.approx(1e-6) and "≤ 1e-6 per check" in readme
    assert f"≤ {figures['at_least_one']:.2g} per `pr` run" in readme


def test_the_run_rate_is_the_per_check_rate_times_the_verdicts():
    fa = _false_alarm()
    f = fa.run_false_alarm(2000, alpha_suspect=1e-3, alpha_fail=9e-4)
    # stage 1 alone below 1e-7, or both stages below 1e-3 and 9e-4
    assert f["per_check"] == pytest.approx(1e-7 + 1e-3 * 9e-4) == pytest.approx(1e-6)
    assert f["expected"] == pytest.approx(2e-3)
    assert f["at_least_one"] == pytest.approx(2e-3)
    assert fa.run_false_alarm(10**7)["at_least_one"] == 1.0  # a probability, capped


def test_only_judged_rows_of_two_stage_checks_are_counted():
    fa = _false_alarm()
    rows = [dict(check="ks", verdict="pass", alpha_fail=1e-3),
            dict(check="ks", verdict="fail", alpha_fail=1e-3),
            dict(check="ks", verdict="xfail", alpha_fail=1e-3),
            dict(check="ks", verdict="skip", alpha_fail=1e-3),  # not applicable: no verdict
            dict(check="ks", verdict="fail", alpha_fail=None),  # the draw failed: no statistics
            dict(check="finite", verdict="pass", alpha_fail=None)]
    assert fa.statistical_verdicts(rows) == 3
    assert fa.statistical_verdicts([]) == 0
