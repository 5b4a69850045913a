"""A call's deadline: the fixed limit, stretched by the candidate's own pace.

A slow sampler is not a hung one: a candidate whose every call takes most of the fixed limit (a
rejection loop deep in a tail) keeps its verdict on a slower machine, and one that stops returning
is still caught, at the fixed limit where its earlier calls were quick. The candidates here sleep
a fixed time per call, so "slow" is slow on any machine; each timing assertion below has a margin
of 2x or more over what a call sleeps.
"""

from __future__ import annotations

import functools
import os
import time

import numpy as np
import pytest
import torch

from candidates import resolve
from harness import engine
from harness.cases import case_by_id
from harness.checks import CHECKS
from harness.checks.contract import check_arguments, check_threads
from harness.engine import PACE_FACTOR, SLOW_CALL_FACTOR, CandidateFailure, Pace
from reference import TruncatedNormal, rounded_law

run_engine = functools.partial(engine.run_engine, families=CHECKS.families())
EXACT = resolve("exact")
CASE = case_by_id("normal-2sigma")  # 256 x 256
LAW = rounded_law(TruncatedNormal(CASE.mean, CASE.std, CASE.a, CASE.b), torch.float32)


def sleeping(seconds: float, forever_from_call: int | None = None):
    """The exact sampler, sleeping `seconds` in each call; from call `forever_from_call` on, a
    loop that never returns."""
    calls = []

    def sampler(tensor, mean, std, a, b, generator=None):
        calls.append(tensor.numel())
        if forever_from_call is not None and len(calls) >= forever_from_call:
            while True:
                pass
        time.sleep(seconds)
        return EXACT(tensor, mean, std, a, b, generator)

    sampler.calls = calls
    return sampler


def test_the_first_call_gets_the_grace_and_later_ones_their_pace_within_it():
    pace = Pace(2.0)
    assert pace.limit() == SLOW_CALL_FACTOR * 2.0  # nothing timed yet
    pace.record(0.01)
    assert pace.limit() == 2.0  # quick calls: the fixed limit
    pace.record(0.5)
    assert pace.limit() == PACE_FACTOR * 0.5  # 4 s: the slowest call's pace
    pace.record(0.1)
    assert pace.limit() == PACE_FACTOR * 0.5  # the slowest call so far sets it
    pace.record(1.0)
    assert pace.limit() == SLOW_CALL_FACTOR * 2.0  # 8x its pace, but not beyond the grace
    pace.record(2.5)  # a call longer than the fixed limit returned (within the first's grace)
    assert pace.limit() == SLOW_CALL_FACTOR * 2.5  # a margin of the grace over its own pace
    assert Pace(2.0, grace=1.0).limit() == 2.0 and Pace(None).limit() is None


def test_calls_that_use_most_of_the_fixed_limit_are_slow_not_hung():
    # 0.8 s a call against a 0.5 s limit: the first call has 1.5 s, the next 3 x 0.8 s (the
    # grace over its own pace); the draw completes. A fixed 0.5 s limit would read it as hung.
    slow = sleeping(0.8)
    s = run_engine(slow, CASE, torch.float32, "cpu", LAW, 3 << 16, 1, call_timeout=0.5)
    assert s.n == 3 << 16 and len(slow.calls) == 3


def test_a_hang_after_quick_calls_is_caught_at_the_fixed_limit():
    stops = sleeping(0.0, forever_from_call=3)
    t0 = time.perf_counter()
    with pytest.raises(CandidateFailure, match="call 3 did not return within 0.5 s") as info:
        run_engine(stops, CASE, torch.float32, "cpu", LAW, 4 << 16, 1, call_timeout=0.5)
    # about a hang only: ~0.5 s expected; without the deadline the loop never returns
    assert info.value.kind == "hang" and time.perf_counter() - t0 < 60


def test_a_first_call_that_never_returns_costs_the_grace():
    never = sleeping(0.0, forever_from_call=1)
    with pytest.raises(CandidateFailure, match=f"call 1 did not return within "
                                               f"{SLOW_CALL_FACTOR * 0.5:g} s") as info:
        run_engine(never, CASE, torch.float32, "cpu", LAW, 1 << 16, 1, call_timeout=0.5)
    assert info.value.kind == "hang"


def test_a_call_far_beyond_its_pace_is_caught_within_the_grace():
    # 0.25 s calls, then one that never returns: caught at 8x the slowest call (2 s and a
    # little more: a call sleeps and then samples), within the grace of 3 x 1 s.
    stops = sleeping(0.25, forever_from_call=3)
    with pytest.raises(CandidateFailure, match="call 3 did not return within") as info:
        run_engine(stops, CASE, torch.float32, "cpu", LAW, 4 << 16, 1, call_timeout=1.0)
    limit = float(str(info.value).split("within ")[1].split(" s")[0])
    assert PACE_FACTOR * 0.25 <= limit < SLOW_CALL_FACTOR * 1.0


def test_the_deadline_does_not_change_the_draw():
    a = run_engine(EXACT, CASE, torch.float32, "cpu", LAW, 2 << 16, 7, call_timeout=20.0)
    b = run_engine(EXACT, CASE, torch.float32, "cpu", LAW, 2 << 16, 7, call_timeout=None)
    assert np.array_equal(a.binned.hist, b.binned.hist)
    assert np.array_equal(a.moments.power_sums, b.moments.power_sums)


def test_threads_holds_its_one_thread_call_to_the_pace():
    # 0.8 s with one thread against a 0.5 s limit (the first call's grace: 1.5 s), quick with all.
    def slow_on_one_thread(tensor, mean, std, a, b, generator=None):
        if torch.get_num_threads() == 1:
            time.sleep(0.8)
        return EXACT(tensor, mean, std, a, b, generator)

    result = check_threads(slow_on_one_thread, CASE, torch.float32, "cpu", 11, timeout=0.5)
    assert result.verdict == "pass", result.message


def test_threads_does_not_judge_an_all_threads_call_that_runs_past_its_pace():
    all_threads = max(2, os.cpu_count() or 1)

    def stuck_with_more_threads(tensor, mean, std, a, b, generator=None):
        while torch.get_num_threads() == all_threads:
            pass
        return EXACT(tensor, mean, std, a, b, generator)

    result = check_threads(stuck_with_more_threads, CASE, torch.float32, "cpu", 11, timeout=0.5)
    assert result.verdict == "skip" and "not judged" in result.message, result.message
    assert result.details["one_thread_s"] < 0.5  # the quick one-thread call, kept out of the text


def test_an_invalid_argument_is_held_to_the_fixed_limit():
    def never_refuses(tensor, mean, std, a, b, generator=None):
        if not a < b:
            while True:
                pass
        return EXACT(tensor, mean, std, a, b, generator)

    t0 = time.perf_counter()
    result = check_arguments(never_refuses, torch.float32, "cpu", 3, timeout=0.5)
    assert result.verdict == "fail" and "a > b: hung (no return within 0.5 s)" in result.message
    # a > b and a == b hang, each at 0.5 s; the grace would give each 1.5 s
    assert time.perf_counter() - t0 < 2 * SLOW_CALL_FACTOR * 0.5


# -- the time other processes held the CPU ------------------------------------------------------

def _spin(cpu_seconds: float) -> None:
    """Busy work until this thread has run `cpu_seconds` of CPU, however long that takes."""
    start = time.thread_time()
    while time.thread_time() - start < cpu_seconds:
        pass


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/schedstat", "rb") as stat:
        return int(stat.read().split()[0]) * 1e-9


@pytest.fixture
def one_shared_cpu():
    """This thread and a busy process on one CPU: each runs about half the time."""
    if engine.deadline.waits() is None or not hasattr(os, "sched_setaffinity"):
        pytest.skip("the kernel does not say how long a thread waited for a CPU (schedstat)")
    import subprocess
    import sys
    mask = os.sched_getaffinity(0)
    cpu = {min(mask)}
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        os.sched_setaffinity(hog.pid, cpu)
        os.sched_setaffinity(0, cpu)  # this thread only: torch's own threads are left alone
        deadline = time.monotonic() + 10.0
        while _cpu_seconds(hog.pid) < 0.05 and time.monotonic() < deadline:
            _spin(0.01)  # until the hog's interpreter has started and is busy
        yield
    finally:
        os.sched_setaffinity(0, mask)
        hog.kill()
        hog.wait()


def test_a_call_gets_back_the_time_another_process_held_its_cpu(one_shared_cpu):
    """0.4 s of work beside a busy process takes ~0.8 s: past a 0.6 s deadline by the wall clock
    (unwatched, it is cut there: that needs the call to get less than 2/3 of the CPU, and the
    scheduler gives each of two busy processes half), within it by the time it could run (that
    needs more than 0.4 / 1.8 of the CPU: the deadline and twice it given back)."""
    from harness.engine.deadline import CallTimeout, candidate_call

    with pytest.raises(CallTimeout):
        with candidate_call(0.6):
            _spin(0.4)
    with candidate_call(0.6, watched=True):
        _spin(0.4)


def test_a_call_that_never_returns_meets_a_finite_deadline_beside_a_busy_process(one_shared_cpu):
    from harness.engine.deadline import CONTENTION_FACTOR, CallTimeout, candidate_call

    t0 = time.perf_counter()
    with pytest.raises(CallTimeout):  # busy forever: at most (1 + factor) deadlines
        with candidate_call(0.3, watched=True):
            _spin(60.0)
    assert time.perf_counter() - t0 < (1 + CONTENTION_FACTOR) * 0.3 + 0.5
    t0 = time.perf_counter()
    with pytest.raises(CallTimeout):  # asleep: it waits for no CPU, nothing is given back
        with candidate_call(0.3, watched=True):
            time.sleep(60.0)
    assert time.perf_counter() - t0 < 0.3 + 0.25
