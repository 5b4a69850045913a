"""The `arguments` check: invalid arguments must raise, and that means something only where a valid
call fills its tensor. A sampler that raises on every call (a wrong signature, a missing
dependency) refuses nothing in particular: it fails, on one call, and never passes.
"""

from __future__ import annotations

import time

import torch

from candidates import resolve
from candidates.protocol import Candidate
from harness.checks.contract import BAD_ARGUMENTS, check_arguments

EXACT = resolve("exact")


def counting(sampler, expresses=None):
    """`sampler` as a Candidate that records the (mean, std, a, b) of each call."""
    calls = []

    def fn(tensor, mean, std, a, b, generator=None):
        calls.append((mean, std, a, b))
        return sampler(tensor, mean, std, a, b, generator)

    return Candidate(fn, name="counting", expresses=expresses), calls


def test_the_exact_sampler_fills_the_valid_call_and_refuses_every_invalid_argument():
    cand, calls = counting(EXACT)
    result = check_arguments(cand, torch.float32, "cpu", seed=3, timeout=10.0)
    assert result.verdict == "pass", result.message
    assert calls[0] == (0.0, 1.0, -2.0, 2.0)  # the valid call first
    assert len(calls) == 1 + len(BAD_ARGUMENTS) + 1  # then each invalid argument, then a == b


def test_a_sampler_that_raises_on_every_call_fails_on_its_valid_call():
    def always_raises(tensor, mean, std, a, b, generator=None):
        raise TypeError("always_raises() takes 1 positional argument but 6 were given")

    cand, calls = counting(always_raises)
    result = check_arguments(cand, torch.float32, "cpu", seed=3, timeout=10.0)
    assert result.verdict == "fail", result.message
    assert "a valid call (mean 0, std 1 on [-2, 2]) raised TypeError: always_raises()" in \
        result.message
    assert len(calls) == 1  # its refusals are not probed: they would say nothing


def test_a_sampler_that_hangs_on_a_valid_call_fails_after_one_limit():
    def hangs(tensor, mean, std, a, b, generator=None):
        while True:
            pass

    cand, calls = counting(hangs)
    t0 = time.perf_counter()
    result = check_arguments(cand, torch.float32, "cpu", seed=3, timeout=0.5)
    assert result.verdict == "fail" and "did not return within 0.5 s" in result.message
    assert len(calls) == 1
    # one call at the fixed 0.5 s limit, not one per invalid argument (4.5 s)
    assert time.perf_counter() - t0 < 2.5


def test_a_sampler_that_cannot_be_asked_the_valid_call_is_probed_as_before():
    def bounds_fixed_at_3(mean, std, a, b):
        return None if (a, b) == (mean - 3 * std, mean + 3 * std) else "bounds are fixed at 3 std"

    def raises(tensor, mean, std, a, b, generator=None):
        raise ValueError("refused")

    cand, calls = counting(raises, expresses=bounds_fixed_at_3)
    result = check_arguments(cand, torch.float32, "cpu", seed=3, timeout=10.0)
    # Neither the valid call nor any invalid argument keeps a, b at mean -+ 3 std: nothing is
    # asked and nothing judged, as for such a sampler before the valid call was asked first.
    assert result.verdict == "skip", result.message
    assert calls == []
