"""The mechanisms seen at the atoms: `rounds-first`, `clamp`, `coarse-uniform` and `exact-zeros`.

Each predicts the mass of an atom (a bound, or zero) from the reference, and is tested on the
atoms family's counts; `rounds-first` and `clamp` also predict the whole binned law, so a fit of
the histogram to it lets their match explain every binned check, not only `atoms`.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from ...families.atoms import ATOMS as ATOMS_CHECK
from ...families.resolution import COLLISIONS, LATTICES, LOW_BITS, low_bit_law
from ..evidence import (AGREE_LEVEL, EMPTY_EXPECTED, MODEL_TOL, Z_AGREE, Evidence, agrees,
                        count_sd, departs, share_text)
from ..match import Match, Mechanism
from ..scope import checks_reading
from .clamp_points import (clamp_points, clamped_bin_probs, count_agrees, cut_and_heavy,
                           repeats_agree)
from .fine_structure import FEW_BITS, quantile_reading
from .value_law import BINNED, class_fit, predicted_pairs, scanned_pairs

#: The checks at the resolution of single values that heavy atoms move (their values repeat,
#: and sit on every coarser lattice and in one low-bit class).
REPEATED = checks_reading("resolution")
#: The atoms check alone.
ATOMS = frozenset({ATOMS_CHECK.name})
#: A written value whose share exceeds the law's by this factor is beyond any rounding cell
#: (a whole cell instead of a half one is at most 3x the half cell, where the spacing doubles).
BEYOND_CELL = 10.0


def finite_sides(law) -> list[str]:
    """The bounds of the law that are finite: "a", "b" (one of them where RN(a) == RN(b))."""
    sides = ["a"] if math.isfinite(law.rn_a) else []
    if math.isfinite(law.rn_b) and not (sides and law.rn_b == law.rn_a):
        sides.append("b")
    return sides


def law_atom(law, side: str) -> float:
    return float(law.atom_a if side == "a" else law.atom_b)


def bound_value(law, side: str) -> float:
    return float(law.rn_a if side == "a" else law.rn_b)


def sigma_text(ev: Evidence, value: float) -> str:
    return f"{(value - ev.mean) / ev.std:+.3g} sigma"


def atom_text(ev: Evidence, side: str, predicted: float, why: str = "") -> str:
    """'atom at RN(a) = -2 (-2 sigma): predicted 6.6e-4 (its whole cell), observed 6.5e-4 +-
    2.5e-5, the law 2.2e-4' (without the parenthesis where `why` is empty)."""
    law, n = ev.law, ev.n
    value = bound_value(law, side)
    observed = ev.atom_count(side) / n
    because = f" ({why})" if why else ""
    return (f"atom at RN({side}) = {value:.6g} ({sigma_text(ev, value)}): predicted "
            f"{predicted:.3g}{because}, observed {share_text(observed, n)}, the law "
            f"{law_atom(law, side):.3g}")


def atoms_depart(ev: Evidence, sides) -> list[str]:
    """The sides whose atom count is off the law at FALSE_MATCH."""
    return [s for s in sides if departs(ev.atom_count(s), ev.n, law_atom(ev.law, s))]


def bound_departures(ev: Evidence) -> tuple[list[str], list[str]]:
    """(the law's finite bound sides, those whose atom is off the law at FALSE_MATCH); both
    empty where the Summary has no atoms or no samples."""
    sides = finite_sides(ev.law)
    if not sides or not ev.has("atoms") or ev.n <= 0:
        return [], []
    return sides, atoms_depart(ev, sides)


def atoms_agree(ev: Evidence, sides, predicted: dict) -> bool:
    n = ev.n
    return all(agrees(ev.atom_count(s) / n, predicted[s], count_sd(n, predicted[s]), MODEL_TOL)
               for s in sides)


class RoundsFirst(Mechanism):
    name = "rounds-first"
    explains = BINNED
    doc = ("X ~ N(mu, sigma) rounded into the dtype, then the values outside [RN(a), RN(b)] "
           "redrawn (or tested after rounding): the bound atoms get their whole rounding cell. "
           "Prediction: the rounded law of TN(mu, sigma, cell_lo(RN(a)), cell_hi(RN(b))).")

    def test(self, ev: Evidence) -> Match | None:
        law = ev.law
        sides, off = bound_departures(ev)
        if not off:
            return None
        fmt = law.fmt
        lo, hi = float(ev.dist.a), float(ev.dist.b)
        if math.isfinite(law.rn_a):
            lo = float(fmt.cell_edges(np.array([law.rn_a]))[0][0])
        if math.isfinite(law.rn_b):
            hi = float(fmt.cell_edges(np.array([law.rn_b]))[1][0])
        alt = ev.alternative(ev.mean, ev.std, lo, hi)
        # read the atoms at the law's RN(a), RN(b): the alternative's ends are their cells' outer
        # edges, ties, and where RN(a)'s significand is odd (float16 -0.04 -> -0.0400085) the
        # tie rounds to the even value beyond, so the alternative's own rn_a is that value, which
        # holds no mass
        predicted = {s: float(alt.atom_probs(np.array([bound_value(law, s)]))[0]) for s in sides}
        if not atoms_agree(ev, sides, predicted):
            return None
        fits = ev.fits(alt)
        if fits is None:
            # a law judged on fine bins: the alternative summed value by value onto them
            fits = ev.fits_by_value(alt)
        if fits is None:
            return None
        note = "; ".join(atom_text(ev, s, predicted[s], "its whole cell") for s in off)
        if fits:
            return self.match(note + "; the histogram fits the rounds-first law")
        return self.match(note, explains=ATOMS)


#: Below this share of the normal inside [a, b] a clamp writes (almost) only a bound: a point
#: mass that other defects write too (a uniform lattice that never leaves a), so no match.
MIN_INSIDE = 1e-3


class Clamp(Mechanism):
    name = "clamp"
    explains = BINNED | REPEATED
    doc = ("X ~ N(mu, sigma) clamped to [a, b]: the mass outside piles on the bounds. "
           "Prediction: atom at RN(a) = Phi(alpha) + Z P(Y = RN(a)), at RN(b) = Phi(-beta) + "
           "Z P(Y = RN(b)), Z = Phi(beta) - Phi(alpha), the rest the law's shape times Z; not "
           "where Z < MIN_INSIDE (a point mass at a bound, which other defects write too). "
           "A clamp inside the support, one- or two-sided: X from a base D (the law itself, or "
           "N(mu, sigma) where a bound is finite) clamped to [c_lo, c_hi], the points read from "
           "the sample as its min and max. A point inside (RN(a), RN(b)) is a clamp's where the "
           "law puts >= EMPTY_EXPECTED draws beyond it (none written) and it holds far more "
           "draws than its cell (`clamp_points.cut_and_heavy`, FALSE_MATCH each). Prediction: "
           "atom at c_hi = D's mass beyond b + Z_D P(Y >= c_hi), at c_lo the same below, nothing "
           "beyond, the rest Z_D times the law; each point's count (exact, or the rows whose "
           "extreme it is) agrees with it (but a point inside, not cut, where D has no mass "
           "outside: the law's own extreme) and the histogram fits the clamped law; it explains "
           "the resolution checks whose statistics agree with that law's too "
           "(`clamp_points.repeats_agree`).")

    def test(self, ev: Evidence) -> Match | None:
        return self.test_at_bounds(ev) or self.test_inside(ev)

    def test_at_bounds(self, ev: Evidence) -> Match | None:
        """The clamp of N(mu, sigma) to [a, b] itself: the bound atoms hold the normal's mass
        outside."""
        law = ev.law
        sides, off = bound_departures(ev)
        if not off:
            return None
        alpha = (float(ev.dist.a) - ev.mean) / ev.std
        beta = (float(ev.dist.b) - ev.mean) / ev.std
        outside = {"a": float(special.ndtr(alpha)), "b": float(special.ndtr(-beta))}
        inside = 1.0 - outside["a"] - outside["b"]
        if inside < MIN_INSIDE:
            return None
        predicted = {s: outside[s] + inside * law_atom(law, s) for s in sides}
        if not atoms_agree(ev, sides, predicted):
            return None
        note = "; ".join(atom_text(ev, s, predicted[s], "the normal's mass beyond it")
                         for s in off)
        explains = set(ATOMS)
        if ev.bins is not None:
            probs = inside * np.asarray(ev.bins.probs, dtype=np.float64)
            for s in sides:
                probs[ev.bin_of(bound_value(law, s))] += outside[s]
            p = ev.fit(probs)
            if p is not None and p >= AGREE_LEVEL:
                explains |= BINNED
                note += "; the histogram fits the clamped law"
        q2 = inside**2 * float(law.collision_prob) + sum(predicted[s] ** 2 for s in sides)
        if pairs_agree(ev, q2):
            explains |= REPEATED
        return self.match(note, explains=frozenset(explains))

    def test_inside(self, ev: Evidence) -> Match | None:
        """A clamp with a point inside the support (the class doc): the first base whose
        clamped law every point's count and the histogram agree with; the parameter is the
        farthest inner point in sigma."""
        points = clamp_points(ev)
        if points is None or any(p.seen is None for p in points.values()):
            return None
        cut = [p for p in points.values() if cut_and_heavy(ev, p, BEYOND_CELL)]
        if not cut or ev.bins is None:
            return None
        k_lo, k_hi = ev.bin_of(points["lo"].value), ev.bin_of(points["hi"].value)
        if k_lo >= k_hi:
            return None  # one bin: no shape to fit
        for base, outside, inside in clamp_bases(ev):
            if inside < MIN_INSIDE:
                continue
            predicted = {s: outside[s] + inside * p.law_mass for s, p in points.items()}
            # a point inside, not cut, where the base has no mass outside, is the law's own
            # extreme: nothing moved there, and its count is selected (>= 1), so it is not tested
            tested = [p for p in points.values()
                      if p in cut or p.at_bound or outside[p.side] > 0]
            if not all(count_agrees(p.seen, predicted[p.side]) for p in tested):
                continue
            probs = clamped_bin_probs(ev.bins.probs, k_lo, k_hi, outside["lo"], outside["hi"],
                                      inside)
            p_fit = ev.fit(probs)
            if p_fit is None or p_fit < AGREE_LEVEL:
                continue
            note = "; ".join(clamp_point_text(ev, p, predicted[p.side], base) for p in cut)
            note += f"; the histogram fits the clamped law (p {p_fit:.2g})"
            moved = sum(p.law_mass for p in points.values())
            atoms = {p.value: predicted[s] for s, p in points.items()}
            explains = BINNED | repeats_agree(ev, atoms, inside, moved)
            farthest = max(abs(p.value - ev.mean) / ev.std for p in cut)
            return self.match(note, parameter=farthest, explains=frozenset(explains))
        return None


def clamp_bases(ev: Evidence):
    """(name, its mass outside [a, b] by side, its mass inside) of each law a clamp inside the
    support may start from: the law itself, then N(mu, sigma) where a bound is finite."""
    yield "the law's", {"lo": 0.0, "hi": 0.0}, 1.0
    alpha = (float(ev.dist.a) - ev.mean) / ev.std
    beta = (float(ev.dist.b) - ev.mean) / ev.std
    if math.isfinite(alpha) or math.isfinite(beta):
        outside = {"lo": float(special.ndtr(alpha)), "hi": float(special.ndtr(-beta))}
        yield "the normal's", outside, 1.0 - outside["lo"] - outside["hi"]


def clamp_point_text(ev: Evidence, point, predicted: float, base: str) -> str:
    """'clamp point 3 (+3 sigma): predicted 1.35e-3 (the law's mass beyond it), observed 609 of
    2048 rows with their max there (predicted 605), nothing beyond where the law puts 708'."""
    seen = point.seen
    if seen.row_len > 1:
        extreme = "min" if point.side == "lo" else "max"
        observed = f"{seen.count} of {seen.trials} rows with their {extreme} there"
    else:
        observed = f"{seen.count} of {seen.trials} draws there"
    return (f"clamp point {point.value:.6g} ({sigma_text(ev, point.value)}): predicted "
            f"{predicted:.3g} ({base} mass beyond it), observed {observed} (predicted "
            f"{seen.trials * seen.rate(predicted):.4g}), nothing beyond where the law puts "
            f"{ev.n * point.beyond:.4g}")


def pairs_agree(ev: Evidence, q2: float) -> bool:
    """Whether the equal pairs the resolution scan found agree with a collision rate q2 (False
    where the scan did not compare pairs)."""
    from ...families.resolution import pair_law

    if not ev.has("resolution"):
        return False
    state = ev.summary.resolution
    compared = float(state.collision_compared)
    if compared <= 0 or state.collision_block == 0:
        return False
    mean, dispersion = pair_law(compared, float(state.collision_triples), q2, q2 * q2)
    return agrees(float(state.collision_pairs), mean, math.sqrt(mean * dispersion), MODEL_TOL)


class CoarseUniform(Mechanism):
    name = "coarse-uniform"
    explains = BINNED | REPEATED
    doc = ("An inverse CDF fed a uniform on a 2^-k lattice: the lattice's end cell becomes an "
           "atom at a bound of mass ~2^-k (where the law has ~none), and the far tail is cut at "
           "the quantile 1 - 2^-k. Prediction: the law's mass beyond the largest value on the "
           "other side is the atom's mass within a factor of 4 (the lattice's spacing may halve "
           "or double across a binade of the uniform); k = -log2(atom mass). A lattice writes "
           "few values: at least half its draws lie on cells of at least 2^-k / 4 each, so its "
           "equal pairs are at least 2^-k / 8 of the pairs compared (the resolution scan's, or "
           "the histogram's where it holds every value); values nearly all distinct are no "
           "lattice's, whatever the bounds show. Where k is whole and a 32/64-bit scan counts "
           "the values, the inverse CDF at the lattice's 2^k points (u = 0 on it for an atom at "
           "a, u = 1 for one at b) is read value by value (`few-random-bits`' reading): the "
           "checks it agrees with are explained too, the lattice being the same story told "
           "with its atom seen.")

    #: The factor within which the cut tail's mass predicts the atom's (and back).
    FACTOR = 4.0
    #: The share of a lattice uniform's draws on cells of at least 1 / FACTOR of the end
    #: cell's mass: a fixed-point lattice's every cell has it; a floating one's spacing halves
    #: at most twice from its end over the binades that hold half its draws.
    COARSE_SHARE = 0.5

    def test(self, ev: Evidence) -> Match | None:
        law = ev.law
        if not ev.has("atoms") or not ev.has("support") or ev.n <= 0:
            return None
        support = ev.summary.support
        for side in finite_sides(law):
            count = ev.atom_count(side)
            share = count / ev.n
            if not (share > BEYOND_CELL * law_atom(law, side)
                    and departs(count, ev.n, law_atom(law, side))):
                continue
            if share > 0.5 and not agrees(share, 0.5, count_sd(ev.n, 0.5)):
                # more than half the draws on the bound, beyond the noise of a two-point
                # lattice's 1/2: a point mass, not a lattice's cell
                continue
            far = float(support.max if side == "a" else support.min)
            if not math.isfinite(far):
                continue
            beyond = float(law.prob_gt(far) if side == "a" else law.prob_lt(far))
            if ev.n * beyond < EMPTY_EXPECTED:
                continue  # the far tail is not measurably cut
            ratio = beyond / share
            if not (1.0 / self.FACTOR <= ratio <= self.FACTOR):
                continue
            floor_rate = self.COARSE_SHARE * share / self.FACTOR
            repeats = lattice_repeats(ev, floor_rate)
            if repeats is not None and not repeats[0]:
                continue  # the values repeat less than any lattice with that end cell writes
            k = -math.log2(share)
            sd_k = count_sd(ev.n, share) / share / math.log(2.0)
            k_text = f"k = {round(k)}" if abs(k - round(k)) <= max(0.1, 3 * sd_k) else \
                f"k = {k:.2f}"
            where = "above" if side == "a" else "below"
            note = (f"atom at RN({side}) = {bound_value(law, side):.6g} "
                    f"({sigma_text(ev, bound_value(law, side))}): observed "
                    f"{share_text(share, ev.n)} = 2^-{k:.2f} ({k_text}), the law "
                    f"{law_atom(law, side):.3g}; far tail cut {where} {far:.6g} "
                    f"({sigma_text(ev, far)}): the law puts {beyond:.3g} there "
                    f"({ratio:.2g} x 2^-k predicted within {self.FACTOR:g}x; "
                    f"{ev.n * beyond:.4g} expected, 0 observed)")
            if repeats is not None:
                note += f"; {repeats[1]}"
            whole = k_text == f"k = {round(k)}"
            explains = self.explains
            if whole and 1 <= round(k) <= FEW_BITS and law.fmt.bits >= 32:
                read = quantile_reading(ev, round(k), 0.0 if side == "a" else 1.0)
                if read is not None and read[0]:
                    explains = explains | frozenset(read[0])
                    note += f"; {read[1]}"
            return self.match(note, parameter=round(k) if whole else k, explains=explains)
        return None


def lattice_repeats(ev: Evidence, floor_rate: float) -> tuple[bool, str] | None:
    """(whether the values' equal pairs reach `floor_rate`, within the noise, and a note): the
    resolution scan's pairs on 32/64-bit values, the histogram's where it holds every value;
    None where neither counts them."""
    count = scanned_pairs(ev)
    if count is not None:
        mean, sd = predicted_pairs(ev, floor_rate)
        return (count >= mean - Z_AGREE * sd,
                f"{count} equal pairs, a lattice with that end cell writes >= {mean:.4g}")
    hist = ev.hist
    if hist is None or ev.summary.hist_bits != ev.law.fmt.bits:
        return None
    counts = np.asarray(hist, dtype=np.float64)
    n = float(counts.sum())
    if n < 2:
        return None
    rate, sd = pair_rate(counts)
    return (rate >= floor_rate - Z_AGREE * sd,
            f"equal pairs at rate {rate:.3g} +- {sd:.2g} (every value counted), a lattice with "
            f"that end cell writes >= {floor_rate:.3g}")


def pair_rate(counts: np.ndarray) -> tuple[float, float]:
    """(the chance two draws are equal, its sd) from every value's count: the unbiased
    sum c (c - 1) / (n (n - 1)), its sd by the delta method, 2 sqrt((sum p^3 - q^2) / n)."""
    n = float(counts.sum())
    rate = float(np.sum(counts * (counts - 1.0))) / (n * (n - 1.0))
    shares = counts / n
    cubes = float(np.sum(shares ** 3))
    return rate, 2.0 * math.sqrt(max(cubes - rate * rate, 0.0) / n)


class ExactZeros(Mechanism):
    name = "exact-zeros"
    explains = BINNED
    doc = ("Zeros written by construction (a Box-Muller radius of 0, mean + std * 0, an "
           "underflow flushed to zero) where the law gives zero almost no mass. Prediction: "
           "the law's zero mass is no explanation (the observed share is beyond any rounding "
           "cell, > 10x the law's); the rate is the parameter. It explains the binned checks where "
           "the histogram fits the law with the zeros added, else atoms alone; and, the zeros "
           "being a point mass at a known value, the checks at the resolution of single values "
           "where they agree with that mixture, (1 - p) law + p at 0: the equal pairs (the "
           "zeros' own pairs p^2 (f^2 + (1 - f)^2), f the share of +0 among them, +0 and -0 "
           "differing in their bits), the values on each coarser lattice (0 is on every one) "
           "and the last bits (0 ends in zeros).")

    def test(self, ev: Evidence) -> Match | None:
        law = ev.law
        if not ev.has("atoms") or ev.n <= 0:
            return None
        if float(law.rn_a) == 0.0:
            count, mass = ev.atom_count("a"), law_atom(law, "a")
        elif float(law.rn_b) == 0.0:
            count, mass = ev.atom_count("b"), law_atom(law, "b")
        elif float(law.rn_a) < 0.0 < float(law.rn_b):
            count = int(ev.summary.atoms.n_at_zero)
            mass = float(np.sum(law.atom_probs(np.array([0.0, -0.0]))))
        else:
            return None
        share = count / ev.n
        if not (share > BEYOND_CELL * mass and departs(count, ev.n, mass)):
            return None
        note = (f"zeros: {count} of {ev.n} ({share_text(share, ev.n)} per element), the law "
                f"{mass:.3g}")
        explains = ATOMS
        if ev.bins is not None:
            probs = (1.0 - share) * np.asarray(ev.bins.probs, dtype=np.float64)
            zero_bins = sorted({ev.bin_of(0.0), ev.bin_of(-0.0)})
            seen = np.array([float(ev.hist[k]) for k in zero_bins])
            for k, c in zip(zero_bins, seen):  # +0 and -0 as written
                probs[k] += share * (c / seen.sum() if seen.sum() > 0 else 1.0 / seen.size)
            p = ev.fit(probs)
            if p is not None and p >= AGREE_LEVEL:
                explains = BINNED
                note += "; the histogram fits the law with those zeros added"
            positive = seen[zero_bins.index(ev.bin_of(0.0))] / seen.sum() if (
                len(zero_bins) == 2 and seen.sum() > 0) else None
            more, texts = self.single_values(ev, share, mass, positive)
            explains = explains | more
            note += "".join(f"; {t}" for t in texts)
        return self.match(note, parameter=share, explains=explains)

    @staticmethod
    def single_values(ev: Evidence, share: float, mass: float,
                      positive: float | None) -> tuple[frozenset, list[str]]:
        """The resolution checks that agree with (1 - share) law + share at 0 and not with the
        law alone (a prediction the law's own figure also meets explains no departure: a few
        zeros change nothing the scan can see), and their notes: the equal pairs (`positive`:
        the share of +0 among the zeros, None where unknown: their pairs then anywhere from
        half to all of share^2), each coarser lattice's count, the last bits' classes."""
        if not ev.has("resolution"):
            return frozenset(), []
        state = ev.summary.resolution
        found, texts = set(), []
        split = [positive] if positive is not None else [0.5, 1.0]
        rest = (1.0 - share) ** 2 * float(ev.law.collision_prob) + 2.0 * share * (1 - share) * mass
        if (any(pairs_agree(ev, rest + share * share * (f * f + (1.0 - f) ** 2)) for f in split)
                and not pairs_agree(ev, float(ev.law.collision_prob))):
            found.add(COLLISIONS.name)
            texts.append(f"{int(state.collision_pairs)} equal pairs, as the zeros predict")
        scanned = int(state.scanned)
        if scanned > 0 and state.lattice_names and state.lattice_counts is not None:
            predicted = [(1.0 - share) * float(ev.law.lattice_mass(name)) + share
                         for name in state.lattice_names]
            law = [float(ev.law.lattice_mass(name)) for name in state.lattice_names]
            counts = [int(c) / scanned for c in state.lattice_counts]
            if (all(agrees(c, q, count_sd(scanned, q)) for c, q in zip(counts, predicted))
                    and not all(agrees(c, q, count_sd(scanned, q)) for c, q in zip(counts, law))):
                found.add(LATTICES.name)
                texts.append("the values on coarser lattices as the zeros predict")
        if state.low_bit_counts is not None and int(np.sum(state.low_bit_counts)) > 0:
            law = low_bit_law(ev.law, int(state.low_bits))
            shares = (1.0 - share) * law
            shares[0] += share
            counts = np.asarray(state.low_bit_counts, dtype=np.float64)
            p = class_fit(counts, shares, 1.0)
            if p >= AGREE_LEVEL and class_fit(counts, law, 1.0) < AGREE_LEVEL:
                found.add(LOW_BITS.name)
                texts.append(f"the last {int(state.low_bits)} bits as the zeros predict (p {p:.2g})")
        return frozenset(found), texts
