"""The repetition family: a stretch of the output that appears twice, at another offset of the
same tensor (a counter that wraps inside a big tensor) or in the next call (an offset reused),
and `check_repetition` over it.

State (`RepetitionState`): the windows hashed at content-defined anchors, the pairs of windows
compared, and the equal pairs among them. Memory is one chunk's hashes and one call's. A sharded
part folds a box of the tensor, not the tensor in row-major order: no windows.

The windows iid draws repeat by chance are priced with the collision rate of the output's own
marginal (`independence.marginal_rate`), so an output of few values, or on a coarse lattice, is
not read as a repeated stretch: its marginal is judged by the binned and resolution checks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from scipy import stats

from ..declaration import statistical
from ..engine import SLICE_ELEMENTS, Family, row_hash_coefficients
from ..result import Outcome
from ..summary import Summary
from . import atoms, binned, independence, resolution
from .common import clip_p, not_applicable, quiet

#: Elements of a repetition window, and the mean spacing of its content-defined anchors: a
#: repeated stretch of 1024 elements holds no anchor with probability (1 - 1/128)^992 = 4e-4
#: (so it is missed only if all of its ~8 anchors are, i.e. never in practice), and two windows
#: of iid draws agree with probability at most q^32.
REPEAT_WINDOW = 32
REPEAT_SPACING_BITS = 7
REPEAT_SPACING = 1 << REPEAT_SPACING_BITS
#: Elements of one draw the repetition fold scans at most (and always its first two calls).
REPEAT_SCAN = 1 << 24
#: A repetition test is made only where the law's own expected number of equal windows is below
#: this (an output of a few values has equal windows by chance).
REPEAT_MAX_EXPECTED = 1e-2
#: The multiplier of an element's anchor key (Knuth's multiplicative hash, as a signed integer of
#: the key's width): an anchor is an element whose key has its top REPEAT_SPACING_BITS bits zero.
ANCHOR_MULT32 = 0x9E3779B1 - (1 << 32)
ANCHOR_MULT64 = 0x9E3779B97F4A7C15 - (1 << 64)
_MIX = 0x5851F42D4C957F2D


@dataclass
class RepetitionState:
    """Windows hashed, pairs of windows compared, equal pairs."""

    windows: int = 0
    pairs: float = 0.0
    equal: int = 0

    @classmethod
    def merge(cls, parts, whole) -> "RepetitionState":
        return cls(sum(int(p.windows) for p in parts), sum(float(p.pairs) for p in parts),
                   sum(int(p.equal) for p in parts))


class RepetitionFold:
    """Hashes of REPEAT_WINDOW-element windows at content-defined anchors (the elements whose
    bit pattern hashes to 0 modulo REPEAT_SPACING): a stretch that appears twice, at any
    offset of the same tensor or of the next call, has its anchors at the same places of its
    content, so its windows hash alike. Equal hashes are counted inside the chunk and
    against the previous call; under the law two windows are equal with probability at most
    q^W (q: the law's collision probability), what the `repetition` check prices. At most
    REPEAT_SCAN elements of a draw are scanned (but always its first two calls): a defect
    that repeats a stretch does so in every call."""

    @classmethod
    def start(cls, law, shape: tuple, fold) -> "RepetitionFold | None":
        return cls(fold) if fold.positional else None

    def __init__(self, fold):
        self.owner = fold
        self.state = RepetitionState()
        self.prev_hashes: torch.Tensor | None = None  # the last call's window hashes
        self.left, self.calls = REPEAT_SCAN, 0

    def fold(self, chunk) -> None:
        f = self.owner
        ints = chunk.ints.view(chunk.calls, -1)
        numel = ints[0].numel()
        # the calls of this chunk to scan: the first two of the draw, then while REPEAT_SCAN lasts
        calls = min(ints.shape[0], max(2 - self.calls, -(-self.left // max(numel, 1)), 0))
        if numel < REPEAT_WINDOW or calls <= 0:
            return
        self.left -= calls * numel
        self.calls += calls
        x = ints[:calls].reshape(calls, numel)
        starts = anchor_starts(f, x)
        call = torch.div(starts, numel, rounding_mode="floor")
        h = window_hashes(f, x.reshape(-1), starts)
        s = self.state
        s.windows += int(h.numel())
        s.pairs += h.numel() * (h.numel() - 1) / 2.0
        s.equal += equal_pairs(h)
        first, last = h[call == 0], h[call == calls - 1]
        if self.prev_hashes is not None and first.numel() and self.prev_hashes.numel():
            s.pairs += float(first.numel()) * float(self.prev_hashes.numel())
            s.equal += int(torch.isin(first, self.prev_hashes).sum())
        self.prev_hashes = last if calls == ints.shape[0] else None
        if self.left <= 0 and self.calls >= 2:  # done scanning: give the scratch back
            for name, dtype in (("rep_key", key_dtype(f.bits)), ("rep_anchor", torch.bool),
                                ("rep_windows", x.dtype), ("rep_bits", torch.int64),
                                ("rep_high", torch.int64)):
                f.release(name, dtype)

    def finish(self, whole: Summary) -> RepetitionState:
        return self.state


def key_dtype(bits: int) -> torch.dtype:
    """The integer type an element's anchor key is worked in: int64 for 64-bit formats, int32
    otherwise (a 16-bit pattern sign-extended)."""
    return torch.int64 if bits == 64 else torch.int32


def anchor_starts(fold, x: torch.Tensor) -> torch.Tensor:
    """The flat offsets (int64, ascending) of the anchors of `x` (calls, numel), the integer
    views of whole calls: the elements that start a window and whose bit pattern hashes to 0
    modulo REPEAT_SPACING. Worked a slice of SLICE_ELEMENTS at a time: the keys are element by
    element, so the anchors do not depend on the slices."""
    calls, numel = x.shape
    heads = numel - REPEAT_WINDOW + 1
    kind = key_dtype(fold.bits)
    shift = (64 if fold.bits == 64 else 32) - REPEAT_SPACING_BITS
    mult = ANCHOR_MULT64 if fold.bits == 64 else ANCHOR_MULT32
    # Slices of whole calls' heads where a call is small, of one call's heads where it is big.
    calls_at_once = max(1, SLICE_ELEMENTS // numel)
    heads_at_once = heads if calls_at_once > 1 else SLICE_ELEMENTS
    found = []
    for first in range(0, calls, calls_at_once):
        for lo in range(0, heads, heads_at_once):
            part = x[first:first + calls_at_once, lo:min(lo + heads_at_once, heads)]
            key = fold.buffer("rep_key", tuple(part.shape), kind)
            if part.dtype == kind:
                torch.mul(part, mult, out=key)
            else:
                key.copy_(part).mul_(mult)
            # The arithmetic shift leaves the top REPEAT_SPACING_BITS bits of the hash,
            # sign-extended: zero exactly when they all are, i.e. with probability
            # 1 / REPEAT_SPACING.
            key.bitwise_right_shift_(shift)
            anchor = torch.eq(key, 0, out=fold.buffer("rep_anchor", tuple(part.shape), torch.bool))
            call, pos = anchor.nonzero(as_tuple=True)
            found.append(call.add_(first).mul_(numel).add_(pos).add_(lo))
    return torch.cat(found) if found else torch.zeros(0, dtype=torch.int64, device=fold.device)


def window_hashes(fold, flat: torch.Tensor, starts: torch.Tensor) -> torch.Tensor:
    """The mixed hash (int64) of the REPEAT_WINDOW-element window of `flat` (an integer view)
    at each of `starts`, a slice of windows at a time into scratch tensors kept for the scan
    (fresh ones of a few MB cost page faults): a window's hash reads its own elements only."""
    h = torch.empty(starts.numel(), dtype=torch.int64, device=fold.device)
    windows_of = flat.unfold(0, REPEAT_WINDOW, 1)
    coef = row_hash_coefficients(REPEAT_WINDOW, fold.device)
    step = max(1, SLICE_ELEMENTS // REPEAT_WINDOW)
    for lo in range(0, starts.numel(), step):
        part = starts[lo:lo + step]
        shape = (part.numel(), REPEAT_WINDOW)
        windows = torch.index_select(windows_of, 0, part,
                                     out=fold.buffer("rep_windows", shape, flat.dtype))
        if windows.dtype != torch.int64:
            windows = fold.buffer("rep_bits", shape, torch.int64).copy_(windows)
        mixed = independence.hash_rows(windows, coef, fold.buffer("rep_high", shape, torch.int64))
        h[lo:lo + part.numel()] = (mixed ^ (mixed >> 31)) * _MIX
    return h


def equal_pairs(h: torch.Tensor) -> int:
    """Pairs of equal values among `h`."""
    if h.numel() < 2:
        return 0
    _, counts = torch.unique(h, return_counts=True)
    counts = counts[counts > 1].to(torch.int64)
    return int((counts * (counts - 1) // 2).sum())


FAMILY = Family("repetition", RepetitionFold.start)


def repetition_expected(summary: Summary, law, bound: bool = False) -> float:
    """Equal window pairs iid draws of the output's own marginal give (at most pairs x q^W, q
    the collision rate of one element, `independence.marginal_rate`: two windows of W iid values,
    overlapping or not, are equal with probability at most q^W); `bound`: at q's upper
    confidence bound where q is estimated (`independence.RATE_BOUND_LEVEL`)."""
    rate = independence.marginal_rate(summary, law)
    q = rate.upper() if bound else rate.q
    if q <= 0:
        return 0.0
    return float(summary.repetition.pairs) * math.exp(min(0.0, REPEAT_WINDOW * math.log(q)))


@quiet
def check_repetition(summary: Summary, law, *, alpha: float = 1e-3) -> Outcome:
    """Equal 32-element windows (anchored by content) inside a call and against the previous
    call: Poisson upper tail with the expected count of the output's own marginal; a stretch of
    >= 1024 elements that repeats shows as ~8 equal pairs (decisive where iid draws of that
    marginal expect far below one)."""
    unit = "equal window pairs"
    state = summary.states.get(FAMILY.name)
    if state is None or state.windows == 0 or state.pairs == 0:
        return not_applicable(f"no windows to compare (a tensor under {REPEAT_WINDOW} elements, "
                              f"no anchor, or a sharded part)", unit)
    lam = repetition_expected(summary, law, bound=True)
    if lam > REPEAT_MAX_EXPECTED:
        return not_applicable(f"the output has too few values: {lam:.3g} equal window pairs "
                              f"expected by chance", unit)
    k = int(state.equal)
    p = 1.0 if k == 0 else clip_p(stats.poisson.sf(k - 1, lam))
    msg = (f"{k} pairs of equal {REPEAT_WINDOW}-element windows among {state.windows} anchored windows "
           f"({state.pairs:.3g} pairs compared; {lam:.3g} expected by chance)")
    if k:
        msg += ": a stretch of the output repeats (a counter that wraps, an offset reused)"
    return Outcome(statistic=float(k), p_value=p, effect=float(k), effect_unit=unit, mde=1.0,
                   message=msg, decisive=bool(k and lam < 1e-12),
                   details={"expected": lam, "windows": int(state.windows)})


def repetition_mde(law, n: int, shape: tuple, alpha: float) -> float:
    """One equal pair of windows, whatever the law, n, shape and level: the check's count is
    decisive (or nearly) from its first pair, and a repeated stretch of >= 1024 elements gives
    ~8."""
    return 1.0


REPETITION = statistical(
    "repetition", check_repetition,
    families=(FAMILY, binned.FAMILY, atoms.FAMILY, resolution.FAMILY),
    doc='No stretch of the output appears twice, in the same tensor or the next call.',
    method=(
        "A stretch of the output that appears again: at another offset of the same tensor (a "
        "counter that wraps inside a big tensor) or in the next call (an offset reused). The engine "
        "hashes 32-element windows at content-defined anchors (the elements whose bit pattern "
        "hashes to 0 modulo 128: a repeated stretch has its anchors at the same places of its "
        "content; a stretch of 1024 elements holds ~8) and counts equal hashes inside each chunk of "
        "calls and against the previous call, over the first 2^24 elements of a draw (and always "
        "its first two calls); memory is one chunk's hashes and one call's. Null: iid draws; two "
        "windows (overlapping or not) are equal with probability <= q^32, q the collision rate of "
        "the output's own marginal (as independence takes it; where estimated from the resolution "
        "scan, at its upper confidence bound at 1e-12, which adds that much to the size at most), "
        "so the equal pairs are at most Poisson(pairs x q^32): exact upper tail; "
        "decisive where that expectation is below 1e-12. Not applicable where it exceeds 0.01 (an "
        "output of a few values). False-alarm rate <= alpha. Effect: equal pairs. MDE: one equal pair "
        "(a repeated stretch of >= 1024 elements gives ~8)."
    ),
    unit="equal window pairs (a repeated stretch of >= 1024 elements gives ~8)",
    mde=repetition_mde,
)
