"""`harness.plugin.lingering`: which threads keep a finished run open, and which processes may
end without waiting for them (the end to end runs: tests/e2e/test_faults.py)."""

from __future__ import annotations

import sys
import threading
import types

import pytest

from harness.plugin.lingering import (children_line, end_children, ends_with_the_run,
                                      lingering_children, lingering_line, lingering_threads)


def test_only_the_non_daemon_threads_started_since_are_lingering():
    stop = threading.Event()
    before = set(threading.enumerate())
    daemon = threading.Thread(target=stop.wait, name="daemonic", daemon=True)
    kept = threading.Thread(target=stop.wait, name="prefetch")
    daemon.start()
    kept.start()
    try:
        left = lingering_threads(before)
        assert left == [kept]
        assert lingering_line(left).startswith(
            "harness: 1 thread(s) started during the run are still running ('prefetch': ")
    finally:
        stop.set()
        kept.join()
        daemon.join()
    assert lingering_threads(before) == []


def test_only_the_non_daemon_child_processes_started_since_are_lingering():
    import multiprocessing
    import time

    ctx = multiprocessing.get_context("fork")
    before = set(multiprocessing.active_children())
    daemon = ctx.Process(target=time.sleep, args=(600,), name="daemonic", daemon=True)
    kept = ctx.Process(target=time.sleep, args=(600,), name="helper")
    daemon.start()
    kept.start()
    try:
        left = lingering_children(before)
        assert left == [kept]
        assert children_line(left).startswith(
            f"harness: 1 child process(es) started during the run are still running ('helper' "
            f"pid {kept.pid}: ")
        end_children(left)
        assert not kept.is_alive() and kept.exitcode is not None
    finally:
        for p in (daemon, kept):
            p.kill()
            p.join()
    assert lingering_children(before) == []


@pytest.mark.parametrize("argv0, ends", [
    ("/venv/bin/pytest", True),
    ("/venv/lib/python3.11/site-packages/pytest/__main__.py", True),  # python -m pytest
    ("/home/u/run_my_checks.py", False),  # pytest.main() inside a program that goes on
    ("", False),
])
def test_a_process_ends_with_the_run_where_pytest_is_the_command(monkeypatch, argv0, ends):
    monkeypatch.setattr(sys, "argv", [argv0])
    assert ends_with_the_run(types.SimpleNamespace()) is ends
    worker = types.SimpleNamespace(workerinput={"workerid": "gw0"})
    assert ends_with_the_run(worker)  # an xdist worker always ends with the run
