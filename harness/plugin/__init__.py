"""The pytest plugin. Registered by the root `conftest.py` (``pytest_plugins``), or ``-p``.

This module is its face: it adds the options (`harness.session.options`), builds the run's
`harness.session.run_plan.HarnessSession` in the steps the Python API takes too
(`harness.session.planner`: resolve, plan; the controller opens the sink) and registers the
plugin objects that drive it, as pytest-xdist registers its DSession:

* in every process: `grid.GridPlugin` (parametrization, collection, the ``verify`` fixture),
  `terminal.SummaryScan`, `terminal.CandidateOutput` (a candidate's output trimmed in the
  reports), the header of `terminal.RunHeader`, and `lingering.LingeringThreads`
  (a candidate's threads and child processes do not keep the process alive once the run is
  over);
* in the process that owns the run (the xdist controller, or the one process of a run without
  -n): `controller.ControllerPlugin` (start-up checks, the scheduler, rows, crashes, the report)
  and `terminal.RunTerminal` (the header, lines said during the run, the conformance summary);
* in an xdist worker: `worker.WorkerPlugin` (its CUDA device and cores, its crash log).

May import: pytest, `harness.session` and the floors below it, `record`, `reports`, `reference`.
"""

from __future__ import annotations

import pytest

from reference.dtypes import DTYPES

from ..seeds import DEFAULT_RUN_SEED
from ..session.run_plan import HarnessSession
from ..session.options import OptionError, add_options, parse_options
from ..session.planner import plan_run
from .controller import ControllerPlugin
from .grid import GridPlugin
from .lingering import LingeringThreads
from .terminal import CandidateOutput, RunHeader, RunTerminal, SummaryScan
from .verify import conformance_tests
from .worker import WorkerPlugin

__all__ = ["conformance_tests"]


def pytest_addoption(parser):
    add_options(parser, DEFAULT_RUN_SEED, tuple(DTYPES))


def new_session(config) -> HarnessSession:
    """The run's session from the command line's options (a bad option: a usage error)."""
    try:
        opt = parse_options(config.option, tuple(DTYPES))
        return plan_run(opt)
    except OptionError as exc:
        raise pytest.UsageError(str(exc)) from None


def pytest_configure(config):
    config.addinivalue_line("markers", "harness_check(name): a conformance check test")
    session = new_session(config)
    plugins = config.pluginmanager
    # Every process: an xdist worker's own reporter writes the failure listing too (unseen, at
    # the end of its run, where the controller waits for it).
    plugins.register(SummaryScan(), "harness-summary-scan")
    plugins.register(CandidateOutput(), "harness-candidate-output")
    plugins.register(LingeringThreads(), "harness-lingering-threads")
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None:
        terminal = RunTerminal(session, config)
        controller = ControllerPlugin(config, session, terminal)
        plugins.register(GridPlugin(session, workers=1, warns_stale_xfails=True), "harness-grid")
        plugins.register(terminal, "harness-terminal")
        # Registered before its start-up checks: its pytest_unconfigure gives the report
        # directory back when one of them ends the run.
        plugins.register(controller, "harness-controller")
        controller.start()
    else:
        worker = WorkerPlugin(session, workerinput)
        plugins.register(GridPlugin(session, workers=worker.workers, warns_stale_xfails=False),
                         "harness-grid")
        plugins.register(RunHeader(session), "harness-terminal")
        plugins.register(worker, "harness-worker")
        worker.start()


def has_line_number(entry) -> bool:
    try:
        entry.lineno
    except TypeError:  # tb_lineno is None
        return False
    return True


@pytest.hookimpl(tryfirst=True)
def pytest_keyboard_interrupt(excinfo):
    """Ctrl-C: keep the traceback entries that have a line number. A KeyboardInterrupt that lands
    on an instruction without one (tb_lineno None, seen in the xdist controller) made pytest's
    own report of it raise TypeError, so the run exited 1 (failed) instead of 2 (interrupted)."""
    excinfo.traceback = excinfo.traceback.filter(has_line_number)
