"""The per-call deadline: SIGALRM interrupts a candidate that does not return in time."""

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
