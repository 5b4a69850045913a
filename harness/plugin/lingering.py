"""The end of a run that a candidate's own threads would keep open.

A sampler that starts a thread and never ends it (a prefetcher, a watchdog, a pool it does not
shut down) kept the process alive once the run was over: interpreter shutdown joins every
non-daemon thread, so a run without -n never ended, and an xdist worker ended only when its
controller killed it, 10 s later. `LingeringThreads`, registered in every process of a run,
looks at the end of it (its pytest_unconfigure runs after every other plugin's: the report, the
JUnit XML and the terminal summary are written) for non-daemon threads started since the run
began; where there are any, it names them in one line and ends the process with the run's exit
status, without waiting for them. Only in a process that ends with the run (`ends_with_the_run`):
``pytest.main()`` called from a program that goes on returns as before.
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

import pytest

#: Threads named in the line, at most.
NAMED_THREADS = 3


def lingering_threads(before: set) -> list:
    """The non-daemon threads alive now that were not in `before`, but this one."""
    here = threading.current_thread()
    return [t for t in threading.enumerate()
            if t.is_alive() and not t.daemon and t is not here and t not in before]


def ends_with_the_run(config) -> bool:
    """Whether the process ends when the run does: an xdist worker, or pytest started as a
    command (its console script, ``python -m pytest``) rather than ``pytest.main()`` inside a
    program that goes on after it."""
    if getattr(config, "workerinput", None) is not None:
        return True
    script = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    return script is not None and (script.stem in ("pytest", "py.test") or (
        script.name == "__main__.py" and script.parent.name == "pytest"))


def lingering_line(threads: list) -> str:
    names = ", ".join(repr(t.name) for t in threads[:NAMED_THREADS])
    more = f" and {len(threads) - NAMED_THREADS} more" if len(threads) > NAMED_THREADS else ""
    return (f"harness: {len(threads)} thread(s) started during the run are still running "
            f"({names}{more}: not joined, a candidate's or a library's it calls); the run is over "
            f"and its report written: exiting without waiting for them")


class LingeringThreads:
    """Ends a process that threads started during its run would keep alive (see the module)."""

    def __init__(self):
        self.before = set(threading.enumerate())
        self.session = None

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session):
        self.session = session

    @pytest.hookimpl(trylast=True)
    def pytest_unconfigure(self, config):
        left = lingering_threads(self.before)
        if not left or self.session is None or not ends_with_the_run(config):
            return  # (no session: the run ended before any candidate was called)
        capture = config.pluginmanager.getplugin("capturemanager")
        if capture is not None:  # the line must reach the terminal, not the capture
            capture.stop_global_capturing()
        print(lingering_line(left), file=sys.stderr)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(int(self.session.exitstatus))
