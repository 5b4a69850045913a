"""Checks of a Summary that need no statistics: any violation is impossible under the law and fails
at once (`finite`, `written`, `bounds`; `inplace` on the shape axis), and `hang`, the verdict on
the draw itself. Each is declared here as a `harness.declaration.Check`."""

from __future__ import annotations

import math

import numpy as np

from reference.dtypes import dtype_name

from ..engine import SLOW_CALL_FACTOR, CandidateFailure
from ..result import Result
from ..summary import Summary
from ..declaration import SHAPE_AXIS, on_draw
from ..families import support


def _sigma(value: float, summary: Summary, mean: float, std: float) -> str:
    return f"{(value - mean) / std:+.4g} sigma"


def infinity_masses(law) -> tuple[float, float]:
    """(P(+inf), P(-inf)) under the rounded law: > 0 where the window reaches past the dtype's
    largest value."""
    p_pos, p_neg = (float(p) for p in law.atom_probs(np.array([np.inf, -np.inf])))
    return p_pos, p_neg


def not_finite(state, law) -> int:
    """The NaN and the infinite values of a support state that the law gives no mass."""
    p_pos, p_neg = infinity_masses(law)
    return (int(state.n_nan) + (int(state.n_posinf) if p_pos <= 0 else 0)
            + (int(state.n_neginf) if p_neg <= 0 else 0))


def check_finite(summary: Summary, law=None) -> Result:
    """No NaN, and no infinity the law does not give mass: a window beyond the dtype's largest
    value (float16 above 65504) rounds to +inf, which is then what a perfect sampler writes."""
    allowed = ""
    bad = summary.support.n_nonfinite
    if law is not None and (summary.support.n_posinf or summary.support.n_neginf):
        bad = not_finite(summary.support, law)
        exempt = summary.support.n_nonfinite - bad
        if exempt:
            p_pos, p_neg = infinity_masses(law)
            allowed = (f"; {exempt} infinite value(s) the law allows (P(+inf) {p_pos:.3g}, "
                       f"P(-inf) {p_neg:.3g}: the window reaches past the dtype's range; the "
                       f"statistical checks judge their count)")
    if bad:
        return Result("finite", "fail", f"{bad} of {summary.n} values are not finite "
                      f"(NaN {summary.support.n_nan}, +inf {summary.support.n_posinf}, -inf {summary.support.n_neginf})",
                      statistic=bad, p_value=0.0, n=summary.n)
    text = f"all {summary.n} written values finite" if not allowed else f"no NaN{allowed}"
    return Result("finite", "pass", text, statistic=0, p_value=1.0, n=summary.n)


def check_written(summary: Summary) -> Result:
    bad = summary.support.n_unwritten
    if bad:
        per_call = bad / max(summary.n_calls, 1)
        return Result("written", "fail", f"{bad} of {summary.n} elements never written "
                      f"({per_call:.4g} per call of {math.prod(summary.shape)} elements)",
                      statistic=bad, p_value=0.0, n=summary.n)
    return Result("written", "pass", "every element written on every call", statistic=0,
                  p_value=1.0, n=summary.n)


def check_bounds(summary: Summary, mean: float, std: float, strict: bool = False) -> Result:
    if strict:
        bad, worst, lo, hi, which = (summary.support.n_outside_strict, summary.support.worst_outside_strict,
                                     summary.a, summary.b, "[a, b]")
    else:
        bad, worst, lo, hi, which = (summary.support.n_outside_rounded, summary.support.worst_outside,
                                     summary.rn_a, summary.rn_b, "[RN(a), RN(b)]")
    if bad:
        return Result("bounds", "fail",
                      f"{bad} of {summary.n} values outside {which} = [{lo:.10g}, {hi:.10g}]; worst "
                      f"{worst:.10g} ({_sigma(worst, summary, mean, std)})",
                      statistic=bad, p_value=0.0, n=summary.n, effect=(worst - mean) / std,
                      effect_unit="sigma")
    return Result("bounds", "pass", f"all values inside {which}; min {summary.support.min:.10g}, "
                  f"max {summary.support.max:.10g}", statistic=0, p_value=1.0, n=summary.n)


def check_inplace(summary: Summary) -> Result:
    """The shape axis: every call wrote the tensor it was given, in place (it returned that very
    tensor) and nothing else (the rest of a view's base kept its poison)."""
    problems = []
    if summary.n_returned_other:
        problems.append(f"{summary.n_returned_other} of {summary.n_calls} calls returned something "
                        f"other than the tensor they were given")
    if summary.n_written_outside:
        problems.append(f"{summary.n_written_outside} elements written outside the view "
                        f"({summary.n_written_outside / max(summary.n_calls, 1):.4g} per call)")
    if problems:
        return Result("inplace", "fail", "; ".join(problems),
                      statistic=summary.n_returned_other + summary.n_written_outside, p_value=0.0,
                      n=summary.n)
    return Result("inplace", "pass", f"{summary.n_calls} calls wrote the tensor given, in place, "
                  f"and nothing else", statistic=0, p_value=1.0, n=summary.n)


def failed_draw(check: str, failure: CandidateFailure, stage: int, case, dtype, device) -> Result:
    """The Result of `check` when the stage's draw of `case` did not complete."""
    n = failure.summary.n if failure.summary is not None else 0
    if failure.kind == "split":  # the harness's scheduling, not the candidate
        return Result(check, "error", str(failure), n=n, n_stage1=n)
    verdict = "error" if failure.kind == "crashed" else "fail"
    return Result(check, verdict, f"candidate {failure.kind} on {case.id} "
                  f"({dtype_name(dtype)}, {device}), stage {stage}: {failure}",
                  n=n, n_stage1=n)


def judge_hang(facts, s1) -> Result:
    """Every call returned within its timeout. A draw that raised returned, so it passes here
    (the other checks of the group fail on it); one that hung, crashed or was split is this
    check's verdict."""
    if isinstance(s1, CandidateFailure) and s1.kind in ("hang", "crashed", "split"):
        return failed_draw("hang", s1, 1, facts.case, facts.dtype, facts.device)
    if isinstance(s1, CandidateFailure):
        return Result("hang", "pass", "returned (with an error; see the other checks)")
    # The deadline's seconds stay out of the row: they follow the machine's speed and load
    # (`RunConfig.call_timeout`), and a seed gives the same rows on any machine.
    return Result("hang", "pass", f"{s1.n_calls} calls, each within its deadline (the fixed "
                  f"limit, up to {SLOW_CALL_FACTOR:g}x that by the candidate's own pace)",
                  n=s1.n, n_stage1=s1.n)


FINITE = on_draw("finite", lambda facts, s: check_finite(s, facts.law),
                 families=(support.FAMILY,), about="values", doc="No NaN or infinity, ever.")
WRITTEN = on_draw("written", lambda facts, s: check_written(s), families=(support.FAMILY,),
                  doc="Every element of the tensor is written on every call (the tensor is "
                      "poisoned before).")
BOUNDS = on_draw("bounds", lambda facts, s: check_bounds(
    s, facts.case.mean, facts.case.std, strict=facts.config.bounds == "strict"),
                 families=(support.FAMILY,), about="values",
                 doc="Every value lies in [RN(a), RN(b)] (or [a, b] with --bounds strict).")
HANG = on_draw("hang", judge_hang, failures=True,
               doc=f"Every call returns within --case-timeout seconds, up to {SLOW_CALL_FACTOR:g}x "
                   "that by the candidate's own pace (its first call; calls after slow ones).")
INPLACE = on_draw("inplace", lambda facts, s: check_inplace(s), scope=SHAPE_AXIS,
                  doc="The shape axis: the tensor given is written in place, and nothing outside "
                      "a view.")
