"""The `dependence` mechanism: values that are not independent draws (correlated neighbours,
successive calls or rows that repeat, a stream that wraps), read from the independence and
repetition families.

Its prediction is the law's own: independent draws give a lag correlation of 0 (sd 1/sqrt(pairs))
and the law's expected number of repeated rows and windows; the match is a departure from it at
the false-match rate, with the dependence figure (the largest |r|, or the repeats' obs/exp) as
its parameter (the worst component's effect: a correlation r, or a count's obs/exp). Where whole
rows repeat, it also predicts what the copies do to every count: each value counted 1 / (1 - d)
times (d the share of repeated rows) inflates the histogram's chi-square by that factor, and the
binned and position checks' failures are the copies'.
"""

from __future__ import annotations

from ...families.independence import INDEPENDENCE
from ...families.position import POSITION
from ...families.repetition import REPETITION
from ..evidence import FALSE_MATCH, Evidence
from ..match import Match, Mechanism
from .bound_atoms import BINNED


class Dependence(Mechanism):
    name = "dependence"
    explains = frozenset({INDEPENDENCE.name, REPETITION.name})
    doc = ("Draws that depend on each other: a lag correlation, successive calls or rows equal, "
           "a repeated stretch. Prediction: the law's (correlation 0, the law's repeat count); "
           "a match is a departure at FALSE_MATCH.")

    def test(self, ev: Evidence) -> Match | None:
        parts, figure = [], None
        if ev.has("independence"):
            out = ev.outcome(INDEPENDENCE)
            if out.applicable and out.p_value < FALSE_MATCH:
                parts.append(f"independence p {out.p_value:.2g}: {out.message}")
                figure = out.effect  # the worst component's: r, or a count's obs/exp
        if ev.has("repetition"):
            out = ev.outcome(REPETITION)
            if out.applicable and out.p_value < FALSE_MATCH:
                parts.append(f"repetition p {out.p_value:.2g}: {out.message}")
                figure = out.effect if figure is None else figure
        if not parts:
            return None
        note = "; ".join(parts)[:400]
        copies = self.copies_inflate(ev)
        if copies is not None:
            return self.match(f"{note}; {copies}", parameter=figure,
                              explains=self.explains | BINNED | {POSITION.name})
        return self.match(note, parameter=figure)

    @staticmethod
    def copies_inflate(ev: Evidence) -> str | None:
        """Where a share d of the rows repeat rows of their call, each value is counted c =
        1 / (1 - d) times over: every count's variance grows c-fold, and the histogram's
        chi-square over its degrees of freedom reads c. The note where it does (None: no
        repeated rows, no main histogram, or a chi-square that disagrees)."""
        if not ev.has("independence"):
            return None
        state = ev.state("independence")
        rows, repeats = int(state.n_rows_compared), int(state.n_duplicate_rows)
        if rows <= 0 or repeats <= 0 or repeats >= rows:
            return None
        note = ev.copies_inflate(rows / (rows - repeats))
        return None if note is None else f"{repeats} of {rows} rows repeat: {note}"
