"""What a candidate warns during a draw: each distinct warning once, as text, in the order first
seen, and at most `KEPT_WARNINGS` of them.

A draw hears every warning of every call (the filter is "always": Python's once-per-location
registry would hide a warning another group raised earlier in the same worker, and a group's row
would then depend on which groups ran before it). Only the distinct texts are kept: a candidate
that warns on each of a million calls, or words each warning differently, leaves a few lines, not
a record per call, so the draw's memory does not grow with its calls.
"""

from __future__ import annotations

import warnings
from contextlib import contextmanager

#: Distinct warning texts kept per draw; the rest are counted.
KEPT_WARNINGS = 20


class Heard:
    """The distinct warnings of a draw: `texts` ("Category: message", the first KEPT_WARNINGS
    distinct ones), and how many warnings came with other texts after those (`more`)."""

    def __init__(self):
        self.texts: list[str] = []
        self.more = 0
        self._seen: set = set()

    def note(self, message, category, filename, lineno, file=None, line=None) -> None:
        """`warnings.showwarning`'s signature: keep the warning's text if it is new."""
        text = f"{category.__name__}: {message}"
        if text in self._seen:
            return
        if len(self.texts) < KEPT_WARNINGS:
            self._seen.add(text)
            self.texts.append(text)
        else:
            self.more += 1  # not remembered: a text seen again past the cap counts again

    def lines(self) -> list[str]:
        """The kept texts, and a last line counting the others where there were more."""
        if not self.more:
            return list(self.texts)
        return self.texts + [f"and {self.more} more warnings with other texts"]


@contextmanager
def caught_warnings():
    """Every warning raised inside, heard by a `Heard` (yielded) instead of being shown; the
    filters and the display are restored on exit."""
    heard = Heard()
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = heard.note
        yield heard
