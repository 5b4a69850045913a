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

from .cases import GRID, PROFILES, case_by_id
from .run import CASE_CHECKS, RunConfig, RunnerCache, dtype_name
from .seeds import DEFAULT_RUN_SEED

DTYPES = {"float64": torch.float64, "float32": torch.float32, "float16": torch.float16,
          "bfloat16": torch.bfloat16}
for _name in ("float8_e4m3fn", "float8_e5m2"):
    if hasattr(torch, _name):
        DTYPES[_name] = getattr(torch, _name)
DEFAULT_DTYPES = ("float64", "float32", "float16", "bfloat16")
DEFAULT_REPORT_DIR = "harness-report"
ROW_KEY = "harness_row"
INFLIGHT_DIR = ".inflight"  # inside the report dir: markers of draws in progress (crash detection)


def _csv(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def pytest_addoption(parser):
    g = parser.getgroup("harness", "truncated-normal conformance harness")
    g.addoption("--candidate", action="append", default=[], metavar="SPEC",
                help="sampler under test: a registered name, pkg.mod:fn or path/file.py:fn; "
                     "repeatable (default: torch)")
    g.addoption("--profile", choices=sorted(PROFILES), default="pr",
                help="samples per case: smoke, pr (default), nightly")
    g.addoption("--samples", type=int, default=None, metavar="N",
                help="stage-1 samples per (case, dtype, device); overrides the profile")
    g.addoption("--seed", type=int, default=DEFAULT_RUN_SEED, metavar="S", help="run seed")
    g.addoption("--dtypes", default=",".join(DEFAULT_DTYPES), metavar="LIST",
                help=f"comma-separated dtypes (default {','.join(DEFAULT_DTYPES)}; also "
                     f"{', '.join(d for d in DTYPES if d not in DEFAULT_DTYPES)})")
    g.addoption("--devices", default=None, metavar="LIST",
                help="comma-separated devices (default: cpu and every cuda device present)")
    g.addoption("--cases", default=None, metavar="IDS", help="comma-separated case ids (default: all)")
    g.addoption("--bounds", choices=("rounded", "strict"), default="rounded",
                help="accept values in [RN(a), RN(b)] (default) or demand [a, b]")
    g.addoption("--case-timeout", type=float, default=20.0, metavar="SECONDS",
                help="seconds one candidate call may take before it counts as a hang (default 20)")
    g.addoption("--budget-seconds", type=float, default=None, metavar="SECONDS",
                help="scale n per case down so the run's sampling fits this wall-clock budget "
                     "(the n actually used and its MDE are recorded)")
    g.addoption("--alpha-suspect", type=float, default=1e-3,
                help="stage-1 p below this draws stage 2 (default 1e-3)")
    g.addoption("--alpha-fail", type=float, default=1e-3,
                help="stage-2 p below this fails (default 1e-3)")
    g.addoption("--report-dir", default=DEFAULT_REPORT_DIR, metavar="DIR",
                help=f"where results go (default ./{DEFAULT_REPORT_DIR}); '' to write nothing")
    g.addoption("--xfails-file", default=None, metavar="FILE",
                help="known failures, one pattern per line with '# cause'")


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

        opt = config.option
        specs = opt.candidate or ["torch"]
        self.candidates = []
        for spec in specs:
            try:
                self.candidates.append(resolve(spec))
            except CandidateNotFound as exc:
                raise pytest.UsageError(str(exc)) from None
        self.run_config = RunConfig(profile=opt.profile, samples=opt.samples, run_seed=opt.seed,
                                    bounds=opt.bounds, case_timeout=opt.case_timeout,
                                    alpha_suspect=opt.alpha_suspect, alpha_fail=opt.alpha_fail,
                                    inflight_dir=(os.path.join(opt.report_dir, INFLIGHT_DIR)
                                                  if opt.report_dir else None))
        self.budget_seconds = opt.budget_seconds
        try:
            self.cases = ([case_by_id(c) for c in _csv(opt.cases)] if opt.cases else list(GRID))
        except KeyError as exc:
            raise pytest.UsageError(f"--cases: {exc.args[0]}") from None
        unknown = [d for d in _csv(opt.dtypes) if d not in DTYPES]
        if unknown:
            raise pytest.UsageError(f"--dtypes: unknown {', '.join(unknown)}; known: {', '.join(DTYPES)}")
        self.dtypes = [DTYPES[d] for d in _csv(opt.dtypes)]
        self.devices = _csv(opt.devices) if opt.devices else default_devices()
        for d in self.devices:
            try:
                torch.device(d)
            except (RuntimeError, ValueError):
                raise pytest.UsageError(f"--devices: {d!r} is not a torch device") from None
        self.xfails = load_xfails(opt.xfails_file) if opt.xfails_file else []
        self.runners = RunnerCache()
        self.rows: list[dict] = []
        self.started = time.time()
        self.node_params: dict = {}  # nodeid -> row skeleton (to report crashed workers)
        self.report_dir = opt.report_dir
        self.saved_case_data: set = set()

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

    def skip_reason(self, candidate, dtype, device, case=None) -> str | None:
        dev = torch.device(device)
        if dev.type == "cuda" and not torch.cuda.is_available():
            return f"device {device}: CUDA is not available on this machine"
        if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
            return f"device {device}: only {torch.cuda.device_count()} CUDA device(s) present"
        # The case too: a sampler that cannot be asked for it (fixed ±2σ bounds, no mean) is skipped
        # with the candidate's reason (issue 13).
        return candidate.skip_reason(dtype, device, case)

    def skeleton_from_nodeid(self, nodeid: str) -> dict | None:
        """Row skeleton of a test from its node id alone: the xdist controller collects nothing,
        yet must write rows for tests whose worker crashed or that were skipped at setup."""
        match = re.search(r"::test_(\w+)\[([^\]]+)\]", nodeid)
        if match is None:
            return None
        if not hasattr(self, "_params_by_id"):
            self._params_by_id = {p.id: p for p in (*self.combos(), *self.api_combos())}
        param = self._params_by_id.get(match.group(2))
        return _row_skeleton(param, match.group(1)) if param is not None else None

    def xfail_for(self, test_name: str) -> XfailPattern | None:
        for p in self.xfails:
            if p.matches(test_name):
                return p
        return None

    def repro(self, candidate, case_id, dtype, device, check) -> str:
        cfg = self.run_config
        parts = ["pytest", "suites", "--candidate", candidate.spec]
        if case_id != "api":
            parts += ["--cases", case_id]
        parts += ["--dtypes", dtype_name(dtype), "--devices", device, "--seed", str(cfg.run_seed),
                  "--profile", cfg.profile]
        if cfg.samples:
            parts += ["--samples", str(cfg.samples)]
        if cfg.bounds != "rounded":
            parts += ["--bounds", cfg.bounds]
        parts += ["-k", f"test_{check}"]
        return " ".join(shlex.quote(p) for p in parts)


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
    if workerinput is not None and workerinput.get("harness_cuda_device") is not None:
        # Pin the worker to the CUDA device the controller gave it (worker index modulo device
        # count, see harness.scheduling) before any CUDA work, so default allocations and
        # kernels of different workers go to different devices.
        torch.cuda.set_device(int(workerinput["harness_cuda_device"]))
    if getattr(config.option, "dist", "no") == "load":
        # A case's checks share one Summary: keep them on one worker (plain -n implies "load").
        config.option.dist = "loadgroup"
    if workerinput is not None and workerinput.get("harness_loadgroup"):
        # Workers decide on the group suffix of node ids from their own command line, which
        # still says "load": tell them what the controller switched to.
        config.option.loadgroup = True
    if workerinput is not None:
        # One worker must not oversubscribe the cores the others use.
        count = int(workerinput.get("workercount", 1))
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // count))


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    """xdist controller, per worker: pass the scheduling decisions on (see pytest_configure)."""
    from .scheduling import owned_cuda_device, visible_cuda_devices

    node.workerinput["harness_loadgroup"] = node.config.getvalue("dist") == "loadgroup"
    node.workerinput["harness_cuda_device"] = owned_cuda_device(node.gateway.id,
                                                                visible_cuda_devices())


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """loadgroup (what plain -n becomes here) with CUDA cases routed to their device's workers."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from .scheduling import DeviceGroupScheduling

    return DeviceGroupScheduling(config, log)


def pytest_report_header(config):
    s = _session(config)
    cands = ", ".join(f"{c.name} ({c.version})" for c in s.candidates)
    cfg = s.run_config
    n = str(cfg.n(1))
    if any(d.startswith("cuda") for d in s.devices) and cfg.n(1, "cuda") != cfg.n(1):
        n += f" on CPU, {cfg.n(1, 'cuda')} on CUDA"
    return [f"harness: candidates {cands}",
            f"harness: torch {torch.__version__}; devices {', '.join(s.devices)}; dtypes "
            f"{', '.join(dtype_name(d) for d in s.dtypes)}",
            f"harness: profile {cfg.profile} (n={n} per case, stage 2 x4); seed {cfg.run_seed}; "
            f"bounds {cfg.bounds}; alpha {cfg.alpha_suspect:g}/{cfg.alpha_fail:g}"]


def pytest_generate_tests(metafunc):
    s = _session(metafunc.config)
    if "conformance_case" in metafunc.fixturenames:
        params = []
        for combo in s.combos():
            group = pytest.mark.xdist_group(combo.id)
            params.append(pytest.param(combo, id=combo.id, marks=group))
        metafunc.parametrize("conformance_case", params)
    if "api_case" in metafunc.fixturenames:
        params = [pytest.param(c, id=c.id, marks=pytest.mark.xdist_group(c.id)) for c in s.api_combos()]
        metafunc.parametrize("api_case", params)


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
    row = {"candidate": param.candidate.name, "candidate_spec": param.candidate.spec,
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
        if isinstance(param, Combo):
            runner = s.runners.get(param.candidate, param.case, param.dtype, param.device,
                                   s.run_config)
            result = runner.run(check)
            case_id = param.case.id
        else:
            from .run import run_candidate_check

            result = run_candidate_check(check, param.candidate, param.dtype, param.device,
                                         s.run_config)
            case_id = "api"
        if result.verdict == "fail" and isinstance(param, Combo):
            self._save_case_data(param, runner)
        row = _row_skeleton(param, check) | result.as_row()
        row["worker"] = os.environ.get("PYTEST_XDIST_WORKER", "main")
        row["profile"] = s.run_config.profile
        repro = s.repro(param.candidate, case_id, param.dtype, param.device, check)
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
    if not s.rows or not s.report_dir:
        return
    from reports.results import write_run

    s.written = write_run(s.rows, s.report_dir, config=config, session=s)


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
