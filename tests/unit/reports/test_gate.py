"""`reports compare` is a gate a lost report cannot fool: an unreadable, truncated, empty or
schema-less BASE or NEW exits 2 with one line naming the file; a key BASE judged and NEW did not
is lost coverage (exit 1 unless --allow-missing); a NEW that was cut short fails. The reports are
real ones, written by `harness.check` (the same writer as `pytest suites`)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pandas as pd
import pytest

import harness
from reports.__main__ import main as cli
from reports.report import read_report

CASES = ["normal-2sigma", "tail-5"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("gate")
    for name, cases in (("base", CASES), ("same", CASES), ("fewer", CASES[:1])):
        harness.check("exact", cases=cases, dtypes=["float32"], profile="smoke", samples=4096,
                      progress=False, report_dir=str(root / name))
    return root


def _copy(runs, name, tmp_path) -> str:
    out = tmp_path / name
    shutil.copytree(runs / name, out)
    return str(out)


def _compare(base, new, *extra, capsys):
    capsys.readouterr()
    status = cli(["compare", str(base), str(new), *extra])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_a_whole_new_run_passes(runs, capsys):
    # deterministic: BASE and NEW are the same run seed in one process, so their verdicts are the
    # same; a false alarm (<= 1e-6 per check) would be in both, not a new failure
    status, out, err = _compare(runs / "base", runs / "same", capsys=capsys)
    assert status == 0 and "**Verdict: OK**" in out and err == ""
    assert read_report(str(runs / "same")).partial is None


def test_a_lost_case_is_lost_coverage(runs, capsys):
    status, out, _ = _compare(runs / "base", runs / "fewer", capsys=capsys)
    assert status == 1
    lost = out.split("## Lost coverage: BASE judged, NEW did not")[1].split("##")[0]
    assert lost.count("`tail-5/float32/") >= 10 and "missing in NEW" in lost
    assert "normal-2sigma" not in lost
    status, out, _ = _compare(runs / "base", runs / "fewer", "--allow-missing", "tail-5/*",
                              capsys=capsys)
    assert status == 0 and "accepted by --allow-missing" in out


def test_a_check_skipped_in_new_is_lost_coverage(runs, tmp_path, capsys):
    new = _copy(runs, "same", tmp_path)
    df = pd.read_csv(os.path.join(new, "results.csv"))
    df.loc[(df.case == "tail-5") & (df.check == "gof"), "verdict"] = "skip"
    for name in ("results.csv", "results.parquet", "manifest.json"):
        os.remove(os.path.join(new, name))
    df.to_csv(os.path.join(new, "results.csv"), index=False)  # a report without a manifest
    status, out, _ = _compare(runs / "base", new, capsys=capsys)
    assert status == 1 and "`tail-5/float32/gof/cpu`: skipped in NEW" in out


@pytest.mark.parametrize("damage", ["truncate-both", "truncate-csv", "empty-parquet",
                                    "no-columns", "garbage-parquet", "disagree", "empty-dir",
                                    "manifest-garbage"])
@pytest.mark.parametrize("side", ["base", "new"])
def test_an_untrustworthy_report_exits_2_with_one_line(runs, tmp_path, capsys, damage, side):
    broken = _copy(runs, "same", tmp_path)
    pq, csv = os.path.join(broken, "results.parquet"), os.path.join(broken, "results.csv")
    if damage == "truncate-both":  # a job killed while writing, a broken artifact upload
        for path in (pq, csv):
            data = open(path, "rb").read()
            open(path, "wb").write(data[: len(data) // 2])
    elif damage == "truncate-csv":
        data = open(csv, "rb").read()
        open(csv, "wb").write(data[: len(data) // 2])
    elif damage == "empty-parquet":
        open(pq, "wb").close()
    elif damage == "no-columns":
        pd.DataFrame({"x": [1, 2]}).to_csv(csv, index=False)
        os.remove(pq)
        os.remove(os.path.join(broken, "manifest.json"))
    elif damage == "garbage-parquet":
        open(pq, "wb").write(b"PAR1 not really")
    elif damage == "disagree":  # csv from another run, no checksums to catch it
        shutil.copy(os.path.join(runs, "fewer", "results.csv"), csv)
        manifest = json.load(open(os.path.join(broken, "manifest.json")))
        manifest["files"] = {}
        json.dump(manifest, open(os.path.join(broken, "manifest.json"), "w"))
    elif damage == "empty-dir":
        for name in os.listdir(broken):
            path = os.path.join(broken, name)
            shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)
    elif damage == "manifest-garbage":
        open(os.path.join(broken, "manifest.json"), "w").write('{"status": "comp')
    args = (broken, runs / "base") if side == "base" else (runs / "base", broken)
    status, out, err = _compare(*args, capsys=capsys)
    assert status == 2, out[-2000:]
    assert out == "" and len(err.strip().splitlines()) == 1, err
    assert broken in err and "Traceback" not in err


def test_the_command_line_exit_codes_without_a_traceback(runs, tmp_path):
    broken = _copy(runs, "same", tmp_path)
    data = open(os.path.join(broken, "results.parquet"), "rb").read()
    open(os.path.join(broken, "results.parquet"), "wb").write(data[:100])
    p = subprocess.run([sys.executable, "-m", "reports", "compare", str(runs / "base"), broken],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "results.parquet" in p.stderr and "Traceback" not in p.stderr
