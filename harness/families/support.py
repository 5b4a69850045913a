"""The support family: where the values lie. Written or not, finite or not, inside the bounds or
outside them, and the extremes seen.

State (`SupportState`): the counts of written NaN, +inf and -inf, of elements still holding the
poison pattern (never written), of finite values outside [RN(a), RN(b)] and outside [a, b] (with
the value farthest outside each), and the min and max of the finite written values. The hard
checks `finite`, `written` and `bounds` (`harness.checks.hard`) read it: any violation there is
a zero-probability event under the law, so they need no statistics.

For 16-bit and 8-bit dtypes every count comes from the per-pattern histogram at the end (the
binned family); for 32/64-bit ones a chunk's outside counts are computed only when its min/max
says a bound was reached, and its non-finite ones only when one is present.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from reference.dtypes import float_format

from ..key_bins import farthest_outside, poison_pattern
from ..engine import Family
from ..summary import Summary
from . import binned
from .binned import exact_values, pattern_values


@dataclass
class SupportState:
    """Written, finite, inside the bounds: the counts the hard checks read."""

    n_nan: int = 0  # written NaN (not the poison pattern)
    n_posinf: int = 0
    n_neginf: int = 0
    n_unwritten: int = 0  # elements still holding the poison pattern
    n_outside_rounded: int = 0  # finite, outside [rn_a, rn_b]
    n_outside_strict: int = 0  # finite, outside [a, b]
    worst_outside: float = math.nan  # finite value farthest outside [rn_a, rn_b]
    worst_outside_strict: float = math.nan  # same for [a, b]
    min: float = math.inf  # over finite written values
    max: float = -math.inf

    @property
    def n_nonfinite(self) -> int:
        return self.n_nan + self.n_posinf + self.n_neginf

    @classmethod
    def merge(cls, parts, whole) -> "SupportState":
        out = cls()
        for name in ("n_nan", "n_posinf", "n_neginf", "n_unwritten", "n_outside_rounded",
                     "n_outside_strict"):
            setattr(out, name, sum(int(getattr(p, name)) for p in parts))
        out.min = min(float(p.min) for p in parts)
        out.max = max(float(p.max) for p in parts)
        out.worst_outside = farthest_outside([p.worst_outside for p in parts], whole.rn_a,
                                             whole.rn_b)
        out.worst_outside_strict = farthest_outside([p.worst_outside_strict for p in parts],
                                                    whole.a, whole.b)
        out.recount(whole)
        return out

    def recount(self, whole: Summary) -> None:
        """Everything a per-pattern histogram knows exactly (16-bit and 8-bit dtypes): the counts
        of its bins replace the folded ones (bit for bit what the engine's own finish gives)."""
        bins = whole.states.get(binned.FAMILY.name)
        if bins is None or not bins.exact:
            return
        fmt = float_format(whole.dtype)
        hist = bins.hist
        values = pattern_values(fmt)
        poison = poison_pattern(whole.dtype)
        poison_key = int(fmt.keys_from_bits(np.array([poison % (1 << fmt.bits)],
                                                     dtype=np.uint64))[0])
        self.n_unwritten = int(hist[poison_key])
        self.n_posinf = int(hist[values == np.inf].sum())
        self.n_neginf = int(hist[values == -np.inf].sum())
        self.n_nan = int(hist[np.isnan(values)].sum()) - self.n_unwritten
        seen = exact_values(whole)
        if seen is None:
            return
        v, c = seen
        self.min, self.max = float(v.min()), float(v.max())
        out = (v < whole.rn_a) | (v > whole.rn_b)
        self.n_outside_rounded = int(c[out].sum())
        self.worst_outside = (farthest_outside((self.min, self.max), whole.rn_a, whole.rn_b)
                              if out.any() else math.nan)
        out_strict = (v < whole.a) | (v > whole.b)
        self.n_outside_strict = int(c[out_strict].sum())
        self.worst_outside_strict = (farthest_outside((self.min, self.max), whole.a, whole.b)
                                     if out_strict.any() else math.nan)


def representable_inside(fmt, a: float, b: float) -> tuple[float, float]:
    """Smallest representable >= a and largest representable <= b (x < a iff x < the first)."""
    lo, hi = float(fmt.round(np.float64(a))), float(fmt.round(np.float64(b)))
    if math.isfinite(a) and lo < a:
        lo = float(fmt.next_up(np.float64(lo)))
    if math.isfinite(b) and hi > b:
        hi = float(fmt.next_down(np.float64(hi)))
    return lo, hi


class SupportFold:
    """Non-finite, unwritten and outside counts and the extremes of each chunk (32/64-bit dtypes;
    the per-pattern histogram gives them all for narrower ones)."""

    def __init__(self, law, shape: tuple, fold):
        self.owner = fold
        self.state = SupportState()
        s = fold.s
        self.inner_a, self.inner_b = representable_inside(fold.fmt, s.a, s.b)

    def fold(self, chunk) -> None:
        f = self.owner
        if f.exact_hist:
            return
        s, state = f.s, self.state
        n_nonfinite = chunk.n_nonfinite
        if n_nonfinite:
            flat, ints = chunk.flat, chunk.ints
            n_unw = int((ints == f.poison).sum())
            n_pinf = int((flat == math.inf).sum())
            n_ninf = int((flat == -math.inf).sum())
            state.n_unwritten += n_unw
            state.n_posinf += n_pinf
            state.n_neginf += n_ninf
            state.n_nan += n_nonfinite - n_unw - n_pinf - n_ninf
        values = chunk.finite_values
        if values is None:
            return
        flat, _, lo, hi = values
        state.min, state.max = min(state.min, lo), max(state.max, hi)
        # Scalars below are representable in the dtype, so comparing in the dtype is exact.
        if lo < s.rn_a or hi > s.rn_b:
            out = (flat < s.rn_a) | (flat > s.rn_b)
            state.n_outside_rounded += int(torch.count_nonzero(out))
            state.worst_outside = farthest_outside((state.worst_outside, lo, hi), s.rn_a, s.rn_b)
        if lo < self.inner_a or hi > self.inner_b:
            out = (flat < self.inner_a) | (flat > self.inner_b)
            state.n_outside_strict += int(torch.count_nonzero(out))
            state.worst_outside_strict = farthest_outside((state.worst_outside_strict, lo, hi),
                                                          s.a, s.b)

    def finish(self, whole: Summary) -> SupportState:
        self.state.recount(whole)
        return self.state


FAMILY = Family("support", SupportFold, needs=(binned.FAMILY,))


#: The counts `support_counts` gives, by their names in `SupportState`.
COUNT_NAMES = ("n_nan", "n_posinf", "n_neginf", "n_unwritten", "n_outside_rounded",
               "n_outside_strict")


def support_counts(summary: Summary) -> dict:
    """What a failing group's figure states of the support (`harness.figure_data`): the written
    non-finite values, the unwritten elements and the values outside the bounds, and the finite
    value farthest outside [RN(a), RN(b)] (``worst_outside``); zeros and NaN for a Summary not
    folded with this family."""
    state = summary.states.get(FAMILY.name)
    if state is None:
        return {**dict.fromkeys(COUNT_NAMES, 0), "worst_outside": math.nan}
    return {**{name: int(getattr(state, name)) for name in COUNT_NAMES},
            "worst_outside": float(state.worst_outside)}
