"""The native backstop: a call stuck inside one native call (SIGALRM's handler never runs there)
ends the process that registered a log, after every deadline the call could have had, with the
stuck stack in the log; calls that return leave no watchdog behind. In subprocesses: the
backstop ends its process. (Through xdist, rows and report: tests/e2e/test_faults.py.)"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

from harness.engine.deadline import CONTENTION_FACTOR

SLACK = 0.5  # NATIVE_SLACK_S and REARM_S in the subprocesses

ROOT = __import__("pathlib").Path(__file__).resolve().parents[3]


def _run(body: str, log, timeout: float = 120) -> tuple[int, float]:
    code = textwrap.dedent("""
        import sys, time
        from harness.engine import candidate_call, deadline, held_handlers, native_backstop
        deadline.NATIVE_SLACK_S = deadline.REARM_S = 0.5  # seconds, not the runs' 5
        log = open(sys.argv[1], "w")
        native_backstop(log)
    """) + textwrap.dedent(body)
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", code, str(log)], cwd=ROOT, timeout=timeout,
                          capture_output=True, text=True)
    return proc.returncode, time.monotonic() - t0


def test_a_call_stuck_in_one_native_call_ends_the_process_with_its_stack(tmp_path):
    log = tmp_path / "gw0.log"
    rc, took = _run("""
        def stuck_in_c():
            sum(range(10 ** 14))  # one C call: the deadline's handler never runs inside it
        with held_handlers():
            with candidate_call(0.5):
                stuck_in_c()
        print("returned")
    """, log)
    assert rc == 1
    text = log.read_text()
    assert text.startswith("Timeout (") and "in stuck_in_c" in text, text[:500]
    # after every deadline it could have had, not long after
    assert 0.5 * (1 + CONTENTION_FACTOR) + SLACK < took < 60


def test_calls_that_return_leave_no_watchdog(tmp_path):
    log = tmp_path / "gw0.log"
    rc, _ = _run("""
        with held_handlers():
            for _ in range(1000):
                with candidate_call(0.5):
                    pass
        with candidate_call(0.5):  # a probe's call, outside a draw
            pass
        time.sleep(0.5 * (1 + 2) + 0.5 + 0.5 + 1)  # past when an armed watchdog would fire
        print("returned")
    """, log)
    assert rc == 0 and log.read_text() == ""
