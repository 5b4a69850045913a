"""Run the checks of one (candidate, case, dtype, device) without pytest.

`CaseRunner` owns the Summaries of one case (one per stage, generated once and shared by every
check), the two-stage error control of the statistical checks, and the time accounting: each
Result carries the candidate time and harness time it caused, so the columns add up over a run.

    from harness.run import RunConfig, CaseRunner
    runner = CaseRunner(resolve("torch"), case_by_id("abs-bounds-trap"), torch.bfloat16, "cpu",
                        RunConfig(profile="pr"))
    results = [runner.run(check) for check in runner.check_names()]
"""

from __future__ import annotations

import time
import warnings
from collections import OrderedDict
from contextlib import contextmanager
from dataclasses import dataclass

import torch

from .cases import PROFILES, STAGE2_FACTOR
from .checks import (CANDIDATE_API_CHECKS, CASE_API_CHECKS, STATISTICAL_CHECKS, SUMMARY_CHECKS,
                     check_arguments, check_bounds, check_contract, check_finite, check_generator,
                     check_written)
from .engine import CandidateFailure, run_engine
from .result import Result
from .seeds import DEFAULT_RUN_SEED, derive_seed

CASE_CHECKS = SUMMARY_CHECKS + ("hang",) + CASE_API_CHECKS


@dataclass(frozen=True)
class RunConfig:
    profile: str = "pr"
    samples: int | None = None  # overrides the profile's n
    run_seed: int = DEFAULT_RUN_SEED
    bounds: str = "rounded"  # or "strict"
    case_timeout: float = 20.0  # seconds one candidate call may take
    alpha_suspect: float = 1e-3
    alpha_fail: float = 1e-3
    chunk_elements: int = 1 << 22
    case_budget_s: float | None = None  # wall-clock seconds for one case's stage-1 draw (--budget-seconds)
    inflight_dir: str | None = None  # where a draw leaves a marker while it runs (crash detection)

    def n(self, stage: int, device: str = "cpu") -> int:
        base = self.samples if self.samples else PROFILES[self.profile].samples(device)
        return base * (STAGE2_FACTOR if stage == 2 else 1)


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def all_check_names() -> tuple:
    return CASE_CHECKS + tuple(STATISTICAL_CHECKS)


class CaseRunner:
    def __init__(self, candidate, case, dtype: torch.dtype, device: str, config: RunConfig):
        self.candidate = candidate
        self.case = case
        self.dtype = dtype
        self.device = str(device)
        self.config = config
        self._law = None
        self._summaries: dict = {}
        self._uncharged: dict = {}  # stage -> (candidate_s, engine_s) not yet put on a Result
        self.warnings: list[str] = []

    # -- pieces ------------------------------------------------------------------------------
    def seed(self, stage) -> int:
        return derive_seed(self.config.run_seed, self.candidate.spec, self.case.id,
                           dtype_name(self.dtype), self.device, stage)

    @property
    def law(self):
        if self._law is None:
            from reference import TruncatedNormal, rounded_law

            c = self.case
            self._law = rounded_law(TruncatedNormal(c.mean, c.std, c.a, c.b), self.dtype)
        return self._law

    def _budget(self, stage: int) -> float | None:
        budget = self.config.case_budget_s
        return None if budget is None else budget * (STAGE2_FACTOR if stage == 2 else 1)

    def _inflight_marker(self, stage):
        return inflight_marker(self.config, self.candidate, self.case.id, self.dtype, self.device,
                               stage)

    def summary(self, stage: int):
        """The stage's Summary, or the CandidateFailure that stopped it (both cached)."""
        if stage in self._summaries:
            return self._summaries[stage]
        marker = self._inflight_marker(stage)
        if marker is not None and marker.exists():
            s, cost = CandidateFailure("crashed", CRASHED), (0.0, 0.0)
        else:
            with inflight(marker), warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                s, cost = self._draw(stage)
            for w in caught:
                text = f"{w.category.__name__}: {w.message}"
                if text not in self.warnings:
                    self.warnings.append(text)
        self._summaries[stage] = s
        self._uncharged[stage] = cost
        return s

    def watch_list(self) -> tuple:
        """Mass bins whose exact values stage 2 tallies: those stage 1 found most over-represented
        (`spikes`' stage 2 judges each value there against its own mass). A function of stage 1's
        Summary alone, whichever check asks for stage 2 first, so all checks share one draw."""
        s1 = self._summaries.get(1)
        if "spikes" not in STATISTICAL_CHECKS or s1 is None or isinstance(s1, CandidateFailure):
            return ()
        from .checks.stat_local import spike_watch

        return spike_watch(s1, self.law)

    def _draw(self, stage: int):
        """Run the engine for one stage -> (Summary or CandidateFailure, (candidate_s, engine_s))."""
        try:
            s = run_engine(self.candidate, self.case, self.dtype, self.device, self.law,
                           self.config.n(stage, self.device), self.seed(stage),
                           call_timeout=self.config.case_timeout,
                           chunk_elements=self.config.chunk_elements,
                           min_calls=PROFILES[self.config.profile].min_calls,
                           time_budget=self._budget(stage),
                           watch=self.watch_list() if stage == 2 else None)
            return s, (s.candidate_s, s.engine_s)
        except CandidateFailure as failure:
            partial = failure.summary
            return failure, ((partial.candidate_s, 0.0) if partial is not None else (0.0, 0.0))

    def cached_summary(self, stage: int):
        """The stage's Summary if it was generated and completed, else None (generates nothing)."""
        s = self._summaries.get(stage)
        if isinstance(s, CandidateFailure):
            return s.summary
        return s

    def _charge(self, result: Result, stages: tuple, t0: float) -> Result:
        cand = eng = 0.0
        for stage in stages:
            c, e = self._uncharged.pop(stage, (0.0, 0.0))
            cand, eng = cand + c, eng + e
        result.candidate_s = cand
        result.harness_s = eng + max(0.0, time.perf_counter() - t0 - cand - eng)
        return result

    # -- checks ------------------------------------------------------------------------------
    def check_names(self) -> tuple:
        return CASE_CHECKS + tuple(STATISTICAL_CHECKS)

    def run(self, check: str) -> Result:
        t0 = time.perf_counter()
        try:
            with on_device(self.device):
                result, stages = self._run(check)
        except Exception as exc:  # a harness defect or a law the reference cannot price
            result, stages = Result(check, "error", f"{type(exc).__name__}: {exc}"[:400]), (1,)
        result.seed = result.seed if result.seed is not None else self.seed(1)
        if self.warnings:
            result.details.setdefault("warnings", "; ".join(self.warnings)[:300])
        return self._charge(result, stages, t0)

    def _failed_run(self, check: str, failure: CandidateFailure, stage: int) -> Result:
        n = failure.summary.n if failure.summary is not None else 0
        verdict = "error" if failure.kind == "crashed" else "fail"
        return Result(check, verdict, f"candidate {failure.kind} on {self.case.id} "
                      f"({dtype_name(self.dtype)}, {self.device}), stage {stage}: {failure}",
                      n=n, n_stage1=n)

    def _run(self, check: str):
        cfg = self.config
        case = self.case
        if check in CASE_API_CHECKS:
            timeout = min(cfg.case_timeout, 30.0)
            if check == "contract":
                def call():
                    return check_contract(self.candidate, case, self.dtype, self.device,
                                          self.seed("contract"), timeout)
            else:
                collision = float(self.law.collision_prob)

                def call():
                    return check_generator(self.candidate, case, self.dtype, self.device,
                                           self.seed("generator"), timeout, collision)
            return crash_guarded(self._inflight_marker(check), check, call), ()

        s1 = self.summary(1)
        if check == "hang":
            if isinstance(s1, CandidateFailure) and s1.kind in ("hang", "crashed"):
                return self._failed_run(check, s1, 1), (1,)
            if isinstance(s1, CandidateFailure):
                return Result("hang", "pass", "returned (with an error; see the other checks)"), (1,)
            return Result("hang", "pass", f"{s1.n_calls} calls, slowest within "
                          f"{cfg.case_timeout:g} s", n=s1.n, n_stage1=s1.n), (1,)
        if isinstance(s1, CandidateFailure):
            return self._failed_run(check, s1, 1), (1,)

        if check in SUMMARY_CHECKS:
            if check == "finite":
                r = check_finite(s1)
            elif check == "written":
                r = check_written(s1)
            else:
                r = check_bounds(s1, case.mean, case.std, strict=cfg.bounds == "strict")
            r.n_stage1 = r.n
            return r, (1,)
        if check in STATISTICAL_CHECKS:
            return self._two_stage(check, s1)
        raise KeyError(f"unknown check {check!r}")

    def _two_stage(self, check: str, s1):
        cfg = self.config
        fn = STATISTICAL_CHECKS[check]
        o1 = fn(s1, self.law, alpha=cfg.alpha_fail)
        base = dict(statistic=o1.statistic, p_value=o1.p_value, p_value_stage1=o1.p_value,
                    n=s1.n, n_stage1=s1.n, seed=self.seed(1), effect=o1.effect,
                    effect_unit=o1.effect_unit, mde=o1.mde, alpha_suspect=cfg.alpha_suspect,
                    alpha_fail=cfg.alpha_fail, details=dict(o1.details))
        if not o1.applicable:
            return Result(check, "skip", o1.message or "not applicable to this law", **base), (1,)
        if o1.decisive:
            return Result(check, "fail", o1.message + " (impossible under the law)", **base), (1,)
        if o1.p_value >= cfg.alpha_suspect:
            return Result(check, "pass", o1.message, **base), (1,)

        s2 = self.summary(2)
        if isinstance(s2, CandidateFailure):
            return self._failed_run(check, s2, 2), (1, 2)
        o2 = fn(s2, self.law, alpha=cfg.alpha_fail)
        base.update(statistic=o2.statistic, p_value=o2.p_value, p_value_stage2=o2.p_value,
                    n=s2.n, n_stage2=s2.n, seed_stage2=self.seed(2), effect=o2.effect,
                    effect_unit=o2.effect_unit, mde=o2.mde)
        base["details"].update(o2.details)
        verdict = "fail" if (o2.decisive or o2.p_value < cfg.alpha_fail) else "pass"
        prefix = (f"stage 1 p={o1.p_value:.3g} at n={s1.n}; stage 2 p={o2.p_value:.3g} at n={s2.n}: ")
        return Result(check, verdict, prefix + o2.message, **base), (1, 2)


CRASHED = ("an earlier attempt ended the worker process (os._exit, a signal or a fatal error "
           "inside the candidate)")


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
    """A file that exists while the candidate is being called for (case, dtype, device, what).

    One left behind means an earlier attempt killed its process (os._exit, a segfault): xdist
    replaces the worker, and the next test of the case finds the marker instead of crashing
    again, so one crashing case costs one worker, not one per check."""
    if not config.inflight_dir:
        return None
    import hashlib
    import pathlib

    key = f"{candidate.spec}|{case_id}|{dtype_name(dtype)}|{device}|{what}"
    name = hashlib.blake2b(key.encode(), digest_size=10).hexdigest()
    return pathlib.Path(config.inflight_dir) / f"{name}.inflight"


@contextmanager
def inflight(marker):
    """Keep the marker file in place while the enclosed candidate calls run (None: no marker)."""
    if marker is None:
        yield
        return
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.touch()
    try:
        yield
    finally:
        marker.unlink(missing_ok=True)


def crash_guarded(marker, check: str, call) -> Result:
    """Run `call` with the in-flight marker set; an existing marker becomes an `error` Result."""
    if marker is not None and marker.exists():
        return Result(check, "error", f"candidate crashed: {CRASHED}")
    with inflight(marker):
        return call()


class RunnerCache:
    """Keeps the CaseRunners of the last few cases of a worker (Summaries hold ~8 MB each)."""

    def __init__(self, size: int = 4):
        self.size = size
        self._runners: OrderedDict = OrderedDict()

    def get(self, candidate, case, dtype, device, config: RunConfig) -> CaseRunner:
        key = (candidate.spec, case.id, dtype_name(dtype), str(device), config)
        runner = self._runners.pop(key, None)
        if runner is None:
            runner = CaseRunner(candidate, case, dtype, device, config)
        self._runners[key] = runner
        while len(self._runners) > self.size:
            self._runners.popitem(last=False)
        return runner


def run_candidate_check(check: str, candidate, dtype: torch.dtype, device: str,
                        config: RunConfig) -> Result:
    """Checks of the candidate's API that no case owns (today: `arguments`)."""
    if check != "arguments":
        raise KeyError(f"unknown candidate-level check {check!r}")
    t0 = time.perf_counter()
    seed = derive_seed(config.run_seed, candidate.spec, "api", dtype_name(dtype), str(device), check)
    marker = inflight_marker(config, candidate, "api", dtype, device, check)
    try:
        with on_device(device):
            result = crash_guarded(marker, check, lambda: check_arguments(
                candidate, dtype, device, seed, min(config.case_timeout, 10.0)))
    except Exception as exc:
        result = Result(check, "error", f"{type(exc).__name__}: {exc}"[:400])
    result.seed = seed
    result.harness_s = time.perf_counter() - t0
    return result
