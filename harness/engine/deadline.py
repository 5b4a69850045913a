"""Calling a candidate: the per-call deadline (SIGALRM interrupts a candidate that does not
return in time), and what it raises that is not an Exception.

`candidate_call` is the one way every check calls a candidate. Inside it a SystemExit,
GeneratorExit or KeyboardInterrupt raised by the candidate's own code becomes `CandidateRaised`,
an ordinary Exception, so the candidate gets a fail row ("raised SystemExit(3)") and the run goes
on; the harness's own deadline (`CallTimeout`) passes through, and so does a real Ctrl-C: SIGINT
arriving while the candidate runs is remembered, and its KeyboardInterrupt stops the run.
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager


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
