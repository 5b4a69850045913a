"""The plugin object of the process that owns the run: the xdist controller, or the one process
of a run without -n.

`ControllerPlugin` opens the report at start-up (what could fail at the end fails before a
worker starts), refuses xdist modes that would split case groups, hands xdist the harness's
scheduler and each worker its CUDA device, records the rows that ride on the test reports
(`harness.session.rows`) or the error rows of tests that left none, takes the groups of a
candidate that crashes its workers off the queue (`crashes`), and writes the report once, at
the end (`harness.session.sink`); it gives the report directory back however the run ended.
"""

from __future__ import annotations

import os

import pytest

from record.store import command_line

from ..fleet.group_ledger import group_of_nodeid
from ..fleet.scheduling import DeviceGroupScheduling, owned_cuda_device, visible_cuda_devices
from ..session.run_plan import HarnessSession
from ..session.options import OptionError
from ..session.rows import ROW_KEY, latest_rows, row_key
from ..session.sink import REPORT_WRITE_FAILED
from ..sharded import ranks
from . import crashes
from .terminal import RunTerminal

#: xdist modes whose scheduling the harness takes over (plain -n gives "load"); any other mode
#: would split or duplicate case groups and is refused at start-up.
GROUP_PRESERVING_DIST = ("load", "loadgroup")


def invocation_args(config):
    """pytest's invocation args (None where unknown: the command line is then sys.argv)."""
    params = getattr(config, "invocation_params", None)
    return None if params is None else params.args


def worker_count(config) -> int:
    """The -n of the run (0 without xdist workers)."""
    workers = getattr(config.option, "numprocesses", None)
    if isinstance(workers, str):  # "auto" / "logical", if xdist has not resolved it
        return os.cpu_count() or 1
    return workers if workers is not None else 0


class ControllerPlugin:
    """The hooks of the process that owns the run's report (see the module)."""

    def __init__(self, config, session: HarnessSession, terminal: RunTerminal):
        self.config = config
        self.session = session
        self.terminal = terminal
        self.crashes = crashes.CrashLedger(session.report.report_dir)

    def start(self) -> None:
        """At pytest_configure: refuse a group-splitting --dist, raise xdist's restart limit,
        warn where no shipped xfails file fits, and open the report sink (unless pytest only
        collects or answers --help / --version)."""
        config, s = self.config, self.session
        # xdist (when installed and -n is given) has set its mode in pytest_cmdline_main, which
        # runs before any pytest_configure. Modes other than load/loadgroup would split case
        # groups or run them on every worker; the harness schedules load/loadgroup itself.
        dist = config.getoption("dist", "no")
        if dist not in ("no",) + GROUP_PRESERVING_DIST:
            raise pytest.UsageError(
                f"--dist {dist}: the harness keeps each case's checks on one worker itself; use "
                f"-n N with the default --dist load (or loadgroup)")
        crashes.allow_restarts(config, len(s.candidates))
        if s.options.xfails_unmatched:
            # No shipped file fits this torch: said at the end too, where -q shows it.
            config.issue_config_time_warning(
                pytest.PytestConfigWarning(s.options.xfails_unmatched), stacklevel=2)
        if not (config.option.collectonly or config.option.help or config.option.version):
            try:  # what could fail at the end fails now, before a worker starts
                taken_over = s.open_sink(command_line(invocation_args(config)))
            except OptionError as exc:
                raise pytest.UsageError(str(exc)) from None
            if taken_over:
                self.terminal.say_early(taken_over)

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node):
        """xdist, per worker: the CUDA device the worker owns (`worker.WorkerPlugin` pins it)."""
        node.workerinput["harness_cuda_device"] = owned_cuda_device(node.gateway.id,
                                                                    visible_cuda_devices())

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_make_scheduler(self, config, log):
        """The harness's scheduler for every -n run: case groups stay whole, CUDA cases go to
        their device's workers (harness.fleet.scheduling). It reads the groups from the node ids
        itself, so it depends neither on xdist's loadgroup option nor on how a pytest version
        stores node ids."""
        if config.getoption("dist", "no") not in GROUP_PRESERVING_DIST:
            return None
        return DeviceGroupScheduling(config, log)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node, error):
        """xdist: a worker went down. One that crashed (error set) hands its unfinished group on
        legitimately; one that finished normally has no unfinished group to hand on."""
        if error is not None:
            self.session.ledger.worker_down(node.gateway.id)

    def pytest_collection_finish(self, session):
        """A run without -n: what this process collected."""
        self.session.report.mark_collected([i.nodeid for i in session.items])

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node, ids):
        """xdist: what the workers collected (they all collect the same)."""
        if not self.session.report.nodeids:
            self.session.report.mark_collected(ids)

    @pytest.hookimpl(optionalhook=True)
    def pytest_handlecrashitem(self, crashitem, report, sched):
        """xdist: a worker died while running `crashitem`. Its row says what killed it, and the
        other checks of its group are not drawn again (xdist would hand the group to another
        worker, which the same draw kills in turn): they become error rows naming the crash. A
        candidate that has crashed MAX_CRASHES_PER_CANDIDATE workers is not drawn any more
        (`harness.plugin.crashes`): all its queued groups are taken off the queue."""
        s, ledger = self.session, self.crashes
        skeleton = s.node_params.get(crashitem) or s.skeleton_from_nodeid(crashitem)
        if skeleton is None:
            return
        report.longrepr = ledger.crashed(report.node, crashitem, skeleton)
        if not hasattr(sched, "drop_queued"):
            return
        spec = skeleton.get("candidate_spec")
        crashed_group = group_of_nodeid(crashitem)
        stop = ledger.should_stop(spec)
        if stop:
            ledger.stopped.add(spec)

        def keep(group: str) -> bool:
            if group == crashed_group:
                return False
            param = s.group_by_id(group)
            return not stop or param is None or param.candidate.spec != spec

        dropped = sched.drop_queued(keep)
        group_note = ledger.group_message(report.node, crashitem)
        stop_note = ledger.not_run_message(spec) if stop else None
        for nodeid in dropped:
            ledger.not_run.setdefault(nodeid, group_note if group_of_nodeid(nodeid) == crashed_group
                                      else stop_note)
        if stop:
            self.terminal.say(f"harness: candidate {spec} crashed {ledger.crashes[spec]} workers: "
                              f"{len(dropped)} queued test(s) of it are not run")

    def pytest_runtest_logreport(self, report):
        s = self.session
        rows = [v for k, v in report.user_properties if k == ROW_KEY]
        # xdist's report of a worker that died running the test has none of pytest's phases.
        crash = report.failed and report.when not in ("setup", "call", "teardown")
        failed_setup = report.when == "setup" and report.outcome != "passed"
        if report.when == "call" or failed_setup or crash:
            node = getattr(report, "node", None)  # the xdist worker that ran it (None without -n)
            if node is not None and not crash:
                s.ledger.record(group_of_nodeid(report.nodeid), node.gateway.id)
            if rows:
                self.record(rows)
                return
            skeleton = s.node_params.get(report.nodeid) or s.skeleton_from_nodeid(report.nodeid)
            if skeleton is None:
                return
            if report.skipped:
                reason = (report.longrepr[2] if isinstance(report.longrepr, tuple)
                          else str(report.longrepr))
                self.record([skeleton | {"verdict": "skip",
                                         "message": str(reason).removeprefix("Skipped: ")[:300]}])
            elif report.failed:
                # No row rode on the report: the worker crashed or the test body blew up.
                text = str(report.longrepr).strip().splitlines()
                self.record([skeleton | {"verdict": "error",
                                         "message": (text[-1] if text else "no result")[:300]}])

    def record(self, rows: list) -> None:
        """Record rows; say at once when the row log has just failed (the run goes on)."""
        line = self.session.report.record(rows)
        if line:
            self.terminal.say(line)

    def pytest_sessionfinish(self, session, exitstatus):
        config, s, say = self.config, self.session, self.terminal.say
        ranks.close_pools()  # the rank processes this process started for sharded groups
        have = {row_key(r) for r in s.report.rows}
        not_run = [skeleton | {"verdict": "error", "message": why}
                   for nodeid, why in self.crashes.not_run.items()
                   for skeleton in [s.skeleton_from_nodeid(nodeid)] if skeleton is not None
                   and row_key(skeleton) not in have]
        s.report.record(not_run)
        s.report.rows = latest_rows(s.report.rows)
        if s.ledger.splits:
            # Each check of a split group read its own draw: the verdicts are not the harness's.
            dsession = config.pluginmanager.getplugin("dsession")
            scheduler = type(getattr(dsession, "sched", None)).__name__
            for row in s.report.rows:
                if row.get("group") in s.ledger.splits:
                    row.update(verdict="error",
                               message=s.ledger.split_message(row["group"], scheduler))
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        empty_share = s.partition is not None and not s.partition.groups
        if empty_share and session.exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
            session.exitstatus = pytest.ExitCode.OK  # N > groups: this partition has nothing to run
        if s.options.explore and session.exitstatus != pytest.ExitCode.INTERRUPTED:
            for b in s.shrink_failures(say, workers=worker_count(config)):
                say(f"harness: {b.line}\n  reproduce: {b.repro}")
        if not s.report.report_dir or s.report.row_log is None:
            return
        s.report.finish(int(session.exitstatus), command_line(invocation_args(config)),
                        s.run_facts(invocation_args(config), worker_count(config)))
        if s.report.fault is not None:
            say(s.report.fault_line())
            session.exitstatus = REPORT_WRITE_FAILED
        elif session.exitstatus == pytest.ExitCode.INTERRUPTED:
            say(f"harness: interrupted: a partial report of {len(s.report.rows)} row(s) is "
                f"written (its manifest says partial)")

    def pytest_unconfigure(self, config):
        """The report directory goes back however the run ended (a usage error after it was
        opened, an internal error): a lock left behind would refuse the next run."""
        self.session.report.release()
