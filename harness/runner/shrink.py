"""Shrinking: where an explored case's failing region ends, parameter by parameter.

For a failing case at (mean, std, alpha, beta) and one parameter p at a time (the others held),
the candidate is judged again at an anchor, the textbook value of p (alpha -2, beta 2, std 1,
mean 0, kept inside alpha < beta); if the anchor passes, bisection between the failing value and
the anchor finds where the verdict changes, to `STEPS` halvings (alpha and beta on the log of the
window width beta - alpha where both are finite, std on log10 std, mean on asinh(mean)). If the
anchor fails too, p does not bound the region. Each probe is a whole group (every check of the
case but the API ones) at the run's profile and the explored case's own error level, its seeds
derived from the probe's own id, so a shrink is reproducible; the boundary is the midpoint of the
last failing and passing values, and its reproduce line names the failing side.

Each parameter of each failing case is one `ShrinkTask`; `run_tasks` runs them one after another
or over the run's workers (spawned processes), with the same boundaries either way.
"""

from __future__ import annotations

import math
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import asdict, dataclass, field

import torch

from reference.dtypes import DTYPES

from ..cases import Case, case_spec
from ..explore import bounds
from .case_runner import CaseRunner

PARAMETERS = ("alpha", "beta", "log_std", "mean")
ANCHORS = {"alpha": -2.0, "beta": 2.0, "log_std": 0.0, "mean": 0.0}
#: Halvings of the interval between a failing and a passing value.
STEPS = 10
#: Failing explored cases shrunk per (candidate, dtype, device), the first in explore order.
SHRINK_CASES = 2
#: Infinite bounds start their bisection from here (45 sigma: beyond any mass).
FAR = 45.0
SYMBOLS = {"alpha": "α", "beta": "β", "log_std": "log10 σ", "mean": "μ"}


@dataclass
class Boundary:
    case: str
    dtype: str
    parameter: str
    boundary: float
    failing: float
    passing: float
    direction: str  # ">=": fails for parameter >= boundary; "<=": fails for parameter <= boundary
    point: dict = field(default_factory=dict)
    line: str = ""
    repro: str = ""

    def as_dict(self) -> dict:
        return asdict(self)


def _point(case: Case) -> dict:
    return {"mean": case.mean, "std": case.std, "alpha": case.alpha, "beta": case.beta}


def probe_case(origin: Case, point: dict, tag: str) -> Case:
    """The case at `point` (mean, std, alpha, beta), shrinking `origin`: its own id and seeds."""
    a, b = bounds(point["mean"], point["std"], point["alpha"], point["beta"])
    case_id = f"{origin.id}.{tag}"
    return Case(case_id, point["mean"], point["std"], a, b, tuple(origin.shape), ("shrink",),
                f"shrinking {origin.id}", spec=case_spec(point["mean"], point["std"], a, b,
                                                          tuple(origin.shape), case_id),
                own_shape=True, alpha_fail=origin.alpha_fail)


def fails(candidate, case: Case, dtype, device, config) -> bool:
    """Whether any check but the API ones fails `case` (a group run from scratch; its rows
    are not annotated: only their verdicts are read)."""
    runner = CaseRunner(candidate, case, dtype, device, config, verdicts_only=True)
    for check in runner.checks():
        if check.kind == "api":
            continue
        if runner.run(check).verdict == "fail":
            return True
    return False


def _coordinates(param: str, point: dict):
    """(to scale, from scale) for bisecting `param` at `point`."""
    if param in ("alpha", "beta"):
        other = point["beta" if param == "alpha" else "alpha"]
        if math.isfinite(other):
            sign = -1.0 if param == "alpha" else 1.0  # alpha = beta - w, beta = alpha + w

            def to(v):
                return math.log(max(sign * (v - other), 1e-300))

            def back(t):
                return other + sign * math.exp(t)
            return to, back
        return (lambda v: max(-FAR, min(FAR, v))), (lambda t: t)
    if param == "log_std":
        return (lambda v: v), (lambda t: t)
    return math.asinh, math.sinh


def _get(point: dict, param: str) -> float:
    return math.log10(point["std"]) if param == "log_std" else point[param]


def _with(point: dict, param: str, value: float) -> dict:
    out = dict(point)
    if param == "log_std":
        out["std"] = 10.0 ** value
    else:
        out[param] = value
    return out


def _anchor(point: dict, param: str) -> float | None:
    """The textbook value of `param`, kept inside alpha < beta (None: no valid anchor)."""
    value = ANCHORS[param]
    if param == "alpha" and not value < point["beta"]:
        value = point["beta"] - 4.0 if math.isfinite(point["beta"]) else None
    if param == "beta" and not value > point["alpha"]:
        value = point["alpha"] + 4.0 if math.isfinite(point["alpha"]) else None
    return value


def shrink_parameter(case: Case, dtype_name: str, param: str, failing) -> Boundary | None:
    """The boundary of `case`'s failing region along `param` (None: it does not bound it);
    `failing(case) -> bool` judges a probe."""
    origin = _point(case)
    anchor = _anchor(origin, param)
    start = _get(origin, param)
    if anchor is None or anchor == start:
        return None
    if failing(probe_case(case, _with(origin, param, anchor), f"{param}-anchor")):
        return None  # fails at the textbook value too: this parameter does not bound it
    to, back = _coordinates(param, origin)
    fail_t, pass_t = to(start), to(anchor)
    for k in range(STEPS):
        mid = (fail_t + pass_t) / 2.0
        if failing(probe_case(case, _with(origin, param, back(mid)), f"{param}-{k}")):
            fail_t = mid
        else:
            pass_t = mid
    fail_v, pass_v = back(fail_t), back(pass_t)
    boundary = (fail_v + pass_v) / 2.0
    direction = ">=" if fail_v > pass_v else "<="
    failing_case = probe_case(case, _with(origin, param, fail_v), f"{param}-fail")
    return Boundary(case.id, dtype_name, param, boundary, fail_v, pass_v, direction, origin,
                    _line(param, direction, boundary, origin, dtype_name), failing_case.spec)


def shrink(case: Case, dtype_name: str, failing) -> list[Boundary]:
    """The boundaries of `case`'s failing region; `failing(case) -> bool` judges a probe."""
    found = (shrink_parameter(case, dtype_name, param, failing) for param in PARAMETERS)
    return [b for b in found if b is not None]


@dataclass(frozen=True)
class ShrinkTask:
    """One parameter of one failing case, for one candidate, dtype and device: a bisection whose
    probes depend on nothing else (their seeds come from their own ids), so tasks run in any
    order, in any process, with the same boundaries."""

    candidate: object  # candidates.Candidate (pickled by its spec)
    case: Case
    dtype_name: str
    device: str
    config: object  # RunConfig
    param: str


def run_task(task: ShrinkTask) -> Boundary | None:
    """Shrink one task here (also the pool's entry point)."""
    dtype = DTYPES[task.dtype_name]
    return shrink_parameter(task.case, task.dtype_name, task.param,
                            lambda c: fails(task.candidate, c, dtype, task.device, task.config))


def _pool_start(threads: int) -> None:
    torch.set_num_threads(threads)


def run_tasks(tasks: list, workers: int = 1) -> list:
    """Each task's Boundary, None, or a one-line reason it has none: here one after another
    (workers <= 1), or over `workers` spawned processes, so that shrinking uses the run's
    workers and a probe that crashes its process ends its tasks, not the run."""
    if workers <= 1 or len(tasks) <= 1:
        return [run_task(t) for t in tasks]
    n = min(workers, len(tasks))
    threads = max(1, (os.cpu_count() or 1) // n)
    out: list = [None] * len(tasks)
    with ProcessPoolExecutor(max_workers=n, mp_context=multiprocessing.get_context("spawn"),
                             initializer=_pool_start, initargs=(threads,)) as pool:
        futures = {pool.submit(run_task, t): i for i, t in enumerate(tasks)}
        for future in as_completed(futures):
            i = futures[future]
            try:
                out[i] = future.result()
            except BrokenProcessPool:
                out[i] = (f"not shrunk along {tasks[i].param}: a shrinking process died (the "
                          f"candidate crashed it, or it ran out of memory)")
            except Exception as exc:  # the probe's own error: the run's rows already hold it
                out[i] = f"not shrunk along {tasks[i].param}: {type(exc).__name__}: {exc}"
    return out


def _num(x: float) -> str:
    return "∞" if x == math.inf else "-∞" if x == -math.inf else f"{x:.4g}"


def _line(param: str, direction: str, boundary: float, point: dict, dtype_name: str) -> str:
    held = []
    for other in PARAMETERS:
        if other == param:
            continue
        if other == "log_std":
            held.append(f"σ = {_num(point['std'])}")
        else:
            held.append(f"{SYMBOLS[other]} = {_num(point[other])}")
    width = point["beta"] - point["alpha"]
    if param in ("alpha", "beta") and math.isfinite(width):
        held.insert(0, f"(β − α = {_num(width)} at the failing point)")
    sign = "≥" if direction == ">=" else "≤"
    return f"fails for {SYMBOLS[param]} {sign} {_num(boundary)} when {', '.join(held)} ({dtype_name})"
