"""Leases: a crash is reported only when the holder is proven dead, never for a live neighbour.

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

from reports.leases import (Holder, LeaseHeld, acquire, current_holder, holder_alive, lease,
                            process_start_time, read_holder, release)
from harness.runner import failure_from_lease

ROOT = Path(__file__).resolve().parents[3]

HOLD = """
import sys, time
sys.path.insert(0, {root!r})
from reports.leases import acquire
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
from reports.leases import LeaseHeld, acquire
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
