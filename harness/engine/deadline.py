"""Calling a candidate: the per-call deadline (SIGALRM interrupts a candidate that does not
return in time), how long it is (`Pace`), and what a candidate raises that is not an Exception.

A call's deadline is the fixed limit (``--case-timeout``, scaled by the tensor's size), stretched
up to SLOW_CALL_FACTOR times where the candidate has shown no pace yet (its first call, which
also pays one-time costs: a library's compile, an allocator's first touch) or its own calls say
it is slow (PACE_FACTOR times its slowest call so far). A sampler whose every call takes a good
share of the fixed limit (torch 2.13's float16 rejection loop deep in a tail: 15 s a call against
20) then keeps its verdict on a machine a few times slower; a call that never returns meets a
finite deadline either way, the fixed one where the candidate's calls were quick.
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager


#: How many times the fixed limit a call may take where the candidate's pace says it is slow, not
#: hung: a margin of 3 over a sampler that uses the whole fixed limit, while a first call that
#: never returns costs 3 fixed limits.
SLOW_CALL_FACTOR = 3.0
#: How many times its slowest earlier call a call may take (within SLOW_CALL_FACTOR): wide enough
#: for a load spike or a slower stretch of the same sampler.
PACE_FACTOR = 8.0


class Pace:
    """The deadline of a candidate's calls, one after another (`record` each that returned).

    The first call may take `grace` times `base` seconds (None: no limit); every later one
    `base`, or PACE_FACTOR times the slowest call so far where that is longer, up to `grace`
    times `base`. `scale` stretches the pace for a call expected to be slower by that factor
    (one torch thread where the timed calls had all of them). ``grace=1`` is the fixed limit
    alone: for calls that should return at once (invalid arguments)."""

    def __init__(self, base: float | None, grace: float = SLOW_CALL_FACTOR):
        self.base = base
        self.grace = grace
        self.slowest: float | None = None

    def record(self, seconds: float) -> None:
        """A call returned after `seconds`."""
        self.slowest = seconds if self.slowest is None else max(self.slowest, seconds)

    def limit(self, scale: float = 1.0) -> float | None:
        """Seconds the next call may take."""
        if not self.base:
            return self.base
        if self.slowest is None:
            return self.grace * self.base
        return max(self.base, min(self.grace * self.base, PACE_FACTOR * scale * self.slowest))


class CallTimeout(BaseException):
    """Raised inside the candidate by SIGALRM; a BaseException so `except Exception` can't eat it."""


@contextmanager
def call_deadline(seconds: float | None):
    """Interrupt the enclosed code after `seconds` (main thread only; otherwise no limit).

    SIGALRM interrupts Python-level loops (a redraw loop calling torch ops returns to the
    interpreter between ops); a single C call that never returns is left to pytest-timeout.
    """
    usable = (seconds and seconds > 0 and hasattr(signal, "setitimer")
              and threading.current_thread() is threading.main_thread())
    if not usable:
        yield
        return

    def on_alarm(signum, frame):
        raise CallTimeout()

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


class CandidateRaised(Exception):
    """A BaseException the candidate raised (SystemExit, GeneratorExit, its own
    KeyboardInterrupt), carried as an Exception; `original` is what it raised."""

    def __init__(self, original: BaseException):
        super().__init__(raised_text(original))
        self.original = original


def raised_text(exc: BaseException) -> str:
    """What a candidate raised, in one line: ``RuntimeError: text``, ``SystemExit(3)``."""
    if isinstance(exc, CandidateRaised):
        exc = exc.original
    if not isinstance(exc, Exception):
        return f"{type(exc).__name__}({', '.join(repr(a) for a in exc.args)})"
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text[:300]}" if text else type(exc).__name__


@contextmanager
def _remember_sigint(flag: list):
    """Note a SIGINT (a real Ctrl-C) before raising KeyboardInterrupt as Python's handler does."""
    usable = threading.current_thread() is threading.main_thread()
    previous = signal.getsignal(signal.SIGINT) if usable else None
    if previous is not signal.default_int_handler:  # ignored, or someone else's: leave it alone
        yield
        return

    def on_sigint(signum, frame):
        flag.append(signum)
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, on_sigint)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@contextmanager
def candidate_call(seconds: float | None):
    """The deadline of `call_deadline`, and the candidate's BaseExceptions as `CandidateRaised`
    (see the module docstring)."""
    sigint: list = []
    try:
        with _remember_sigint(sigint), call_deadline(seconds):
            yield
    except (CallTimeout, Exception):
        raise
    except KeyboardInterrupt as exc:
        if sigint:
            raise  # the user's Ctrl-C: stop the run
        raise CandidateRaised(exc) from exc
    except BaseException as exc:
        raise CandidateRaised(exc) from exc
