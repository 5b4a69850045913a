"""The end of a run that a candidate's own threads or child processes would keep open.

A sampler that starts a thread and never ends it (a prefetcher, a watchdog, a pool it does not
shut down) kept the process alive once the run was over: interpreter shutdown joins every
non-daemon thread, so a run without -n never ended, and an xdist worker ended only when its
controller killed it, 10 s later. A non-daemon child process started with `multiprocessing` (a
helper process, a pool's worker) does the same: multiprocessing joins them at exit.
`LingeringThreads`, registered in every process of a run, looks at the end of it (its
pytest_unconfigure runs after every other plugin's: the report, the JUnit XML and the terminal
summary are written) for non-daemon threads and child processes started since the run began;
where there are any, it names them in one line and ends those children (they served a run that
is over), and where threads are left it ends the process with the run's exit status, without
waiting for them. Only in a process that ends with the run (`ends_with_the_run`):
``pytest.main()`` called from a program that goes on returns as before.
"""

from __future__ import annotations

import multiprocessing
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


def lingering_children(before: set) -> list:
    """The non-daemon child processes (multiprocessing's) alive now that were not in `before`:
    interpreter shutdown would wait for each of them to end."""
    return [p for p in multiprocessing.active_children() if not p.daemon and p not in before]


#: Seconds a lingering child is given to end on SIGTERM before it is killed.
CHILD_GRACE_S = 2.0


def end_children(children: list) -> None:
    """SIGTERM each child, then SIGKILL those still alive after CHILD_GRACE_S."""
    for child in children:
        child.terminate()
    for child in children:
        child.join(CHILD_GRACE_S)
        if child.is_alive():
            child.kill()
            child.join(CHILD_GRACE_S)


def ends_with_the_run(config) -> bool:
    """Whether the process ends when the run does: an xdist worker, or pytest started as a
    command (its console script, ``python -m pytest``) rather than ``pytest.main()`` inside a
    program that goes on after it."""
    if getattr(config, "workerinput", None) is not None:
        return True
    script = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    return script is not None and (script.stem in ("pytest", "py.test") or (
        script.name == "__main__.py" and script.parent.name == "pytest"))


def _named(items: list, name) -> str:
    names = ", ".join(name(i) for i in items[:NAMED_THREADS])
    return names + (f" and {len(items) - NAMED_THREADS} more" if len(items) > NAMED_THREADS else "")


def lingering_line(threads: list) -> str:
    return (f"harness: {len(threads)} thread(s) started during the run are still running "
            f"({_named(threads, lambda t: repr(t.name))}: not joined, a candidate's or a "
            f"library's it calls); the run is over and its report written: exiting without "
            f"waiting for them")


def children_line(children: list) -> str:
    return (f"harness: {len(children)} child process(es) started during the run are still "
            f"running ({_named(children, lambda p: f'{p.name!r} pid {p.pid}')}: not joined, a "
            f"candidate's or a library's it calls); the run is over and its report written: "
            f"ending them")


class LingeringThreads:
    """Ends a process that threads or child processes started during its run would keep alive
    (see the module)."""

    def __init__(self):
        self.before = set(threading.enumerate())
        self.children_before = set(multiprocessing.active_children())
        self.session = None

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session):
        self.session = session

    @pytest.hookimpl(trylast=True)
    def pytest_unconfigure(self, config):
        left = lingering_threads(self.before)
        children = lingering_children(self.children_before)
        if not (left or children) or self.session is None or not ends_with_the_run(config):
            return  # (no session: the run ended before any candidate was called)
        capture = config.pluginmanager.getplugin("capturemanager")
        if capture is not None:  # the lines must reach the terminal, not the capture
            capture.stop_global_capturing()
        if children:
            print(children_line(children), file=sys.stderr)
            end_children(children)
            if not left:
                return  # nothing else to wait for: the interpreter ends as usual (atexit too)
        print(lingering_line(left), file=sys.stderr)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(int(self.session.exitstatus))
