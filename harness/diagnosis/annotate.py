"""Fill a failing Result's level, severity and mechanism: `annotate` (a row with its group's
Summary) and `annotate_failure` (a row with none: a draw that did not complete, an API check, a
harness error). `harness.runner.CaseRunner` calls them on every row it makes.

The figures and the catalog's matches are computed once per Summary (the checks of a group share
one, and the last few are kept), never per row.
"""

from __future__ import annotations

from collections import OrderedDict

from ..result import Result
from .catalog import diagnose, explain
from .levels import FAILING, level_of
from .severity import severity

#: Summaries whose figures and matches are kept (the groups a runner cache holds, and both stages).
KEPT = 8
_KEPT: "OrderedDict[int, tuple]" = OrderedDict()


def figures_and_matches(summary, law) -> tuple[dict, tuple]:
    """The Summary's severity figures and the catalog's matches, computed once per Summary."""
    key = id(summary)
    kept = _KEPT.get(key)
    if kept is not None and kept[0] is summary and kept[1] is law:
        _KEPT.move_to_end(key)
        return kept[2], kept[3]
    figures, matches = severity(summary, law), tuple(diagnose(summary, law))
    _KEPT[key] = (summary, law, figures, matches)
    while len(_KEPT) > KEPT:
        _KEPT.popitem(last=False)
    return figures, matches


def annotate(result: Result, summary, law) -> Result:
    """`result` with its level, severity and mechanism from its deciding stage's Summary (pass
    and skip rows are left as they are)."""
    if result.verdict not in FAILING:
        return result
    figures, matches = figures_and_matches(summary, law)
    result.severity = dict(figures)
    result.level = level_of(result.check, result.verdict, figures)
    result.mechanism, result.mechanism_note = explain(result.check, result.verdict,
                                                      result.message, matches)
    return result


def annotate_failure(result: Result) -> Result:
    """`result`, a row with no Summary behind it, with its level (api) and mechanism."""
    if result.verdict not in FAILING:
        return result
    result.level = level_of(result.check, result.verdict, {})
    result.mechanism, result.mechanism_note = explain(result.check, result.verdict,
                                                      result.message, ())
    return result
