"""pytest's end-of-run failure listing without its quadratic scan.

For every failed test, pytest's terminal reporter looks for the test's teardown output by
scanning every passed setup and teardown report of the session (``stats[""]``): with the 567
failures of the main job among 4220 tests that is ~5 million report comparisons, seconds at the
end of a run in which nothing else happens, and it grows with failures x tests. Only a teardown
report with captured sections can print anything there, so while pytest writes its summary the
reporter sees those alone (`summary_scan`); every other report is back in its place afterwards.
"""

from __future__ import annotations

from contextlib import contextmanager

import pytest


def printable_teardowns(reports) -> list:
    """The reports of `reports` whose teardown output pytest's failure listing can print."""
    return [r for r in reports
            if getattr(r, "when", None) == "teardown" and getattr(r, "sections", None)]


@contextmanager
def summary_scan(reporter):
    """`reporter.stats[""]` cut to `printable_teardowns` inside the block, then restored as it was
    (the same list object, with any report appended meanwhile)."""
    stats = getattr(reporter, "stats", None)
    kept = stats.get("") if isinstance(stats, dict) else None
    if not kept:
        yield
        return
    shown = printable_teardowns(kept)
    before = len(shown)
    stats[""] = shown
    try:
        yield
    finally:
        if stats.get("") is shown:  # a report logged meanwhile stays logged
            kept.extend(shown[before:])
        stats[""] = kept


class SummaryScan:
    """The plugin object that puts `summary_scan` around every plugin's terminal summary
    (pytest's failure listing included); registered in the controller and in each worker."""

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_terminal_summary(self, terminalreporter):
        with summary_scan(terminalreporter):
            return (yield)
