"""The report directory of one run: opened at start-up, rows as they come, finished at the end.

`ReportSink` takes the directory's run lock (one run per directory, `record.leases`), clears what
an earlier run left, writes the "running" manifest and opens the row log before anything is
drawn, so whatever could fail at the end fails at once, as one line (`OptionError`). Rows are
appended to the log as tests finish; at the end the tables, the views and the final manifest are
written. A write that fails (a full disk, the directory removed under the run) is recorded once
(`fault`): later rows stay in memory, the manifest says partial with that reason, and the run
exits `REPORT_WRITE_FAILED`.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import time
from collections import Counter

from record.leases import ReportDirHeld, lock_report_dir, unlock_report_dir
from record.manifest import build_manifest, write_manifest
from record.store import (DiskFault, RowLog, file_digest, prepare_report_dir, writing)
from reports.render import write_run

from ..fleet.group_ledger import group_of_nodeid
from .options import OptionError

#: Inside the report dir: leases of draws in progress (record.leases).
INFLIGHT_DIR = ".inflight"
#: Inside the report dir: the shrunk boundaries of the explored cases that failed.
BOUNDARIES_FILE = "boundaries.json"

#: The exit status of a run whose report could not be written whole (a full disk, an I/O error,
#: the directory removed under it): its manifest says partial, with the failed write as reason.
#: pytest's own are 0 to 5; 1 (some checks fail) is a finding, this one a broken run.
REPORT_WRITE_FAILED = 6


class ReportSink:
    """Where one run's rows go (see the module docstring). `report_dir` None: nowhere (rows
    are kept in memory only)."""

    def __init__(self, report_dir: str | None):
        self.report_dir = report_dir
        self.plan_facts: dict = {}  # the plan's part of the manifest, given to `open`
        self.rows: list[dict] = []
        self.collected: dict = {}  # group -> tests collected (for the manifest)
        self.nodeids: list = []  # the tests collected, by node id
        self.written: str | None = None  # where the report went
        self.row_log: RowLog | None = None
        self.fault: DiskFault | None = None  # the first write into the report dir that failed
        self.tables_written = False  # after a fault: the results tables were written all the same
        self.locked = False  # this process holds the report dir's run lock

    def open(self, command: str = "", plan_facts: dict | None = None) -> str | None:
        """Make the report directory ready before anything is drawn: take its run lock (one run
        per directory), clear what an earlier run left there, write the manifest ("running") and
        open the row log. Whatever could fail at the end fails here instead: OptionError (one
        line) when the directory cannot be written or another run holds it. Returns a line when
        the lock of a run that died was taken over, else None. `plan_facts`: the plan's part
        of the manifest (`HarnessSession.manifest_facts`)."""
        self.row_log = None
        self.plan_facts = dict(plan_facts or {})
        if not self.report_dir:
            return None
        try:
            os.makedirs(self.report_dir, exist_ok=True)
            taken_over = lock_report_dir(self.report_dir, command)
        except ReportDirHeld as exc:
            raise OptionError(str(exc)) from None
        except OSError as exc:
            raise OptionError(f"--report-dir: {self.report_dir!r} cannot be written: "
                              f"{exc.strerror or exc}") from None
        self.locked = True
        try:
            prepare_report_dir(self.report_dir)
            for stale in (INFLIGHT_DIR, ".stores", ".crashes"):  # leases, rendezvous files, logs
                shutil.rmtree(os.path.join(self.report_dir, stale), ignore_errors=True)
            write_manifest(self.report_dir, self.manifest(None, "", status="running"))
            self.row_log = RowLog(self.report_dir)
        except (DiskFault, OSError) as exc:
            self.release()
            why = str(exc) if isinstance(exc, DiskFault) else (exc.strerror or str(exc))
            raise OptionError(f"--report-dir: {self.report_dir!r} cannot be written: {why}") from None
        return taken_over

    def release(self) -> None:
        """Give the report directory's run lock back (idempotent)."""
        if self.locked:
            unlock_report_dir(self.report_dir)
            self.locked = False

    def record(self, rows: list) -> str | None:
        """Rows of finished tests: kept for the table and appended to the row log at once, so
        a run killed later still leaves them. Returns a line when the row log just failed (a
        full disk): the rows are then kept in memory only, and the report will be partial."""
        self.rows.extend(rows)
        if self.row_log is None or not rows or self.fault is not None:
            return None
        try:
            self.row_log.append(rows)
        except DiskFault as fault:
            self.fault = fault
            return (f"harness: cannot write the report: {fault}; {self.row_log.count} row(s) are "
                    f"in {self.row_log.path}, later ones are kept in memory only")
        return None

    def mark_collected(self, nodeids) -> None:
        """The tests this process will run (per group, for the manifest) once collection is in."""
        self.nodeids = list(nodeids)
        self.collected = dict(Counter(group_of_nodeid(n) for n in self.nodeids))
        if self.report_dir and self.row_log is not None:
            write_manifest(self.report_dir, self.manifest(None, "", status="running"))

    def finish(self, exitstatus: int, command: str, run: dict) -> str | None:
        """Write the tables and views, then the final manifest (status, rows, the files'
        sha256), and give the directory back; the directory, or None where nothing is written
        or a write failed (`fault` then says which, and the manifest says partial with that
        reason where it can still be written)."""
        if not self.report_dir:
            return None
        try:
            # After a failed row log the tables are still tried (the rows are in memory), but not
            # into a directory removed under the run: another run may own that path by now.
            if self.fault is None or self.fault.errno != errno.ENOENT:
                self._write(exitstatus, command, run)
        except DiskFault as fault:
            self.fault = self.fault or fault
        if self.fault is not None:
            self.tables_written = self.written is not None
            self.written = None
            try:
                write_manifest(self.report_dir, self.manifest(
                    exitstatus, command, status="partial",
                    reason=f"a write into the report directory failed: {self.fault}"))
            except DiskFault:
                pass  # the manifest of start-up stays: "running", which readers call partial
        self.release()
        return self.written

    def fault_line(self) -> str:
        """One line for the user after a write failed: what failed, and where the rows are."""
        logged = self.row_log.count if self.row_log is not None else 0
        if self.tables_written:
            where = f"results.csv and results.parquet hold all {len(self.rows)} row(s)"
        elif self.row_log is not None:
            where = f"{logged} of {len(self.rows)} row(s) are in {self.row_log.path}"
        else:
            where = "no row was written"
        return (f"harness: the report in {self.report_dir} is partial: {self.fault}; {where} "
                f"(exit {REPORT_WRITE_FAILED})")

    def _write(self, exitstatus: int, command: str, run: dict) -> None:
        if self.row_log is not None:
            self.row_log.close()
        self.written = write_run(self.rows, self.report_dir, run)
        have = Counter(r.get("group") for r in self.rows)
        whole = all(have.get(g, 0) >= n for g, n in self.collected.items())
        files = {}
        for name in ("results.parquet", "results.csv"):
            path = os.path.join(self.report_dir, name)
            if os.path.exists(path):
                with writing(path):
                    files[name] = file_digest(path)
        write_manifest(self.report_dir, self.manifest(exitstatus, command,
                                                      status="complete" if whole else "partial",
                                                      files=files))

    def manifest(self, exitstatus: int | None, command: str, status: str = "complete",
                 files: dict | None = None, reason: str | None = None) -> dict:
        """manifest.json: the run's plan (`plan_facts`: the partition, the grid's
        assignment, the options every partition shares), the groups run and the tests collected
        per group, the machine (`record.manifest`): what `reports merge` checks a partitioned
        run's coverage with."""
        return build_manifest(**self.plan_facts,
                              groups={r["group"] for r in self.rows if r.get("group")},
                              tests=self.collected,
                              finished=None if status == "running" else time.time(),
                              exitstatus=exitstatus, command=command, status=status,
                              rows=None if status == "running" else len(self.rows), files=files,
                              reason=reason)

    def write_boundaries(self, found: list) -> None:
        """REPORT_DIR/boundaries.json: the shrunk boundaries of the explored cases that failed."""
        if not self.report_dir or self.fault is not None:
            return
        path = os.path.join(self.report_dir, BOUNDARIES_FILE)
        try:
            with writing(path), open(path, "w", encoding="utf-8") as fh:
                json.dump([b.as_dict() for b in found], fh, indent=1, default=str)
        except DiskFault as fault:
            self.fault = fault
