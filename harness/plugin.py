"""The pytest plugin: options, parametrization of the suites, result rows, reports at the end.

Registered by the root `conftest.py`. It stays plumbing: which (candidate, case, dtype, device)
combinations exist, how a Result becomes a pytest outcome, and how rows travel from xdist workers
to the controller (as `user_properties` on the test reports) to be written once, there.
"""

from __future__ import annotations

import dataclasses
import re
import os
import shlex
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass

import pytest
import torch

from .cases import GRID
from .groups import GroupLedger, group_of_nodeid
from .options import (DEFAULT_ALPHA, DEFAULT_CASE_TIMEOUT, OptionError, add_options,
                      parse_options)
from .run import RunConfig, RunnerCache, dtype_name
from .seeds import DEFAULT_RUN_SEED

DTYPES = {"float64": torch.float64, "float32": torch.float32, "float16": torch.float16,
          "bfloat16": torch.bfloat16}
for _name in ("float8_e4m3fn", "float8_e5m2"):
    if hasattr(torch, _name):
        DTYPES[_name] = getattr(torch, _name)
ROW_KEY = "harness_row"
INFLIGHT_DIR = ".inflight"  # inside the report dir: leases of draws in progress (harness.leases)
#: xdist modes whose scheduling the harness takes over (plain -n gives "load"); any other mode
#: would split or duplicate case groups and is refused at start-up.
GROUP_PRESERVING_DIST = ("load", "loadgroup")


def pytest_addoption(parser):
    add_options(parser, DEFAULT_RUN_SEED, tuple(DTYPES))


# ------------------------------------------------------------------------------------------------
# Session state


@dataclass(frozen=True)
class Combo:
    """One (candidate, case, dtype, device): the parameter of every conformance test."""

    candidate: object
    case: object
    dtype: torch.dtype
    device: str

    @property
    def id(self) -> str:
        return f"{self.candidate.name}-{self.case.id}-{dtype_name(self.dtype)}-{self.device}"


@dataclass(frozen=True)
class ApiCombo:
    candidate: object
    dtype: torch.dtype
    device: str

    @property
    def id(self) -> str:
        return f"{self.candidate.name}-{dtype_name(self.dtype)}-{self.device}"


class XfailPattern:
    """One line of the xfails file: a glob over test names (only * and ? are wildcards, so the
    brackets of `check[candidate-case-dtype-device]` are literal) and the cause."""

    def __init__(self, pattern: str, cause: str, line: int):
        self.pattern, self.cause, self.line = pattern, cause, line
        self.regex = re.compile(
            "".join(".*" if ch == "*" else "." if ch == "?" else re.escape(ch) for ch in pattern) + r"\Z")

    def matches(self, test_name: str) -> bool:
        return self.regex.match(test_name) is not None


def load_xfails(path: str) -> list[XfailPattern]:
    patterns = []
    with open(path, encoding="utf-8") as fh:
        for lineno, raw in enumerate(fh, 1):
            text, _, cause = raw.partition("#")
            text = text.strip()
            if text:
                patterns.append(XfailPattern(text, cause.strip() or "no cause given", lineno))
    return patterns


class HarnessSession:
    def __init__(self, config):
        from candidates import CandidateNotFound, resolve

        try:
            opt = parse_options(config.option, tuple(DTYPES))
        except OptionError as exc:
            raise pytest.UsageError(str(exc)) from None
        self.options = opt
        self.candidates = []
        for spec in opt.candidates:
            try:
                self.candidates.append(resolve(spec))
            except CandidateNotFound as exc:
                raise pytest.UsageError(str(exc)) from None
        self.run_config = RunConfig(profile=opt.profile, samples=opt.samples, run_seed=opt.seed,
                                    bounds=opt.bounds, case_timeout=opt.case_timeout,
                                    alpha_suspect=opt.alpha_suspect, alpha_fail=opt.alpha_fail,
                                    case_budget_s=opt.case_budget,
                                    inflight_dir=(os.path.join(opt.report_dir, INFLIGHT_DIR)
                                                  if opt.report_dir else None))
        self.budget_seconds = opt.budget_seconds
        self.cases = list(opt.cases)
        self.dtypes = [DTYPES[d] for d in opt.dtypes]
        self.devices = list(opt.devices) if opt.devices else default_devices()
        for d in self.devices:
            check_device_name(d)
        try:
            self.xfails = load_xfails(opt.xfails_file) if opt.xfails_file else []
        except (OSError, UnicodeDecodeError) as exc:
            raise pytest.UsageError(f"--xfails-file: {opt.xfails_file!r}: {exc}") from None
        self.runners = RunnerCache()
        self.rows: list[dict] = []
        self.started = time.time()
        self.node_params: dict = {}  # nodeid -> row skeleton (to report crashed workers)
        self.report_dir = opt.report_dir
        self.saved_case_data: set = set()
        self.ledger = GroupLedger()  # controller: which worker ran each case group
        # Grid partitions (harness.partition): the groups this process runs; None: all of them.
        self.partition = None
        if opt.shard is not None:
            from .partition import plan

            self.partition = plan(opt.shard, self.grid_groups(), opt.durations, opt.durations_from)
        self.collected: dict = {}  # group -> tests collected (for the manifest)

    def apply_budget(self, n_combos: int, workers: int) -> None:
        """--budget-seconds: give each (candidate, case, dtype, device) an equal share of the
        wall clock for its stage-1 draw; a third of the budget is kept for stage 2 and checks."""
        if self.budget_seconds is None or n_combos == 0:
            return
        share = self.budget_seconds * max(1, workers) / n_combos / 3.0
        self.run_config = dataclasses.replace(self.run_config, case_budget_s=share)

    def combos(self):
        for cand in self.candidates:
            for case in self.cases:
                for dtype in self.dtypes:
                    for device in self.devices:
                        yield Combo(cand, case, dtype, device)

    def api_combos(self):
        for cand in self.candidates:
            for dtype in self.dtypes:
                for device in self.devices:
                    yield ApiCombo(cand, dtype, device)

    def grid_groups(self) -> list[str]:
        """Every group key of the run's grid (what a partition splits), whatever -k selects."""
        return sorted({p.id for p in (*self.combos(), *self.api_combos())})

    def skip_reason(self, candidate, dtype, device, case=None) -> str | None:
        # The case too: a sampler that cannot be asked for it (fixed ±2σ bounds, no mean) is
        # skipped with the candidate's reason.
        return device_skip_reason(device) or candidate.skip_reason(dtype, device, case)

    def skeleton_from_nodeid(self, nodeid: str) -> dict | None:
        """Row skeleton of a test from its node id alone: the xdist controller collects nothing,
        yet must write rows for tests whose worker crashed or that were skipped at setup."""
        match = re.search(r"::test_(\w+)\[", nodeid)
        if match is None:
            return None
        if not hasattr(self, "_params_by_id"):
            self._params_by_id = {p.id: p for p in (*self.combos(), *self.api_combos())}
        param = self._params_by_id.get(group_of_nodeid(nodeid))
        return _row_skeleton(param, match.group(1)) if param is not None else None

    def xfail_for(self, test_name: str) -> XfailPattern | None:
        for p in self.xfails:
            if p.matches(test_name):
                return p
        return None

    def repro(self, candidate, case_id, dtype, device, check, samples: int | None = None) -> str:
        """The one command that reruns this check on exactly these streams. `samples`: the n
        stage 1 drew, where a budget was in force (a budget stops at a time that depends on the
        machine; an explicit --samples is drawn in full, so the rerun draws the same n)."""
        cfg = self.run_config
        parts = ["pytest", "suites", "--candidate", candidate.spec]
        if case_id != "api":
            parts += ["--cases", case_id]
        parts += ["--dtypes", dtype_name(dtype), "--devices", device, "--seed", str(cfg.run_seed),
                  "--profile", cfg.profile]
        samples = samples or cfg.samples
        if samples:
            parts += ["--samples", str(samples)]
        if cfg.bounds != "rounded":
            parts += ["--bounds", cfg.bounds]
        for flag, value, default in (("--case-timeout", cfg.case_timeout, DEFAULT_CASE_TIMEOUT),
                                     ("--alpha-suspect", cfg.alpha_suspect, DEFAULT_ALPHA),
                                     ("--alpha-fail", cfg.alpha_fail, DEFAULT_ALPHA)):
            if value != default:
                parts += [flag, f"{value:g}"]
        parts += ["-k", f"test_{check}"]
        return " ".join(shlex.quote(p) for p in parts)


def check_device_name(name: str) -> None:
    """A device the harness can sample on: a torch device name, not `meta` (which holds no
    values). Whether it is present on this machine is decided per test (`device_skip_reason`)."""
    try:
        device = torch.device(name)
    except (RuntimeError, ValueError):
        raise pytest.UsageError(f"--devices: {name!r} is not a torch device") from None
    if device.type == "meta":
        raise pytest.UsageError("--devices: 'meta' holds no values to test (the contract check "
                                "covers meta tensors)")


def device_skip_reason(name: str) -> str | None:
    """Why tests on device `name` cannot run here (None: they can); an explicit skip, not an error."""
    device = torch.device(name)
    if device.type == "cpu":
        return None
    backend = getattr(torch, device.type, None)
    is_available = getattr(backend, "is_available", None)
    if is_available is None or not is_available():
        return f"device {name}: {device.type} is not available on this machine"
    count = getattr(backend, "device_count", lambda: 1)()
    if device.index is not None and device.index >= count:
        return f"device {name}: only {count} {device.type} device(s) present"
    return None


def default_devices() -> list[str]:
    devices = ["cpu"]
    if torch.cuda.is_available():
        devices += [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    return devices


def _session(config) -> HarnessSession:
    return config.stash[_SESSION_KEY]


_SESSION_KEY = pytest.StashKey[HarnessSession]()


def pytest_configure(config):
    config.addinivalue_line("markers", "harness_check(name): a conformance check test")
    config.stash[_SESSION_KEY] = HarnessSession(config)
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
        return
    if workerinput.get("harness_cuda_device") is not None:
        # Pin the worker to the CUDA device the controller gave it (worker index modulo device
        # count, see harness.scheduling) before any CUDA work, so default allocations and
        # kernels of different workers go to different devices.
        torch.cuda.set_device(int(workerinput["harness_cuda_device"]))
    # One worker must not oversubscribe the cores the others use.
    count = int(workerinput.get("workercount", 1))
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // count))


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    """xdist controller, per worker: the CUDA device the worker owns (see pytest_configure)."""
    from .scheduling import owned_cuda_device, visible_cuda_devices

    node.workerinput["harness_cuda_device"] = owned_cuda_device(node.gateway.id,
                                                                visible_cuda_devices())


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """The harness's scheduler for every -n run: case groups stay whole, CUDA cases go to their
    device's workers (harness.scheduling). It reads the groups from the node ids itself, so it
    depends neither on xdist's loadgroup option nor on how a pytest version stores node ids."""
    if config.getoption("dist", "no") not in GROUP_PRESERVING_DIST:
        return None
    from .scheduling import DeviceGroupScheduling

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
    lines = [f"harness: candidates {cands}",
             f"harness: torch {torch.__version__}; devices {', '.join(s.devices)}; dtypes "
             f"{', '.join(dtype_name(d) for d in s.dtypes)}",
             f"harness: profile {cfg.profile} (n={n} per case, stage 2 x4); "
             f"budget {budget_text(cfg.case_budget_s)}; seed {cfg.run_seed}; bounds {cfg.bounds}; "
             f"alpha {cfg.alpha_suspect:g}/{cfg.alpha_fail:g}"]
    if s.partition is not None:
        lines.append(f"harness: {s.partition.describe()}")
    return lines


def budget_text(seconds: float | None) -> str:
    return "none" if seconds is None else f"{seconds:g} s of candidate time per case"


def pytest_generate_tests(metafunc):
    s = _session(metafunc.config)
    if "conformance_case" in metafunc.fixturenames:
        # The id is the case group (harness.groups): every check of a combo shares it.
        metafunc.parametrize("conformance_case", [pytest.param(c, id=c.id) for c in s.combos()])
    if "api_case" in metafunc.fixturenames:
        metafunc.parametrize("api_case", [pytest.param(c, id=c.id) for c in s.api_combos()])


def _check_of(item) -> str | None:
    marker = item.get_closest_marker("harness_check")
    return marker.args[0] if marker else None


def _param_of(item):
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return None
    return callspec.params.get("conformance_case") or callspec.params.get("api_case")


def pytest_collection_modifyitems(session, config, items):
    s = _session(config)
    from .run import all_check_names

    if s.partition is not None:
        deselect_other_shards(s.partition, config, items)

    order = {name: i for i, name in enumerate(all_check_names() + ("arguments",))}
    # Keep every check of one (candidate, case, dtype, device) together: its Summary is generated
    # once and shared, and a runner cache of a few cases suffices.
    indexed = list(enumerate(items))

    def key(pair):
        i, item = pair
        param = _param_of(item)
        check = _check_of(item)
        if param is None or check is None:
            return (0, "", i, 0)
        return (1, param.id, order.get(check, 99), i)

    items[:] = [item for _, item in sorted(indexed, key=key)]
    workerinput = getattr(config, "workerinput", None)
    workers = int(workerinput.get("workercount", 1)) if workerinput else 1
    combos = {_param_of(i).id for i in items if isinstance(_param_of(i), Combo)}
    s.apply_budget(len(combos), workers)
    for item in items:
        param, check = _param_of(item), _check_of(item)
        if param is None or check is None:
            continue
        test_name = f"{check}[{param.id}]"
        reason = s.skip_reason(param.candidate, param.dtype, param.device, getattr(param, "case", None))
        if reason:
            item.add_marker(pytest.mark.skip(reason=reason))
        s.node_params[item.nodeid] = _row_skeleton(param, check)
        xf = s.xfail_for(test_name)
        if xf is not None:
            item.stash[_XFAIL_KEY] = xf
    if not hasattr(config, "workerinput"):
        warn_stale_xfails(config, s)


def deselect_other_shards(partition, config, items) -> None:
    """Keep the conformance tests of this shard's groups; the others are deselected (not skipped:
    another shard runs them). Tests the harness did not parametrize are left alone."""
    keep, drop = [], []
    for item in items:
        mine = _param_of(item) is None or partition.owns(group_of_nodeid(item.nodeid))
        (keep if mine else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def _count_collected(s: "HarnessSession", nodeids) -> None:
    counts = Counter(group_of_nodeid(n) for n in nodeids)
    s.collected = dict(counts)


def pytest_collection_finish(session):
    if not hasattr(session.config, "workerinput"):
        _count_collected(_session(session.config), [i.nodeid for i in session.items])


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids):
    """xdist controller: what the workers collected (they all collect the same)."""
    _count_collected(_session(node.config), ids)


def warn_stale_xfails(config, s: "HarnessSession") -> None:
    """array-api-tests style: warn about xfails lines that match no test of the configured
    candidates on the whole grid (not merely the tests this run selected)."""
    from .run import all_check_names

    names = [f"{check}[{cand.name}-{case.id}-{dtype}-{device}]"
             for cand in s.candidates for case in GRID for dtype in DTYPES
             for device in ("cpu", "cuda:0") for check in all_check_names()]
    names += [f"arguments[{cand.name}-{dtype}-{device}]"
              for cand in s.candidates for dtype in DTYPES for device in ("cpu", "cuda:0")]
    for p in s.xfails:
        if not any(p.matches(name) for name in names):
            config.issue_config_time_warning(
                pytest.PytestConfigWarning(f"xfails file line {p.line}: {p.pattern!r} matches no test"),
                stacklevel=2)


_XFAIL_KEY = pytest.StashKey[XfailPattern]()


def _row_skeleton(param, check: str) -> dict:
    case = getattr(param, "case", None)
    row = {"group": param.id, "candidate": param.candidate.name, "candidate_spec": param.candidate.spec,
           "candidate_version": param.candidate.version, "case": case.id if case else "api",
           "dtype": dtype_name(param.dtype), "device": param.device, "check": check}
    if case is not None:
        row.update(mean=case.mean, std=case.std, a=case.a, b=case.b,
                   shape="x".join(map(str, case.shape)))
    return row


# ------------------------------------------------------------------------------------------------
# Fixtures and the bridge from Result to pytest outcome


class Verifier:
    def __init__(self, session: HarnessSession, request):
        self.s = session
        self.request = request

    def __call__(self, check: str, param) -> None:
        s = self.s
        case_columns, repro_samples = {}, None
        if isinstance(param, Combo):
            runner = s.runners.get(param.candidate, param.case, param.dtype, param.device,
                                   s.run_config)
            result = runner.run(check)
            case_id = param.case.id
            case_columns = runner.case_columns()
            if s.run_config.case_budget_s is not None:
                repro_samples = runner.samples_for_repro or s.run_config.n(1, param.device)
        else:
            from .run import run_candidate_check

            result = run_candidate_check(check, param.candidate, param.dtype, param.device,
                                         s.run_config)
            case_id = "api"
        if result.verdict == "fail" and isinstance(param, Combo):
            self._save_case_data(param, runner)
        row = _row_skeleton(param, check) | result.as_row() | case_columns
        row["worker"] = os.environ.get("PYTEST_XDIST_WORKER", "main")
        row["profile"] = s.run_config.profile
        repro = s.repro(param.candidate, case_id, param.dtype, param.device, check, repro_samples)
        xf = self.request.node.stash.get(_XFAIL_KEY, None)
        if result.verdict in ("fail", "error"):
            row["repro"] = repro
            if xf is not None:
                row["verdict"] = "xfail"
                row["xfail_cause"] = xf.cause
        self.request.node.user_properties.append((ROW_KEY, row))
        text = f"{check} [{param.id}]: {result.message}"
        if result.verdict == "pass":
            return
        if result.verdict == "skip":
            pytest.skip(text)
        if xf is not None:
            pytest.xfail(f"known: {xf.cause} -- {text}")
        if result.verdict == "error":
            pytest.fail(f"HARNESS ERROR {text}\n  reproduce: {repro}", pytrace=False)
        pytest.fail(f"{text}\n  reproduce: {repro}", pytrace=False)

    def _save_case_data(self, param, runner) -> None:
        """Keep the failing case's histogram for the report's figure (never changes a verdict)."""
        s = self.s
        key = (param.candidate.name, param.case.id, dtype_name(param.dtype), param.device)
        if not s.report_dir or key in s.saved_case_data:
            return
        summary = next((runner.cached_summary(st) for st in (2, 1)
                        if runner.cached_summary(st) is not None), None)
        if summary is None:
            return
        s.saved_case_data.add(key)
        try:
            from reports.figures import save_case_data
            from reports.results import case_data_path

            save_case_data(case_data_path(s.report_dir, *key), summary, runner.law,
                           meta={"candidate": key[0], "case": key[1], "device": key[3]})
        except Exception as exc:  # a figure problem must not change a verdict
            runner.warnings.append(f"case data not saved: {type(exc).__name__}: {exc}")


@pytest.fixture
def verify(request) -> Verifier:
    """verify(check_name, param): run one check and turn its verdict into the test's outcome."""
    return Verifier(_session(request.config), request)


# ------------------------------------------------------------------------------------------------
# Rows to the controller, reports at the end


def pytest_runtest_logreport(report):
    config = _CONFIG.get("config")
    if config is None or hasattr(config, "workerinput"):
        return
    s = _session(config)
    rows = [v for k, v in report.user_properties if k == ROW_KEY]
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        node = getattr(report, "node", None)  # the xdist worker that ran it (None without -n)
        if node is not None:
            s.ledger.record(group_of_nodeid(report.nodeid), node.gateway.id)
        if rows:
            s.rows.extend(rows)
            return
        skeleton = s.node_params.get(report.nodeid) or s.skeleton_from_nodeid(report.nodeid)
        if skeleton is None:
            return
        if report.skipped:
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
            s.rows.append(skeleton | {"verdict": "skip", "message": str(reason)[:300]})
        elif report.failed:
            # No row rode on the report: the worker crashed or the test body blew up.
            text = str(report.longrepr).strip().splitlines()
            s.rows.append(skeleton | {"verdict": "error",
                                      "message": (text[-1] if text else "no result")[:300]})


_CONFIG: dict = {}


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session):
    _CONFIG["config"] = session.config
    config = session.config
    s = _session(config)
    if not hasattr(config, "workerinput") and s.report_dir:
        # Files of an earlier run in the same directory must not mix into this one.
        import shutil

        from reports.results import prepare_report_dir

        prepare_report_dir(s.report_dir)
        shutil.rmtree(os.path.join(s.report_dir, INFLIGHT_DIR), ignore_errors=True)


def pytest_sessionfinish(session, exitstatus):
    config = session.config
    if hasattr(config, "workerinput"):
        return
    s = _session(config)
    s.rows = latest_rows(s.rows)
    if s.ledger.splits:
        # Each check of a split group read its own draw: the verdicts are not the harness's.
        dsession = config.pluginmanager.getplugin("dsession")
        scheduler = type(getattr(dsession, "sched", None)).__name__
        for row in s.rows:
            if row.get("group") in s.ledger.splits:
                row.update(verdict="error",
                           message=s.ledger.split_message(row["group"], scheduler))
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    empty_share = s.partition is not None and not s.partition.groups
    if empty_share and session.exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
        session.exitstatus = pytest.ExitCode.OK  # N > groups: this shard has nothing to run
    if not s.report_dir or not (s.rows or empty_share):
        return
    from reports.results import write_run

    s.written = write_run(s.rows, s.report_dir, config=config, session=s)
    write_run_manifest(s, config, session.exitstatus)


def write_run_manifest(s: "HarnessSession", config, exitstatus) -> None:
    """manifest.json beside the results: the shard, the grid's assignment, the groups run, the
    machine (reports.manifest); what `reports merge` checks a partitioned run's coverage with."""
    from reports.manifest import build_manifest, write_manifest
    from reports.results import command_line

    opt, p = s.options, s.partition
    if p is not None:
        shard, assignment = p.shard.as_dict(), p.assignment
        partition = {"method": p.method, "durations_from": p.durations_from, "known": p.known}
    else:
        shard, assignment, partition = None, {g: 0 for g in s.grid_groups()}, {"method": None}
    config_key = {"profile": opt.profile, "samples": opt.samples, "run_seed": opt.seed,
                  "bounds": opt.bounds, "case_timeout": opt.case_timeout,
                  "case_budget": opt.case_budget, "budget_seconds": opt.budget_seconds,
                  "alpha_suspect": opt.alpha_suspect, "alpha_fail": opt.alpha_fail,
                  "candidates": [[c.spec, c.version] for c in s.candidates]}
    manifest = build_manifest(shard=shard, partition=partition, assignment=assignment,
                              groups={r["group"] for r in s.rows if r.get("group")},
                              tests=s.collected, config=config_key, started=s.started,
                              finished=time.time(), exitstatus=int(exitstatus),
                              command=command_line(config))
    write_manifest(s.report_dir, manifest)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if hasattr(config, "workerinput"):
        return
    s = _session(config)
    if not s.rows:
        return
    tr = terminalreporter
    tr.section("truncated-normal conformance")
    counts = Counter(r.get("verdict", "?") for r in s.rows)
    tr.write_line("verdicts: " + ", ".join(f"{k} {counts[k]}" for k in
                                           ("pass", "fail", "error", "xfail", "skip") if counts[k]))
    fails = defaultdict(list)
    for r in s.rows:
        if r.get("verdict") in ("fail", "error"):
            fails[r["check"]].append(r)
    for check, rows in sorted(fails.items()):
        tr.write_line(f"  {check}: {len(rows)} failing")
        for r in rows[:6]:
            tr.write_line(f"    {r['candidate']} {r['case']} {r['dtype']} {r['device']}: "
                          f"{str(r.get('message', ''))[:150]}")
        if len(rows) > 6:
            tr.write_line(f"    ... {len(rows) - 6} more (see the report)")
    for name, (n, secs) in throughput(s.rows).items():
        rate = f"{n / secs / 1e6:.2f} M samples/s inside the candidate" if secs > 0 and n else "n/a"
        tr.write_line(f"throughput {name}: {n} samples in {secs:.1f} s, {rate}")
    written = getattr(s, "written", None)
    if written:
        tr.write_line(f"report written to {written}")


def latest_rows(rows: list[dict]) -> list[dict]:
    """One row per (candidate, case, dtype, device, check): the last reported wins (a worker
    crash is reported for the test it was running, which may run again on a new worker)."""
    keyed = {(r.get("candidate_spec"), r["case"], r["dtype"], r["device"], r["check"]): r
             for r in rows}
    return list(keyed.values())


def throughput(rows: list[dict]) -> dict:
    """candidate -> (samples generated, seconds inside the candidate), over both stages."""
    samples: dict = defaultdict(int)
    stage2: dict = {}
    seconds: dict = defaultdict(float)
    for r in rows:
        seconds[r["candidate"]] += float(r.get("candidate_s") or 0.0)
        key = (r["candidate"], r["case"], r["dtype"], r["device"])
        if r["check"] == "hang":
            samples[r["candidate"]] += int(r.get("n_stage1") or 0)
        stage2[key] = max(stage2.get(key, 0), int(r.get("n_stage2") or 0))
    for (cand, *_), n2 in stage2.items():
        samples[cand] += n2
    return {c: (samples[c], seconds[c]) for c in seconds}
