"""Run the checks of one (candidate, case, dtype, device) without pytest: the two-stage CaseRunner.

`CaseRunner` owns the Summaries of one case (one per stage, generated once and shared by every
check), the two-stage error control of the statistical checks, and the time accounting: each
Result carries the candidate time and harness time it caused, so the columns add up over a run.

    from harness.runner import RunConfig, CaseRunner
    runner = CaseRunner(resolve("torch"), case_by_id("abs-bounds-trap"), torch.bfloat16, "cpu",
                        RunConfig(profile="pr"))
    results = [runner.run(check) for check in runner.check_names()]
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property

import torch

from record.leases import LeaseHeld, lease
from reference.dtypes import dtype_name

from .. import error_control
from ..cases import PROFILES, STAGE2_FACTOR
from ..checks import CHECKS, Check
from ..checks.hard import failed_draw
from ..declaration import GroupFacts, case_law
from ..diagnosis import (DEFAULT_THRESHOLDS, OWN_STAGE_FAMILIES, HarmThresholds, annotate,
                         annotate_failure, level_at)
from ..engine import (CandidateFailure, caught_warnings, chunk_elements_for, fold_order,
                      normal_throughput, run_engine)
from ..families.localized import spike_watch
from ..result import Result
from ..seeds import DEFAULT_RUN_SEED, derive_seed

#: A call may take this many times what ``normal_`` takes to fill the same tensor (its shape and
#: dtype, on its device), where that is longer than --case-timeout: a big tensor, a slow device,
#: a dtype torch fills slowly (float64 on a CPU: ~6x float32).
NORMAL_CALLS = 30


@dataclass(frozen=True)
class RunConfig:
    profile: str = "pr"
    samples: int | None = None  # overrides the profile's n
    run_seed: int = DEFAULT_RUN_SEED
    bounds: str = "rounded"  # or "strict"
    case_timeout: float = 4.0  # seconds one call may take, at least (`call_timeout`)
    alpha_suspect: float = 1e-3
    alpha_fail: float = 9e-4  # with alpha_suspect, a per-check rate of 1e-6 (harness.error_control)
    chunk_elements: int | None = None  # elements folded at a time; None: by device (the engine's)
    # Seconds of the candidate's own time one case's stage-1 draw may take (None: no limit); a
    # draw stopped by it records its n, and stage 2 draws STAGE2_FACTOR times that n.
    case_budget_s: float | None = None
    inflight_dir: str | None = None  # where a draw holds its lease while it runs (record.leases)
    # How far each effect figure may go before a failure is harmful (`harness.diagnosis`'s
    # HarmThresholds; --harm-thresholds).
    harm_thresholds: HarmThresholds = DEFAULT_THRESHOLDS

    def call_timeout(self, case, dtype: torch.dtype, device="cpu") -> float:
        """Seconds one call on `case`'s tensor may take (its first call, by the candidate's own
        pace, up to SLOW_CALL_FACTOR times that: `harness.engine.Pace`): `case_timeout`, or
        NORMAL_CALLS times what ``normal_`` takes to fill a tensor of the case's shape in `dtype`
        on `device`, on this machine, where that is longer. At pr on 2 cores the floor holds for
        every case but float64 at 2^24 elements (``normal_`` ~0.33 s: ~10 s, where the exact
        sampler takes 12-14 s a call), so a call that never returns costs 12 s, 30 s there."""
        numel = max(1, math.prod(case.shape))
        rate = normal_throughput(tuple(case.shape), dtype, device)
        yardstick = NORMAL_CALLS * numel / rate if rate > 0 else 0.0
        return max(self.case_timeout, yardstick)

    def n(self, stage: int, device: str = "cpu", case=None) -> int:
        """The n asked for (an explicit budget may stop stage 1 earlier; see
        CaseRunner.n_requested): the profile's for `case` and `device`, or --samples."""
        if self.samples:
            return self.samples * (STAGE2_FACTOR if stage == 2 else 1)
        return PROFILES[self.profile].stage_samples(stage, device, case)


@dataclass(frozen=True)
class DrawRequest:
    """What one stage's draw asks for: the same rules make it for a plain and a sharded group;
    only how it is drawn differs (`CaseRunner.draw`)."""

    stage: int
    n: int
    seed: int
    call_timeout: float
    chunk_elements: int
    min_calls: int
    time_budget: float | None
    watch: tuple | None


class CaseRunner:
    """One group's checks on one draw per stage. ``verdicts_only``: rows are not annotated (no
    level, severity or mechanism; `harness.diagnosis` never changes a verdict), for callers that
    read the verdict alone (a shrink's probes): the mechanism catalog costs a failing group more
    than its draw on some laws."""

    def __init__(self, candidate, case, dtype: torch.dtype, device: str, config: RunConfig, *,
                 verdicts_only: bool = False):
        self.candidate = candidate
        self.verdicts_only = verdicts_only
        self.case = case
        self.dtype = dtype
        self.device = str(device)
        self.config = config
        self.facts = GroupFacts(case, dtype, self.device, config)
        self._summaries: dict = {}
        self._uncharged: dict = {}  # stage -> (candidate_s, engine_s) not yet put on a Result
        self._read: set = set()  # the stages the running check read
        self._first_outcomes: dict = {}  # check name -> its stage-1 Outcome (two-stage checks)
        self._stage2_reason: str | None = None  # stage2_reason, once computed
        self.warnings: list[str] = []
        self.progress = None  # progress(drawn, target) after each fold of a draw (harness.api)

    # -- pieces ------------------------------------------------------------------------------
    def seed(self, stage) -> int:
        return derive_seed(self.config.run_seed, self.candidate.spec, self.case.id,
                           dtype_name(self.dtype), self.device, stage)

    @cached_property
    def law(self):
        """The case's rounded law, built on first use: the one its checks are told (`GroupFacts`)."""
        return case_law(self.case, self.dtype)

    def n_requested(self, stage: int) -> int:
        """Stage 1 asks for the configured n; stage 2 for STAGE2_FACTOR times what stage 1 drew
        when a budget stopped it (so `--samples <that n>` reproduces both stages), or when stage
        1 drew far more than n (a tensor of more elements than n: at least two calls of it),
        else for the configured stage-2 n (`Profile.stage_samples`)."""
        s1 = self.cached_summary(1)
        if stage == 2 and s1 is not None and (self.budget_limited
                                              or s1.n >= 2 * self.config.n(1, self.device, self.case)):
            return STAGE2_FACTOR * s1.n
        return self.config.n(stage, self.device, self.case)

    @property
    def budget_limited(self) -> bool:
        """Whether the budget stopped stage 1 short of the configured n."""
        s1 = self.cached_summary(1)
        return bool(s1 is not None and s1.notes.get("stopped_by_budget"))

    def case_columns(self) -> dict:
        """What every row of the case carries besides its check's result: the n asked for,
        whether the budget cut stage 1 short of it, the samples the group has drawn so far over
        both stages (`samples_drawn`: a later row of the group carries a larger figure, its last
        row the group's total), and the candidate's stage-1 throughput next to torch's
        ``normal_`` on the same tensor and device (`speed_vs_normal`: their ratio)."""
        drawn = [self.cached_summary(stage) for stage in (1, 2)]
        cols = {"n_target": self.config.n(1, self.device, self.case),
                "budget_limited": self.budget_limited,
                "samples_drawn": sum(s.n for s in drawn if s is not None)}
        s1 = self.cached_summary(1)
        if s1 is not None and s1.n and s1.candidate_s > 0:
            rate = s1.n / s1.candidate_s
            reference = normal_throughput(tuple(self.case.shape), self.dtype, self.device)
            cols.update(samples_per_s=rate, normal_samples_per_s=reference,
                        speed_vs_normal=rate / reference if reference > 0 else math.nan)
        return cols

    @property
    def samples_for_repro(self) -> int | None:
        """The `--samples` a reproduce line needs: stage 1's n when the budget cut it."""
        return self.cached_summary(1).n if self.budget_limited else None

    def lease_case_name(self) -> str:
        """The case's part of the key of the leases this runner's draws and checks hold
        (`inflight_marker`): the case id. A runner of another layout of the case names its layout
        too (harness.sharded.dtensor_runner), so the layouts of one case never share a lease."""
        return self.case.id

    def _inflight_marker(self, stage):
        return inflight_marker(self.config, self.candidate, self.lease_case_name(), self.dtype,
                               self.device, stage)

    def summary(self, stage: int):
        """The stage's Summary, or the CandidateFailure that stopped it (both cached). The check
        that reads a stage first is charged its draw (`_charge`)."""
        self._read.add(stage)
        if stage in self._summaries:
            return self._summaries[stage]
        marker = self._inflight_marker(stage)
        try:
            with lease(marker), caught_warnings() as heard:
                s, cost = self._draw(stage)
            self.warnings += [text for text in heard.lines() if text not in self.warnings]
        except LeaseHeld as held:
            s, cost = failure_from_lease(held, f"stage {stage}"), (0.0, 0.0)
        self._summaries[stage] = s
        self._uncharged[stage] = cost
        return s

    def watch_list(self) -> tuple:
        """Mass bins whose exact values stage 2 tallies: those stage 1 found most over-represented
        (`spikes`' stage 2 judges each value there against its own mass). A function of stage 1's
        Summary alone, whichever check asks for stage 2 first, so all checks share one draw."""
        s1 = self._summaries.get(1)
        if s1 is None or isinstance(s1, CandidateFailure):
            return ()
        return spike_watch(s1, self.law)

    def draw_request(self, stage: int) -> DrawRequest:
        """What the stage's draw asks for, by the same rules for a plain and a sharded group."""
        return DrawRequest(stage=stage, n=self.n_requested(stage), seed=self.seed(stage),
                           call_timeout=self.config.call_timeout(self.case, self.dtype,
                                                                 self.device),
                           chunk_elements=(self.config.chunk_elements
                                           or chunk_elements_for(self.device)),
                           min_calls=PROFILES[self.config.profile].min_calls,
                           time_budget=self.config.case_budget_s if stage == 1 else None,
                           watch=self.watch_list() if stage == 2 else None)

    def draw(self, request: DrawRequest):
        """One stage's Summary, drawn by the engine in this process; raises CandidateFailure.
        A runner of another layout overrides it and `lease_case_name` (harness.sharded.dtensor_runner)."""
        return run_engine(self.candidate, self.case, self.dtype, self.device, self.law,
                          request.n, request.seed, families=self.stage_families(request.stage),
                          call_timeout=request.call_timeout,
                          chunk_elements=request.chunk_elements, min_calls=request.min_calls,
                          time_budget=request.time_budget, watch=request.watch,
                          progress=self.progress)

    def _draw(self, stage: int):
        """One stage's draw -> (Summary or CandidateFailure, (candidate_s, engine_s))."""
        try:
            s = self.draw(self.draw_request(stage))
        except CandidateFailure as failure:
            partial = failure.summary
            spent = (partial.candidate_s if partial is not None
                     else getattr(failure, "candidate_s", 0.0))
            return failure, (spent, 0.0)
        return s, (s.candidate_s, s.engine_s)

    def cached_summary(self, stage: int):
        """The stage's Summary if it was generated and completed, else None (generates nothing)."""
        s = self._summaries.get(stage)
        if isinstance(s, CandidateFailure):
            return s.summary
        return s

    def _charge(self, result: Result, stages: tuple, t0: float) -> Result:
        """Put the candidate and harness time this check caused on its Result: the draws of the
        stages it used first (each draw is charged once, to the first check that reads it), plus
        the candidate's own calls of an API check (already on the Result)."""
        cand, eng = result.candidate_s, 0.0
        for stage in stages:
            c, e = self._uncharged.pop(stage, (0.0, 0.0))
            cand, eng = cand + c, eng + e
        result.candidate_s = cand
        result.harness_s = eng + max(0.0, time.perf_counter() - t0 - cand - eng)
        return result

    # -- checks ------------------------------------------------------------------------------
    #: Whether the group is a sharded parameter (`harness.sharded.dtensor_runner.ShardedCaseRunner`).
    sharded = False

    def checks(self) -> tuple:
        """The checks of this group (`harness.checks.CHECKS`, by the group's kind)."""
        return CHECKS.for_group(shaped=bool(getattr(self.case, "shape_class", "")),
                                path=getattr(self.candidate, "path", "eager"),
                                sharded=self.sharded)

    def families(self) -> tuple:
        """The statistic families the engine folds for this group: those its checks read."""
        return fold_order(f for c in self.checks() for f in c.families)

    def stage_families(self, stage: int) -> tuple:
        """The families a stage's draw folds: at stage 1 every family the group's checks read; at
        stage 2 the same but the diagnosis's OWN_STAGE_FAMILIES (independence, repetition,
        position) none of whose checks is `suspect`: no check reads them at stage 2, and the
        diagnosis reads their stage-1 state (`harness.diagnosis.evidence.Evidence.holder`). They
        cost most of a stage-2 fold (every element's lag products, row and window hashes).
        (A sharded group's ranks fold every family at both stages.)"""
        families = self.families()
        if stage != 2:
            return families
        wanted = {f.name for c in self.suspects() for f in fold_order(c.families)}
        return tuple(f for f in families
                     if f.name not in OWN_STAGE_FAMILIES or f.name in wanted)

    def suspects(self) -> tuple:
        """The group's two-stage checks that stage 1 leaves suspect (p < alpha_suspect, neither
        decided nor inapplicable), or whose stage-1 outcome raised (its own row reports that)."""
        out = []
        for check in self.checks():
            if check.outcome is None:
                continue
            try:
                o1 = self.first_outcome(check.name, check.outcome)
            except Exception:
                out.append(check)
                continue
            if o1.applicable and not o1.decisive and o1.p_value < self.config.alpha_suspect:
                out.append(check)
        return tuple(out)

    def first_outcome(self, check: str, fn):
        """`check`'s outcome on the stage-1 Summary at the group's level (computed once: the
        check's row and `suspects` read it)."""
        if check not in self._first_outcomes:
            self._first_outcomes[check] = fn(self.summary(1), self.law, alpha=self.alpha_fail)
        return self._first_outcomes[check]

    def check_names(self) -> tuple:
        return tuple(c.name for c in self.checks())

    def run(self, check: str | Check) -> Result:
        """Run one check of the group -> its Result (a harness defect is an `error` Result)."""
        check = CHECKS[check] if isinstance(check, str) else check
        t0 = time.perf_counter()
        self._read = set()
        try:
            with on_device(self.device):
                result = self.run_body(check)
        except Exception as exc:  # a harness defect or a law the reference cannot price
            result = Result(check.name, "error", f"{type(exc).__name__}: {exc}"[:400])
        if not self.verdicts_only:
            result = self.annotated(check, result)
        result.seed = result.seed if result.seed is not None else self.seed(1)
        if self.warnings:
            result.details.setdefault("warnings", "; ".join(self.warnings)[:300])
        return self._charge(result, sorted(self._read), t0)

    def annotated(self, check: Check, result: Result) -> Result:
        """`result` with what its failure means (`harness.diagnosis`): from the Summary of the
        stage that decided it (stage 2 where it ran), or, where a stage it read did not complete
        or it read none (an API check), from the row alone. A defect of the diagnosis never
        costs the row its verdict: it is noted in the row's details."""
        summaries = [self._summaries.get(stage) for stage in sorted(self._read)]
        deciding = self._summaries.get(2 if result.n_stage2 else 1)
        first = self._summaries.get(1) if result.n_stage2 else None
        try:
            if (check.kind == "api" or not summaries or deciding is None
                    or any(isinstance(s, CandidateFailure) for s in summaries + [deciding])):
                return annotate_failure(result)
            return annotate(result, deciding, self.law, first, self.config.harm_thresholds,
                            candidate=self.candidate.spec,
                            n=deciding.n if result.n_stage2 and result.n != result.n_stage2 else None)
        except Exception as exc:
            result.details["diagnosis"] = f"{type(exc).__name__}: {exc}"[:200]
            return annotate_failure(result)

    def run_body(self, check: Check) -> Result:
        """The check's body (`harness.declaration.Check`), run here: the checks are told the
        group's facts and never call back into the runner."""
        if check.outcome is not None:
            return self.two_stage(check.name, check.outcome)
        if check.call is not None:
            return self.called(check)
        return self.on_draw(check.name, check.judge, check.judges_failures)

    def failed(self, check: str, failure: CandidateFailure, stage: int) -> Result:
        """The Result of `check` when the stage's draw did not complete."""
        return failed_draw(check, failure, stage, self.case, self.dtype, self.device)

    def on_draw(self, check: str, judge, failures: bool = False) -> Result:
        """`judge(facts, summary) -> Result` on the stage-1 Summary; a failed draw is the
        Result (`failures`: the judge is given the failure instead)."""
        s1 = self.summary(1)
        if isinstance(s1, CandidateFailure):
            return judge(self.facts, s1) if failures else self.failed(check, s1, 1)
        result = judge(self.facts, s1)
        result.n_stage1 = result.n
        return result

    def called(self, check: Check) -> Result:
        """An API check's call of the candidate, within ``--case-timeout`` (capped), under the
        group's crash guard (`guarded`)."""
        timeout = min(self.config.case_timeout, check.timeout_cap)
        seed = self.seed(check.name)
        return self.guarded(check.name,
                            lambda: check.call(self.candidate, self.facts, seed, timeout))

    def guarded(self, check: str, call) -> Result:
        """An API check's `call() -> Result`, holding the group's lease (a call that kills the
        process is then found by the next attempt: `crash_guarded`). Not run when the case's draw
        already waited out the deadline: every probe would too."""
        s1 = self._summaries.get(1)
        if isinstance(s1, CandidateFailure) and s1.kind == "hang":
            return Result(check, "fail", f"not run: the candidate does not return on "
                          f"{self.case.id} ({s1}); {check} needs calls that return")
        return crash_guarded(self._inflight_marker(check), check, call)

    @property
    def alpha_fail(self) -> float:
        """The stage-2 level: the run's, or the case's own where a family of cases holds a
        stated family-wise rate (the explorer's, `harness.explore`)."""
        own = getattr(self.case, "alpha_fail", None)
        return own if own is not None else self.config.alpha_fail

    @property
    def alpha_decide(self) -> float:
        """The stage-1 p-value below which a check fails without stage 2
        (`harness.error_control.alpha_decide` of the group's levels)."""
        return error_control.alpha_decide(self.config.alpha_suspect, self.alpha_fail)

    def stage2_reason(self) -> str:
        """Why the group draws stage 2, the same for all its checks (computed once, before any
        of them needs it): ``verdict`` where a check's stage-1 p-value is suspect but does not
        decide (alpha_decide <= p1 < alpha_suspect) or its stage-1 outcome raised; ``level``
        where every suspect check failed at stage 1 alone but one of them would be undetermined
        at stage 1's n (the level needs the larger n); '' where stage 2 changes no answer."""
        if self._stage2_reason is None:
            self._stage2_reason = self._why_stage2()
        return self._stage2_reason

    def _why_stage2(self) -> str:
        decided = []
        for check in self.suspects():
            try:
                o1 = self.first_outcome(check.name, check.outcome)
            except Exception:
                return "verdict"
            if o1.p_value >= self.alpha_decide:
                return "verdict"
            decided.append(check.name)
        s1 = self.cached_summary(1)
        if not decided or s1 is None:
            return ""
        thresholds = self.config.harm_thresholds
        if any(level_at(name, s1, self.law, thresholds) == "undetermined" for name in decided):
            return "level"
        return ""

    def two_stage(self, check: str, fn) -> Result:
        """A statistical check `fn(summary, law, *, alpha) -> Outcome` through the two stages
        (`harness.error_control`): stage 1 passes at p >= alpha_suspect and fails at p <
        alpha_decide; between them stage 2 draws its n (`n_requested`) from another seed and
        decides at alpha_fail. Not applicable: skip; decisive: fail. A check stage 1 decided
        still reads stage 2 where the group draws it (`stage2_reason`): its level and mechanism
        come from the larger n, its verdict and p-value from stage 1."""
        s1 = self.summary(1)
        if isinstance(s1, CandidateFailure):
            return self.failed(check, s1, 1)
        cfg = self.config
        alpha_fail = self.alpha_fail
        o1 = self.first_outcome(check, fn)
        base = dict(statistic=o1.statistic, p_value=o1.p_value, p_value_stage1=o1.p_value,
                    n=s1.n, n_stage1=s1.n, seed=self.seed(1), effect=o1.effect,
                    effect_unit=o1.effect_unit, mde=o1.mde, alpha_suspect=cfg.alpha_suspect,
                    alpha_fail=alpha_fail, details=dict(o1.details))
        if not o1.applicable:
            return Result(check, "skip", o1.message or "not applicable to this law", **base)
        if o1.decisive:
            return Result(check, "fail", o1.message + " (impossible under the law)", **base)
        if o1.p_value >= cfg.alpha_suspect:
            return Result(check, "pass", o1.message, **base)

        reason = self.stage2_reason()
        if o1.p_value < self.alpha_decide:
            prefix = (f"stage 1 p={o1.p_value:.3g} at n={s1.n} decides "
                      f"(< {self.alpha_decide:.3g}): ")
            result = Result(check, "fail", prefix + o1.message, **base)
            if reason:
                s2 = self.summary(2)
                if not isinstance(s2, CandidateFailure):
                    result.n_stage2, result.seed_stage2 = s2.n, self.seed(2)
                    result.stage2_reason = reason
            return result

        s2 = self.summary(2)
        if isinstance(s2, CandidateFailure):
            return self.failed(check, s2, 2)
        o2 = fn(s2, self.law, alpha=alpha_fail)
        base.update(statistic=o2.statistic, p_value=o2.p_value, p_value_stage2=o2.p_value,
                    n=s2.n, n_stage2=s2.n, seed_stage2=self.seed(2), effect=o2.effect,
                    effect_unit=o2.effect_unit, mde=o2.mde)
        base["details"].update(o2.details)
        verdict = "fail" if (o2.decisive or o2.p_value < alpha_fail) else "pass"
        prefix = (f"stage 1 p={o1.p_value:.3g} at n={s1.n}; stage 2 p={o2.p_value:.3g} at n={s2.n}: ")
        return Result(check, verdict, prefix + o2.message, stage2_reason="verdict", **base)


def failure_from_lease(held: LeaseHeld, what: str) -> CandidateFailure:
    """A lease someone else holds: a crash when its holder is proven dead, else a split group."""
    who = held.holder.describe() if held.holder is not None else "an unknown process"
    if held.crashed:
        return CandidateFailure("crashed", f"{who} ended while calling the candidate for {what} "
                                f"(os._exit, a signal or a fatal error inside the candidate)")
    where = "is drawing it right now" if held.alive else "holds it (liveness unknown)"
    return CandidateFailure("split", f"case group split across workers: {who} {where} ({what}); "
                            f"the checks of one case must run on one worker and share one draw. "
                            f"A scheduling defect, not a candidate failure")


@contextmanager
def on_device(device):
    """Make a CUDA case's device the current one while its checks run: a candidate that
    allocates on "cuda" (the current device) must land where the case's tensor is, whichever
    device the worker is pinned to."""
    device = torch.device(device)
    if device.type != "cuda" or not torch.cuda.is_available():
        yield
        return
    with torch.cuda.device(device):
        yield


def inflight_marker(config: RunConfig, candidate, case_id: str, dtype, device, what):
    """The lease file held while the candidate is called for (case, dtype, device, what).

    One left behind by a dead holder means an earlier attempt killed its process (os._exit, a
    segfault): xdist replaces the worker, and the next test of the case finds the lease instead of
    crashing again, so one crashing case costs one worker, not one per check. One held by a live
    process is not a crash (see record.leases)."""
    if not config.inflight_dir:
        return None
    import hashlib
    import pathlib

    key = f"{candidate.spec}|{case_id}|{dtype_name(dtype)}|{device}|{what}"
    name = hashlib.blake2b(key.encode(), digest_size=10).hexdigest()
    return pathlib.Path(config.inflight_dir) / f"{name}.inflight"


def crash_guarded(marker, check: str, call) -> Result:
    """Run `call` holding the lease; one held by someone else becomes an `error` Result."""
    try:
        with lease(marker):
            return call()
    except LeaseHeld as held:
        failure = failure_from_lease(held, check)
        prefix = "candidate crashed: " if failure.kind == "crashed" else ""
        return Result(check, "error", prefix + str(failure))


class RunnerCache:
    """Keeps the CaseRunners of the last few cases of a worker (Summaries hold ~8 MB each)."""

    def __init__(self, size: int = 4):
        self.size = size
        self._runners: OrderedDict = OrderedDict()

    def get(self, candidate, case, dtype, device, config: RunConfig, *layout) -> CaseRunner:
        """The runner of this group, built on first use; `layout`: what a cache of another
        kind of group needs besides (harness.sharded.dtensor_runner.ShardedRunnerCache)."""
        key = (candidate.spec, case.id, dtype_name(dtype), str(device), config, *layout)
        runner = self._runners.pop(key, None)
        if runner is None:
            runner = self.build(candidate, case, dtype, device, config, *layout)
        self._runners[key] = runner
        while len(self._runners) > self.size:
            self._runners.popitem(last=False)
        return runner

    def build(self, candidate, case, dtype, device, config: RunConfig) -> CaseRunner:
        return CaseRunner(candidate, case, dtype, device, config)


class CandidateRunner:
    """The runner of a candidate-scope group (candidate, dtype, device; no case): the context of
    the checks of the candidate's API that no case owns (`arguments`)."""

    sharded = False

    def __init__(self, candidate, dtype: torch.dtype, device: str, config: RunConfig):
        self.candidate = candidate
        self.dtype = dtype
        self.device = str(device)
        self.config = config
        self.facts = GroupFacts(None, dtype, self.device, config)

    def seed(self, what) -> int:
        return derive_seed(self.config.run_seed, self.candidate.spec, "api",
                           dtype_name(self.dtype), self.device, what)

    def checks(self) -> tuple:
        return CHECKS.for_kind("candidate")

    def guarded(self, check: str, call) -> Result:
        marker = inflight_marker(self.config, self.candidate, "api", self.dtype, self.device, check)
        return crash_guarded(marker, check, call)

    def called(self, check: Check, seed: int) -> Result:
        """The check's call of the candidate with `seed` (`CaseRunner.called`), under the crash
        guard."""
        timeout = min(self.config.case_timeout, check.timeout_cap)
        return self.guarded(check.name,
                            lambda: check.call(self.candidate, self.facts, seed, timeout))

    def run(self, check: str | Check) -> Result:
        check = CHECKS[check] if isinstance(check, str) else check
        if not check.applies_to("candidate"):
            raise KeyError(f"{check.name!r} is not a check of the candidate alone")
        t0 = time.perf_counter()
        seed = self.seed(check.name)
        try:
            with on_device(self.device):
                result = self.called(check, seed)
        except Exception as exc:
            result = Result(check.name, "error", f"{type(exc).__name__}: {exc}"[:400])
        result = annotate_failure(result)
        result.seed = seed
        result.harness_s = max(0.0, time.perf_counter() - t0 - result.candidate_s)
        return result
