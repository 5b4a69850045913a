"""The `directed-rounding` mechanism: the exact value cast with a directed rounding (toward
zero, down or up: the cheap conversion that drops a float32's low bits into bfloat16, a
kernel's rounding-mode flag) instead of round-to-nearest-even.

Its prediction is a whole alternative law computed from the reference's distribution: a value v
receives the X-mass of [v, next_up(v)) rounding down, of (next_down(v), v] rounding up, and the
one on its side of zero rounding toward zero; summed over the main histogram's bins (their
smallest and largest finite values, `FloatFormat.hist_bin_bounds`), the histogram must fit it
(chi-square p >= AGREE_LEVEL) where it departs from the law at the false-match rate. It is read
where the histogram holds every value (16-bit): a wider bin's mass moves by half a value's cell
at each edge, 2^-12 of a float32 bin's, which no run's n resolves.
"""

from __future__ import annotations

import numpy as np

from ...families.common import cached_on_law
from ..evidence import AGREE_LEVEL, Evidence
from ..match import Match, Mechanism
from .bound_atoms import BINNED

#: The directed roundings, by the name the note gives them.
MODES = ("toward zero", "down", "up")


def nonnegative(v: np.ndarray) -> np.ndarray:
    """v >= +0 (the sign bit clear: -0 is on the negative side)."""
    return ~np.signbit(v)


def directed_bin_probs(law, mode: str) -> np.ndarray:
    """The main histogram's bin masses of the law's X rounded in `mode` into its format."""
    fmt, dist = law.fmt, law.dist
    lo, hi = (np.asarray(v, dtype=np.float64) for v in fmt.hist_bin_bounds())
    finite = ~np.isnan(lo)
    lo_f, hi_f = np.where(finite, lo, 0.0), np.where(finite, hi, 0.0)
    with np.errstate(invalid="ignore"):
        above, below = fmt.next_up(hi_f), fmt.next_down(lo_f)
    if mode == "down":
        start, end = lo_f, above
    elif mode == "up":
        start, end = below, hi_f
    elif mode == "toward zero":
        start = np.where(nonnegative(lo_f), lo_f, below)
        end = np.where(nonnegative(hi_f), above, np.where(hi_f == 0.0, 0.0, hi_f))
    else:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    start = np.where(np.isnan(start), -np.inf, start)
    end = np.where(np.isnan(end), np.inf, end)
    probs = np.where(finite, dist.prob_cells(start, end), 0.0)
    return probs / probs.sum()


class DirectedRounding(Mechanism):
    name = "directed-rounding"
    explains = BINNED
    doc = ("The exact value cast by a directed rounding (toward zero, down, up) instead of to "
           "nearest. Prediction: the histogram fits the law rounded that way, where it departs "
           "from the law rounded to nearest.")

    def test(self, ev: Evidence) -> Match | None:
        if ev.bins is None or ev.summary.hist_bits != ev.law.fmt.bits or not ev.binned_departs:
            return None  # wider bins move by half a value's cell at each edge: too little to read
        for mode in MODES:
            p = ev.fit(cached_on_law(ev.law, f"_directed_{mode.replace(' ', '_')}",
                                     lambda law, mode=mode: directed_bin_probs(law, mode)))
            if p is not None and p >= AGREE_LEVEL:
                note = (f"the histogram fits the law rounded {mode} (chi-square p {p:.2g}), not "
                        f"rounded to nearest (p {ev.canonical_fit:.2g})")
                return self.match(note)
        return None
