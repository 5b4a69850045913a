"""A call's deadline: the fixed limit, or the candidate's own pace where longer.

A slow sampler is not a hung one: a candidate whose every call takes longer than the fixed limit
(a rejection loop deep in a tail) returns, and its verdict does not depend on how fast the machine
runs it; one that stops returning is still caught, at the fixed limit where its earlier calls were
quick. The candidates here sleep a fixed time per element, so "slow" is slow on any machine.
"""

from __future__ import annotations

import functools
import math
import os
import time

import numpy as np
import pytest
import torch

from candidates import resolve
from harness import engine
from harness.cases import case_by_id
from harness.checks import CHECKS
from harness.checks.contract import check_threads
from harness.engine import PACE_FACTOR, CandidateFailure, Pace, pilot_shape
from reference import TruncatedNormal, rounded_law

run_engine = functools.partial(engine.run_engine, families=CHECKS.families())
EXACT = resolve("exact")
CASE = case_by_id("normal-2sigma")  # 256 x 256
LAW = rounded_law(TruncatedNormal(CASE.mean, CASE.std, CASE.a, CASE.b), torch.float32)


def sleeping(seconds_per_element: float, forever_from_call: int | None = None):
    """The exact sampler, sleeping `seconds_per_element` per element of each call; from call
    `forever_from_call` on (counting every call, a pilot's too), a loop that never returns."""
    calls = []

    def sampler(tensor, mean, std, a, b, generator=None):
        calls.append(tensor.numel())
        if forever_from_call is not None and len(calls) >= forever_from_call:
            while True:
                pass
        time.sleep(seconds_per_element * tensor.numel())
        return EXACT(tensor, mean, std, a, b, generator)

    sampler.calls = calls
    return sampler


def test_pace_predicts_per_element_from_the_biggest_calls_timed():
    pace = Pace(2.0)
    assert pace.limit(1 << 16) == 2.0  # nothing timed: the fixed limit
    pace.record(0.5, 1024)  # a pilot: 0.5 s on 1024 elements
    assert pace.limit(1 << 16) == pytest.approx(PACE_FACTOR * 0.5 * 64)
    pace.record(1.0, 1 << 16)  # the whole tensor replaces the pilot's estimate
    assert pace.limit(1 << 16) == pytest.approx(PACE_FACTOR * 1.0)
    pace.record(0.1, 1 << 16)  # a quicker call of the same size keeps the slowest
    pace.record(9.0, 1024)  # a smaller call does not count once a bigger one is timed
    assert pace.limit(1 << 16) == pytest.approx(PACE_FACTOR * 1.0)
    assert pace.limit(1 << 16, scale=2) == pytest.approx(PACE_FACTOR * 2.0)
    pace.record(0.0, 1 << 20)
    assert pace.limit(1 << 16) == 2.0  # never below the fixed limit
    assert Pace(None).limit(1 << 16) is None


@pytest.mark.parametrize("shape", [(256, 256), (1, 144, 64), (10, 500), (1 << 24,),
                                   (4096, 4096), (64, 64, 3, 3), (2, 3, 1000)])
def test_a_pilot_holds_a_64th_of_the_tensor_in_its_trailing_dimensions(shape):
    small = pilot_shape(shape)
    total = math.prod(shape)
    assert len(small) == len(shape)
    assert math.prod(small) <= max(1024, total // 64)
    assert small[-1] == min(shape[-1], max(1024, total // 64))


def test_no_pilot_for_a_tensor_of_a_pilots_size():
    assert pilot_shape((32, 32)) is None and pilot_shape((3,)) is None


def test_calls_slower_than_the_fixed_limit_are_slow_not_hung():
    # 0.9 s a call on 65536 elements against a 0.3 s limit: the pilot (1024 elements, 14 ms)
    # sets a deadline of 8 x 0.9 s, and the draw completes with every value.
    slow = sleeping(0.9 / (1 << 16))
    s = run_engine(slow, CASE, torch.float32, "cpu", LAW, 2 << 16, 1, call_timeout=0.3)
    assert s.n == 2 << 16
    assert slow.calls == [1024, 1 << 16, 1 << 16]


def test_a_hang_after_quick_calls_is_caught_at_the_fixed_limit():
    stops = sleeping(0.0, forever_from_call=3)  # the pilot, call 1, then call 2 never returns
    t0 = time.perf_counter()
    with pytest.raises(CandidateFailure, match="call 2 did not return within 0.5 s") as info:
        run_engine(stops, CASE, torch.float32, "cpu", LAW, 4 << 16, 1, call_timeout=0.5)
    # about a hang only: ~0.5 s expected; without the deadline the loop never returns
    assert info.value.kind == "hang" and time.perf_counter() - t0 < 60


def test_a_pilot_that_does_not_return_is_the_draws_hang():
    never = sleeping(0.0, forever_from_call=1)
    with pytest.raises(CandidateFailure, match="timing the candidate before the draw") as info:
        run_engine(never, CASE, torch.float32, "cpu", LAW, 1 << 16, 1, call_timeout=0.5)
    assert info.value.kind == "hang" and never.calls == [1024]


def test_a_pilot_that_raises_leaves_the_error_to_the_first_call():
    def raising(tensor, *args):
        raise RuntimeError("no")

    with pytest.raises(CandidateFailure, match="call 1 raised RuntimeError: no") as info:
        run_engine(raising, CASE, torch.float32, "cpu", LAW, 1 << 16, 1, call_timeout=0.5)
    assert info.value.kind == "raised"


def test_the_pilot_does_not_change_the_draw():
    a = run_engine(EXACT, CASE, torch.float32, "cpu", LAW, 2 << 16, 7, call_timeout=20.0)
    b = run_engine(EXACT, CASE, torch.float32, "cpu", LAW, 2 << 16, 7, call_timeout=None)
    assert np.array_equal(a.binned.hist, b.binned.hist)
    assert np.array_equal(a.moments.power_sums, b.moments.power_sums)


def test_the_one_thread_call_of_threads_is_held_to_the_pace_times_the_thread_count():
    # Each call takes 0.4 s x (all threads / threads in use): 0.4 s with all of them, 0.4 x N s
    # with one, past the 0.3 s limit both; held to their pace, both return and the bits match.
    all_threads = max(2, os.cpu_count() or 1)

    def slower_on_fewer_threads(tensor, mean, std, a, b, generator=None):
        time.sleep(0.4 / (1 << 16) * tensor.numel() * all_threads / torch.get_num_threads())
        return EXACT(tensor, mean, std, a, b, generator)

    slower_on_fewer_threads.accepts_generator = True
    result = check_threads(slower_on_fewer_threads, CASE, torch.float32, "cpu", 11, timeout=0.3)
    assert result.verdict == "pass", result.message
