"""The run's plan and state, without pytest: which groups exist (candidates x cases x dtypes x
devices [x layouts]), their runners, skip reasons, xfails and reproduce lines, and the one function
that turns a check on a group into its result row (`HarnessSession.run_check`).

The pytest plugin (`harness.plugin`) and the Python API (`harness.api`) both drive a
`HarnessSession`, so `pytest suites` and `harness.check` give the same rows.
"""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import shlex
import shutil
import time
from collections import Counter
from dataclasses import dataclass

import torch

from candidates import CandidateNotFound, resolve
from reports.leases import ReportDirHeld, lock_report_dir, unlock_report_dir
from reports.manifest import build_manifest, write_manifest
from reports.render import write_run
from reports.ids import API_CASE, DEFAULT_PATH, parse_case_label
from reports.store import (DiskFault, RowLog, command_line, file_digest, prepare_report_dir,
                           writing)
from reference.dtypes import DTYPES, dtype_name

from ..checks import CHECKS
from ..fleet.groups import GroupLedger, group_of_nodeid, nodeid_parts
from ..fleet.partition import plan
from ..cases import PROFILES, shape_classes_for, shaped
from ..cases import on_path as case_on_path
from ..explore import EXPLORE_FWER
from ..group import ApiGroup, Group, id_clash
from ..runner import CandidateRunner, RunConfig, RunnerCache, candidate_on_path
from ..runner.drawn import as_drawn
from ..runner.shrink import PARAMETERS as SHRINK_PARAMETERS
from ..runner.shrink import SHRINK_CASES, ShrinkTask, run_tasks
from ..sharded.layout import Layout
from ..sharded.runner import ShardedRunnerCache, sharded_skip_reason
from .crashes import CrashLedger
from .devices import (check_device_name, default_devices, device_skip_reason,
                      memory_skip_reason)
from .options import RUN_DEFAULTS, OptionError, Options
from .rows import row_skeleton
from .xfails import XfailPattern, load_xfails

#: Inside the report dir: leases of draws in progress (reports.leases).
INFLIGHT_DIR = ".inflight"
#: Inside the report dir: the shrunk boundaries of the explored cases that failed.
BOUNDARIES_FILE = "boundaries.json"

#: The exit status of a run whose report could not be written whole (a full disk, an I/O error,
#: the directory removed under it): its manifest says partial, with the failed write as reason.
#: pytest's own are 0 to 5; 1 (some checks fail) is a finding, this one a broken run.
REPORT_WRITE_FAILED = 6


@dataclass
class CheckOutcome:
    """What one check on one group gave: its row, and what pytest needs to report it."""

    row: dict
    verdict: str  # the Result's verdict (the row says "xfail" where an xfails line matched)
    text: str  # "check [group]: message"
    repro: str
    xfail: XfailPattern | None = None


def recorded_call_facts(case) -> dict:
    """What the model report (`reports.model`) reads of a case recorded from a model."""
    return {"case": case.id, "model": case.origin.model, "call": case.origin.function,
            "calls": case.origin.calls, "parameters": list(case.origin.parameters),
            "sampler": case.sampler, "shape": case.shape_text, "dtype": case.dtypes[0],
            "drawn_in": case.drawn_in}


class HarnessSession:
    """One run: the validated options, the resolved candidates, the grid and its runners."""

    def __init__(self, opt: Options):
        self.options = opt
        # Who judges each case (`candidates_for`): the --candidate list judges every case; without
        # it, a model's recorded call is judged with the candidate of the function that made it
        # (its `Case.sampler`, a registered name or a --record spec) and every other case with
        # the default candidate.
        self.by_sampler: dict = {}
        if opt.candidates_given:
            specs = list(opt.candidates)
        else:
            samplers = list(dict.fromkeys(c.sampler for c in opt.cases if c.sampler))
            plain = (any(not c.sampler for c in opt.cases)
                     or any(w > 1 for w in opt.world_sizes))
            specs = list(opt.candidates) if plain else []
            specs += [s for s in samplers if s not in specs]
        self.candidates = []
        for spec in specs:
            try:
                candidate = resolve(spec)
            except CandidateNotFound as exc:
                raise OptionError(str(exc)) from None
            self.candidates.append(candidate)
            if isinstance(spec, str):
                self.by_sampler[spec] = candidate
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
            raise OptionError(f"--xfails-file: {opt.xfails_file!r}: {exc}") from None
        self.runners = RunnerCache()
        self.paths = tuple(opt.paths) if opt.paths is not None else PROFILES[opt.profile].paths
        self.world_sizes = tuple(opt.world_sizes)
        self.layouts = [Layout(w, p, r) for w in self.world_sizes if w > 1
                        for p in opt.placements for r in opt.rank_seeds]
        self.sharded_cases = list(opt.sharded_cases)
        self.sharded_dtypes = [DTYPES[d] for d in opt.sharded_dtypes]
        self._sharded_runners = None
        self.rows: list[dict] = []
        self.started = time.time()
        self.node_params: dict = {}  # nodeid -> row skeleton (to report crashed workers)
        self.report_dir = opt.report_dir
        self.saved_case_data: set = set()
        self.ledger = GroupLedger()  # controller: which worker ran each case group
        clash = id_clash((*self.groups(), *self.api_groups()))
        if clash:
            raise OptionError(clash)
        # Grid partitions (harness.fleet.partition): the groups this process runs; None: all.
        self.partition = None
        if opt.partition is not None:
            self.partition = plan(opt.partition, self.grid_groups(), opt.durations,
                                  opt.durations_from)
        self.collected: dict = {}  # group -> tests collected (for the manifest)
        self.nodeids: list = []  # the tests collected, by node id
        self.written: str | None = None  # where the report went
        self.row_log: RowLog | None = None
        self.fault: DiskFault | None = None  # the first write into the report dir that failed
        self.tables_written = False  # after a fault: the results tables were written all the same
        self.locked = False  # this process holds the report dir's run lock
        self.crashes = CrashLedger(opt.report_dir)  # controller: workers the candidates killed
        self.not_run: dict = {}  # nodeid -> why it was never drawn (a candidate that crashes)

    def apply_budget(self, n_groups: int, workers: int) -> None:
        """--budget-seconds: give each (candidate, case, dtype, device) an equal share of the
        wall clock for its stage-1 draw; a third of the budget is kept for stage 2 and checks."""
        if self.budget_seconds is None or n_groups == 0:
            return
        share = self.budget_seconds * max(1, workers) / n_groups / 3.0
        self.run_config = dataclasses.replace(self.run_config, case_budget_s=share)

    def candidates_for(self, case) -> list:
        """The candidates that judge `case`: the --candidate list; without one, the candidate of
        the function that made a recorded call, the default candidate for any other case."""
        if self.options.candidates_given:
            return self.candidates
        return [self.by_sampler[case.sampler or self.options.candidates[0]]]

    def groups(self):
        """Every case group: per (candidate, case, dtype, device) the grid's group, its shape-axis
        groups and its path groups; then the sharded groups."""
        if 1 in self.world_sizes:
            for cand in self.candidates:
                for case in self.cases:
                    if cand not in self.candidates_for(case):
                        continue
                    for dtype in self.dtypes_of(case):
                        for device in self.devices:
                            yield Group(cand, case, dtype, device)
                            for shape in self.shapes_for(case, dtype, device):
                                yield Group(cand, shaped(case, shape), dtype, device)
                            for path in self.paths_for(case):
                                yield Group(cand, case_on_path(case, path), dtype, device)
        yield from self.sharded_groups()

    def dtypes_of(self, case) -> list:
        """The dtypes `case` is judged in: its own (a model's recorded calls), else the run's."""
        if case.dtypes:
            return [DTYPES[d] for d in case.dtypes]
        return self.dtypes

    def paths_for(self, case) -> tuple:
        """The paths a grid case also runs on (--paths, or the profile's), beyond its own."""
        if case.shape_class or case.path != "eager":
            return ()
        return tuple(p for p in self.paths if p != "eager")

    def shapes_for(self, case, dtype, device) -> list:
        """The shape classes `case` is drawn at in this run (`harness.cases.SHAPES`): --shapes, or
        the profile's selection; the big CUDA-only ones only on CUDA, a dtype-bound one in its
        dtype, the big ones only on the profile's `big_shape_cases`."""
        if case.shape_class or case.path != "eager" or case.own_shape:
            return []  # a case named as one shape or path, or given with its shape, is just that
        return shape_classes_for(case.id, PROFILES[self.options.profile],
                                 torch.device(device).type == "cuda", dtype_name(dtype),
                                 self.options.shapes)

    def sharded_groups(self):
        """The sharded groups: candidates x the sharded selection x devices x layouts."""
        for cand in self.candidates:
            for case in self.sharded_cases:
                if cand not in self.candidates_for(case):
                    continue
                for dtype in self.sharded_dtypes:
                    for device in self.devices:
                        for layout in self.layouts:
                            yield Group(cand, case, dtype, device, layout)

    @property
    def sharded_runners(self):
        if self._sharded_runners is None:
            store_dir = os.path.join(self.report_dir, ".stores") if self.report_dir else None
            self._sharded_runners = ShardedRunnerCache(store_dir)
        return self._sharded_runners

    def runner_for(self, group: "Group"):
        if group.layout is None:
            candidate = candidate_on_path(as_drawn(group.candidate, group.case.drawn_in),
                                          group.path)
            return self.runners.get(candidate, group.case, group.dtype, group.device,
                                    self.run_config)
        return self.sharded_runners.get(group.candidate, group.case, group.dtype, group.device,
                                        self.run_config, group.layout)

    def params_for(self, check: str) -> list:
        """The groups a check runs on: those of the kinds its scope names (`harness.checks.CHECKS`):
        the candidate-scope checks once per (candidate, dtype, device)."""
        declared = CHECKS[check]
        if declared.applies_to("candidate"):
            return list(self.api_groups())
        return [c for c in self.groups() if declared.applies_to(c.kind)]

    def planned_tests(self) -> list[tuple[str, object]]:
        """Every (check, group) this process runs, in the order pytest runs them: group by group
        (`Group.id` order), each group's checks in the registry's order (the partition's share
        only)."""
        tests = [(check, param) for check in CHECKS.names() for param in self.params_for(check)
                 if self.partition is None or self.partition.owns(param.id)]
        return sorted(tests, key=lambda t: (t[1].id, CHECKS.index(t[0])))

    def api_groups(self):
        if 1 not in self.world_sizes:  # the API checks call the candidate on plain tensors
            return
        for cand in self.candidates:
            for dtype in self.dtypes:
                for device in self.devices:
                    yield ApiGroup(cand, dtype, device)

    def grid_groups(self) -> list[str]:
        """Every group key of the run's grid (what a partition splits), whatever -k selects."""
        return sorted({p.id for p in (*self.groups(), *self.api_groups())})

    def skip_reason(self, candidate, dtype, device, group=None) -> str | None:
        # The case too: a sampler that cannot be asked for it (fixed ±2σ bounds, no mean) is
        # skipped with the candidate's reason; a sharded layout needs ranks and devices.
        case = getattr(group, "case", None)
        if case is not None and case.drawn_in:
            dtype = DTYPES[case.drawn_in]  # the sampler writes that dtype; the cast is the model's
        reason = (device_skip_reason(device)
                  or candidate.skip_reason(dtype, device, case))
        if reason is None and getattr(group, "layout", None) is not None:
            reason = sharded_skip_reason(group.layout, device, tuple(group.case.shape))
        if reason is None and getattr(group, "case", None) is not None:
            reason = self._memory_reason(tuple(group.case.shape), device)
        return reason

    def _memory_reason(self, shape: tuple, device) -> str | None:
        # Asked once per (shape, device): the free memory of a busy device moves between tests,
        # and every group of a shape should get the same verdict.
        cache = self.__dict__.setdefault("_memory_reasons", {})
        key = (shape, str(device))
        if key not in cache:
            cache[key] = memory_skip_reason(shape, device)
        return cache[key]

    def skeleton_from_nodeid(self, nodeid: str) -> dict | None:
        """Row skeleton of a test from its node id alone: the xdist controller collects nothing,
        yet must write rows for tests whose worker crashed or that were skipped at setup."""
        parts = nodeid_parts(nodeid)
        if parts is None:
            return None
        check, group = parts
        param = self.param_of_group(group)
        return row_skeleton(param, check) if param is not None else None

    def case_of(self, case_id: str):
        """The case of this run with id `case_id` (None when it is not one)."""
        if not hasattr(self, "_cases_by_id"):
            self._cases_by_id = {c.id: c for c in self.cases}
        return self._cases_by_id.get(case_id)

    def param_of_group(self, group: str):
        """The Group or ApiGroup whose id is `group` (None for a group not of this run)."""
        if not hasattr(self, "_params_by_id"):
            self._params_by_id = {p.id: p for p in (*self.groups(), *self.api_groups())}
        return self._params_by_id.get(group)

    def xfail_for(self, test_name: str) -> XfailPattern | None:
        for p in self.xfails:
            if p.matches(test_name):
                return p
        return None

    def repro(self, candidate, case_id, dtype, device, check, samples: int | None = None,
              layout: Layout | None = None, spec: str | None = None,
              alpha_fail: float | None = None) -> str:
        """The one command that reruns this check on exactly these streams. `samples`: the n
        stage 1 drew, where a budget was in force (a budget stops at a time that depends on the
        machine; an explicit --samples is drawn in full, so the rerun draws the same n)."""
        cfg = self.run_config
        parts = ["pytest", "suites", "--candidate", candidate.spec]
        case = self.case_of(case_id) if case_id not in (API_CASE, None) else None
        if spec is not None:
            parts += ["--case", spec]
        elif case is not None and case.spec:
            parts += ["--case", case.spec]
            if not case.own_shape:
                parts += ["--shapes", "none", "--paths", "eager"]  # this group only
        elif case_id not in (API_CASE, None):
            parts += ["--cases", case_id]
            label = parse_case_label(case_id)
            if not label.shape and label.path == DEFAULT_PATH and layout is None:
                parts += ["--shapes", "none", "--paths", "eager"]  # this group only
        parts += ["--dtypes", dtype_name(dtype), "--devices", device, "--seed", str(cfg.run_seed),
                  "--profile", cfg.profile]
        if layout is not None:
            parts += ["--world-sizes", str(layout.world_size), "--placements", layout.placement]
            if layout.rank_seeds != "same":
                parts += ["--rank-seeds", layout.rank_seeds]
        elif case_id not in (API_CASE, None) and self.world_sizes != (1,):
            parts += ["--world-sizes", "1"]
        samples = samples or cfg.samples
        if samples:
            parts += ["--samples", str(samples)]
        if cfg.bounds != "rounded":
            parts += ["--bounds", cfg.bounds]
        if alpha_fail is None:
            alpha_fail = (case.alpha_fail if case is not None and case.alpha_fail is not None
                          else cfg.alpha_fail)
        for flag, value, default in (
                ("--case-timeout", cfg.case_timeout, RUN_DEFAULTS.case_timeout),
                ("--alpha-suspect", cfg.alpha_suspect, RUN_DEFAULTS.alpha_suspect),
                ("--alpha-fail", alpha_fail, RUN_DEFAULTS.alpha_fail)):
            if value != default:
                parts += [flag, f"{value:g}"]
        parts += ["-k", f"test_{check}"]
        return " ".join(shlex.quote(p) for p in parts)

    def run_facts(self, invocation=None, workers: int = 0) -> dict:
        """What the report records of this run, as plain values (`reports.render.write_run`)."""
        cfg = self.run_config
        return {"started": self.started, "command": command_line(invocation),
                "xdist_workers": workers, "profile": cfg.profile, "samples": cfg.samples,
                "case_budget_s": cfg.case_budget_s, "run_seed": cfg.run_seed,
                "bounds": cfg.bounds, "case_timeout": cfg.case_timeout,
                "alpha_suspect": cfg.alpha_suspect, "alpha_fail": cfg.alpha_fail,
                "candidates": [{"name": c.name, "spec": c.spec, "version": c.version}
                               for c in self.candidates],
                "devices": list(self.devices), "cases": [c.id for c in self.cases],
                "recorded": [recorded_call_facts(c) for c in self.cases if c.origin is not None],
                "n_stage1": cfg.n(1), "n_stage2": cfg.n(2),
                **({"explore": {"n": self.options.explore, "seed": self.options.explore_seed,
                                "fwer": EXPLORE_FWER,
                                "alpha_fail": next((c.alpha_fail for c in self.cases
                                                    if "explore" in c.tags), None)}}
                   if self.options.explore else {})}

    # -- the report directory: opened at start-up, rows as they come, finished at the end -----
    def open_report(self, command: str = "") -> str | None:
        """Make the report directory ready before anything is drawn: take its run lock (one run
        per directory), clear what an earlier run left there, write the manifest ("running") and
        open the row log. Whatever could fail at the end fails here instead: OptionError (one
        line) when the directory cannot be written or another run holds it. Returns a line when
        the lock of a run that died was taken over, else None."""
        self.row_log = None
        if not self.report_dir:
            return None
        try:
            os.makedirs(self.report_dir, exist_ok=True)
            taken_over = lock_report_dir(self.report_dir, command)
        except ReportDirHeld as exc:
            raise OptionError(str(exc)) from None
        except OSError as exc:
            raise OptionError(f"--report-dir: {self.report_dir!r} cannot be written: "
                              f"{exc.strerror or exc}") from None
        self.locked = True
        try:
            prepare_report_dir(self.report_dir)
            for stale in (INFLIGHT_DIR, ".stores", ".crashes"):  # leases, rendezvous files, logs
                shutil.rmtree(os.path.join(self.report_dir, stale), ignore_errors=True)
            write_manifest(self.report_dir, self.manifest(None, "", status="running"))
            self.row_log = RowLog(self.report_dir)
        except (DiskFault, OSError) as exc:
            self.release_report()
            why = str(exc) if isinstance(exc, DiskFault) else (exc.strerror or str(exc))
            raise OptionError(f"--report-dir: {self.report_dir!r} cannot be written: {why}") from None
        return taken_over

    def release_report(self) -> None:
        """Give the report directory's run lock back (idempotent)."""
        if self.locked:
            unlock_report_dir(self.report_dir)
            self.locked = False

    def record(self, rows: list) -> str | None:
        """Rows of finished tests: kept for the table and appended to the row log at once, so
        a run killed later still leaves them. Returns a line when the row log just failed (a
        full disk): the rows are then kept in memory only, and the report will be partial."""
        self.rows.extend(rows)
        if self.row_log is None or not rows or self.fault is not None:
            return None
        try:
            self.row_log.append(rows)
        except DiskFault as fault:
            self.fault = fault
            return (f"harness: cannot write the report: {fault}; {self.row_log.count} row(s) are "
                    f"in {self.row_log.path}, later ones are kept in memory only")
        return None

    def mark_collected(self, nodeids) -> None:
        """The tests this process will run (per group, for the manifest) once collection is in."""
        self.nodeids = list(nodeids)
        self.collected = dict(Counter(group_of_nodeid(n) for n in self.nodeids))
        if self.report_dir and self.row_log is not None:
            write_manifest(self.report_dir, self.manifest(None, "", status="running"))

    def finish_report(self, exitstatus: int, command: str, run: dict) -> str | None:
        """Write the tables and views, then the final manifest (status, rows, the files'
        sha256), and give the directory back; the directory, or None where nothing is written
        or a write failed (`fault` then says which, and the manifest says partial with that
        reason where it can still be written)."""
        if not self.report_dir:
            return None
        try:
            # After a failed row log the tables are still tried (the rows are in memory), but not
            # into a directory removed under the run: another run may own that path by now.
            if self.fault is None or self.fault.errno != errno.ENOENT:
                self._write_report(exitstatus, command, run)
        except DiskFault as fault:
            self.fault = self.fault or fault
        if self.fault is not None:
            self.tables_written = self.written is not None
            self.written = None
            try:
                write_manifest(self.report_dir, self.manifest(
                    exitstatus, command, status="partial",
                    reason=f"a write into the report directory failed: {self.fault}"))
            except DiskFault:
                pass  # the manifest of start-up stays: "running", which readers call partial
        self.release_report()
        return self.written

    def fault_line(self) -> str:
        """One line for the user after a write failed: what failed, and where the rows are."""
        logged = self.row_log.count if self.row_log is not None else 0
        if self.tables_written:
            where = f"results.csv and results.parquet hold all {len(self.rows)} row(s)"
        elif self.row_log is not None:
            where = f"{logged} of {len(self.rows)} row(s) are in {self.row_log.path}"
        else:
            where = "no row was written"
        return (f"harness: the report in {self.report_dir} is partial: {self.fault}; {where} "
                f"(exit {REPORT_WRITE_FAILED})")

    def _write_report(self, exitstatus: int, command: str, run: dict) -> None:
        if self.row_log is not None:
            self.row_log.close()
        self.written = write_run(self.rows, self.report_dir, run)
        have = Counter(r.get("group") for r in self.rows)
        whole = all(have.get(g, 0) >= n for g, n in self.collected.items())
        files = {}
        for name in ("results.parquet", "results.csv"):
            path = os.path.join(self.report_dir, name)
            if os.path.exists(path):
                with writing(path):
                    files[name] = file_digest(path)
        write_manifest(self.report_dir, self.manifest(exitstatus, command,
                                                      status="complete" if whole else "partial",
                                                      files=files))

    def shrink_failures(self, say=None, workers: int = 1) -> list:
        """Shrink the failing explored cases (`harness.runner.shrink`: the first SHRINK_CASES per
        candidate, dtype and device, each parameter a task, over `workers` processes) and write
        REPORT_DIR/boundaries.json; the boundaries."""
        failing: dict = {}
        for row in self.rows:
            case = self.case_of(row.get("case", ""))
            if case is None or "explore" not in case.tags or row.get("verdict") != "fail":
                continue
            key = (str(row.get("candidate_spec")), row["dtype"], row["device"])
            cases = failing.setdefault(key, [])
            if case not in cases:
                cases.append(case)
        by_spec = {c.spec: c for c in self.candidates}
        tasks = []
        for (spec, dtype_text, device), cases in sorted(failing.items()):
            candidate = by_spec.get(spec)
            if candidate is None:
                continue
            for case in sorted(cases, key=lambda c: c.id)[:SHRINK_CASES]:
                if say is not None:
                    say(f"harness: shrinking {case.id} ({dtype_text}) for {candidate.name}")
                tasks += [ShrinkTask(candidate, case, dtype_text, device, self.run_config, param)
                          for param in SHRINK_PARAMETERS]
        found = []
        for task, result in zip(tasks, run_tasks(tasks, workers)):
            if isinstance(result, str):
                if say is not None:
                    say(f"harness: {task.case.id} ({task.dtype_name}): {result}")
                continue
            if result is None:
                continue
            result.repro = self.repro(task.candidate, None, DTYPES[task.dtype_name], task.device,
                                      "*", spec=result.repro,
                                      alpha_fail=task.case.alpha_fail).replace(" -k test_*", "")
            found.append(result)
        if self.report_dir and self.fault is None:
            path = os.path.join(self.report_dir, BOUNDARIES_FILE)
            try:
                with writing(path), open(path, "w", encoding="utf-8") as fh:
                    json.dump([b.as_dict() for b in found], fh, indent=1, default=str)
            except DiskFault as fault:
                self.fault = fault
        self.boundaries = found
        return found

    def manifest(self, exitstatus: int | None, command: str, status: str = "complete",
                 files: dict | None = None, reason: str | None = None) -> dict:
        """manifest.json: the partition (key ``shard``), the grid's assignment, the groups run and
        the tests collected per group, the options every partition shares, the machine (`reports.manifest`): what
        `reports merge` checks a partitioned run's coverage with."""
        opt, p = self.options, self.partition
        if p is not None:
            shard, assignment = p.spec.as_dict(), p.assignment
            partition = {"method": p.method, "durations_from": p.durations_from, "known": p.known}
        else:
            shard, assignment, partition = None, {g: 0 for g in self.grid_groups()}, {"method": None}
        config_key = {"profile": opt.profile, "samples": opt.samples, "run_seed": opt.seed,
                      "bounds": opt.bounds, "case_timeout": opt.case_timeout,
                      "case_budget": opt.case_budget, "budget_seconds": opt.budget_seconds,
                      "alpha_suspect": opt.alpha_suspect, "alpha_fail": opt.alpha_fail,
                      "candidates": [[c.spec, c.version] for c in self.candidates]}
        return build_manifest(shard=shard, partition=partition, assignment=assignment,
                              groups={r["group"] for r in self.rows if r.get("group")},
                              tests=self.collected, config=config_key, started=self.started,
                              finished=None if status == "running" else time.time(),
                              exitstatus=exitstatus, command=command, status=status,
                              rows=None if status == "running" else len(self.rows), files=files,
                              reason=reason)

    # -- one check on one group ------------------------------------------------------------
    def run_check(self, check: str, param, worker: str = "main",
                  on_failure=None) -> CheckOutcome:
        """Run `check` on `param` (a Group or an ApiGroup) -> its row and outcome.

        `on_failure(param, runner)` is called for a failing case check (the plugin saves the
        case's histogram for the report's figure there)."""
        case_columns, repro_samples = {}, None
        if isinstance(param, Group):
            runner = self.runner_for(param)
            result = runner.run(check)
            case_id = param.case.id
            case_columns = runner.case_columns()
            if self.run_config.case_budget_s is not None:
                repro_samples = runner.samples_for_repro or self.run_config.n(1, param.device, param.case)
            if result.verdict == "fail" and on_failure is not None:
                on_failure(param, runner)
        else:
            result = CandidateRunner(param.candidate, param.dtype, param.device,
                                     self.run_config).run(check)
            case_id = API_CASE
        row = row_skeleton(param, check) | result.as_row() | case_columns
        row["worker"] = worker
        row["profile"] = self.run_config.profile
        repro = self.repro(param.candidate, case_id, param.dtype, param.device, check,
                           repro_samples, getattr(param, "layout", None))
        xf = self.xfail_for(f"{check}[{param.id}]")
        if result.verdict in ("fail", "error"):
            row["repro"] = repro
            if xf is not None:
                row["verdict"] = "xfail"
                row["xfail_cause"] = xf.cause
        return CheckOutcome(row, result.verdict, f"{check} [{param.id}]: {result.message}", repro,
                            xf if result.verdict in ("fail", "error") else None)

    def skip_row(self, param, check: str, reason: str) -> dict:
        """The row of a test skipped before it ran (an unsupported dtype, device or case)."""
        return row_skeleton(param, check) | {"verdict": "skip", "message": str(reason)[:300]}
