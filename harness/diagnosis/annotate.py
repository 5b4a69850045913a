"""Fill a failing Result's level, severity and mechanism: `annotate` (a row with its group's
Summary) and `annotate_failure` (a row with none: a draw that did not complete, an API check, a
harness error). `harness.runner.CaseRunner` calls them on every row it makes.

The figures and the catalog's matches are computed once per Summary (the checks of a group share
one, and the last few are kept), never per row.
"""

from __future__ import annotations

from collections import OrderedDict

from ..result import Result
from .mechanism_catalog import diagnose, explain
from .grading.effects import effects
from .grading.levels import FAILING, basis_text, grade, level_of
from .grading.severity import severity
from .grading.thresholds import DEFAULT_THRESHOLDS

#: Summaries whose figures and matches are kept (the groups a runner cache holds, and both stages).
KEPT = 8
_FIGURES: OrderedDict = OrderedDict()
_MATCHES: OrderedDict = OrderedDict()


def kept(cache: OrderedDict, key: tuple, compute):
    """`compute()`, computed once per `key` (objects compared by identity) among the last KEPT."""
    ids = tuple(id(k) for k in key)
    held = cache.get(ids)
    if held is not None and all(a is b for a, b in zip(held[0], key)):
        cache.move_to_end(ids)
        return held[1]
    value = compute()
    cache[ids] = (key, value)
    while len(cache) > KEPT:
        cache.popitem(last=False)
    return value


def figures(summary, law) -> dict:
    """The Summary's severity and effect figures, computed once per Summary."""
    return kept(_FIGURES, (summary, law),
                lambda: {**severity(summary, law), **effects(summary, law)})


def figures_and_matches(summary, law, first=None) -> tuple[dict, tuple]:
    """The Summary's figures and the catalog's matches, computed once per Summary (`first`: the
    group's stage-1 Summary where `summary` is stage 2's, `diagnose`)."""
    matches = kept(_MATCHES, (summary, law, first),
                   lambda: tuple(diagnose(summary, law, first)))
    return figures(summary, law), matches


def level_at(check: str, summary, law, thresholds=DEFAULT_THRESHOLDS) -> str:
    """The level a failing row of `check` would get from `summary` alone: what a runner asks of
    stage 1's Summary to know whether the level needs stage 2's larger n."""
    return grade(check, "fail", figures(summary, law), summary.n, thresholds).level


def annotate(result: Result, summary, law, first=None, thresholds=DEFAULT_THRESHOLDS,
             candidate=None, n=None) -> Result:
    """`result` with its level, severity and mechanism from its deciding stage's Summary (pass
    and skip rows are left as they are); `first`: the group's stage-1 Summary where that is stage
    2's (the catalog reads OWN_STAGE_FAMILIES stage 2 did not fold from it); `thresholds`: the
    `harness.diagnosis.grading.thresholds.HarmThresholds` in force; `candidate`: the row's
    candidate (a library's kernel is named only for the candidates that run it); `n`: the
    Summary's values, where the row's own n is another stage's (a check stage 1 decided, graded
    on stage 2)."""
    if result.verdict not in FAILING:
        return result
    group_figures, matches = figures_and_matches(summary, law, first)
    n = result.n if n is None else n
    graded = grade(result.check, result.verdict, group_figures, n, thresholds)
    result.severity = dict(group_figures, decide_n=graded.decide_n)
    result.level = graded.level
    result.level_basis = basis_text(result.check, graded, group_figures, thresholds, n)
    result.mechanism, result.mechanism_note = explain(result.check, result.verdict,
                                                      result.message, matches, candidate)
    return result


def annotate_failure(result: Result) -> Result:
    """`result`, a row with no Summary behind it, with its level (api) and mechanism."""
    if result.verdict not in FAILING:
        return result
    result.level = level_of(result.check, result.verdict, {})
    result.mechanism, result.mechanism_note = explain(result.check, result.verdict,
                                                      result.message, ())
    return result
