"""Candidates that kill their worker process: what killed it, and when to stop drawing them.

A native kernel that segfaults on some input kills the xdist worker calling it. xdist replaces the
worker, and the case's other checks find the dead worker's lease and become `error` rows
(`record.leases`); a candidate that crashes every process it runs in would otherwise
cost one worker per group, until xdist's restart limit ends the run without a report. So the
controller counts crashes per candidate (`CrashLedger`):

* after `MAX_CRASHES_PER_CANDIDATE` crashed workers, no new group of that candidate is started:
  its groups still queued are taken off the scheduler's queue and become `error` rows ("not run:
  candidate crashed 3 workers (last: SIGSEGV in segv (faults.py:13), case tail-5 float32)");
  groups already handed to a worker (at most two per worker) still run, and may crash it too;
* the other candidates run on, and the report is written;
* xdist's own restart limit (``--max-worker-restart``, by default 4 per worker) is raised, when
  the user did not set it, to what that bound needs: every candidate may cost
  MAX_CRASHES_PER_CANDIDATE workers plus the groups in flight.

What killed a worker comes from its exit status (the signal, e.g. SIGSEGV) and from the
`faulthandler` log every worker writes into ``REPORT_DIR/.crashes/`` (the innermost Python frame
outside the standard library when the fatal signal arrived: the candidate's call). The same log
takes the stacks of a worker whose call stayed inside one native call past every deadline it
could have had (`harness.engine.native_backstop`): the candidate did not return, and the row
says where it was stuck.
"""

from __future__ import annotations

import faulthandler
import os
import re
import signal
import sysconfig
import time

from record.ids import API_CASE

from ..engine import native_backstop

#: Crashed workers a candidate may cost before the harness stops drawing it.
MAX_CRASHES_PER_CANDIDATE = 3
#: Inside the report dir: one faulthandler log per worker process.
CRASH_DIR = ".crashes"

_FAULT_LOG: list = []  # the open log of this worker (kept alive for faulthandler)
_FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d+) in (?P<name>\S+)')
#: The first line of faulthandler's dump when the native backstop ended the worker.
_STUCK = re.compile(r"^Timeout \((?P<after>[0-9:.]+)\)!", re.MULTILINE)


def allow_restarts(config, n_candidates: int) -> None:
    """Raise xdist's restart limit to what MAX_CRASHES_PER_CANDIDATE per candidate needs (only
    when the user did not set --max-worker-restart). Runs before xdist reads it."""
    workers = getattr(config.option, "numprocesses", None)
    if not isinstance(workers, int) or workers <= 0 or not hasattr(config.option, "maxworkerrestart"):
        return
    if config.option.maxworkerrestart is None:
        need = max(1, n_candidates) * (MAX_CRASHES_PER_CANDIDATE + 2 * workers) + workers
        config.option.maxworkerrestart = str(max(4 * workers, need))


def record_fatal_errors(report_dir: str, worker: str) -> None:
    """In a worker: write the Python stack of a fatal signal (SIGSEGV, SIGFPE, SIGABRT, SIGBUS,
    SIGILL) to REPORT_DIR/.crashes/<worker>.log."""
    if not report_dir or _FAULT_LOG:
        return
    try:
        os.makedirs(os.path.join(report_dir, CRASH_DIR), exist_ok=True)
        fh = open(os.path.join(report_dir, CRASH_DIR, f"{worker}.log"), "w", encoding="utf-8")
    except OSError:
        return  # the report directory was checked at start-up; no log is no worse than before
    faulthandler.enable(file=fh, all_threads=False)
    native_backstop(fh)  # a call stuck in native code ends the worker, its stack in the log
    _FAULT_LOG.append(fh)


def _exit_status(node, wait_s: float = 2.0) -> int | None:
    """The crashed worker's exit status (negative: killed by that signal), None where unknown."""
    io = getattr(getattr(node, "gateway", None), "_io", None)  # execnet's Popen2IOMaster
    popen = getattr(io, "popen", None)
    if popen is None:
        return None
    deadline = time.monotonic() + wait_s
    while True:
        code = popen.poll()
        if code is not None or time.monotonic() > deadline:
            return code
        time.sleep(0.05)


def _stdlib_paths() -> tuple:
    paths = sysconfig.get_paths()
    return tuple(p for p in {paths.get("stdlib"), paths.get("platstdlib")} if p)


def fault_log(report_dir: str, worker: str) -> str:
    """The worker's faulthandler log ('' where there is none)."""
    if not report_dir:
        return ""
    try:
        with open(os.path.join(report_dir, CRASH_DIR, f"{worker}.log"), encoding="utf-8",
                  errors="replace") as fh:
            return fh.read()
    except OSError:
        return ""


def stuck_after(log: str) -> str | None:
    """How long the worker's call had run (h:mm:ss) when the native backstop ended it, from its
    `fault_log`; None where it did not."""
    found = _STUCK.search(log)
    return found["after"] if found else None


def fault_location(log: str) -> str | None:
    """Where the worker was when the fatal signal came, or when the native backstop ended it,
    from its `fault_log`: the innermost frame outside the standard library, e.g. "segv
    (faults.py:13)"; None without either in the log."""
    if "Fatal Python error" not in log and not _STUCK.search(log):
        return None
    stdlib = _stdlib_paths()
    frames = [m for m in (_FRAME.match(line) for line in log.splitlines()) if m]
    for m in frames:  # most recent call first
        if not m["path"].startswith(stdlib):
            return f"{m['name']} ({os.path.basename(m['path'])}:{m['line']})"
    return None


def describe_exit(code: int | None) -> str:
    if code is None:
        return "ended"
    if code < 0:
        try:
            return signal.Signals(-code).name
        except ValueError:
            return f"signal {-code}"
    return f"exit {code}"


class CrashLedger:
    """The controller's count of crashed workers per candidate (by spec)."""

    def __init__(self, report_dir: str = ""):
        self.report_dir = report_dir
        self.crashes: dict = {}  # spec -> count
        self.last: dict = {}  # spec -> what the last crash was
        self.last_cause: dict = {}  # node id of the crashed test -> what killed its worker
        self.stopped: set = set()
        self.not_run: dict = {}  # nodeid -> why it was never drawn (its candidate crashes)

    def crashed(self, node, nodeid: str, row: dict) -> str:
        """Note a worker crash while it ran `nodeid` (row: its skeleton); the message of its row."""
        worker = node.gateway.id
        cause = describe_exit(_exit_status(node))
        log = fault_log(self.report_dir, worker)
        where = fault_location(log)
        after = stuck_after(log)
        if after is not None:
            what = (f"ended after {after} inside one native call, where no deadline reaches"
                    + (f", in {where}" if where else ""))
            self._count(row, what)
            self.last_cause[nodeid] = what
            return (f"worker {worker} {what}, while running {row.get('check')} on "
                    f"{row.get('group')}: the candidate did not return")
        what = cause + (f" in {where}" if where else "")
        self._count(row, what)
        self.last_cause[nodeid] = what
        return (f"worker {worker} died ({what}) while running {row.get('check')} on "
                f"{row.get('group')}: the candidate killed its process")

    def _count(self, row: dict, what: str) -> None:
        spec = row.get("candidate_spec") or row.get("candidate")
        self.crashes[spec] = self.crashes.get(spec, 0) + 1
        case = f"case {row.get('case')} {row.get('dtype')}" if row.get("case") != API_CASE else \
            f"the API checks {row.get('dtype')}"
        self.last[spec] = f"{what}, {case}"

    def group_message(self, node, nodeid: str) -> str:
        """The row of every other check of the group whose draw killed a worker."""
        cause = self.last_cause.get(nodeid, "no exit status")
        did = "a call of the candidate ended" if cause.startswith("ended after") else \
            "the candidate crashed"
        return (f"not run: {did} worker {node.gateway.id} in this group ({cause}); the group is "
                f"not drawn again")

    def should_stop(self, spec: str) -> bool:
        return spec not in self.stopped and self.crashes.get(spec, 0) >= MAX_CRASHES_PER_CANDIDATE

    def not_run_message(self, spec: str) -> str:
        return (f"not run: candidate crashed {self.crashes.get(spec, 0)} workers "
                f"(last: {self.last.get(spec, 'unknown')}); no further group of it is drawn "
                f"(at most {MAX_CRASHES_PER_CANDIDATE} crashes per candidate)")
