"""The pytest plugin: hooks only. Registered by the root `conftest.py`.

It stays plumbing: it registers the options (`harness.session.options`), builds the run's
`harness.session.harness_session.HarnessSession` in the steps the Python API takes too
(`harness.session.planner`: resolve, plan, open the sink) and drives it, turns a check's
outcome into a pytest outcome, carries rows from xdist workers to the controller (as
`user_properties` on the test reports, `harness.session.rows`), counts the workers candidates
crash (`crashes`), and has the report written once, there, at the end (`harness.session.sink`).

May import: pytest, `harness.session` and the floors below it, `reports`, `reference`.
"""

from __future__ import annotations

import os
import sys
from collections import Counter, defaultdict

import pytest
import torch

from reference.dtypes import DTYPES, dtype_name
from reports.defects import allowed_reason, defects, tally_text
from reports.figures import save_case_data
from reports.store import case_data_path, command_line

from ..checks import CHECKS
from ..fleet.groups import group_of_nodeid
from ..fleet.scheduling import DeviceGroupScheduling, owned_cuda_device, visible_cuda_devices
from ..seeds import DEFAULT_RUN_SEED
from ..sharded import ranks
from . import crashes, terminal
from ..session.options import OptionError, add_options, parse_options
from ..session.rows import ROW_KEY, latest_rows, row_key, row_skeleton, throughput
from ..group import ApiGroup, Group
from ..session.harness_session import HarnessSession
from ..session.planner import open_sink, plan_run, resolve_candidates
from ..session.sink import REPORT_WRITE_FAILED
from ..session.xfails import stale_lines

#: xdist modes whose scheduling the harness takes over (plain -n gives "load"); any other mode
#: would split or duplicate case groups and is refused at start-up.
GROUP_PRESERVING_DIST = ("load", "loadgroup")


def pytest_addoption(parser):
    add_options(parser, DEFAULT_RUN_SEED, tuple(DTYPES))


# ------------------------------------------------------------------------------------------------
# Session state


def _session(config) -> HarnessSession:
    return config.stash[_SESSION_KEY]


_SESSION_KEY = pytest.StashKey[HarnessSession]()


_CRASHES_KEY = pytest.StashKey[crashes.CrashLedger]()


def _crashes(config) -> crashes.CrashLedger:
    """The controller's ledger of the workers candidates crashed (`harness.plugin.crashes`)."""
    return config.stash[_CRASHES_KEY]


def _new_session(config) -> HarnessSession:
    try:
        opt = parse_options(config.option, tuple(DTYPES))
        return plan_run(opt, resolve_candidates(opt))
    except OptionError as exc:
        raise pytest.UsageError(str(exc)) from None


def pytest_configure(config):
    config.addinivalue_line("markers", "harness_check(name): a conformance check test")
    config.stash[_SESSION_KEY] = _new_session(config)
    config.stash[_CRASHES_KEY] = crashes.CrashLedger(_session(config).report.report_dir)
    # Every process: an xdist worker's own reporter writes the failure listing too (unseen, at
    # the end of its run, where the controller waits for it).
    config.pluginmanager.register(terminal.SummaryScan(), "harness-summary-scan")
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None:
        # xdist (when installed and -n is given) has set its mode in pytest_cmdline_main, which
        # runs before any pytest_configure. Modes other than load/loadgroup would split case
        # groups or run them on every worker; the harness schedules load/loadgroup itself.
        dist = config.getoption("dist", "no")
        if dist not in ("no",) + GROUP_PRESERVING_DIST:
            raise pytest.UsageError(
                f"--dist {dist}: the harness keeps each case's checks on one worker itself; use "
                f"-n N with the default --dist load (or loadgroup)")
        s = _session(config)
        crashes.allow_restarts(config, len(s.candidates))
        if s.options.xfails_unmatched:
            # No shipped file fits this torch: said at the end too, where -q shows it.
            config.issue_config_time_warning(
                pytest.PytestConfigWarning(s.options.xfails_unmatched), stacklevel=2)
        if not (config.option.collectonly or config.option.help or config.option.version):
            try:  # what could fail at the end fails now, before a worker starts
                taken_over = open_sink(s, command_line(_invocation(config)))
            except OptionError as exc:
                raise pytest.UsageError(str(exc)) from None
            if taken_over:
                _say_early(config, taken_over)
        return
    if workerinput.get("harness_cuda_device") is not None:
        # Pin the worker to the CUDA device the controller gave it (worker index modulo device
        # count, see harness.fleet.scheduling) before any CUDA work, so default allocations and
        # kernels of different workers go to different devices.
        torch.cuda.set_device(int(workerinput["harness_cuda_device"]))
    # One worker must not oversubscribe the cores the others use.
    count = int(workerinput.get("workercount", 1))
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // count))


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    """xdist controller, per worker: the CUDA device the worker owns (see pytest_configure)."""
    node.workerinput["harness_cuda_device"] = owned_cuda_device(node.gateway.id,
                                                                visible_cuda_devices())


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """The harness's scheduler for every -n run: case groups stay whole, CUDA cases go to their
    device's workers (harness.fleet.scheduling). It reads the groups from the node ids itself, so it
    depends neither on xdist's loadgroup option nor on how a pytest version stores node ids."""
    if config.getoption("dist", "no") not in GROUP_PRESERVING_DIST:
        return None
    return DeviceGroupScheduling(config, log)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """xdist controller: a worker went down. One that crashed (error set) hands its unfinished
    group on legitimately; one that finished normally has no unfinished group to hand on."""
    if error is not None:
        _session(node.config).ledger.worker_down(node.gateway.id)


def pytest_report_header(config):
    s = _session(config)
    cands = ", ".join(f"{c.name} ({c.version})" for c in s.candidates)
    cfg = s.run_config
    n = str(cfg.n(1))
    if any(d.startswith("cuda") for d in s.devices) and cfg.n(1, "cuda") != cfg.n(1):
        n += f" on CPU, {cfg.n(1, 'cuda')} on CUDA"
    slow = [c for c in s.cases if cfg.n(1, "cpu", c) != cfg.n(1)]
    if slow:
        n += f"; {', '.join(c.id for c in slow)}: {cfg.n(1, 'cpu', slow[0])}"
    sharded = ""
    if s.layouts:
        sharded = (f"; sharded: world sizes {','.join(str(w) for w in s.world_sizes if w > 1)}, "
                   f"{len(s.layouts)} layouts ({', '.join(l.label for l in s.layouts[:6])}"
                   f"{', ...' if len(s.layouts) > 6 else ''})")
    lines = [f"harness: candidates {cands}",
             f"harness: torch {torch.__version__}; devices {', '.join(s.devices)}; dtypes "
             f"{', '.join(dtype_name(d) for d in s.dtypes)}",
             f"harness: profile {cfg.profile} (n={n} per case, stage 2 x4); "
             f"budget {budget_text(cfg.case_budget_s)}; seed {cfg.run_seed}; bounds {cfg.bounds}; "
             f"alpha {cfg.alpha_suspect:g}/{cfg.alpha_fail:g}{sharded}"]
    if s.partition is not None:
        lines.append(f"harness: {s.partition.describe()}")
    if s.options.xfails_choice:
        lines.append(f"harness: {s.options.xfails_choice}")
    return lines


def budget_text(seconds: float | None) -> str:
    return "none" if seconds is None else f"{seconds:g} s of candidate time per case"


def pytest_generate_tests(metafunc):
    """The id is the case group (harness.fleet.groups): every check of a group shares it."""
    s = _session(metafunc.config)
    marker = metafunc.definition.get_closest_marker("harness_check")
    check = marker.args[0] if marker else None
    for fixture in ("conformance_case", "api_case"):
        if fixture in metafunc.fixturenames:
            metafunc.parametrize(fixture, [pytest.param(c, id=c.id) for c in s.groups_for(check)])


def _check_of(item) -> str | None:
    marker = item.get_closest_marker("harness_check")
    return marker.args[0] if marker else None


def _group_of(item):
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return None
    param = callspec.params.get("conformance_case") or callspec.params.get("api_case")
    return param if isinstance(param, (Group, ApiGroup)) else None


def _empty_parametrization(item) -> bool:
    """A harness test whose parameter list was empty in this run (e.g. `contract` in a run of
    sharded groups only): pytest's placeholder, deselected rather than reported as a skip."""
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return False
    params = callspec.params
    return any(k in params and not isinstance(params[k], (Group, ApiGroup))
               for k in ("conformance_case", "api_case"))


def pytest_collection_modifyitems(session, config, items):
    s = _session(config)
    if s.partition is not None:
        deselect_other_partitions(s.partition, config, items)

    order = {name: i for i, name in enumerate(CHECKS.names())}
    empty = [item for item in items if _empty_parametrization(item)]
    if empty:
        config.hook.pytest_deselected(items=empty)
        items[:] = [item for item in items if not _empty_parametrization(item)]
    # Keep every check of one (candidate, case, dtype, device) together: its Summary is generated
    # once and shared, and a runner cache of a few cases suffices.
    indexed = list(enumerate(items))

    def key(pair):
        i, item = pair
        param = _group_of(item)
        check = _check_of(item)
        if param is None or check is None:
            return (0, "", i, 0)
        return (1, param.id, order.get(check, 99), i)

    items[:] = [item for _, item in sorted(indexed, key=key)]
    workerinput = getattr(config, "workerinput", None)
    workers = int(workerinput.get("workercount", 1)) if workerinput else 1
    groups = {_group_of(i).id for i in items if isinstance(_group_of(i), Group)}
    s.apply_budget(len(groups), workers)
    for item in items:
        param, check = _group_of(item), _check_of(item)
        if param is None or check is None:
            continue
        reason = s.skip_reason(param.candidate, param.dtype, param.device, param)
        if reason:
            item.add_marker(pytest.mark.skip(reason=reason))
        s.node_params[item.nodeid] = row_skeleton(param, check)
    if not hasattr(config, "workerinput"):
        warn_stale_xfails(config, s)


def deselect_other_partitions(partition, config, items) -> None:
    """Keep the conformance tests of this partition's groups; the others are deselected (not
    skipped: another partition runs them). Tests the harness did not parametrize are left alone."""
    keep, drop = [], []
    for item in items:
        mine = _group_of(item) is None or partition.owns(group_of_nodeid(item.nodeid))
        (keep if mine else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def pytest_collection_finish(session):
    if not hasattr(session.config, "workerinput"):
        _session(session.config).report.mark_collected([i.nodeid for i in session.items])


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids):
    """xdist controller: what the workers collected (they all collect the same)."""
    s = _session(node.config)
    if not s.report.nodeids:
        s.report.mark_collected(ids)


def warn_stale_xfails(config, s: "HarnessSession") -> None:
    """array-api-tests style: warn about xfails lines that match no test of the configured
    candidates on the whole grid (not merely the tests this run selected)."""
    for p in stale_lines(s.xfails, s.candidates, s.sharded_cases, s.layouts, s.cases):
        config.issue_config_time_warning(
            pytest.PytestConfigWarning(f"xfails file line {p.line}: {p.pattern!r} matches no test"),
            stacklevel=2)



# ------------------------------------------------------------------------------------------------
# Fixtures and the bridge from a check's outcome to a pytest outcome


def conformance_tests() -> dict:
    """``test_<name>`` -> the pytest test of each check of `harness.checks.CHECKS`, in its order:
    what ``suites/test_conformance.py`` defines. A case-group check takes the ``conformance_case``
    parameter, a candidate-scope one ``api_case``; the test's docstring is the check's doc."""
    return {check.test_name: _conformance_test(check) for check in CHECKS}


def _conformance_test(check):
    if check.applies_to("candidate"):
        def test(verify, api_case):
            verify(check.name, api_case)
    else:
        def test(verify, conformance_case):
            verify(check.name, conformance_case)
    test.__name__ = test.__qualname__ = check.test_name
    test.__doc__ = check.doc
    return pytest.mark.harness_check(check.name)(test)



class Verifier:
    def __init__(self, session: HarnessSession, request):
        self.s = session
        self.request = request

    def __call__(self, check: str, param) -> None:
        out = self.s.run_check(check, param, os.environ.get("PYTEST_XDIST_WORKER", "main"),
                               on_failure=self._save_case_data)
        self.request.node.user_properties.append((ROW_KEY, out.row))
        if out.verdict == "pass":
            return
        if out.verdict == "skip":
            pytest.skip(out.text)
        if out.xfail is not None:
            pytest.xfail(f"known: {out.xfail.cause} -- {out.text}")
        if out.allowed is not None:  # below --fail-on: the row's verdict stays fail
            pytest.xfail(f"{out.allowed} -- {out.text}")
        if out.verdict == "error":
            pytest.fail(f"HARNESS ERROR {out.text}\n  reproduce: {out.repro}", pytrace=False)
        pytest.fail(f"{out.text}\n  reproduce: {out.repro}", pytrace=False)

    def _save_case_data(self, param, runner) -> None:
        """Keep the failing case's histogram for the report's figure (never changes a verdict)."""
        s = self.s
        key = (param.candidate.name, param.case_label, dtype_name(param.dtype), param.device)
        if not s.report.report_dir or key in s.saved_case_data:
            return
        summary = next((runner.cached_summary(st) for st in (2, 1)
                        if runner.cached_summary(st) is not None), None)
        if summary is None:
            return
        s.saved_case_data.add(key)
        try:
            save_case_data(case_data_path(s.report.report_dir, *key), summary, runner.law,
                           meta={"candidate": key[0], "case": key[1], "device": key[3]})
        except Exception as exc:  # a figure problem must not change a verdict
            runner.warnings.append(f"case data not saved: {type(exc).__name__}: {exc}")


@pytest.fixture
def verify(request) -> Verifier:
    """verify(check_name, param): run one check and turn its verdict into the test's outcome."""
    return Verifier(_session(request.config), request)


# ------------------------------------------------------------------------------------------------
# Rows to the controller, reports at the end


@pytest.hookimpl(optionalhook=True)
def pytest_handlecrashitem(crashitem, report, sched):
    """xdist controller: a worker died while running `crashitem`. Its row says what killed it,
    and the other checks of its group are not drawn again (xdist would hand the group to
    another worker, which the same draw kills in turn): they become error rows naming the
    crash. A candidate that has crashed MAX_CRASHES_PER_CANDIDATE workers is not drawn any more
    (`harness.plugin.crashes`): all its queued groups are taken off the queue."""
    config = _CONFIG.get("config")
    if config is None:
        return
    s = _session(config)
    skeleton = s.node_params.get(crashitem) or s.skeleton_from_nodeid(crashitem)
    if skeleton is None:
        return
    report.longrepr = _crashes(config).crashed(report.node, crashitem, skeleton)
    if not hasattr(sched, "drop_queued"):
        return
    spec = skeleton.get("candidate_spec")
    crashed_group = group_of_nodeid(crashitem)
    stop = _crashes(config).should_stop(spec)
    if stop:
        _crashes(config).stopped.add(spec)

    def keep(group: str) -> bool:
        if group == crashed_group:
            return False
        param = s.group_by_id(group)
        return not stop or param is None or param.candidate.spec != spec

    dropped = sched.drop_queued(keep)
    group_note = _crashes(config).group_message(report.node, crashitem)
    stop_note = _crashes(config).not_run_message(spec) if stop else None
    for nodeid in dropped:
        _crashes(config).not_run.setdefault(nodeid, group_note if group_of_nodeid(nodeid) == crashed_group
                             else stop_note)
    if stop:
        _say(config, f"harness: candidate {spec} crashed {_crashes(config).crashes[spec]} workers: "
                     f"{len(dropped)} queued test(s) of it are not run")


def pytest_runtest_logreport(report):
    config = _CONFIG.get("config")
    if config is None or hasattr(config, "workerinput"):
        return
    s = _session(config)
    rows = [v for k, v in report.user_properties if k == ROW_KEY]
    crash = report.failed and report.when not in ("setup", "call", "teardown")  # xdist's report
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed") or crash:
        node = getattr(report, "node", None)  # the xdist worker that ran it (None without -n)
        if node is not None and not crash:
            s.ledger.record(group_of_nodeid(report.nodeid), node.gateway.id)
        if rows:
            _record(config, s, rows)
            return
        skeleton = s.node_params.get(report.nodeid) or s.skeleton_from_nodeid(report.nodeid)
        if skeleton is None:
            return
        if report.skipped:
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
            _record(config, s, [skeleton | {"verdict": "skip",
                                            "message": str(reason).removeprefix("Skipped: ")[:300]}])
        elif report.failed:
            # No row rode on the report: the worker crashed or the test body blew up.
            text = str(report.longrepr).strip().splitlines()
            _record(config, s, [skeleton | {"verdict": "error",
                                            "message": (text[-1] if text else "no result")[:300]}])


def _record(config, s: HarnessSession, rows: list) -> None:
    """Record rows; say at once when the row log has just failed (the run goes on)."""
    line = s.report.record(rows)
    if line:
        _say(config, line)


_CONFIG: dict = {}


def _close_rank_pools() -> None:
    """Stop the rank processes this process started for sharded groups (harness.sharded.ranks)."""
    ranks.close_pools()


def _has_line_number(entry) -> bool:
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
    excinfo.traceback = excinfo.traceback.filter(_has_line_number)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session):
    _CONFIG["config"] = session.config
    if hasattr(session.config, "workerinput"):
        # After every pytest_configure (pytest's own faulthandler plugin enables it on stderr
        # there): a fatal signal's stack goes to the log the controller reads.
        crashes.record_fatal_errors(_session(session.config).report.report_dir,
                                    os.environ.get("PYTEST_XDIST_WORKER", "main"))


def pytest_sessionfinish(session, exitstatus):
    config = session.config
    _close_rank_pools()
    if hasattr(config, "workerinput"):
        return
    s = _session(config)
    have = {row_key(r) for r in s.report.rows}
    not_run = [skeleton | {"verdict": "error", "message": why}
               for nodeid, why in _crashes(config).not_run.items()
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
        for b in s.shrink_failures(lambda text: _say(config, text), workers=_workers(config)):
            _say(config, f"harness: {b.line}\n  reproduce: {b.repro}")
    if not s.report.report_dir or s.report.row_log is None:
        return
    s.report.finish(int(session.exitstatus), command_line(_invocation(config)),
                    s.run_facts(_invocation(config), _workers(config)))
    if s.report.fault is not None:
        _say(config, s.report.fault_line())
        session.exitstatus = REPORT_WRITE_FAILED
    elif session.exitstatus == pytest.ExitCode.INTERRUPTED:
        _say(config, f"harness: interrupted: a partial report of {len(s.report.rows)} row(s) is written "
                     f"(its manifest says partial)")


def pytest_unconfigure(config):
    """The controller gives the report directory back however the run ended (a usage error after
    it was opened, an internal error): a lock left behind would refuse the next run."""
    if not hasattr(config, "workerinput") and _SESSION_KEY in config.stash:
        _session(config).report.release()


def _say_early(config, text: str) -> None:
    """A line before the terminal reporter is set up (pytest_configure): straight to stderr."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(text, yellow=True)
    else:
        sys.stderr.write(text + "\n")


def _say(config, text: str) -> None:
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(text, yellow=True)


def _invocation(config):
    """pytest's invocation args (None where unknown: the command line is then sys.argv)."""
    params = getattr(config, "invocation_params", None)
    return None if params is None else params.args


def _workers(config) -> int:
    workers = getattr(config.option, "numprocesses", None)
    if isinstance(workers, str):  # "auto" / "logical", if xdist has not resolved it
        return os.cpu_count() or 1
    return workers if workers is not None else 0


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if hasattr(config, "workerinput"):
        return
    s = _session(config)
    if not s.report.rows:
        return
    tr = terminalreporter
    tr.section("truncated-normal conformance")
    counts = Counter(r.get("verdict", "?") for r in s.report.rows)
    tr.write_line("verdicts: " + ", ".join(f"{k} {counts[k]}" for k in
                                           ("pass", "fail", "error", "xfail", "skip") if counts[k]))
    fail_on = s.options.fail_on
    allowed = sum(1 for r in s.report.rows if r.get("verdict") == "fail"
                  and allowed_reason(r.get("level"), fail_on) is not None)
    if allowed:
        tr.write_line(f"--fail-on {fail_on}: {allowed} failing row(s) below it allowed (xfail "
                      f"in pytest's count; fail in the report)")
    found = defects(s.report.rows)
    for name in dict.fromkeys(d.candidate for d in found):
        tr.write_line(f"defects of {name}: {tally_text(d for d in found if d.candidate == name)}")
    fails = defaultdict(list)
    for r in s.report.rows:
        if r.get("verdict") in ("fail", "error"):
            fails[r["check"]].append(r)
    for check, rows in sorted(fails.items()):
        tr.write_line(f"  {check}: {len(rows)} failing")
        for r in rows[:6]:
            tr.write_line(f"    {r['candidate']} {r['case']} {r['dtype']} {r['device']}: "
                          f"{str(r.get('message', ''))[:150]}")
        if len(rows) > 6:
            tr.write_line(f"    ... {len(rows) - 6} more (see the report)")
    for name, (n, secs) in throughput(s.report.rows).items():
        rate = f"{n / secs / 1e6:.2f} M samples/s inside the candidate" if secs > 0 and n else "n/a"
        tr.write_line(f"throughput {name}: {n} samples in {secs:.1f} s, {rate}")
    written = s.report.written
    if written:
        tr.write_line(f"report written to {written}")
