"""The `dependence` mechanism: values that are not independent draws (correlated neighbours,
successive calls or rows that repeat, a stream that wraps), read from the independence and
repetition families.

Its prediction is the law's own: independent draws give a lag correlation of 0 (sd 1/sqrt(pairs))
and the law's expected number of repeated rows and windows; the match is a departure from it at
the false-match rate, with the dependence figure (the largest |r|, or the repeats' obs/exp) as
its parameter (the worst component's effect: a correlation r, or a count's obs/exp).
"""

from __future__ import annotations

from ..families.independence import INDEPENDENCE, check_independence
from ..families.repetition import REPETITION, check_repetition
from .evidence import FALSE_MATCH, Evidence
from .match import Match, Mechanism


class Dependence(Mechanism):
    name = "dependence"
    explains = frozenset({INDEPENDENCE.name, REPETITION.name})
    doc = ("Draws that depend on each other: a lag correlation, successive calls or rows equal, "
           "a repeated stretch. Prediction: the law's (correlation 0, the law's repeat count); "
           "a match is a departure at FALSE_MATCH.")

    def test(self, ev: Evidence) -> Match | None:
        parts, figure = [], None
        if ev.has("independence"):
            out = ev.outcome(check_independence)
            if out.applicable and out.p_value < FALSE_MATCH:
                parts.append(f"independence p {out.p_value:.2g}: {out.message}")
                figure = out.effect  # the worst component's: r, or a count's obs/exp
        if ev.has("repetition"):
            out = ev.outcome(check_repetition)
            if out.applicable and out.p_value < FALSE_MATCH:
                parts.append(f"repetition p {out.p_value:.2g}: {out.message}")
                figure = out.effect if figure is None else figure
        if not parts:
            return None
        return self.match("; ".join(parts)[:400], parameter=figure)
