"""In-flight markers that say who holds them, so a crash is never confused with a busy neighbour.

While a worker calls a candidate for one stage of one case, it holds a lease: a small JSON file in
``REPORT_DIR/.inflight`` naming the holder (host, pid, the process's start time, the xdist worker
and run). A worker that finds a lease it does not hold asks whether the holder still lives:

* holder dead (no such pid, or the pid now belongs to a process started later): the holder died
  while calling the candidate (``os._exit``, a signal, a fatal error inside it) -> a crash;
* holder alive: another process is drawing the same case right now -> not a crash; the case's
  checks were split across workers, which is a scheduling defect and is reported as one;
* holder on another host, or its liveness cannot be read: unknown -> treated as alive (a crash is
  only ever reported when it is proven).

The lease file is created atomically with its content (written to a temporary name, then
hard-linked to the lease name, which fails if the name exists), so nobody ever reads a half-written
holder from a live process.

The same holder names the run that writes a report directory: ``REPORT_DIR/run.lock``
(`lock_report_dir`), taken before anything in the directory is touched and given back when the
report is written. A second run into a held directory is refused with one line naming the holder;
a lock whose holder is proven dead (SIGKILL, a lost machine on this host) is taken over, with a line
saying so; the readers (`reports compare`, `reports merge`) say when the run that writes a directory
is still going (`report_dir_writer`).
"""

from __future__ import annotations

import json
import os
import socket
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path


@dataclass(frozen=True)
class Holder:
    host: str
    pid: int
    start: str | None  # the process's start time as the OS records it (None where unreadable)
    worker: str  # xdist worker id, or "main"
    run: str  # xdist's test run uid (shared by a run's workers), or ""
    since: float  # when the lease was taken (time.time())
    command: str = ""  # what the holder runs (the run lock names it to whoever is refused)

    def describe(self) -> str:
        return f"{self.worker} (pid {self.pid} on {self.host})"

    def describe_run(self) -> str:
        since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.since))
        what = f": {self.command}" if self.command else ""
        return f"pid {self.pid} on {self.host}, since {since}{what}"


def _proc_stat(pid: int) -> tuple[str, str] | None:
    """(state, start time) of process `pid` from /proc (Linux), None where unreadable.

    The start time is field 22 of /proc/PID/stat (clock ticks since boot) with the boot id: they
    identify one process for the machine's uptime, and a recycled pid has a later start time."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            stat = fh.read()
        # The command name (field 2) may hold spaces and parentheses: split after the last ")".
        fields = stat[stat.rindex(")") + 2:].split()
        state, ticks = fields[0], fields[19]
    except (OSError, ValueError, IndexError):
        return None
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as fh:
            boot = fh.read().strip()
    except OSError:
        boot = ""
    return state, f"{boot}:{ticks}"


def process_start_time(pid: int) -> str | None:
    """The start time of process `pid` as an opaque string, None where it cannot be read."""
    stat = _proc_stat(pid)
    return stat[1] if stat else None


def current_holder() -> Holder:
    pid = os.getpid()
    return Holder(host=socket.gethostname(), pid=pid, start=process_start_time(pid),
                  worker=os.environ.get("PYTEST_XDIST_WORKER", "main"),
                  run=os.environ.get("PYTEST_XDIST_TESTRUNUID", ""), since=time.time())


def holder_alive(holder: Holder) -> bool | None:
    """True if the holder process still runs, False if it is gone, None if this host cannot tell."""
    if holder.host != socket.gethostname():
        return None
    try:
        os.kill(holder.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        pass
    except OSError:
        return None
    if holder.start is None:
        return True  # a live pid whose start time was not recorded: cannot prove it is another
    # The start time was readable when the lease was taken, so it is readable here too unless the
    # process has just exited. A process that exited but was not reaped yet (a zombie: a crashed
    # xdist worker whose controller has not waited for it) still has its pid and start time.
    stat = _proc_stat(holder.pid)
    return stat is not None and stat[0] not in ("Z", "X", "x") and stat[1] == holder.start


def is_me(holder: Holder) -> bool:
    me = current_holder()
    return holder.host == me.host and holder.pid == me.pid and holder.start == me.start


class LeaseHeld(Exception):
    """The lease is held by someone else; `alive` says whether that holder still lives."""

    def __init__(self, path: Path, holder: Holder | None, alive: bool | None):
        self.path, self.holder, self.alive = path, holder, alive
        who = holder.describe() if holder else "an unknown holder (unreadable lease)"
        state = {True: "alive", False: "dead", None: "liveness unknown"}[alive]
        super().__init__(f"{path.name} held by {who}, {state}")

    @property
    def crashed(self) -> bool:
        """Proven dead: the holder died while it held the lease."""
        return self.alive is False


def read_holder(path: Path) -> Holder | None:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        return Holder(**data)
    except (OSError, ValueError, TypeError):
        return None


def _try_create(path: Path, holder: Holder) -> bool:
    """Create `path` holding `holder`, atomically; False if it already exists."""
    tmp = path.with_name(f".{path.name}.{holder.pid}.{time.monotonic_ns()}.tmp")
    try:
        tmp.write_text(json.dumps(asdict(holder)), encoding="utf-8")
        os.link(tmp, path)
        return True
    except FileExistsError:
        return False
    finally:
        tmp.unlink(missing_ok=True)


def acquire(path: Path) -> None:
    """Take the lease at `path`, or raise LeaseHeld naming its holder and whether it lives.

    A lease this very process left behind (an earlier attempt that did not release it) is taken
    over: it is neither a crash nor a neighbour."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    me = current_holder()
    if _try_create(path, me):
        return
    holder = read_holder(path)
    if holder is not None and is_me(holder):
        path.unlink(missing_ok=True)
        if _try_create(path, me):
            return
        holder = read_holder(path)
    alive = holder_alive(holder) if holder is not None else None
    raise LeaseHeld(path, holder, alive)


def release(path: Path) -> None:
    """Give the lease back if this process holds it (never remove another holder's lease)."""
    holder = read_holder(path)
    if holder is not None and is_me(holder):
        Path(path).unlink(missing_ok=True)


@contextmanager
def lease(path: Path | None):
    """Hold the lease at `path` for the enclosed block (None: no lease). Raises LeaseHeld.

    A lease that cannot be written (a full disk, a directory removed under the run) is not held:
    the block runs without one, so only a crash inside it goes unrecognized, and the run that
    collects the rows reports the disk fault itself (its row log fails on the same disk)."""
    if path is None:
        yield
        return
    try:
        acquire(path)
        held = True
    except LeaseHeld:
        raise
    except OSError:
        held = False
    try:
        yield
    finally:
        if held:
            try:
                release(path)
            except OSError:
                pass


# ------------------------------------------------------------------------------------------------
# The run lock of a report directory

#: The lock file of a report directory: it names the run that writes the directory.
RUN_LOCK = "run.lock"


class ReportDirHeld(Exception):
    """Another run holds the report directory; str() is one line naming it."""


def _run_lock(report_dir: str) -> Path:
    return Path(report_dir) / RUN_LOCK


def lock_report_dir(report_dir: str, command: str = "") -> str | None:
    """Take `report_dir`'s run lock for this process (the directory must exist).

    Raises ReportDirHeld when a run that is alive, or whose liveness this host cannot tell (another
    host), holds it. A lock whose holder is proven dead, or that is unreadable, is taken over; the
    return value is then a line saying so, else None. Two runs taking over one dead lock at once:
    the stale file is renamed away before the new lock is created, and a run that renamed a lock
    other than the one it judged dead puts it back, so exactly one of them gets the directory."""
    path = _run_lock(report_dir)
    me = replace(current_holder(), command=command)
    note = None
    for _ in range(4):
        if _try_create(path, me):
            return note
        holder = read_holder(path)
        if holder is not None and is_me(holder):
            return note  # this process took it already (an earlier call that was not released)
        alive = holder_alive(holder) if holder is not None else False
        if alive is not False:
            unknown = (" (on another host: this one cannot tell whether it still runs; remove "
                       f"{path} if it does not)") if alive is None else ""
            raise ReportDirHeld(f"--report-dir: {str(report_dir)!r} is in use by another run "
                                f"({holder.describe_run()}){unknown}; wait for it to finish or "
                                f"give this run another --report-dir")
        stale = path.with_name(f".{RUN_LOCK}.stale.{me.pid}.{time.monotonic_ns()}")
        try:
            os.rename(path, stale)
        except FileNotFoundError:
            continue  # another run took the dead lock over first: try again, against it
        if read_holder(stale) != holder:  # not the lock judged dead: give it back
            try:
                os.link(stale, path)
            except FileExistsError:
                pass
            stale.unlink(missing_ok=True)
            continue
        stale.unlink(missing_ok=True)
        note = (f"harness: took over {path}: the run that held it ({holder.describe_run()}) is gone"
                if holder is not None else f"harness: took over {path}: it was unreadable")
    raise ReportDirHeld(f"--report-dir: {str(report_dir)!r}: could not take {RUN_LOCK} (other runs "
                        f"keep taking it)")


def unlock_report_dir(report_dir: str) -> None:
    """Give `report_dir`'s run lock back if this process holds it (never another run's)."""
    try:
        release(_run_lock(report_dir))
    except OSError:
        pass


def report_dir_writer(report_dir: str) -> str | None:
    """A line naming the run still writing `report_dir` (its lock held by a live process, or by a
    process on another host), None when no run holds the directory or its holder is dead."""
    holder = read_holder(_run_lock(report_dir))
    if holder is None or is_me(holder):
        return None
    alive = holder_alive(holder)
    if alive is False:
        return None
    return (f"a run is still writing it ({holder.describe_run()})" if alive
            else f"{RUN_LOCK} names a run on another host that may still be writing it "
                 f"({holder.describe_run()})")
