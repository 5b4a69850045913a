"""A report directory on a disk that fails: every write is whole or absent, and the failure is one
DiskFault naming the file and the errno. On a real 64 KiB tmpfs (`small_disk`), not a mock."""

from __future__ import annotations

import errno
import json
import shutil

import pandas as pd
import pytest

from record.manifest import read_manifest, write_manifest
from record.store import ROW_LOG, DiskFault, RowLog, write_tables

ROW = {"candidate": "exact", "case": "normal-2sigma", "dtype": "float32", "device": "cpu",
       "check": "gof", "verdict": "pass", "message": "x" * 400}


def _fill(log: RowLog, limit: int = 10_000) -> DiskFault:
    for i in range(limit):
        try:
            log.append([ROW | {"n": i}])
        except DiskFault as fault:
            return fault
    raise AssertionError(f"{limit} rows fit on a 64 KiB disk")


def test_a_row_log_on_a_full_disk_fails_once_and_keeps_its_whole_lines(small_disk):
    log = RowLog(str(small_disk))
    fault = _fill(log)
    assert fault.errno == errno.ENOSPC and log.fault is fault
    text = str(fault)
    assert "\n" not in text and text.startswith(str(small_disk / ROW_LOG)) and "ENOSPC" in text
    log.append([ROW])  # closed to further rows: no second exception
    log.close()
    whole = []
    for line in (small_disk / ROW_LOG).read_text(encoding="utf-8").splitlines():
        try:
            whole.append(json.loads(line))
        except ValueError:
            pass  # the line the failed write tore
    assert len(whole) == log.count > 0
    assert [r["n"] for r in whole] == list(range(log.count))


def test_a_row_log_whose_directory_was_removed_says_so(tmp_path):
    report = tmp_path / "report"
    report.mkdir()
    log = RowLog(str(report))
    log.append([ROW])
    shutil.rmtree(report)
    with pytest.raises(DiskFault) as info:
        log.append([ROW])
    assert info.value.errno == errno.ENOENT and "removed during the run" in str(info.value)
    assert log.count == 1


def test_tables_on_a_full_disk_leave_no_half_file(small_disk):
    df = pd.DataFrame([ROW | {"n": i} for i in range(2000)])  # ~0.9 MB of csv
    with pytest.raises(DiskFault) as info:
        write_tables(df, str(small_disk))
    assert info.value.errno == errno.ENOSPC and "results.csv" in str(info.value)
    assert sorted(p.name for p in small_disk.iterdir()) == []  # no results.csv, no temporary


def test_a_manifest_that_cannot_be_written_leaves_the_last_one_whole(small_disk):
    write_manifest(str(small_disk), {"assignment": {}, "status": "running"})
    with pytest.raises(DiskFault):
        write_manifest(str(small_disk), {"assignment": {}, "status": "complete",
                                         "pad": "x" * 200_000})
    assert read_manifest(str(small_disk))["status"] == "running"
    assert sorted(p.name for p in small_disk.iterdir()) == ["manifest.json"]
