"""benchmarks/compare_rows.py, the row-for-row check of a refactoring: the same rows compare equal
whatever their timings; a changed p-value, verdict or a lost row does not."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pandas as pd
import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "benchmarks" / "compare_rows.py"


@pytest.fixture(scope="module")
def compare_rows():
    spec = importlib.util.spec_from_file_location("compare_rows", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _report(path: Path, rows: list[dict]) -> str:
    path.mkdir()
    pd.DataFrame(rows).to_csv(path / "results.csv", index=False)
    return str(path)


ROWS = [dict(candidate="torch", case="normal-2sigma", dtype=d, device="cpu", check=c,
             verdict="pass", statistic=0.1 + i, p_value=0.3, n=4194304, candidate_s=1.0,
             harness_s=0.5, message="ok", details="{}")
        for i, (d, c) in enumerate([("float32", "gof"), ("float32", "ks"), ("bfloat16", "atoms")])]


def test_the_same_rows_with_other_timings_compare_equal(compare_rows, tmp_path, capsys):
    later = [dict(r, candidate_s=9.0, harness_s=3.0, level="", mechanism="") for r in ROWS]
    assert compare_rows.main([_report(tmp_path / "a", ROWS), _report(tmp_path / "b", later)]) == 0
    assert "SAME ROWS" in capsys.readouterr().out


def test_a_time_measured_into_the_details_is_left_out(compare_rows, tmp_path, capsys):
    first = [dict(r, details="{'one_thread_s': 2.3, 'warnings': 'w'}") for r in ROWS]
    later = [dict(r, details="{'one_thread_s': 3.6, 'warnings': 'w'}") for r in ROWS]
    assert compare_rows.main([_report(tmp_path / "a", first), _report(tmp_path / "b", later)]) == 0
    other = [dict(r, details="{'one_thread_s': 3.6, 'warnings': 'v'}") for r in ROWS]
    assert compare_rows.main([_report(tmp_path / "c", first), _report(tmp_path / "d", other)]) == 1


@pytest.mark.parametrize("change", [dict(p_value=0.30000000000000004), dict(verdict="fail"),
                                    dict(statistic=1.1000001)])
def test_a_changed_field_is_a_difference(compare_rows, tmp_path, capsys, change):
    later = [dict(ROWS[0], **change)] + ROWS[1:]
    assert compare_rows.main([_report(tmp_path / "a", ROWS), _report(tmp_path / "b", later)]) == 1
    assert "ROWS DIFFER" in capsys.readouterr().out


def test_a_lost_row_is_a_difference(compare_rows, tmp_path):
    assert compare_rows.main([_report(tmp_path / "a", ROWS), _report(tmp_path / "b", ROWS[:2])]) == 1
