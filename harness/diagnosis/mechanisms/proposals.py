"""The mechanism of a rejection sampler whose uniforms live in the output dtype:
`uniform-proposals`.

Such a sampler (torch's `trunc_normal_` on a window holding <= 0.3 of the normal, 2.12 to 2.14)
proposes ``x = uniform_(a, b)`` and accepts it where ``log(uniform_()) <= c(x)``, c(x) =
-((x - mean) / std)**2 / 2 - log_peak, everything computed in the tensor's dtype. Its law is not
the rounded law, in three ways the reference can price exactly:

* the proposals sit on a lattice: torch's uniform kernel draws u = j 2^-D, j uniform on
  0..2^D - 1, D = 24 (computed in float32 for every dtype up to 32 bits) or 53 (float64), writes
  from + u (to - from) rounded into the dtype, and a value that rounds up to `to` is written as
  `from` (torch 2.13's CPU kernel, bit for bit on one random stream: bfloat16 ``uniform_()`` is
  0 with probability 2^-9, the half cell below 1, and never 1). So RN(a) receives its upper half
  cell and RN(b)'s lower one, RN(b) nothing;
* the acceptance test is rounded: c(x) is five operations each rounded into the dtype, and
  ``uniform_()`` itself lives on the dtype's lattice (in 16 bits the test is enumerated exactly);
* ``uniform_()`` = 0 (2^-9 in bfloat16, 2^-12 in float16) makes ``log`` -inf, which accepts any
  proposal: a uniform on [a, b] mixed into the law, the dominant part deep in a tail.

The prediction is that law, value by value, `ProposalLaw` (the proposals counted per output value
by bisection on j, the acceptance per value), aggregated into the Summary's histogram bins (the
main bins or a narrow law's fine bins). A match needs a bound atom off the rounded law
(FALSE_MATCH), both bound atoms within Z_AGREE sd + MODEL_TOL of the prediction, and then
explains the binned checks where the histogram fits the law (chi-square p >= AGREE_LEVEL), else
`atoms` alone. Windows holding more than `MAX_VALUES` output values are not enumerated (no
prediction: a bound atom of such a window holds ~2^-21 of a flat law, a few values at the grid's
n, too few to depart).

The mechanism is the construction, not torch's code: any sampler that proposes uniformly on
[a, b] and accepts by a coarse or faulty test of u' <= r(x) (r the density ratio to its peak on
[a, b]) writes the same kind of law, and where torch's kernel law does not fit the histogram the
row tries the general one (`CoarseAcceptance`, the proposals continuous on [a, b], rounded into
the dtype):

* u' on the lattice j 2^-K, j = 0..2^K - 1 (a table uniform, a uniform of K bits): P(accept | x)
  = 2^-K (floor(2^K r(x)) + 1), the truncated density rounded down to the lattice plus the 2^-K
  that u' = 0 accepts anywhere; K = 1..MAX_ACCEPT_BITS, the likeliest on the histogram;
* u' continuous but 0 with probability w (or any test that lets a fixed share of the proposals
  through): P(accept | x) = w + (1 - w) r(x), the mixture of the truncated law and the uniform
  proposal law, its weight fitted by maximum likelihood.

A match needs the main histogram off the law at FALSE_MATCH (the event `inverse-cdf-in-dtype`
departs on), the fitted law 1 / FALSE_MATCH times likelier than the law on it, the floor seen
where it dominates (the bins where the fitted law is >= 2x the law hold more values than the law
gives them, at FALSE_MATCH: a wider scale or a shift reshapes the window but never doubles it
where the density ratio stays near 1, as on +-2 sigma), and the histogram to fit the fitted law (chi-square p >= AGREE_LEVEL with one degree of freedom fewer); it then
explains the binned checks, its parameter the share of the values the acceptance uniform's 0
let through.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy import optimize

from reference import float_format

from ...families.common import LawBins
from ..evidence import (AGREE_LEVEL, FALSE_MATCH, Evidence, chi2_fit, departs, fine_bin_index,
                        log_likelihood_ratio)
from ..library_ops import libm
from ..library_ops.affine import first_index
from ..match import Match, Mechanism
from .bound_atoms import (ATOMS, BINNED, atom_text, atoms_agree, bound_departures, bound_value,
                          law_atom, sigma_text)

#: The random bits of one uniform: 24 (float32, the accumulator of every dtype up to 32 bits),
#: 53 (float64).
DIGITS = {32: 24, 64: 53}
#: The most output values in [a, b] whose proposal counts are enumerated (every 16-bit window; a
#: 32-bit one judged on fine bins holds fewer than 256 main bins of 2^12 values).
MAX_VALUES = 1 << 20

_F32 = float_format("float32")


def accumulator_bits(fmt) -> int:
    """The width of the arithmetic the dtype's kernels compute in: float32 up to 32 bits."""
    return 64 if fmt.bits == 64 else 32


def in_accumulator(x, fmt) -> np.ndarray:
    """x rounded into the accumulator (float32 below 64 bits; float64 as is)."""
    x = np.asarray(x, dtype=np.float64)
    return x if fmt.bits == 64 else _F32.round(x)


def in_dtype(x, fmt) -> np.ndarray:
    """One operation of the dtype's kernels: the exact result rounded into the accumulator, then
    into the dtype (an identity for the accumulator's own width)."""
    return fmt.round(in_accumulator(x, fmt))


class UniformLattice:
    """``uniform_(lo, hi)`` in the format: from + j 2^-D (to - from), j = 0..2^D - 1, rounded into
    the accumulator then the format, a value equal to `to` written as `from`; `counts` gives how
    many j land on each output value."""

    def __init__(self, fmt, lo: float, hi: float):
        self.fmt = fmt
        self.digits = DIGITS[accumulator_bits(fmt)]
        # torch computes from + u (to - from) on the bounds as the accumulator holds them, and
        # compares the result, cast into the dtype, with `to` cast into it (measured on 2.13's
        # 16-bit kernels: bounds of +-0.9545 give RN(from) its cell inside the range plus RN(to)'s
        # part, chi-square 3845 on 4340 values, where bounds cast into the dtype first give 7963).
        self.lo = float(in_accumulator(np.array([lo]), fmt)[0])
        self.top = float(in_accumulator(np.array([hi]), fmt)[0])
        self.start = float(fmt.round(np.array([self.lo]))[0])  # `from` as written
        self.hi = float(fmt.round_torch(np.array([hi]))[0])  # `to` as compared
        self.width = float(in_accumulator(np.array([self.top - self.lo]), fmt)[0])

    def raw_values(self, j: np.ndarray) -> np.ndarray:
        """The rounded proposal of lattice index j (before `to` is moved to `from`): u w + from
        with one rounding (the kernel's fused multiply-add: float64 without it differs on 1.4%
        of [10, 1000]), into the accumulator and then the dtype. Below 64 bits u w is exact in
        float64 (24 + 24 bits); the sum's float64 rounding could only matter on a float32
        midpoint, which the bit-for-bit test never met."""
        u = np.ldexp(j.astype(np.float64), -self.digits)
        if accumulator_bits(self.fmt) == 64:
            return libm.fma(u, self.width, self.lo)
        return in_dtype(u * self.width + self.lo, self.fmt)

    def first_index(self, keys: np.ndarray) -> np.ndarray:
        """The smallest j whose proposal's ordered key is >= each key (2^D where none): the
        proposals increase with j, so one bisection per key."""
        return first_index(lambda j: self.fmt.ordered_keys(self.raw_values(j)), keys, 0,
                           (1 << self.digits) - 1)

    @functools.cached_property
    def key_range(self) -> tuple[int, int]:
        """Keys of `from` as written (RN(from)) and of the largest proposal: `to`, or above it
        where the accumulator rounded (to - from) up."""
        top = self.raw_values(np.array([(1 << self.digits) - 1], dtype=np.int64))
        k = self.fmt.ordered_keys(np.array([self.start, self.hi, float(top[0])]))
        return int(k[0]), int(max(k[1], k[2]))

    def counts(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(keys, values, counts): every output value from `from` to `to` and how many of the 2^D
        lattice indices write it."""
        k0, k1 = self.key_range
        keys = np.arange(k0, k1 + 2, dtype=np.uint64)
        first = self.first_index(keys)
        counts = (first[1:] - first[:-1]).astype(np.float64)
        keys = keys[:-1]
        values = self.fmt.values_from_keys(keys)
        top = values == self.hi  # -0 too where `to` is 0: the kernel compares values
        moved = float(counts[top].sum())
        counts[top] = 0.0
        counts[0] += moved  # keys[0] is `from`'s
        return keys, values, counts


@functools.lru_cache(maxsize=8)
def acceptance_table(fmt_name: str) -> tuple[np.ndarray, np.ndarray, int]:
    """(log(uniform_()) rounded into the format, sorted; the cumulative count of lattice indices
    at or below each; 2^D): ``uniform_()`` enumerated in a <= 16-bit format."""
    fmt = float_format(fmt_name)
    lattice = UniformLattice(fmt, 0.0, 1.0)
    _, values, counts = lattice.counts()
    with np.errstate(divide="ignore"):
        logs = in_dtype(np.log(values), fmt)  # log(0) = -inf: accepts any proposal
    order = np.argsort(logs, kind="stable")
    return logs[order], np.cumsum(counts[order]), 1 << lattice.digits


def acceptance(c: np.ndarray, fmt) -> np.ndarray:
    """P(log(uniform_()) <= c) in the format: enumerated up to 16 bits; above, the uniform's
    lattice alone (j = 0 always accepts, j >= 1 where j 2^-D <= e^c; the rounding of the log
    moves it by ~1 ulp of the accumulator)."""
    if fmt.bits <= 16:
        logs, cum, total = acceptance_table(fmt.name)
        idx = np.searchsorted(logs, c, side="right")
        return np.where(idx > 0, cum[np.maximum(idx - 1, 0)], 0.0) / total
    scale = float(1 << DIGITS[accumulator_bits(fmt)])
    with np.errstate(over="ignore"):
        return np.minimum(1.0, (1.0 + np.floor(np.exp(np.minimum(c, 0.0)) * scale)) / scale)


def log_density_test(values: np.ndarray, mean: float, std: float, a: float, b: float,
                     fmt) -> np.ndarray:
    """c(x) = -((x - mean) / std)**2 / 2 - log_peak, each operation rounded into the dtype.
    The scalars follow torch's CPU kernels (measured on 2.13, bfloat16 and float16): a
    subtracted scalar is cast into the dtype first, a divisor or factor enters the accumulator
    (float32) as is."""
    mode = max(a, min(mean, b))
    log_peak = -0.5 * ((mode - mean) / std) ** 2
    m, p = (float(x) for x in fmt.round_torch(np.array([mean, log_peak])))
    s = float(in_accumulator(np.array([std]), fmt)[0])
    with np.errstate(over="ignore", invalid="ignore"):
        t = in_dtype(values - m, fmt)
        t = in_dtype(t / s, fmt)
        t = in_dtype(t * t, fmt)
        t = in_dtype(t * -0.5, fmt)
        return in_dtype(t - p, fmt)


class ProposalLaw:
    """The law of the rejection sampler with proposals `UniformLattice(fmt, a, b)` and the
    acceptance test in the dtype: P(v) proportional to count(v) P(accept | v), per output value
    v of [RN(a), RN(b)] (`keys`, `values`, `probs`); `zero_share`, the share accepted by a
    uniform of 0 (log 0 = -inf)."""

    def __init__(self, mean: float, std: float, a: float, b: float, fmt):
        self.fmt = fmt
        lattice = UniformLattice(fmt, a, b)
        self.digits = lattice.digits
        keys, values, counts = lattice.counts()
        accept = acceptance(log_density_test(values, mean, std, a, b, fmt), fmt)
        weight = counts * accept
        total = float(weight.sum())
        if not total > 0:
            raise ValueError("no proposal is ever accepted")
        self.keys, self.values, self.probs = keys, values, weight / total
        p0 = float(acceptance(np.array([-np.inf]), fmt)[0])
        self.zero_share = p0 * float(counts.sum()) / total

    @classmethod
    def of(cls, law) -> "ProposalLaw | None":
        """The proposal law of a RoundedLaw's parameters (None: an infinite bound, or more than
        MAX_VALUES output values in the window); cached."""
        return _proposal_law(float(law.dist.loc), float(law.dist.scale), float(law.dist.a),
                             float(law.dist.b), law.fmt.name)

    def prob_at(self, value: float) -> float:
        key = self.fmt.ordered_keys(np.array([value]))[0]
        hit = self.keys == key
        return float(self.probs[hit].sum())

    def bin_probs(self, bins: LawBins) -> np.ndarray:
        """The law's mass in each of `bins` (the main histogram, or a narrow law's fine bins
        with the two outer bins)."""
        size = bins.probs.size
        if not bins.fine:
            idx = (self.keys >> np.uint64(self.fmt.bits - self.fmt.hist_bits)).astype(np.intp)
        else:
            idx = fine_bin_index(self.keys, bins)
        return np.bincount(idx, weights=self.probs, minlength=size)[:size]


@functools.lru_cache(maxsize=32)
def _proposal_law(mean: float, std: float, a: float, b: float, fmt_name: str):
    if not (math.isfinite(a) and math.isfinite(b) and std > 0):
        return None
    fmt = float_format(fmt_name)
    if fmt.bits not in (16, 32, 64):
        return None  # the uniform kernel's width for float8 is not modelled
    k = fmt.ordered_keys(np.array([a, b]))
    if int(k[1]) - int(k[0]) + 1 > MAX_VALUES:
        return None
    return ProposalLaw(mean, std, a, b, fmt)


# -- uniform proposals accepted by a coarse or faulty test ----------------------------------------

#: The finest acceptance lattice fitted: steps of 2^-K for K = 1..MAX_ACCEPT_BITS (at 2^-20 the
#: proposals the lattice's 0 accepts are ~2^-20 of the values on a window near the mean, a few
#: at the largest n the harness draws).
MAX_ACCEPT_BITS = 20


def proposal_ranges(law, bins: LawBins) -> tuple[np.ndarray, np.ndarray]:
    """(lo, hi) per main bin: the part of [a, b] whose proposals round into the bin (lo == hi
    where none): from the lower cell edge of its first value in [RN(a), RN(b)] to the upper
    edge of its last, clipped to [a, b]."""
    fmt = law.fmt
    a, b = float(law.dist.a), float(law.dist.b)
    size = bins.probs.size
    lo, hi = np.full(size, a), np.full(size, a)
    shift = fmt.bits - fmt.hist_bits
    k_a, k_b = (int(k) for k in fmt.ordered_keys(np.array([law.rn_a, law.rn_b])))
    if k_b < k_a:
        return lo, hi
    idx = np.arange(k_a >> shift, (k_b >> shift) + 1)
    first = np.maximum(idx << shift, k_a).astype(np.uint64)
    last = np.minimum(((idx + 1) << shift) - 1, k_b).astype(np.uint64)
    lo[idx] = np.clip(fmt.key_cell_edge(first, -1), a, b)
    hi[idx] = np.clip(fmt.key_cell_edge(last, +1), a, b)
    return lo, hi


def ratio_intervals(mean: float, std: float, a: float, b: float,
                    thresholds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(lo, hi): where the density ratio r(x) = f(x) / max f on [a, b] is >= each threshold in
    (0, 1], an interval of [a, b] around the mode (nested: lo increases, hi decreases as the
    threshold grows)."""
    mode = max(a, min(mean, b))
    z_peak = (mode - mean) / std
    half = np.sqrt(z_peak * z_peak - 2.0 * np.log(thresholds)) * std
    return np.clip(mean - half, a, b), np.clip(mean + half, a, b)


def nested_sums(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(cumulative lo, cumulative length) of nested intervals, each from 0: what `nested_overlap`
    reads, worked out once for all the points it is asked about."""
    return (np.concatenate([[0.0], np.cumsum(lo)]),
            np.concatenate([[0.0], np.cumsum(hi - lo)]))


def nested_overlap(x: np.ndarray, sums: tuple, counts: tuple) -> np.ndarray:
    """sum_j |[-inf, x] cap [lo_j, hi_j]| for each x, over nested intervals (lo ascending, hi
    descending): the intervals that start below x contribute up to x or to their end.
    `sums`: the intervals' `nested_sums`; `counts`: (#{j: lo_j < x}, #{j: hi_j > x}) per x
    (`interval_counts`, `lattice_counts`)."""
    cum_lo, cum_len = sums
    started, open_ = counts
    inside = np.minimum(started, open_)
    ended = np.maximum(started - open_, 0)  # j in [open_, started): [lo_j, hi_j] below x
    return (inside * x - cum_lo[inside]
            + np.where(ended > 0, cum_len[np.maximum(started, open_)] - cum_len[open_], 0.0))


def interval_counts(x: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> tuple:
    """(#{j: lo_j < x}, #{j: hi_j > x}) for each x, over nested intervals (lo ascending, hi
    descending)."""
    return np.searchsorted(lo, x, side="left"), np.searchsorted(-hi, -x, side="left")


def lattice_counts(finest_counts: tuple, bits: int) -> tuple:
    """`interval_counts` over a lattice's intervals (`lattice_intervals`) from those over the
    finest: its intervals are the finest's j = k s - 1 (k >= 1, s the step), and the finest's
    below (above) x are a prefix of them, so k s - 1 < count, k <= count // s."""
    step = 1 << (MAX_ACCEPT_BITS - bits)
    return tuple(c // step for c in finest_counts)


def lattice_intervals(finest: tuple, bits: int) -> tuple[np.ndarray, np.ndarray]:
    """The intervals where r(x) >= j 2^-bits, j = 1..2^bits - 1, picked out of `finest` (those
    of the thresholds j 2^-MAX_ACCEPT_BITS): every 2^(MAX_ACCEPT_BITS - bits)-th."""
    step = 1 << (MAX_ACCEPT_BITS - bits)
    return tuple(v[step - 1::step] for v in finest)


def lattice_acceptance_probs(ranges, finest: tuple, bits: int, finest_counts: tuple) -> np.ndarray:
    """The main bins' masses of uniform proposals on [a, b] accepted where u' <= r(x), u' uniform
    on the lattice j 2^-bits (j = 0..2^bits - 1): P(accept | x) = 2^-bits (1 + #{j >= 1: j 2^-bits
    <= r(x)}), integrated over each bin's `ranges`. `finest`: `ratio_intervals` of the thresholds
    j 2^-MAX_ACCEPT_BITS, j = 1..2^MAX_ACCEPT_BITS - 1, of which this lattice's are every
    2^(MAX_ACCEPT_BITS - bits)-th; `finest_counts`: their `interval_counts` at the ranges' lower
    and upper ends, worked out once for every lattice."""
    sums = nested_sums(*lattice_intervals(finest, bits))
    r_lo, r_hi = ranges
    at_lo, at_hi = (lattice_counts(c, bits) for c in finest_counts)
    mass = ((r_hi - r_lo) + nested_overlap(r_hi, sums, at_hi)
            - nested_overlap(r_lo, sums, at_lo))
    mass = np.maximum(mass, 0.0) * np.ldexp(1.0, -bits)
    total = float(mass.sum())
    return mass / total if total > 0 else mass


def mixture_weight(hist: np.ndarray, p: np.ndarray, q: np.ndarray) -> float | None:
    """The maximum-likelihood weight w in [0, 1] of the mixture (1 - w) p + w q for histogram
    counts `hist` (None: a count where both laws put no mass)."""
    seen = hist > 0
    if np.any(seen & (p <= 0) & (q <= 0)):
        return None
    h, ps, qs = hist[seen].astype(np.float64), p[seen], q[seen]

    def minus_log_likelihood(w: float) -> float:
        with np.errstate(divide="ignore"):
            return -float(np.sum(h * np.log((1.0 - w) * ps + w * qs)))

    found = optimize.minimize_scalar(minus_log_likelihood, bounds=(0.0, 1.0), method="bounded",
                                     options={"xatol": 1e-12})
    return float(found.x)


class CoarseAcceptance:
    """The laws of uniform proposals on [a, b], rounded into the dtype, accepted by a coarse or
    faulty test of u' <= r(x) (r the density ratio to its peak on [a, b]): u' uniform on the
    lattice j 2^-K, K = 1..MAX_ACCEPT_BITS (P(accept | x) = 2^-K (floor(2^K r) + 1), the
    truncated density rounded down to the lattice plus the 2^-K that u' = 0 accepts anywhere),
    or u' continuous but 0 with probability w (P(accept | x) = w + (1 - w) r: a mixture of the
    truncated law and the uniform proposal law). Each fitted to the main histogram by maximum
    likelihood (K over its range, the mixture weight in [0, 1]); `best` is the fitted law the
    histogram fits best."""

    def __init__(self, law, bins: LawBins, hist: np.ndarray):
        self.law, self.bins, self.hist = law, bins, hist
        dist = law.dist
        self.mean, self.std = float(dist.loc), float(dist.scale)
        self.a, self.b = float(dist.a), float(dist.b)
        self.ranges = proposal_ranges(law, bins)
        self.uniform = (self.ranges[1] - self.ranges[0]) / (self.b - self.a)

    def mixture(self) -> tuple[np.ndarray, float, str] | None:
        """(probs, uniform share, description) of the fitted mixture."""
        w = mixture_weight(self.hist, self.bins.probs, self.uniform)
        if w is None:
            return None
        probs = (1.0 - w) * self.bins.probs + w * self.uniform
        return probs, w, "u' = 0 with a fitted probability (a mixture of the law and the uniform)"

    def lattice(self) -> tuple[np.ndarray, float, str] | None:
        """(probs, uniform share, description) of the acceptance lattice of the likeliest K."""
        j = np.arange(1, 1 << MAX_ACCEPT_BITS, dtype=np.float64)
        finest = ratio_intervals(self.mean, self.std, self.a, self.b,
                                 np.ldexp(j, -MAX_ACCEPT_BITS))
        counts = tuple(interval_counts(end, *finest) for end in self.ranges)
        best = None
        for bits in range(1, MAX_ACCEPT_BITS + 1):
            probs = lattice_acceptance_probs(self.ranges, finest, bits, counts)
            llr = log_likelihood_ratio(self.hist, probs, self.bins.probs)
            if best is None or llr > best[0]:
                best = llr, bits, probs
        if best is None or not math.isfinite(best[0]):
            return None
        _, bits, probs = best
        # u' = 0 accepts 2^-K of every proposal: its share of the accepted ones, the integral
        # of P(accept | x) over [a, b] being 2^-K (b - a + the lengths of the intervals)
        lo, hi = lattice_intervals(finest, bits)
        width = self.b - self.a
        share = width / (width + float(np.sum(hi - lo)))
        return probs, share, f"u' on the lattice j 2^-{bits} (K = {bits})"


def floor_departs(ev: Evidence, probs: np.ndarray) -> bool:
    """Whether the proposals a coarse test lets through anywhere are seen where they dominate:
    the bins where `probs` is at least twice the law (the uniform floor above the truncated
    density) hold more values than the law gives them, at FALSE_MATCH. A law that only reshapes
    the window (a wider scale, a shift) never doubles it where the density ratio stays near 1."""
    law_probs = ev.bins.probs
    floor = probs >= 2.0 * law_probs
    mass = float(law_probs[floor].sum())
    count = float(ev.hist[floor].sum())
    return bool(floor.any() and count > ev.n * mass and departs(count, ev.n, mass))


class UniformProposals(Mechanism):
    name = "uniform-proposals"
    explains = BINNED
    doc = ("A rejection sampler with uniform proposals on [a, b] and a coarse or faulty "
           "acceptance test. torch's kernel: proposals uniform_(a, b) and the test computed in "
           "the dtype, the proposals on the lattice from + j 2^-D (to - from), D = 24 below 64 "
           "bits, rounded, a rounded `to` written as `from` (RN(a) gets RN(b)'s half cell, RN(b) "
           "nothing), the test rounded, a uniform of 0 accepting anything; prediction: that law "
           "per output value (`ProposalLaw`), its bound atoms and its histogram. Any other: the "
           "acceptance uniform on a 2^-K lattice (0 accepting anything) or 0 with a fitted "
           "probability (a mixture of the law and the uniform); prediction: that law, fitted "
           "to the histogram (`CoarseAcceptance`).")

    def test(self, ev: Evidence) -> Match | None:
        kernel = self.kernel_match(ev)
        if kernel is not None and kernel.explains == BINNED:
            return kernel
        return self.coarse_acceptance_match(ev) or kernel

    def kernel_match(self, ev: Evidence) -> Match | None:
        """The match of torch's kernel (`ProposalLaw`): its bound atoms, and its histogram
        where it fits."""
        law = ev.law
        sides, off = bound_departures(ev)
        if not off or len(sides) < 2:
            return None
        alt = ProposalLaw.of(law)
        if alt is None:
            return None
        predicted = {s: alt.prob_at(bound_value(law, s)) for s in sides}
        if not atoms_agree(ev, sides, predicted):
            return None
        note = "; ".join(self.atom_note(ev, s, predicted[s]) for s in sides)
        if alt.zero_share >= 0.01:
            note += (f"; {alt.zero_share:.3g} of the values accepted by a uniform of 0 "
                     f"(log 0 = -inf)")
        explains = ATOMS
        p = self.fit(ev, alt)
        if p is not None and p >= AGREE_LEVEL:
            explains = BINNED
            note += "; the histogram fits the uniform-proposal law"
        return self.match(note, parameter=alt.digits, explains=explains)

    def coarse_acceptance_match(self, ev: Evidence) -> Match | None:
        """The match of uniform proposals accepted by a coarse or faulty test
        (`CoarseAcceptance`): the main histogram departs from the law at FALSE_MATCH, the
        likeliest of its fitted laws is FALSE_MATCH^-1 times likelier than the law, and the
        histogram fits it (chi-square p >= AGREE_LEVEL, one degree of freedom taken by the
        fitted parameter)."""
        law = ev.law
        if not (math.isfinite(float(law.dist.a)) and math.isfinite(float(law.dist.b))
                and math.isfinite(law.rn_a) and math.isfinite(law.rn_b)):
            return None
        if ev.bins is None or not ev.binned_departs:
            return None
        laws = CoarseAcceptance(law, ev.bins, ev.hist)
        fits = []
        for fitted in (laws.lattice(), laws.mixture()):
            if fitted is None:
                continue
            probs, share, text = fitted
            llr = ev.log_likelihood_ratio(probs)
            p = chi2_fit(ev.hist, probs, fitted=1)
            if (llr >= -math.log(FALSE_MATCH) and p is not None and p >= AGREE_LEVEL
                    and floor_departs(ev, probs)):
                fits.append((p, share, text))
        if not fits:
            return None
        p, share, text = max(fits)
        note = (f"the histogram fits uniform proposals on [a, b] accepted by a coarse test, "
                f"{text}: {share:.3g} of the values are proposals the acceptance uniform's 0 "
                f"accepts anywhere (chi-square p {p:.2g}; the law p {ev.canonical_fit:.2g})")
        return self.match(note, parameter=share)

    @staticmethod
    def fit(ev: Evidence, alt: ProposalLaw) -> float | None:
        """The histogram's chi-square p against the proposal law (None: no histogram)."""
        judged = ev.judged_hist
        if judged is None:
            return None
        bins, hist = judged
        return chi2_fit(hist, alt.bin_probs(bins))

    @staticmethod
    def atom_note(ev: Evidence, side: str, predicted: float) -> str:
        """'atom at RN(a) = 1 (+1 sigma): predicted 0.0177, observed 0.0176 +- 0.00013, the law
        0.006', or for a bound no proposal stays on, 'RN(b) = 3 (+3 sigma): predicted 0 (its
        proposals are written as RN(a)), observed 0, the law 0.000223 (234 expected)'."""
        if predicted > 0:
            return atom_text(ev, side, predicted)
        law, n = ev.law, ev.n
        value = bound_value(law, side)
        return (f"RN({side}) = {value:.6g} ({sigma_text(ev, value)}): predicted "
                f"0 (its proposals are written as RN(a)), observed "
                f"{ev.atom_count(side)}, the law {law_atom(law, side):.3g} "
                f"({n * law_atom(law, side):.4g} expected)")
