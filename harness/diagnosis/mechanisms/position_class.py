"""The `position-class` mechanism: one class of positions (the first or the last element, a
vector loop's remainder, the ends of rows) drawn from another law than the rest of the tensor.

Its prediction: the position check's worst class departs from the rest at the false-match rate,
and the rest of the tensor, without that class, fits the law over the same coarse groups
(chi-square p >= AGREE_LEVEL): a sampler wrong everywhere, or wrong by copies, is never named
by it.
"""

from __future__ import annotations

import numpy as np

from ...families.position import POSITION, group_totals, law_groups
from ..evidence import AGREE_LEVEL, FALSE_MATCH, Evidence, chi2_fit
from ..match import Match, Mechanism


class PositionClass(Mechanism):
    name = "position-class"
    explains = frozenset({POSITION.name})
    doc = ("One class of positions drawn from another law. Prediction: the class departs from "
           "the rest of the tensor (the position check at FALSE_MATCH) while the rest fits the "
           "law over the same coarse groups.")

    def test(self, ev: Evidence) -> Match | None:
        if not ev.has("position") or not ev.has("binned"):
            return None
        out = ev.outcome(POSITION)
        if not out.applicable or out.p_value >= FALSE_MATCH:
            return None
        summary = ev.holder("position")
        state = summary.position
        name = out.details.get("class")
        if name not in tuple(state.classes):
            return None
        counts = np.asarray(state.counts, dtype=np.float64)[list(state.classes).index(name)]
        _, masses = law_groups(ev.law)
        totals = group_totals(summary, ev.law)
        rest = np.maximum(totals - counts, 0.0)
        p = chi2_fit(rest, masses)
        if p is None or p < AGREE_LEVEL:
            return None
        note = (f"class {name} ({int(counts.sum())} elements) drawn from another law (position "
                f"p {out.p_value:.2g}, w {out.effect:.3g}); the other {int(rest.sum())} elements "
                f"fit the law (chi-square p {p:.2g})")
        return self.match(note, parameter=out.effect)
