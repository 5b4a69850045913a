"""The run's plan, without pytest: which groups exist (candidates x cases x dtypes x devices
[x layouts]), which checks each runs, their runners, skip reasons and xfails, and the one function
that turns a check on a group into its result row (`HarnessSession.run_check`). The rows go to
the run's `harness.session.sink.ReportSink` (``session.report``), their reproduce lines come from
`harness.session.repro.ReproLines` (``session.repro``).

A session is planned by `harness.session.planner.plan_run` (the candidates resolved, the devices
and xfails checked), lists its own groups when it is made, and opens its sink when told
(`HarnessSession.open_sink`); the pytest plugin (`harness.plugin`) and the Python API
(`harness.api`) both build it so and drive it, so `pytest suites` and `harness.check` give the
same rows. The API runs the plan in this process, test after test (`run_in_process`).
"""

from __future__ import annotations

import dataclasses
import os
import time
from dataclasses import dataclass

import torch

from record.store import command_line
from reference.dtypes import DTYPES, dtype_name
from reports.defects import allowed_reason

from ..checks import CHECKS
from ..fleet.group_ledger import GroupLedger, conformance_nodeid, nodeid_parts
from ..cases import PROFILES, shape_classes_for, shaped
from ..cases import on_path as case_on_path
from ..explore import EXPLORE_FWER
from ..fleet.partition import plan
from ..group import ApiGroup, Group, api_group_names, group_names, id_clash
from ..runner import CandidateRunner, RunConfig, RunnerCache, candidate_on_path
from ..runner.drawn_then_cast import as_drawn
from ..runner.shrink import PARAMETERS as SHRINK_PARAMETERS
from ..runner.shrink import SHRINK_CASES, ShrinkTask, run_tasks
from ..sharded.layout import Layout
from ..sharded.dtensor_runner import ShardedRunnerCache, sharded_skip_reason
from .devices import MemoryReasons, device_skip_reason
from .options import OptionError, Options
from .rows import row_skeleton
from .repro import ReproLines
from .sink import INFLIGHT_DIR, ReportSink
from .xfails import XfailPattern, first_match


@dataclass
class CheckOutcome:
    """What one check on one group gave: its row, and what pytest needs to report it."""

    row: dict
    verdict: str  # the Result's verdict (the row says "xfail" where an xfails line matched)
    text: str  # "check [group]: message"
    repro: str
    xfail: XfailPattern | None = None
    # Why a failing row does not fail the run (``--fail-on``, by its level); None: it does.
    allowed: str | None = None


def recorded_call_facts(case) -> dict:
    """What the model report (`reports.model`) reads of a case recorded from a model."""
    return {"case": case.id, "model": case.origin.model, "call": case.origin.function,
            "calls": case.origin.calls, "parameters": list(case.origin.parameters),
            "sampler": case.sampler, "shape": case.shape_text, "dtype": case.dtypes[0],
            "drawn_in": case.drawn_in}


def named(case_groups, api_groups):
    """(id, identity, description) of each group, for `harness.group.id_clash`: two groups are
    one where their candidate spec, case label, dtype and device are."""
    for g in case_groups:
        yield (g.id, (g.candidate.spec, g.case_label, g.dtype, g.device),
               f"{g.candidate.name} on {g.case_label}")
    for g in api_groups:
        yield g.id, (g.candidate.spec, g.dtype, g.device), f"{g.candidate.name}'s arguments"


def _drawn_sharded_reason(case) -> str | None:
    """Why a recorded call drawn in one dtype and cast into another is not drawn sharded: the
    sharded draw fills the parameter in the dtype it holds (its unsharded group judges the cast)."""
    if not case.drawn_in:
        return None
    return (f"{case.id} is drawn in {case.drawn_in} and cast into {case.dtypes[0]}: a sharded "
            "draw fills the parameter in its own dtype (the unsharded group judges the cast)")


class HarnessSession:
    """One run: the validated options, the resolved candidates, the grid and its runners."""

    def __init__(self, opt: Options, candidates, by_sampler: dict, devices, xfails):
        """The plan's values (`harness.session.planner.plan_run` gives them): the options, the
        resolved candidates (`by_sampler`: spec -> candidate, see `candidates_for`), the devices
        and the xfails lines. The session lists its groups (OptionError where two share an id)
        and, for a partitioned run, the groups this process runs (`harness.fleet.partition`);
        nothing here resolves, reads or opens anything."""
        self.options = opt
        self.candidates = list(candidates)
        self.by_sampler = dict(by_sampler)
        self.devices = list(devices)
        self.xfails = list(xfails)
        self.run_config = RunConfig(profile=opt.profile, samples=opt.samples, run_seed=opt.seed,
                                    bounds=opt.bounds, case_timeout=opt.case_timeout,
                                    alpha_suspect=opt.alpha_suspect, alpha_fail=opt.alpha_fail,
                                    case_budget_s=opt.case_budget,
                                    harm_thresholds=opt.harm_thresholds,
                                    inflight_dir=(os.path.join(opt.report_dir, INFLIGHT_DIR)
                                                  if opt.report_dir else None))
        self.budget_seconds = opt.budget_seconds
        self.cases = list(opt.cases)
        self.dtypes = [DTYPES[d] for d in opt.dtypes]
        self.runners = RunnerCache()
        self.paths = tuple(opt.paths) if opt.paths is not None else PROFILES[opt.profile].paths
        self.world_sizes = tuple(opt.world_sizes)
        self.layouts = [Layout(w, p, r) for w in self.world_sizes if w > 1
                        for p in opt.placements for r in opt.rank_seeds]
        self.sharded_cases = list(opt.sharded_cases)
        self.sharded_dtypes = [DTYPES[d] for d in opt.sharded_dtypes]
        self._sharded_runners = None
        self._groups = None  # (case groups, API groups), listed at their first use
        self.started = time.time()
        self.node_params: dict = {}  # nodeid -> row skeleton (to report crashed workers)
        self.saved_case_data: set = set()
        self.ledger = GroupLedger()  # controller: which worker ran each case group
        self.report = ReportSink(opt.report_dir)
        self.memory_reasons = MemoryReasons()
        self.repro = ReproLines(self.run_config, self.world_sizes, {c.id: c for c in self.cases})
        self._listed_groups()
        # Grid partitions (harness.fleet.partition): the groups this process runs; None: all.
        self.partition = (plan(opt.partition, self.grid_groups(), opt.durations,
                               opt.durations_from) if opt.partition is not None else None)

    def open_sink(self, command: str = "") -> str | None:
        """Make the report directory ready before anything is drawn (its run lock, the "running"
        manifest with the plan's facts, the row log: `ReportSink.open`). OptionError when it
        cannot be written or another run holds it; a line when the lock of a run that died was
        taken over, else None."""
        return self.report.open(command, self.manifest_facts())

    def apply_budget(self, n_groups: int, workers: int) -> None:
        """--budget-seconds: give each (candidate, case, dtype, device) an equal share of the
        wall clock for its stage-1 draw; a third of the budget is kept for stage 2 and checks."""
        if self.budget_seconds is None or n_groups == 0:
            return
        share = self.budget_seconds * max(1, workers) / n_groups / 3.0
        self.run_config = dataclasses.replace(self.run_config, case_budget_s=share)
        self.repro.config = self.run_config

    def candidates_for(self, case) -> list:
        """The candidates that judge `case`: the --candidate list; without one, the candidate of
        the function that made a recorded call, the default candidate for any other case."""
        if self.options.candidates_given:
            return self.candidates
        return [self.by_sampler[case.sampler or self.options.candidates[0]]]

    def groups(self) -> tuple:
        """Every case group: per (candidate, case, dtype, device) the grid's group, its shape-axis
        groups and its path groups; then the sharded groups. Listed once: the plan is made, and
        every step after it (the manifest, the tests, their order) reads the same groups."""
        return self._listed_groups()[0]

    def api_groups(self) -> tuple:
        """The groups of the API checks: per (candidate, dtype, device), listed once."""
        return self._listed_groups()[1]

    def _listed_groups(self) -> tuple:
        """(case groups, API groups): what each is made of is planned first, then the groups
        are made, and no two of them may share an id (OptionError)."""
        if self._groups is None:
            planned = list(self._case_groups()), list(self._candidate_groups())
            groups = (tuple(Group(*fields, **group_names(fields[0].name, *fields[1:]))
                            for fields in planned[0]),
                      tuple(ApiGroup(*fields, **api_group_names(fields[0].name, *fields[1:]))
                            for fields in planned[1]))
            clash = id_clash(named(groups[0], groups[1]))
            if clash:
                raise OptionError(clash)
            self._groups = groups
        return self._groups

    def _case_groups(self):
        """The fields of each case group (`Group`), in the plan's order."""
        if 1 in self.world_sizes:
            for cand in self.candidates:
                for case in self.cases:
                    if cand not in self.candidates_for(case):
                        continue
                    for dtype in self.dtypes_of(case):
                        for device in self.devices:
                            yield cand, case, dtype, device
                            for shape in self.shapes_for(case, dtype, device):
                                yield cand, shaped(case, shape), dtype, device
                            for path in self.paths_for(case):
                                yield cand, case_on_path(case, path), dtype, device
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
        """The fields of the sharded groups: candidates x the sharded selection x devices x
        layouts; a model's recorded call in the dtype its parameter holds, drawn with the
        sampler that made it (`candidates_for`)."""
        if not self.layouts:
            return
        for cand in self.candidates:
            for case in self.sharded_cases:
                if cand not in self.candidates_for(case):
                    continue
                for dtype in self.dtypes_of(case) if case.dtypes else self.sharded_dtypes:
                    for device in self.devices:
                        for layout in self.layouts:
                            yield cand, case, dtype, device, layout

    @property
    def sharded_runners(self):
        if self._sharded_runners is None:
            report_dir = self.options.report_dir
            store_dir = os.path.join(report_dir, ".stores") if report_dir else None
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

    def groups_for(self, check: str) -> list:
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
        tests = [(check, param) for check in CHECKS.names() for param in self.groups_for(check)
                 if self.partition is None or self.partition.owns(param.id)]
        return sorted(tests, key=lambda t: (t[1].id, CHECKS.index(t[0])))

    def _candidate_groups(self):
        """The fields of each API group (`ApiGroup`)."""
        if 1 not in self.world_sizes:  # the API checks call the candidate on plain tensors
            return
        for cand in self.candidates:
            for dtype in self.dtypes:
                for device in self.devices:
                    yield cand, dtype, device

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
            reason = (candidate.sharded_reason() or _drawn_sharded_reason(case)
                      or sharded_skip_reason(group.layout, device, tuple(group.case.shape)))
        if reason is None and getattr(group, "case", None) is not None:
            reason = self.memory_reasons(tuple(group.case.shape), device)
        return reason

    def skeleton_from_nodeid(self, nodeid: str) -> dict | None:
        """Row skeleton of a test from its node id alone: the xdist controller collects nothing,
        yet must write rows for tests whose worker crashed or that were skipped at setup."""
        parts = nodeid_parts(nodeid)
        if parts is None:
            return None
        check, group = parts
        param = self.group_by_id(group)
        return row_skeleton(param, check) if param is not None else None

    def case_of(self, case_id: str):
        """The case of this run with id `case_id` (None when it is not one)."""
        if not hasattr(self, "_cases_by_id"):
            self._cases_by_id = {c.id: c for c in self.cases}
        return self._cases_by_id.get(case_id)

    def group_by_id(self, group: str):
        """The Group or ApiGroup whose id is `group` (None for a group not of this run)."""
        if not hasattr(self, "_groups_by_id"):
            self._groups_by_id = {p.id: p for p in (*self.groups(), *self.api_groups())}
        return self._groups_by_id.get(group)

    def run_facts(self, invocation=None, workers: int = 0) -> dict:
        """What the report records of this run, as plain values (`reports.render.write_run`)."""
        cfg = self.run_config
        return {"started": self.started, "command": command_line(invocation),
                "xdist_workers": workers, "profile": cfg.profile, "samples": cfg.samples,
                "case_budget_s": cfg.case_budget_s, "run_seed": cfg.run_seed,
                "bounds": cfg.bounds, "case_timeout": cfg.case_timeout,
                "alpha_suspect": cfg.alpha_suspect, "alpha_fail": cfg.alpha_fail,
                "fail_on": self.options.fail_on,
                "harm_thresholds": self.options.harm_thresholds.as_dict(),
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

    def shrink_failures(self, say=None, workers: int = 1) -> list:
        """Shrink the failing explored cases (`harness.runner.shrink`: the first SHRINK_CASES per
        candidate, dtype and device, each parameter a task, over `workers` processes) and write
        REPORT_DIR/boundaries.json; the boundaries."""
        failing: dict = {}
        for row in self.report.rows:
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
            result.repro = self.repro.line(task.candidate, None, DTYPES[task.dtype_name],
                                           task.device, None, spec=result.repro,
                                           alpha_fail=task.case.alpha_fail)
            found.append(result)
        self.report.write_boundaries(found)
        self.boundaries = found
        return found

    def manifest_facts(self) -> dict:
        """The plan's part of manifest.json (`ReportSink.manifest`): the partition (key
        ``shard``), the grid's assignment, the options every partition shares, the start."""
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
                      # the levels of the rows are graded at these
                      "harm_thresholds": opt.harm_thresholds.as_dict(),
                      "candidates": [[c.spec, c.version] for c in self.candidates]}
        return dict(shard=shard, partition=partition, assignment=assignment, config=config_key,
                    started=self.started)

    def run_in_process(self, tests: list, on_group=None, progress=None) -> None:
        """Run `tests` (`planned_tests`) in this process, in order, without pytest (the Python
        API): each one's row, or its skip row, into the report; then, in an explored run, shrink
        the failures. `on_group(group_id)` is told as each test comes, `progress(drawn, target)`
        after each fold of a group's draw."""
        self.report.mark_collected(conformance_nodeid(check_name, param.id)
                                   for check_name, param in tests)
        for check_name, param in tests:
            if on_group is not None:
                on_group(param.id)
            reason = self.skip_reason(param.candidate, param.dtype, param.device, param)
            if reason:
                self.report.record([self.skip_row(param, check_name, reason)])
                continue
            self.report.record([self.run_check(check_name, param, progress=progress).row])
        if self.options.explore:
            self.shrink_failures()

    # -- one check on one group ------------------------------------------------------------
    def run_check(self, check: str, param, worker: str = "main",
                  on_failure=None, progress=None) -> CheckOutcome:
        """Run `check` on `param` (a Group or an ApiGroup) -> its row and outcome.

        `on_failure(param, runner)` is called for a failing case check (the plugin saves the
        case's histogram for the report's figure there); `progress(drawn, target)` is told after
        each fold of a group's draw (the API's progress bar)."""
        case_columns, repro_samples = {}, None
        if isinstance(param, Group):
            runner = self.runner_for(param)
            if progress is not None:
                runner.progress = progress
            result = runner.run(check)
            case_columns = runner.case_columns()
            if self.run_config.case_budget_s is not None:
                repro_samples = runner.samples_for_repro or self.run_config.n(1, param.device, param.case)
            if result.verdict == "fail" and on_failure is not None:
                on_failure(param, runner)
        else:
            result = CandidateRunner(param.candidate, param.dtype, param.device,
                                     self.run_config).run(check)
        row = row_skeleton(param, check) | result.as_row() | case_columns
        row["worker"] = worker
        row["profile"] = self.run_config.profile
        repro = self.repro.line(param.candidate, getattr(param, "case", None), param.dtype,
                                param.device, check, repro_samples, getattr(param, "layout", None))
        xf = first_match(self.xfails, f"{check}[{param.id}]", result.mechanism or None)
        allowed = None
        if result.verdict in ("fail", "error"):
            row["repro"] = repro
            if xf is not None:
                row["verdict"] = "xfail"
                row["xfail_cause"] = xf.cause
            elif result.verdict == "fail":  # an error is the harness's: nothing rated it
                allowed = allowed_reason(result.level, self.options.fail_on)
        return CheckOutcome(row, result.verdict, f"{check} [{param.id}]: {result.message}", repro,
                            xf if result.verdict in ("fail", "error") else None, allowed)

    def skip_row(self, param, check: str, reason: str) -> dict:
        """The row of a test skipped before it ran (an unsupported dtype, device or case)."""
        return row_skeleton(param, check) | {"verdict": "skip", "message": str(reason)[:300]}
