"""Calling a candidate: the per-call deadline (SIGALRM interrupts a candidate that does not
return in time), how long it is (`Pace`), and what a candidate raises that is not an Exception.

A call's deadline is the fixed limit (``--case-timeout``, scaled by the tensor's size), stretched
up to SLOW_CALL_FACTOR times where the candidate has shown no pace yet (its first call, which
also pays one-time costs: a library's compile, an allocator's first touch) or its own calls say
it is slow (PACE_FACTOR times its slowest call so far, up to SLOW_CALL_FACTOR times the fixed
limit, and always SLOW_CALL_FACTOR times its slowest call). A sampler whose every call takes a
good share of the fixed limit, or more (a pure-Python sampler on 2^24 elements: 8 s a call
against 4), then keeps its verdict under a load spike; a call that never returns meets a finite
deadline either way, the fixed one where the candidate's calls were quick.

A deadline counts the time a call could run, not the time other processes held the CPU: where the
kernel says how long the call's threads waited, runnable, for a CPU (Linux's schedstat), a call
that meets its deadline gets those waits back, added up (`total_wait`), up to CONTENTION_FACTOR
times its deadline in all,
before it is a hang. On an idle machine nothing is added; beside a busy one (a third process on 2
cores) a slow but correct sampler keeps its verdict, while a call that never returns still meets a
finite deadline. The wait is read only around calls long enough that reading it is noise
(`Pace.watched`: the first call, or calls of WATCH_CALL_SECONDS or more).

SIGALRM's handler runs between the interpreter's instructions: a call stuck inside one native call
(a C loop that never returns to Python) never meets it. Where a process registered a log for that
(`native_backstop`: an xdist worker, its crash log), faulthandler's watchdog thread, which needs
no GIL, ends the process once such a call has run past any deadline it could have had: the
controller then reports the stuck call from the stack written to the log
(`harness.plugin.crashes`), and the run goes on in a new worker.

`candidate_call` is the one way every check calls a candidate. Inside it a SystemExit,
GeneratorExit or KeyboardInterrupt raised by the candidate's own code becomes `CandidateRaised`,
an ordinary Exception, so the candidate gets a fail row ("raised SystemExit(3)") and the run goes
on; the harness's own deadline (`CallTimeout`) passes through, and so does a real Ctrl-C: SIGINT
arriving while the candidate runs is remembered, and its KeyboardInterrupt stops the run.
"""

from __future__ import annotations

import _signal
import faulthandler
import os
import signal
import threading
import time
from contextlib import ExitStack, contextmanager


#: How many times the fixed limit a call may take where the candidate's pace says it is slow, not
#: hung: a margin of 3 over a sampler that uses the whole fixed limit, while a first call that
#: never returns costs 3 fixed limits.
SLOW_CALL_FACTOR = 3.0
#: How many times its slowest earlier call a call may take (within SLOW_CALL_FACTOR): wide enough
#: for a load spike or a slower stretch of the same sampler.
PACE_FACTOR = 8.0
#: The most a call's deadline is pushed back for the time its threads waited for a CPU, as a
#: multiple of the deadline: a call that never returns costs at most (1 + this) deadlines, however
#: busy the machine.
CONTENTION_FACTOR = 2.0
#: A call this long or longer has the wait of its threads read (~50 us: noise beside it).
WATCH_CALL_SECONDS = 0.01
#: A wait shorter than this is not given back (the deadline stands).
MIN_GIVEN_BACK = 0.01


def handler_of(signum: int):
    """The handler installed for `signum`, as installed (a function, SIG_DFL, SIG_IGN or
    None). `signal.getsignal` looks the answer up in an enum first, which for a function costs
    a raised and caught ValueError: ~5 us, and a draw asks twice per call."""
    return _signal.getsignal(signum)


class Pace:
    """The deadline of a candidate's calls, one after another (`record` each that returned).

    The first call may take `grace` times `base` seconds (None: no limit); every later one
    `base`, or PACE_FACTOR times the slowest call so far where that is longer, up to `grace`
    times `base`, and always `grace` times the slowest call so far: a sampler whose calls take
    more than the fixed limit (it returned within the first call's grace) keeps a margin of
    `grace` over its own pace for a load spike. ``grace=1`` is the fixed limit alone: for calls
    that should return at once (invalid arguments)."""

    def __init__(self, base: float | None, grace: float = SLOW_CALL_FACTOR):
        self.base = base
        self.grace = grace
        self.slowest: float | None = None

    def record(self, seconds: float) -> None:
        """A call returned after `seconds`."""
        self.slowest = seconds if self.slowest is None else max(self.slowest, seconds)

    def watched(self) -> bool:
        """Whether the next call's wait for a CPU is read (`candidate_call`): the first call, or
        a candidate whose calls take WATCH_CALL_SECONDS or more."""
        return self.slowest is None or self.slowest >= WATCH_CALL_SECONDS

    def limit(self) -> float | None:
        """Seconds the next call may take."""
        if not self.base:
            return self.base
        if self.slowest is None:
            return self.grace * self.base
        return max(self.base, min(self.grace * self.base, PACE_FACTOR * self.slowest),
                   self.grace * self.slowest)


#: Past every deadline a call could have (its own, pushed back by CONTENTION_FACTOR times it):
#: the native backstop's slack, for the harness's work on one call's output before the next
#: call (a draw releases the backstop before it folds a chunk: `release_native_backstop`).
NATIVE_SLACK_S = 5.0
#: The native backstop is re-armed at most about this often in a draw's calls: arming costs
#: ~50 us (faulthandler starts its watchdog thread), as much as a small tensor's call.
REARM_S = 5.0


class _Backstop:
    """faulthandler's watchdog over the calls of this process (`native_backstop`): where it
    writes and when it fires (monotonic seconds; None: not armed)."""

    file = None
    fires_at: float | None = None

    @classmethod
    def cover(cls, seconds: float) -> None:
        """Make sure the watchdog does not fire before a call of deadline `seconds`, starting now,
        could have run past every deadline it may have (re-armed only where it would)."""
        if cls.file is None:
            return
        need = seconds * (1 + CONTENTION_FACTOR) + NATIVE_SLACK_S
        now = time.monotonic()
        if cls.fires_at is not None and cls.fires_at - now >= need:
            return
        faulthandler.dump_traceback_later(need + REARM_S, exit=True, file=cls.file)
        cls.fires_at = now + need + REARM_S

    @classmethod
    def release(cls) -> None:
        """No call is under way any more: the watchdog stands down."""
        if cls.fires_at is not None:
            faulthandler.cancel_dump_traceback_later()
            cls.fires_at = None


def native_backstop(file) -> None:
    """End this process, writing the stacks of its threads to `file` (faulthandler's
    "Timeout (h:mm:ss)!" dump), where a candidate's call stays inside one native call past any
    deadline it could have had (see the module). For a process whose end the run survives: an
    xdist worker. None: off."""
    _Backstop.release()
    _Backstop.file = file


def release_native_backstop() -> None:
    """The harness's own work begins (a draw folding a chunk, however long that takes under
    load): the native backstop stands down until the next call arms it again."""
    _Backstop.release()


class CallTimeout(BaseException):
    """Raised inside the candidate by SIGALRM; a BaseException so `except Exception` can't eat it."""


def waits() -> dict | None:
    """Seconds each thread of this process has waited, runnable, for a CPU (thread id -> seconds,
    from /proc/self/task/*/schedstat); None where the kernel does not say."""
    try:
        threads = os.listdir("/proc/self/task")
    except OSError:
        return None
    out = {}
    for thread in threads:
        try:
            with open(f"/proc/self/task/{thread}/schedstat", "rb") as stat:
                out[thread] = int(stat.read().split()[1]) * 1e-9
        except (OSError, ValueError, IndexError):
            continue
    return out or None


def total_wait(before: dict, now: dict) -> float:
    """What the threads waited for a CPU between two `waits`, added up (a thread born between
    them counts from its birth). A call on several threads waits for the slowest of each
    parallel op, and the threads take turns at being it: the longest single thread's wait
    misses most of that (torch's rejection loop on 2 threads beside a busy worker: 2.3 s alone,
    past 4 s + twice that), while the sum can only give back too much, within CONTENTION_FACTOR."""
    return sum(now[t] - before.get(t, 0.0) for t in now)


class _Watch:
    """The waits of the call now under a deadline (`candidate_call`), while it is watched: the
    `waits` when it was armed, the seconds given back so far and the most that may be."""

    before: dict | None = None
    given: float = 0.0
    most: float = 0.0

    @classmethod
    def give_back(cls) -> float:
        """Seconds to push the deadline back by now: the wait since the call was armed not yet
        given back, within `most`; 0 where nothing is watched or the kernel does not say."""
        if cls.before is None:
            return 0.0
        now = waits()
        if now is None:
            return 0.0
        more = min(total_wait(cls.before, now) - cls.given, cls.most - cls.given)
        if more < MIN_GIVEN_BACK:
            return 0.0
        cls.given += more
        return more


def _on_alarm(signum, frame):
    more = _Watch.give_back()
    if more > 0:
        signal.setitimer(signal.ITIMER_REAL, more)
        return
    raise CallTimeout()


#: SIGINTs (a real Ctrl-C) noted while our SIGINT handler is installed; cleared by each call.
_SIGINTS: list = []


def _on_sigint(signum, frame):
    _SIGINTS.append(signum)
    raise KeyboardInterrupt


class _Handlers:
    """How many `held_handlers` contexts the main thread is in: the outermost installs our
    SIGALRM handler and SIGINT note, the inner ones find them installed. `sigint`: whether the
    SIGINT note is ours to keep (the handler found was Python's default)."""

    depth = 0
    sigint = False


@contextmanager
def held_handlers():
    """Keep the deadline's handlers installed for the enclosed calls of `candidate_call`:
    installing a handler costs ~10 us, as much as a small tensor's call, so a draw of thousands
    of calls installs them once and each call only arms the timer. A no-op outside the main
    thread; inside another `held_handlers`, it only counts."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    if _Handlers.depth:
        _Handlers.depth += 1
        try:
            yield
        finally:
            _Handlers.depth -= 1
        return
    alarm = signal.signal(signal.SIGALRM, _on_alarm) if hasattr(signal, "setitimer") else None
    interrupt = handler_of(signal.SIGINT)
    own_sigint = interrupt is signal.default_int_handler  # ignored, or someone else's: left alone
    if own_sigint:
        signal.signal(signal.SIGINT, _on_sigint)
    _Handlers.depth, _Handlers.sigint = 1, own_sigint
    try:
        yield
    finally:
        _Handlers.depth, _Handlers.sigint = 0, False
        _Backstop.release()
        if own_sigint:
            signal.signal(signal.SIGINT, interrupt)
        if alarm is not None:
            signal.signal(signal.SIGALRM, alarm)


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
    with held_handlers():
        signal.setitimer(signal.ITIMER_REAL, seconds)
        try:
            yield
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)


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


class candidate_call:
    """The deadline of `call_deadline`, and the candidate's BaseExceptions as `CandidateRaised`
    (see the module docstring). A class rather than nested generators: a draw enters it once per
    call, and inside `held_handlers` (the main thread) it only clears the noted SIGINTs and arms
    and disarms the timer, ~1 us a call instead of ~4."""

    def __init__(self, seconds: float | None, watched: bool = False):
        self.seconds = seconds
        self.watched = watched  # give back the CPU waits of the call (`Pace.watched`)
        self.armed = False
        self.outer: ExitStack | None = None

    def __enter__(self) -> "candidate_call":
        seconds = self.seconds
        if _Handlers.depth and threading.current_thread() is threading.main_thread():
            _SIGINTS.clear()
            # An earlier call may have taken a signal (a library that times itself out, or
            # that handles Ctrl-C): each call takes it back, or the next call that hangs would
            # hang the run and a Ctrl-C would not stop it.
            if _Handlers.sigint and handler_of(signal.SIGINT) is not _on_sigint:
                signal.signal(signal.SIGINT, _on_sigint)
            if seconds and seconds > 0 and hasattr(signal, "setitimer"):
                if handler_of(signal.SIGALRM) is not _on_alarm:
                    signal.signal(signal.SIGALRM, _on_alarm)
                self._watch(seconds)
                signal.setitimer(signal.ITIMER_REAL, seconds)
                self.armed = True
                _Backstop.cover(seconds)
            return self
        self.outer = ExitStack()
        self.outer.enter_context(held_handlers())  # its end stands the backstop down
        _SIGINTS.clear()
        if threading.current_thread() is threading.main_thread() and seconds and seconds > 0:
            self._watch(seconds)
            _Backstop.cover(seconds)
        self.outer.enter_context(call_deadline(seconds))
        return self

    def _watch(self, seconds: float) -> None:
        if self.watched:
            _Watch.before, _Watch.given = waits(), 0.0
            _Watch.most = CONTENTION_FACTOR * seconds

    def __exit__(self, kind, exc, trace) -> bool:
        _Watch.before = None
        if self.armed:
            signal.setitimer(signal.ITIMER_REAL, 0)
            self.armed = False
        if self.outer is not None:
            outer, self.outer = self.outer, None
            outer.__exit__(kind, exc, trace)
        if exc is None or isinstance(exc, (CallTimeout, Exception)):
            return False
        if isinstance(exc, KeyboardInterrupt) and _SIGINTS:
            return False  # the user's Ctrl-C: stop the run
        raise CandidateRaised(exc) from exc
