"""The mechanisms seen only at the resolution of single values: `few-random-bits` (k from the
collision rate) and `dtype-arithmetic` (a step done in a coarser arithmetic than the output's:
last bits forced to zero, every value on a coarser format's lattice, a 16-bit value rounded
twice on its way from float64, or a last step done in the output dtype whose law the reference
pushes value by value: mean + std z, or uniform proposals on [a, b],
`harness.diagnosis.library_ops.affine`).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from scipy import special, stats

from reference import rounded_law
from reference.dtypes import float_format

from ...families.common import cached_on_law
from ...key_bins import COARSE_LATTICES
from ...families.resolution import COLLISIONS, LATTICES, LOW_BITS, low_bit_law
from ..evidence import (AGREE_LEVEL, EMPTY_EXPECTED, FALSE_MATCH, MODEL_TOL, Z_AGREE, Evidence,
                        agrees, count_sd, log_likelihood_ratio)
from ..library_ops.affine import ARITHMETIC, BLOCKS, RUN, AffineLaw, PushedLaw, PushedProposals
from ..library_ops.uniform_bits import MAX_BITS, SPACES, collision_rate
from ..match import Match, Mechanism
from . import value_law
from .value_law import BINNED, CoarseLaw, class_fit, moves, predicted_pairs, scanned_pairs


def quiet_at(ev: Evidence, check) -> bool:
    """Whether a resolution check agrees with the law (p >= AGREE_LEVEL) or does not apply."""
    out = ev.outcome(check)
    return (not out.applicable) or out.p_value >= AGREE_LEVEL


class FewRandomBits(Mechanism):
    name = "few-random-bits"
    explains = frozenset({COLLISIONS.name})
    doc = ("The values are a function of k random bits (a float32 uniform has 23 or 24, a "
           "32-bit word rounded into float32 more near 0): equal pairs at the rate of an "
           "inverse CDF driven by them, u = RN(j 2^-k) carried through erf or Phi space in the "
           "dtype (`harness.diagnosis.library_ops.uniform_bits`): 2^-k where every value holds at "
           "most one "
           "lattice point, more where the dtype's rounding of u, v or x merges them, the law's "
           "own rate where each value holds many. k and the space: the first of the common "
           "widths, then the widths from the observed rate up, whose rate the equal pairs agree "
           "with (MODEL_TOL) and which moves them off the law's; the binned histogram is the "
           "law's, and so are the last bits and the coarser lattices unless `dtype-arithmetic` "
           "reads them. Where the histogram holds every value (16-bit) and k is small, k from "
           "the counts themselves: every written value holds c 2^-k of the draws, c >= 1 an "
           "integer, and the c sum to 2^k (`count_lattice`). Where a 32/64-bit output holds few "
           "values (the pairs at 2^-k, k <= 20), the law's quantile at the 2^k left ends or "
           "midpoints of the uniform's cells, value by value, set against the pairs, the "
           "histogram, the mass bins, the lattices and the last bits (`from_values`).")

    def test(self, ev: Evidence) -> Match | None:
        return self.from_collisions(ev) or self.from_counts(ev) or self.from_values(ev)

    def from_values(self, ev: Evidence) -> Match | None:
        """k where a 32/64-bit output holds few values: the equal pairs depart upward at a rate
        near 2^-k (k <= FEW_BITS), and the law of the inverse CDF at the 2^k points (j + c) 2^-k
        (c = 0 or 1/2: the lattice's left ends or midpoints), each carried through the law's own
        quantile in float64 and rounded into the dtype, agrees with the equal pairs and the
        histogram (`value_law.read`): it then explains every check its values predict (where
        several do, the one that explains the most)."""
        count = scanned_pairs(ev)
        if count is None or ev.law.fmt.bits < 32:
            return None
        out = ev.outcome(COLLISIONS)
        if (not out.applicable or out.p_value >= FALSE_MATCH
                or count <= out.details["pairs_expected"]):
            return None
        observed = float(out.details["bits"])
        if not observed <= FEW_BITS:
            return None
        read = []
        for bits in range(max(1, math.floor(observed)), min(FEW_BITS, math.ceil(observed) + 1) + 1):
            for offset in POINT_OFFSETS:
                found = quantile_reading(ev, bits, offset)
                # the histogram too: a rate alone is `from_collisions`' reading, with its model
                if found is not None and {COLLISIONS.name} | value_law.HISTOGRAM <= found[0]:
                    read.append((bits, *found))
        if not read:
            return None
        # the points that explain the most checks; among as many, the closest fit
        bits, explains, text, _ = max(read, key=lambda r: (len(r[1]), r[3]))
        return self.match(f"the values are a function of k = {bits} random bits: {text}",
                          parameter=bits, explains=frozenset(explains))

    def from_counts(self, ev: Evidence) -> Match | None:
        """k where the values' counts sit on the lattice n c 2^-k and the law departs."""
        if ev.bins is None or ev.summary.hist_bits != ev.law.fmt.bits or not ev.binned_departs:
            return None
        found = count_lattice(ev.hist, ev.n)
        if found is None:
            return None
        k, p, written = found
        note = (f"{written} distinct values written, each with a whole multiple of 2^-{k} of "
                f"the {ev.n} draws (the lattice's fit p {p:.2g}, its units summing to 2^{k}): "
                f"the values are a function of k = {k} random bits; the law departs (p "
                f"{ev.canonical_fit:.2g})")
        return self.match(note, parameter=k, explains=BINNED | COUNTED)

    def from_collisions(self, ev: Evidence) -> Match | None:
        """k where the equal pairs agree with the k-bit inverse CDF's collision rate
        (`harness.diagnosis.library_ops.uniform_bits`) and that rate moves them off the law's; the last
        bits and the coarser lattices either the law's or read by `dtype-arithmetic` (a step in the
        dtype changes which values are written, not how many lattice points share one)."""
        count = scanned_pairs(ev)
        if count is None or count == 0:
            return None
        out = ev.outcome(COLLISIONS)
        if (not out.applicable or out.p_value >= FALSE_MATCH
                or count <= out.details["pairs_expected"]):
            return None
        if ev.binned_departs or not last_bits_accounted(ev):
            return None
        law_mean, _ = predicted_pairs(ev, float(ev.law.collision_prob))
        for bits in candidate_bits(ev.law.fmt, float(out.details["bits"])):
            for space in SPACES:
                model = collision_rate(ev.law, bits, space)
                mean, sd = predicted_pairs(ev, model.rate)
                sd = math.hypot(sd, mean * model.rel_sd)
                if agrees(count, mean, sd, MODEL_TOL) and moves(count, mean, law_mean):
                    note = (f"{count} equal pairs, the law's {out.details['pairs_expected']:.4g}: "
                            f"{out.details['resolution']}; an inverse CDF of k = {bits} random "
                            f"bits ({space} space, the uniform rounded into {ev.law.fmt.name}) "
                            f"predicts {mean:.4g} +- {sd:.2g} (2^{-math.log2(model.rate):.2f} "
                            f"equally likely values)")
                    return self.match(note, parameter=bits)
        return None


#: The widest uniform whose inverse CDF `FewRandomBits.from_values` enumerates (2^20 points),
#: and where each of its points sits in its cell of the uniform: the left end or the midpoint.
FEW_BITS = 20
POINT_OFFSETS = (0.0, 0.5)


def quantile_law(law, bits: int, offset: float) -> CoarseLaw | None:
    """The law of the truncated law's quantile at the 2^bits points (j + offset) 2^-bits, in
    float64 and rounded into `law`'s dtype, each point with mass 2^-bits (None: no finite value)."""
    points = (np.arange(1 << bits, dtype=np.float64) + offset) * 2.0 ** -bits
    with np.errstate(all="ignore"):
        values = law.fmt.round(np.asarray(law.dist.ppf(points), dtype=np.float64))
    values = values[np.isfinite(values)]
    if values.size == 0:
        return None
    keys, counts = np.unique(law.fmt.ordered_keys(values).astype(np.uint64), return_counts=True)
    return CoarseLaw.exact(keys, counts / counts.sum())


#: What each offset of `quantile_law`'s points is called in a note.
OFFSET_WORDS = {0.0: "left ends", 0.5: "midpoints", 1.0: "right ends"}


def quantile_reading(ev: Evidence, bits: int, offset: float) -> tuple[set, str, float] | None:
    """`value_law.read` of the inverse CDF at the 2^bits points (j + offset) 2^-bits
    (`quantile_law`, cached on the law): the checks it agrees with, its note and its fit; None
    where the points write no finite value or neither the pairs nor the histogram agree."""
    law = cached_on_law(ev.law, f"_few_bits_{bits}_{offset}",
                        lambda law: quantile_law(law, bits, offset) or False)
    if not law:
        return None
    where = OFFSET_WORDS.get(offset, "points")
    return value_law.read(ev, law, f"the inverse CDF at the {1 << bits} {where} "
                                   f"(j + {offset:g}) 2^-{bits}: {law.keys.size} values written")


def candidate_bits(fmt, observed_bits: float) -> list[int]:
    """The widths of uniform a k-bit reading tries, in order: the dtype's mantissa (with and
    without its implicit bit) and a 32-bit word first, the widths common uniforms have, then
    the four from the observed rate up (the k-bit rate is at least 2^-k where the dtype holds
    every u, so k below it cannot agree)."""
    cap = 32 if fmt.bits <= 32 else MAX_BITS
    low = max(1, math.floor(observed_bits))
    widths = [fmt.man_bits, fmt.man_bits + 1, 32, 52, 53] + list(range(low, low + 4))
    seen: list[int] = []
    for k in widths:
        if k <= cap and k not in seen:
            seen.append(k)
    return seen


def last_bits_accounted(ev: Evidence) -> bool:
    """Whether the last bits and the coarser lattices are the law's, or `dtype-arithmetic` reads
    each of them that is not."""
    loud = [check.name for check in (LOW_BITS, LATTICES) if not quiet_at(ev, check)]
    if not loud:
        return True
    match = DtypeArithmetic().test(ev)
    return match is not None and all(name in match.explains for name in loud)


#: A count lattice is read at k only where every written value's count has sd <= 1 / (2 Z) of
#: a unit, Z = Z_AGREE: c units of n 2^-k draws have sd sqrt(c n 2^-k), so n 2^-k >= 4 Z^2 c.
#: Then a count off the lattice misses its nearest multiple by ~Z sd, and rounding to it
#: cannot make a law's counts fit.
RESOLVED = 4.0 * Z_AGREE**2
#: The fewest values a count lattice is read on (a few values can sit near multiples by chance).
LATTICE_VALUES = 16
#: The checks a few-bit lattice of counts explains besides the binned ones: the values repeat.
COUNTED = frozenset({COLLISIONS.name, LATTICES.name, LOW_BITS.name})


def count_lattice(hist, n: int) -> tuple[int, float, int] | None:
    """(k, p, values written): the smallest k whose lattice holds the counts of a histogram of
    one bin per value, i.e. every count > 0 is Bin(n, c 2^-k) for an integer c >= 1 and the
    c sum to 2^k (p: the chi-square fit with each c the count's nearest multiple); only k where
    every count resolves its multiple (n 2^-k >= RESOLVED c) are read. None for fewer than
    LATTICE_VALUES values written, or where no such k fits at AGREE_LEVEL."""
    written = np.asarray(hist, dtype=np.float64)
    written = written[written > 0]
    if n <= 0 or written.size < LATTICE_VALUES:
        return None
    k = 0
    while n * 2.0 ** -(k + 1) >= RESOLVED:
        k += 1
        unit = n * 2.0**-k
        units = np.maximum(np.rint(written / unit), 1.0)
        if int(units.sum()) != 1 << k or unit < RESOLVED * float(units.max()):
            continue
        expected = unit * units
        x2 = float(np.sum((written - expected) ** 2 / (expected * (1.0 - units * 2.0**-k))))
        p = float(stats.chi2.sf(x2, written.size))
        if p >= AGREE_LEVEL:
            return k, p, int(written.size)
    return None


def zero_low_bits(ev: Evidence) -> int:
    """The largest t <= 4 such that no scanned value has any of its last t bits set while the
    law puts >= EMPTY_EXPECTED of them there (0: no such t)."""
    state = ev.summary.resolution
    if state.low_bit_counts is None:
        return 0
    counts = np.asarray(state.low_bit_counts, dtype=np.int64)
    scanned = int(counts.sum())
    probs = low_bit_law(ev.law, int(state.low_bits))
    classes = np.arange(counts.size)
    for t in range(int(state.low_bits), 0, -1):
        off = classes % (1 << t) != 0
        if counts[off].sum() == 0 and scanned * probs[off].sum() >= EMPTY_EXPECTED:
            return t
    return 0


def full_lattice(ev: Evidence) -> str | None:
    """The coarsest format whose lattice holds every scanned value, where the law puts a share
    there that departs (None: no such lattice)."""
    state = ev.summary.resolution
    if not state.lattice_names or state.lattice_counts is None:
        return None
    n = int(state.scanned)
    best = None
    for name, count in zip(state.lattice_names, state.lattice_counts):
        mass = float(ev.law.lattice_mass(name))
        if int(count) == n and n * (1.0 - mass) >= EMPTY_EXPECTED:
            if best is None or float_format(name).man_bits < float_format(best).man_bits:
                best = name
    return best


#: The laws of a last step done in the output dtype that `DtypeArithmetic` tests the last bits
#: against (`pushed_laws`): the affine step, the affine step on the redraws only, uniform proposals.
PUSHED_LAWS = 3
#: Their departure: the last bits' classes favour one of them over the law by a likelihood ratio
#: of at least PUSHED_LAWS / FALSE_MATCH. Under the law the ratio's mean is 1, so (Markov) an
#: exact sampler reaches it for any of them with probability <= FALSE_MATCH, whatever the
#: prediction's own error; it is the most powerful test of the law against each (Neyman-Pearson),
#: where the omnibus chi-square spends 15 df on alternatives nobody predicted.
LR_DEPART = math.log(PUSHED_LAWS / FALSE_MATCH)
#: The pushed laws are computed only where the low_bits row fails at the default alpha (each
#: costs ~0.1-0.2 s of CPU).
LOW_BITS_GATE = 1e-3


@dataclass(frozen=True)
class Pushed:
    """One pushed law: how the note names it, its last bits' class shares, and the law itself
    where it also predicts the equal pairs and the 16-bit lattices (None: the classes only)."""

    label: str
    shares: np.ndarray
    law: PushedLaw | None
    exact: bool


def pushed_laws(ev: Evidence, bits: int) -> Iterator[Pushed]:
    """The pushed laws of `ev`'s case in its dtype, computed one at a time (`harness.diagnosis.
    affine`) and once per law (the stages and shapes of a case share it): mean + std z in the
    dtype; the same on the redraws only, the first draw exact (a mixture, the first draw's share
    the normal's mass inside [a, b]: torch's float32 `normal_` on a strided view goes through
    float64, its redraws into a fresh contiguous tensor do not); rejection from the dtype's
    uniform proposals on [a, b]."""
    dtype = ev.law.fmt.name
    if dtype not in ARITHMETIC:
        return
    affine, shares = cached_on_law(ev.law, "_pushed_laws",
                                   lambda _: _with_shares(AffineLaw(ev.dist, dtype), bits),
                                   key=("affine", bits))
    exact = affine.runs[0].shape[0] == 1
    yield Pushed(f"mean + std z in {dtype}", shares, affine, exact)
    first = float(special.ndtr(ev.dist.beta) - special.ndtr(ev.dist.alpha))
    if first < 1.0:
        mixed = first * low_bit_law(ev.law, bits) + (1.0 - first) * shares
        yield Pushed(f"the first draw exact, its redraws ({1.0 - first:.3g} of the values) mean "
                     f"+ std z in {dtype}", mixed, None, exact)
    uniform = cached_on_law(ev.law, "_pushed_laws", lambda _: _proposals(ev, dtype, bits),
                            key=("uniform", bits))
    if uniform is None:
        return
    proposals, shares = uniform
    yield Pushed(f"uniform proposals RN(a) + (RN(b) - RN(a)) j 2^-{proposals.bits} in {dtype}, "
                 f"accepted by the density", shares, proposals, proposals.runs[0].shape[0] == 1)


def _with_shares(law, bits: int) -> tuple:
    return law, law.low_bit_shares(bits)


def _proposals(ev: Evidence, dtype: str, bits: int) -> tuple | None:
    """The uniform proposals' pushed law and its class shares (None: the case has none)."""
    try:
        proposals = PushedProposals(ev.dist, dtype)
    except ValueError:
        return None
    return _with_shares(proposals, bits)


class DtypeArithmetic(Mechanism):
    name = "dtype-arithmetic"
    explains = frozenset({LOW_BITS.name, LATTICES.name, COLLISIONS.name})
    doc = ("A step done in an arithmetic coarser than the output's. Five signatures, each "
           "predicted by the reference: (1) the last t bits of every value zero (a last step "
           "that truncates): the law puts >= -ln(FALSE_MATCH) values' worth of mass on the "
           "classes with one of them set, equal pairs 2^t times the law's, and each coarser "
           "format's lattice holding the law's share over the law's share with those t bits "
           "zero; (2) every value "
           "on the lattice of a coarser format F (computed in F, written wider): equal pairs at "
           "the collision rate of the rounded law in F, and the histogram and the mass bins "
           "from that law value by value (`format_law`); (3) a 16-bit value cast from float64 "
           "through float32 (rounded twice): the histogram fits the law of torch's cast "
           "(`rounded_law(..., rounding='torch')`) and not the single rounding; (4) mean + std z "
           "in the output dtype (or on the redraws only): the last bits' classes follow the "
           "affine step's law, value by value (`harness.diagnosis.library_ops.affine.AffineLaw`), "
           "and so do "
           "the equal pairs and the 16-bit lattices where they fail; (5) rejection from the "
           "dtype's uniform proposals on [a, b] (`PushedProposals`): the same three.")

    def test(self, ev: Evidence) -> Match | None:
        held = ev.memo.get(self.name)  # `few-random-bits` reads it too
        if held is None:
            held = ev.memo[self.name] = (self.read(ev),)
        return held[0]

    def read(self, ev: Evidence) -> Match | None:
        if ev.has("resolution") and ev.summary.resolution.low_bit_counts is not None:
            return self.low_bit_pattern(ev)
        return self.double_rounding(ev)

    def low_bit_pattern(self, ev: Evidence) -> Match | None:
        t = zero_low_bits(ev)
        # every value on a coarser format's lattice is (2) whatever pushed the values there
        lattice = full_lattice(ev) if t else None
        pushed = None
        if lattice is None:
            try:
                pushed = self.pushed_step(ev, t)
            except (ValueError, ArithmeticError):
                pushed = None  # a law the quadrature cannot push: (1) still stands
        if pushed is not None or t == 0:
            return pushed
        state = ev.summary.resolution
        scanned = int(np.asarray(state.low_bit_counts).sum())
        law_q2 = float(ev.law.collision_prob)
        if lattice is not None:
            scanned_on = lattice
            head = (f"every one of {scanned} scanned values on the {lattice} lattice (its last "
                    f"{ev.law.fmt.man_bits - float_format(lattice).man_bits} bits zero; the law "
                    f"puts {1.0 - float(ev.law.lattice_mass(lattice)):.3g} of its values off it)")
            lattice = nested_lattice(ev, lattice)
            if lattice != scanned_on:
                head += (f", and their equal pairs at the {lattice} law's rate: on the "
                         f"{lattice} lattice")
            q2 = float(rounded_law(ev.dist, lattice).collision_prob)
            why = f"the {lattice} law's collision rate"
            trailing = ev.law.fmt.man_bits - float_format(lattice).man_bits
        else:
            q2, why, trailing = (2**t) * law_q2, f"2^{t} x the law's", t
            head = zero_bits_text(ev, t)
        explains = {LOW_BITS.name} | ({LATTICES.name} if lattice is not None else set())
        if lattice is None:
            follows, text = zero_bits_lattices(ev, t)
            if text:
                head += "; " + text
            if follows:
                explains.add(LATTICES.name)
        count = scanned_pairs(ev)
        if count is not None:
            mean, sd = predicted_pairs(ev, q2)
            if agrees(count, mean, sd, MODEL_TOL):
                explains.add(COLLISIONS.name)
                head += f"; equal pairs {count}, predicted {mean:.4g} +- {sd:.2g} ({why})"
            else:
                head += (f"; equal pairs {count} do not follow ({why} predicts {mean:.4g} +- "
                         f"{sd:.2g})")
        if lattice is not None:
            whole, text = format_law_reads(ev, lattice)
            explains |= whole
            if text:
                head += "; " + text
        return self.match(head, parameter=trailing, explains=frozenset(explains))

    def pushed_step(self, ev: Evidence, t: int) -> Match | None:
        """(4), (5): the last bits' classes depart from the law's (the last t bits of every value
        zero, or a likelihood ratio >= e^LR_DEPART for the pushed law) and fit those of a last
        step done in the output dtype (`pushed_laws`); the first that fits is the match, and it
        explains collisions and lattices too where their counts agree with its prediction and
        the prediction moves them off the law's (`pairs_follow`, `lattices_follow`)."""
        out = ev.outcome(LOW_BITS)
        if not out.applicable or (t == 0 and out.p_value >= LOW_BITS_GATE):
            return None
        state = ev.summary.resolution
        bits = int(state.low_bits)
        counts = np.asarray(state.low_bit_counts, dtype=np.float64)
        n = float(counts.sum())
        law_shares = low_bit_law(ev.law, bits)
        for pushed in pushed_laws(ev, bits):
            ratio = log_likelihood_ratio(counts, pushed.shares, law_shares)
            if t == 0 and not ratio >= LR_DEPART:
                continue
            # the quadrature's own error, as if its BLOCKS x RUN values were a sample
            inflation = 1.0 if pushed.exact else 1.0 + n / (BLOCKS * RUN)
            p = class_fit(counts, pushed.shares, inflation)
            if p < AGREE_LEVEL:
                continue
            j = int(np.argmax(np.abs(pushed.shares - law_shares)))
            why = (zero_bits_text(ev, t) if t else
                   f"the law's rejected (p {out.p_value:.2g}; likelihood ratio e^{ratio:.3g} for "
                   f"the prediction)")
            note = (f"last {bits} bits: class {j:0{bits}b} observed {counts[j] / n:.4g} of the "
                    f"values, {pushed.label} predicts {pushed.shares[j]:.4g}, the law "
                    f"{law_shares[j]:.4g}; all classes as predicted (chi2 p {p:.2g}); {why}")
            explains = {LOW_BITS.name}
            if pushed.law is not None:
                for check, text in (pairs_follow(ev, pushed.law), lattices_follow(ev, pushed.law)):
                    if text:
                        note += "; " + text
                    if check:
                        explains.add(check)
            return self.match(note, explains=frozenset(explains))
        return None

    def double_rounding(self, ev: Evidence) -> Match | None:
        law = ev.law
        if law.fmt.bits > 16 or law.rounding != "rn" or not ev.binned_departs:
            return None
        twice = rounded_law(ev.dist, law.fmt, "torch")
        p = ev.fit(twice.hist_bin_probs())
        if p is None or p < AGREE_LEVEL:
            return None
        return self.match(f"the histogram fits torch's float64 -> float32 -> {law.fmt.name} cast "
                          f"(rounded twice: p {p:.2g}), not the single rounding "
                          f"(p {ev.canonical_fit:.2g})", parameter=None, explains=BINNED)



def nested_lattice(ev: Evidence, lattice: str) -> str:
    """The format whose lattice the values lie on, from `lattice` (every scanned value on it) and
    the equal pairs: `lattice` where they agree with its law's collision rate (MODEL_TOL) or no
    coarser format's does, else the coarser format nested in it whose law's rate they agree with
    (the scan counts only the lattices next to the dtype: float32's in a float64 tensor, whose
    float16 values repeat at float16's rate)."""
    count = scanned_pairs(ev)
    if count is None:
        return lattice

    def repeats_as(name: str) -> bool:
        mean, sd = predicted_pairs(ev, float(rounded_law(ev.dist, name).collision_prob))
        return agrees(count, mean, sd, MODEL_TOL)

    if repeats_as(lattice):
        return lattice
    return next((name for name in COARSE_LATTICES.get(lattice, ()) if repeats_as(name)), lattice)


#: The most values of a coarser format a law rounded into it is enumerated over (float32's
#: values in a wide float64 window are too many: there the lattice explains its own rows only).
MAX_FORMAT_VALUES = 1 << 20


def format_law(law, lattice: str) -> CoarseLaw | None:
    """`law`'s distribution rounded into the coarser format `lattice`, value by value, as keys
    of `law`'s dtype: what a sampler computing in that format and writing the wider dtype
    writes (None: more than MAX_FORMAT_VALUES values, or none)."""
    coarse = rounded_law(law.dist, lattice)
    fmt = coarse.fmt
    ends = np.array([coarse.support_lo, coarse.support_hi], dtype=np.float64)
    ends = np.clip(ends, -fmt.max_finite, fmt.max_finite)
    k0, k1 = (int(k) for k in fmt.ordered_keys(ends))
    if not k0 <= k1 or k1 - k0 + 1 > MAX_FORMAT_VALUES:
        return None
    values = fmt.values_from_keys(np.arange(k0, k1 + 1, dtype=np.uint64))
    probs = np.asarray(coarse.atom_probs(values), dtype=np.float64)
    keep = (probs > 0) & np.isfinite(values)
    if not np.any(keep):
        return None
    return CoarseLaw.exact(law.fmt.ordered_keys(values[keep]), probs[keep] / probs[keep].sum())


def format_law_reads(ev: Evidence, lattice: str) -> tuple[set, str]:
    """(the checks of the bins the law rounded into `lattice` explains, a note): every value
    on a coarser lattice predicts the whole histogram and the mass bins too, from that law
    value by value (`value_law`); each explained only where its fit agrees."""
    law = cached_on_law(ev.law, f"_format_law_{lattice}",
                        lambda law: format_law(law, lattice) or False)
    if not law:
        return set(), ""
    explains, texts = set(), []
    for found, checks in ((value_law.histogram(ev, law), value_law.HISTOGRAM),
                          (value_law.mass_bins(ev, law), value_law.LOCAL)):
        if found is None:
            continue
        ok, text, *_ = found
        texts.append(text)
        if ok:
            explains |= checks
    if not texts:
        return set(), ""
    return explains, f"the law rounded into {lattice}, value by value: " + ", ".join(texts)


def zero_bits_text(ev: Evidence, t: int) -> str:
    state = ev.summary.resolution
    scanned = int(np.asarray(state.low_bit_counts).sum())
    off_share = float(np.sum(low_bit_law(ev.law, int(state.low_bits))[
        np.arange(1 << int(state.low_bits)) % (1 << t) != 0]))
    return (f"the last {t} bit(s) of every one of {scanned} scanned values zero (the law puts "
            f"{off_share:.3g} of its values elsewhere: {scanned * off_share:.4g} expected, 0 "
            f"observed)")


def zero_bits_lattices(ev: Evidence, t: int) -> tuple[bool, str]:
    """(whether the coarse lattices follow, a note) for the last t bits of every value zero: a
    coarser format's values have those bits zero already, so each lattice's share is the law's
    divided by the law's share with its last t bits zero; every lattice's count must agree with
    that (MODEL_TOL) and the prediction must `move` the count farthest from the law's."""
    state = ev.summary.resolution
    if (not state.lattice_names or state.lattice_counts is None or int(state.scanned) == 0
            or t > int(state.low_bits)):
        return False, ""
    classes = np.arange(1 << int(state.low_bits))
    kept = float(np.sum(low_bit_law(ev.law, int(state.low_bits))[classes % (1 << t) == 0]))
    if kept <= 0:
        return False, ""
    follows, text = lattices_against(
        ev, lambda name: min(1.0, float(ev.law.lattice_mass(name)) / kept))
    return bool(follows), text


def pairs_follow(ev: Evidence, pushed: PushedLaw) -> tuple[str | None, str]:
    """(COLLISIONS' name or None, a note): whether the equal pairs agree with the pushed law's
    collision rate (MODEL_TOL) and that rate `moves` them off the law's (no note where the law
    expects less than one equal pair: float64)."""
    count = scanned_pairs(ev)
    if count is None:
        return None, ""
    law_mean, _ = predicted_pairs(ev, float(ev.law.collision_prob))
    if law_mean < 1.0:
        return None, ""
    q2 = float(pushed.collision_prob)
    mean, sd = predicted_pairs(ev, q2)
    text = (f"equal pairs {count}, predicted {mean:.4g} +- {sd:.2g} (2^{-math.log2(q2):.2f} "
            f"equally likely values), the law {law_mean:.4g}")
    follows = agrees(count, mean, sd, MODEL_TOL) and moves(count, mean, law_mean)
    return (COLLISIONS.name if follows else None), text


def lattices_follow(ev: Evidence, pushed: PushedLaw) -> tuple[str | None, str]:
    """(LATTICES' name or None, a note): whether every coarse lattice's count agrees with the
    pushed law's mass on it (MODEL_TOL) and, on the lattice farthest from the law (the one the
    row fails on), the prediction `moves` the count off the law's; None where a lattice has no
    prediction (float32 in float64)."""
    state = ev.summary.resolution
    if not state.lattice_names or state.lattice_counts is None or int(state.scanned) == 0:
        return None, ""
    follows, text = lattices_against(ev, pushed.lattice_mass)
    return (LATTICES.name if follows else None), text


def lattices_against(ev: Evidence, mass_of) -> tuple[bool | None, str]:
    """(whether the coarse lattices follow a prediction, a note): every lattice's count agrees
    with ``mass_of(name)`` (MODEL_TOL) and, on the lattice farthest from the law, the prediction
    `moves` the count off the law's; (None, "") where a lattice has no prediction."""
    state = ev.summary.resolution
    n = int(state.scanned)
    parts, follows, worst = [], True, (-1.0, False)
    for name, count in zip(state.lattice_names, state.lattice_counts):
        mass = mass_of(name)
        if mass is None:
            return None, ""
        law_mass = float(ev.law.lattice_mass(name))
        share = int(count) / n
        follows &= agrees(share, mass, count_sd(n, mass), MODEL_TOL)
        off = abs(share - law_mass) / max(count_sd(n, law_mass), 1e-300)
        if off > worst[0]:
            worst = (off, moves(share, mass, law_mass))
        parts.append(f"{name} values {int(count)}, predicted {n * mass:.4g} (the law "
                     f"{n * law_mass:.4g})")
    return follows and worst[1], "; ".join(parts)
