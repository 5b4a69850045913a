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
_KEPT: "OrderedDict[int, tuple]" = OrderedDict()


def figures_and_matches(summary, law, first=None) -> tuple[dict, tuple]:
    """The Summary's severity and effect figures and the catalog's matches, computed once per
    Summary (`first`: the group's stage-1 Summary where `summary` is stage 2's, `diagnose`)."""
    key = id(summary)
    kept = _KEPT.get(key)
    if kept is not None and kept[0] is summary and kept[1] is law and kept[2] is first:
        _KEPT.move_to_end(key)
        return kept[3], kept[4]
    figures = {**severity(summary, law), **effects(summary, law)}
    matches = tuple(diagnose(summary, law, first))
    _KEPT[key] = (summary, law, first, figures, matches)
    while len(_KEPT) > KEPT:
        _KEPT.popitem(last=False)
    return figures, matches


def annotate(result: Result, summary, law, first=None, thresholds=DEFAULT_THRESHOLDS,
             candidate=None) -> Result:
    """`result` with its level, severity and mechanism from its deciding stage's Summary (pass
    and skip rows are left as they are); `first`: the group's stage-1 Summary where that is stage
    2's (the catalog reads OWN_STAGE_FAMILIES stage 2 did not fold from it); `thresholds`: the
    `harness.diagnosis.grading.thresholds.HarmThresholds` in force; `candidate`: the row's
    candidate (a library's kernel is named only for the candidates that run it)."""
    if result.verdict not in FAILING:
        return result
    figures, matches = figures_and_matches(summary, law, first)
    graded = grade(result.check, result.verdict, figures, result.n, thresholds)
    result.severity = dict(figures, decide_n=graded.decide_n)
    result.level = graded.level
    result.level_basis = basis_text(result.check, graded, figures, thresholds, result.n)
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
