"""Leases: a crash is reported only when the holder is proven dead, never for a live neighbour;
and the run lock of a report directory: one run writes a directory, a dead run's lock is taken
over, the readers say when a directory is still being written.

Real processes throughout: a child that holds a lease while alive, one that exits and is reaped,
one that exits and is not reaped yet (a zombie, as a crashed xdist worker is until its
controller waits for it), and two processes racing for one lease.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path

import pytest

from record.leases import (RUN_LOCK, Holder, LeaseHeld, ReportDirHeld, acquire, current_holder,
                           holder_alive, lease, lock_report_dir, process_start_time, read_holder,
                           release, report_dir_writer, unlock_report_dir)
from harness.runner import failure_from_lease

ROOT = Path(__file__).resolve().parents[3]

HOLD = """
import sys, time
sys.path.insert(0, {root!r})
from record.leases import acquire
acquire({path!r})
print("held", flush=True)
{after}
"""


def _child(path: Path, after: str) -> subprocess.Popen:
    code = HOLD.format(root=str(ROOT), path=str(path), after=after)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_take_and_give_back(tmp_path):
    path = tmp_path / "a.inflight"
    with lease(path):
        holder = read_holder(path)
        assert holder.pid == os.getpid() and holder.start == process_start_time(os.getpid())
    assert not path.exists()


def test_a_lease_this_process_left_behind_is_taken_over(tmp_path):
    path = tmp_path / "a.inflight"
    acquire(path)
    acquire(path)  # an earlier attempt of ours that never released it: neither crash nor neighbour
    release(path)
    assert not path.exists()


def test_a_live_holder_is_not_a_crash(tmp_path):
    path = tmp_path / "a.inflight"
    proc = _child(path, "time.sleep(60)")
    try:
        with pytest.raises(LeaseHeld) as info:
            acquire(path)
        assert info.value.alive is True and not info.value.crashed
        failure = failure_from_lease(info.value, "stage 1")
        assert failure.kind == "split" and "crash" not in str(failure)
        assert f"pid {proc.pid}" in str(failure)
        release(path)  # not ours: must stay
        assert path.exists()
    finally:
        proc.kill()
        proc.wait()


def test_a_dead_holder_is_a_crash(tmp_path):
    path = tmp_path / "a.inflight"
    proc = _child(path, "import os; os._exit(3)")
    proc.wait()  # reaped
    with pytest.raises(LeaseHeld) as info:
        acquire(path)
    assert info.value.crashed
    failure = failure_from_lease(info.value, "stage 1")
    assert failure.kind == "crashed" and f"pid {proc.pid}" in str(failure)


def test_a_zombie_holder_is_a_crash(tmp_path):
    if not os.path.exists("/proc/self/stat"):
        pytest.skip("process states are read from /proc")
    path = tmp_path / "a.inflight"
    proc = _child(path, "import os; os._exit(3)")
    deadline = time.time() + 10
    while time.time() < deadline:  # exited, not waited for: a zombie
        state = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        if state == "Z":
            break
        time.sleep(0.01)
    assert state == "Z"
    try:
        with pytest.raises(LeaseHeld) as info:
            acquire(path)
        assert info.value.crashed
    finally:
        proc.wait()


def test_a_recycled_pid_is_not_the_holder(tmp_path):
    """The pid lives, but it is a process started after the lease was taken."""
    holder = replace(current_holder(), pid=os.getppid(), start="another-boot:1")
    assert holder_alive(holder) is False


def test_a_holder_on_another_host_is_not_called_dead(tmp_path):
    path = tmp_path / "a.inflight"
    path.write_text(json.dumps(asdict(replace(current_holder(), host="elsewhere", pid=1))))
    with pytest.raises(LeaseHeld) as info:
        acquire(path)
    assert info.value.alive is None and not info.value.crashed
    assert failure_from_lease(info.value, "stage 1").kind == "split"


def test_two_processes_racing_for_one_lease(tmp_path):
    """Exactly one wins; the loser sees a live holder, never a crash."""
    path = tmp_path / "a.inflight"
    go = tmp_path / "go"
    done = tmp_path / "done"
    # No timing in it: every child says "ready" once imported, all are released together, and the
    # winner holds the lease, alive, until the test has every loser's answer (a winner sleeping a
    # fixed 2 s could exit, leaving its lease to a dead pid, before a child slow to import looked).
    code = f"""
import os, sys, time
sys.path.insert(0, {str(ROOT)!r})
from record.leases import LeaseHeld, acquire
print("ready", flush=True)
while not os.path.exists({str(go)!r}):
    time.sleep(0.001)
try:
    acquire({str(path)!r})
    print("won", flush=True)
    deadline = time.monotonic() + 300  # only if the test died: never outlive it for long
    while not os.path.exists({str(done)!r}) and time.monotonic() < deadline:
        time.sleep(0.01)
except LeaseHeld as e:
    print("alive" if e.alive else "crashed" if e.crashed else "unknown", flush=True)
"""
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
             for _ in range(4)]
    try:
        assert [p.stdout.readline().strip() for p in procs] == ["ready"] * 4
        go.touch()
        outcomes = sorted(p.stdout.readline().strip() for p in procs)  # one line each
    finally:
        done.touch()
        for p in procs:
            p.communicate(timeout=60)
    assert outcomes == ["alive", "alive", "alive", "won"]


def test_holder_record_round_trips(tmp_path):
    path = tmp_path / "a.inflight"
    acquire(path)
    holder = read_holder(path)
    assert isinstance(holder, Holder) and holder == replace(current_holder(), since=holder.since)
    release(path)


# ------------------------------------------------------------------------------------------------
# The run lock of a report directory


def _write_holder(path: Path, holder: Holder) -> None:
    path.write_text(json.dumps(asdict(holder)), encoding="utf-8")


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()  # reaped: the pid names no process (until the kernel hands it out again)
    return proc.pid


def test_the_run_lock_names_its_holder_and_is_given_back(tmp_path):
    assert lock_report_dir(str(tmp_path), "pytest suites") is None
    holder = read_holder(tmp_path / RUN_LOCK)
    assert holder.pid == os.getpid() and holder.command == "pytest suites"
    assert report_dir_writer(str(tmp_path)) is None  # this process is the writer
    unlock_report_dir(str(tmp_path))
    assert not (tmp_path / RUN_LOCK).exists()


def test_a_run_lock_held_by_a_live_run_refuses_with_one_line_naming_it(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        live = replace(current_holder(), pid=proc.pid, start=process_start_time(proc.pid),
                       command="pytest suites --candidate scipy")
        _write_holder(tmp_path / RUN_LOCK, live)
        with pytest.raises(ReportDirHeld) as info:
            lock_report_dir(str(tmp_path))
        text = str(info.value)
        assert "\n" not in text and f"pid {proc.pid}" in text and "--candidate scipy" in text
        assert "in use by another run" in text
        assert read_holder(tmp_path / RUN_LOCK) == live  # untouched
        unlock_report_dir(str(tmp_path))  # not ours: must stay
        assert (tmp_path / RUN_LOCK).exists()
        assert f"still writing it (pid {proc.pid}" in report_dir_writer(str(tmp_path))
    finally:
        proc.kill()
        proc.wait()


def test_a_dead_runs_lock_is_taken_over_with_a_line(tmp_path):
    dead = replace(current_holder(), pid=_dead_pid(), start="boot:1", command="pytest suites")
    _write_holder(tmp_path / RUN_LOCK, dead)
    assert report_dir_writer(str(tmp_path)) is None  # a dead writer writes nothing
    note = lock_report_dir(str(tmp_path))
    assert note is not None and "took over" in note and f"pid {dead.pid}" in note and "gone" in note
    assert read_holder(tmp_path / RUN_LOCK).pid == os.getpid()
    assert [p.name for p in tmp_path.iterdir()] == [RUN_LOCK]  # the stale file is gone
    unlock_report_dir(str(tmp_path))


def test_an_unreadable_run_lock_is_taken_over(tmp_path):
    (tmp_path / RUN_LOCK).write_text("{half", encoding="utf-8")
    note = lock_report_dir(str(tmp_path))
    assert note is not None and "unreadable" in note
    unlock_report_dir(str(tmp_path))


def test_a_run_lock_from_another_host_is_not_taken(tmp_path):
    """Liveness across hosts cannot be read: the lock is kept, and the line says how to break it."""
    _write_holder(tmp_path / RUN_LOCK, replace(current_holder(), host="elsewhere", pid=1))
    with pytest.raises(ReportDirHeld) as info:
        lock_report_dir(str(tmp_path))
    assert "another host" in str(info.value) and "remove" in str(info.value)
    assert "another host" in report_dir_writer(str(tmp_path))


def test_two_runs_taking_over_one_dead_lock_end_with_one_holder(tmp_path):
    """Two processes race for a directory whose lock a dead run left: exactly one holds it, the
    other is refused naming the winner (deterministic: whoever loses, it is refused)."""
    _write_holder(tmp_path / RUN_LOCK, replace(current_holder(), pid=_dead_pid(), start="boot:1"))
    code = (f"import sys, time; sys.path.insert(0, {str(ROOT)!r})\n"
            "from record.leases import lock_report_dir, ReportDirHeld\n"
            "try:\n"
            f"    lock_report_dir({str(tmp_path)!r}); print('held', flush=True); time.sleep(30)\n"
            "except ReportDirHeld as exc:\n"
            "    print('refused', exc, flush=True)\n")
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
             for _ in range(2)]
    try:
        first = sorted(p.stdout.readline().split()[0] for p in procs)
        assert first == ["held", "refused"], first
    finally:
        for p in procs:
            p.kill()
            p.wait()
