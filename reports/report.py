"""A report directory read whole, for the readers that gate on it (`compare`, `merge`): its rows,
its environment, its manifest, and whether it is the report of a run that finished.

`read_report` refuses (`ReportError`, one line naming the file and the problem) what cannot be
trusted: a results file that does not match the sha256 its manifest records (a truncated or
altered artifact), results.parquet and results.csv that disagree, a table without rows or
without the harness's columns. It reports as *partial* (`Report.partial`, a reason) what can be
read but is not a whole run: a run that never wrote its results (only the row log is there), a
manifest still saying "running" (the run was killed), a manifest saying "partial" (with the
reason the run gave, e.g. a write that failed), fewer rows than tests collected (cut short:
``-x``, Ctrl-C, a lost worker), or a directory whose run lock is still held by a live run
(`record.leases`: it is being written now). A report without a manifest (written by hand, or by an
older harness) cannot say; it is read as it is.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass

import pandas as pd

from record.leases import report_dir_writer
from record.manifest import read_manifest
from record.store import ReportError, file_digest, read_environment, read_results


@dataclass
class Report:
    dir: str
    frame: pd.DataFrame
    environment: dict
    manifest: dict | None
    partial: str | None  # why this is not the report of a whole run; None: it is (or cannot say)


def cut_short(manifest: dict, frame: pd.DataFrame) -> str | None:
    """Why the rows fall short of the tests the manifest says were collected (None: they do not)."""
    tests = {g: int(n) for g, n in (manifest.get("tests") or {}).items()}
    if not tests:
        return None
    have = Counter(g for g in frame["group"] if isinstance(g, str)) if "group" in frame else Counter()
    short = {g: n - have.get(g, 0) for g, n in tests.items() if have.get(g, 0) < n}
    if not short:
        return None
    first = sorted(short)[0]
    return (f"cut short: {sum(short.values())} of {sum(tests.values())} tests collected have no "
            f"row ({len(short)} group(s), e.g. {first})")


def read_report(report_dir: str, allow_empty: bool = False) -> Report:
    """The report of `report_dir`; ReportError (one line) when it cannot be trusted.
    `allow_empty`: a table without rows is a report (a grid partition with nothing to run)."""
    if not os.path.isdir(report_dir):
        raise ReportError(f"{report_dir!r} is not a directory")
    manifest = read_manifest(report_dir)
    for name, digest in ((manifest or {}).get("files") or {}).items():
        path = os.path.join(report_dir, name)
        if not os.path.exists(path):
            raise ReportError(f"{report_dir!r}: {name} is missing (manifest.json lists it)")
        if file_digest(path) != digest:
            raise ReportError(f"{report_dir!r}: {name} does not match the sha256 manifest.json "
                              f"records for it: the file is truncated or altered")
    writer = report_dir_writer(report_dir)
    try:
        frame = read_results(report_dir, allow_empty)
    except ReportError as exc:
        if writer is None:
            raise
        raise ReportError(f"{exc} ({writer})") from None
    partial = writer or frame.attrs.get("partial")
    if manifest is not None:
        rows = manifest.get("rows")
        if partial is None and isinstance(rows, int) and rows != len(frame):
            raise ReportError(f"{report_dir!r}: the results hold {len(frame)} rows, manifest.json "
                              f"says {rows}")
        status = manifest.get("status")
        if partial is None and status == "running":
            partial = "the run did not finish (manifest.json still says running)"
        partial = partial or cut_short(manifest, frame)
        if partial is None and status == "partial":
            partial = (f"the run was cut short: {manifest['reason']}" if manifest.get("reason")
                       else "the run was cut short (manifest.json says partial)")
    return Report(report_dir, frame, read_environment(report_dir), manifest, partial)
