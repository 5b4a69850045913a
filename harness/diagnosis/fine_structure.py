"""The mechanisms seen only at the resolution of single values: `few-random-bits` (k from the
collision rate) and `dtype-arithmetic` (a step done in a coarser arithmetic than the output's:
last bits forced to zero, every value on a coarser format's lattice, or a 16-bit value rounded
twice on its way from float64).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from reference import TruncatedNormal, rounded_law
from reference.dtypes import float_format

from ..families.resolution import (COLLISIONS, LATTICES, LOW_BITS, check_collisions,
                                   check_lattices, check_low_bits, low_bit_law, pair_law)
from .bound_atoms import BINNED
from .evidence import AGREE_LEVEL, EMPTY_EXPECTED, FALSE_MATCH, MODEL_TOL, Evidence, agrees
from .match import Match, Mechanism


def predicted_pairs(ev: Evidence, q2: float) -> tuple[float, float]:
    """(mean, sd) of the equal pairs of the resolution scan at a collision rate q2."""
    state = ev.summary.resolution
    mean, dispersion = pair_law(float(state.collision_compared),
                                float(state.collision_triples), q2, q2 * q2)
    return mean, math.sqrt(mean * dispersion)


def scanned_pairs(ev: Evidence) -> int | None:
    """The equal pairs the resolution scan found (None where it compared none)."""
    if not ev.has("resolution"):
        return None
    state = ev.summary.resolution
    if state.collision_block == 0 or float(state.collision_compared) <= 0:
        return None
    return int(state.collision_pairs)


def quiet_at(ev: Evidence, check) -> bool:
    """Whether a resolution check agrees with the law (p >= AGREE_LEVEL) or does not apply."""
    out = ev.outcome(check)
    return (not out.applicable) or out.p_value >= AGREE_LEVEL


class FewRandomBits(Mechanism):
    name = "few-random-bits"
    explains = frozenset({COLLISIONS.name})
    doc = ("The values are a function of k random bits (a float32 uniform has 24, JAX's 23): "
           "equal pairs at the rate 2^-k, where the law's own rate is sum_v P(Y = v)^2. k from "
           "the collision rate; prediction: C pairs compared give C 2^-k equal pairs, while the "
           "last bits, the coarser lattices and the binned histogram stay the law's (the map "
           "from the bits to the values is one to one where the law has >= 2 bits more).")

    def test(self, ev: Evidence) -> Match | None:
        count = scanned_pairs(ev)
        if count is None or count == 0:
            return None
        out = ev.outcome(check_collisions)
        if (not out.applicable or out.p_value >= FALSE_MATCH
                or count <= out.details["pairs_expected"]):
            return None
        bits, own = float(out.details["bits"]), float(out.details["law_bits"])
        k = round(bits)
        if own < k + 2:
            return None
        mean, sd = predicted_pairs(ev, 2.0**-k)
        if not agrees(count, mean, sd, MODEL_TOL):
            return None
        if not (quiet_at(ev, check_low_bits) and quiet_at(ev, check_lattices)):
            return None
        if ev.binned_departs:
            return None
        note = (f"{count} equal pairs, the law's {out.details['pairs_expected']:.4g}: "
                f"{out.details['resolution']}; k = {k} random bits predict {mean:.4g} +- "
                f"{sd:.2g}; last bits and coarser lattices as the law's")
        return self.match(note, parameter=k)


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


#: The affine step's quadrature: this many equal-mass quantiles of the standardized law, and a
#: run of this many consecutive values of the dtype from each (2^20 values in all).
AFFINE_BLOCKS = 4096
AFFINE_RUN = 256
#: numpy's types of the dtypes whose arithmetic the quadrature repeats (IEEE, round to nearest).
NUMPY_TYPES = {"float64": (np.float64, np.int64), "float32": (np.float32, np.int32)}


def affine_classes(dist, dtype: str, bits: int) -> np.ndarray | None:
    """The shares of the last-`bits`-bit classes of y = z * std + mean computed in `dtype` (two
    roundings), z a value of the dtype drawn from the standardized law: a deterministic
    quadrature, runs of AFFINE_RUN consecutive values of z (the law's density is flat over a
    run) from AFFINE_BLOCKS equal-mass quantiles. None for a dtype numpy has no arithmetic for."""
    if dtype not in NUMPY_TYPES:
        return None
    real, whole = NUMPY_TYPES[dtype]
    unit = TruncatedNormal(0.0, 1.0, dist.alpha, dist.beta)
    quantiles = unit.ppf((np.arange(AFFINE_BLOCKS) + 0.5) / AFFINE_BLOCKS).astype(real)
    runs = quantiles.view(whole)[:, None] + np.arange(AFFINE_RUN, dtype=whole)[None, :]
    z = runs.view(real)
    with np.errstate(all="ignore"):
        y = z * real(dist.scale) + real(dist.loc)
    y = y[np.isfinite(y)]
    if y.size == 0:
        return None
    classes = np.bitwise_and(y.view(whole), (1 << bits) - 1).astype(np.int64)
    return np.bincount(classes, minlength=1 << bits) / y.size


class DtypeArithmetic(Mechanism):
    name = "dtype-arithmetic"
    explains = frozenset({LOW_BITS.name, LATTICES.name, COLLISIONS.name})
    doc = ("A step done in an arithmetic coarser than the output's. Three signatures, each "
           "predicted by the reference: (1) the last t bits of every value zero (a last step "
           "that truncates): the law puts >= -ln(FALSE_MATCH) values' worth of mass on the "
           "classes with one of them set, and equal pairs 2^t times the law's; (2) every value "
           "on the lattice of a coarser format F (computed in F, written wider): equal pairs at "
           "the collision rate of the rounded law in F; (3) a 16-bit value cast from float64 "
           "through float32 (rounded twice): the histogram fits the law of torch's cast "
           "(`rounded_law(..., rounding='torch')`) and not the single rounding; (4) mean + std z "
           "in the output dtype: the last bits' classes follow those of the affine step "
           "repeated in the dtype's own arithmetic on runs of consecutive z (`affine_classes`).")

    def test(self, ev: Evidence) -> Match | None:
        if ev.has("resolution") and ev.summary.resolution.low_bit_counts is not None:
            return self.low_bit_pattern(ev)
        return self.double_rounding(ev)

    def low_bit_pattern(self, ev: Evidence) -> Match | None:
        t = zero_low_bits(ev)
        if t == 0:
            return self.affine_step(ev)
        state = ev.summary.resolution
        scanned = int(np.asarray(state.low_bit_counts).sum())
        lattice = full_lattice(ev)
        law_q2 = float(ev.law.collision_prob)
        if lattice is not None:
            coarse = rounded_law(ev.dist, lattice)
            q2, why = float(coarse.collision_prob), f"the {lattice} law's collision rate"
            trailing = ev.law.fmt.man_bits - float_format(lattice).man_bits
            head = (f"every one of {scanned} scanned values on the {lattice} lattice (its last "
                    f"{trailing} bits zero; the law puts "
                    f"{1.0 - float(ev.law.lattice_mass(lattice)):.3g} of its values off it)")
        else:
            q2, why, trailing = (2**t) * law_q2, f"2^{t} x the law's", t
            off_share = float(np.sum(low_bit_law(ev.law, int(state.low_bits))[
                np.arange(1 << int(state.low_bits)) % (1 << t) != 0]))
            head = (f"the last {t} bit(s) of every one of {scanned} scanned values zero (the law "
                    f"puts {off_share:.3g} of its values elsewhere: {scanned * off_share:.4g} "
                    f"expected, 0 observed)")
        explains = {LOW_BITS.name} | ({LATTICES.name} if lattice is not None else set())
        count = scanned_pairs(ev)
        if count is not None:
            mean, sd = predicted_pairs(ev, q2)
            if agrees(count, mean, sd, MODEL_TOL):
                explains.add(COLLISIONS.name)
                head += f"; equal pairs {count}, predicted {mean:.4g} +- {sd:.2g} ({why})"
            else:
                head += (f"; equal pairs {count} do not follow ({why} predicts {mean:.4g} +- "
                         f"{sd:.2g})")
        return self.match(head, parameter=trailing, explains=frozenset(explains))

    def affine_step(self, ev: Evidence) -> Match | None:
        """(4): the last bits' classes depart from the law's and follow those of mean + std z
        computed in the output dtype (`affine_classes`)."""
        out = ev.outcome(check_low_bits)
        if not out.applicable or out.p_value >= FALSE_MATCH:
            return None
        state = ev.summary.resolution
        shares = affine_classes(ev.dist, ev.law.fmt.name, int(state.low_bits))
        if shares is None:
            return None
        counts = np.asarray(state.low_bit_counts, dtype=np.float64)
        n = float(counts.sum())
        expected = n * shares
        cells = expected >= 5.0
        if cells.sum() < 2 or counts[~cells].sum() > 0:
            return None
        # the quadrature's own error, as if its AFFINE_BLOCKS x AFFINE_RUN values were a sample
        inflation = 1.0 + n / (AFFINE_BLOCKS * AFFINE_RUN)
        chi2 = float(np.sum((counts[cells] - expected[cells]) ** 2 / expected[cells]) / inflation)
        p = float(stats.chi2.sf(chi2, int(cells.sum()) - 1))
        if p < AGREE_LEVEL:
            return None
        law_shares = low_bit_law(ev.law, int(state.low_bits))
        j = int(np.argmax(np.abs(shares - law_shares)))
        width = f"0{int(state.low_bits)}b"
        note = (f"last {int(state.low_bits)} bits: class {j:{width}} observed "
                f"{counts[j] / n:.4g} of the values, mean + std z in {ev.law.fmt.name} predicts "
                f"{shares[j]:.4g}, the law {law_shares[j]:.4g}; all {int(cells.sum())} classes "
                f"as predicted (chi2 p {p:.2g}), the law's rejected (p {out.p_value:.2g})")
        return self.match(note, explains=frozenset({LOW_BITS.name}))

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

