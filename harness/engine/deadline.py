"""Calling a candidate: the per-call deadline (SIGALRM interrupts a candidate that does not
return in time), how long that deadline is (`Pace`), and what a candidate raises that is not an
Exception.

A call counts as hung when it runs past the longer of two limits: the fixed one
(``--case-timeout``, scaled by the tensor's size) and PACE_FACTOR times what the candidate's own
calls, timed on the same machine, predict for it. The second is what keeps the verdict off the
machine's speed: a sampler whose every call takes seconds (a rejection loop deep in a tail) is
slow, not hung, on a fast machine and on one three times slower alike; a call that never returns
meets a finite deadline either way.

`candidate_call` is the one way every check calls a candidate. Inside it a SystemExit,
GeneratorExit or KeyboardInterrupt raised by the candidate's own code becomes `CandidateRaised`,
an ordinary Exception, so the candidate gets a fail row ("raised SystemExit(3)") and the run goes
on; the harness's own deadline (`CallTimeout`) passes through, and so does a real Ctrl-C: SIGINT
arriving while the candidate runs is remembered, and its KeyboardInterrupt stops the run.
"""

from __future__ import annotations

import math
import signal
import threading
from contextlib import contextmanager


#: How many times its own pace a call may take before it counts as hung (where that is longer than
#: the fixed limit): wide enough for a load spike or a slower stretch of the same sampler, narrow
#: enough that a hang costs a few of the candidate's calls.
PACE_FACTOR = 8.0
#: The pilot call that times a candidate before its first call on a tensor holds this share of the
#: tensor's elements (at least PILOT_ELEMENTS; no pilot for a tensor no bigger): small enough that
#: it returns long before the fixed limit wherever the real call would, big enough that a fixed
#: cost per call (a library's child process) barely inflates the per-element pace it measures.
PILOT_SHARE = 1 / 64
PILOT_ELEMENTS = 1024


class Pace:
    """The deadline of a candidate's next call: `base` seconds (None: no limit), or PACE_FACTOR
    times what its timed calls predict for the call's elements, whichever is longer. The
    prediction is per element, from the biggest calls timed (the slowest of them): a pilot's
    until a call on the whole tensor has returned. `scale` stretches it for a call expected to be
    slower by that factor (one torch thread where the timed calls had all of them)."""

    def __init__(self, base: float | None):
        self.base = base
        self.elements = 0
        self.seconds_per_element = 0.0

    def record(self, seconds: float, elements: int) -> None:
        """A call on `elements` elements returned after `seconds`."""
        elements = max(1, elements)
        if elements > self.elements:
            self.elements, self.seconds_per_element = elements, seconds / elements
        elif elements == self.elements:
            self.seconds_per_element = max(self.seconds_per_element, seconds / elements)

    def limit(self, elements: int, scale: float = 1.0) -> float | None:
        """Seconds a call on `elements` elements may take."""
        if not self.base:
            return self.base
        return max(self.base, PACE_FACTOR * scale * self.seconds_per_element * max(1, elements))


def pilot_shape(shape: tuple) -> tuple | None:
    """A shape like `shape` with about PILOT_SHARE of its elements (at least PILOT_ELEMENTS):
    the leading dimensions shrink first, the trailing ones are kept where they fit. None where
    `shape` holds no more than PILOT_ELEMENTS (its first call is a pilot's size already)."""
    total = math.prod(shape)
    if total <= PILOT_ELEMENTS:
        return None
    budget = max(PILOT_ELEMENTS, int(total * PILOT_SHARE))
    dims = list(shape)
    for i in range(len(dims)):
        if math.prod(dims) <= budget:
            break
        dims[i] = max(1, min(dims[i], budget // max(1, math.prod(dims[i + 1:]))))
    return tuple(dims)


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
