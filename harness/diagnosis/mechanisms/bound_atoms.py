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
from ..evidence import (AGREE_LEVEL, EMPTY_EXPECTED, MODEL_TOL, Evidence, agrees, count_sd,
                        departs, share_text)
from ..match import Match, Mechanism
from ..scope import checks_reading

#: The checks whose statistic a wrong law at the bins' resolution moves: those reading only the
#: histogram, the atoms, the moments, the extremes and the localized bins.
BINNED = checks_reading("binned", "atoms", "moments", "extremes", "localized")
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
           "where Z < MIN_INSIDE (a point mass at a bound, which other defects write too).")

    def test(self, ev: Evidence) -> Match | None:
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
           "or double across a binade of the uniform); k = -log2(atom mass).")

    #: The factor within which the cut tail's mass predicts the atom's (and back).
    FACTOR = 4.0

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
            return self.match(note, parameter=round(k) if k_text == f"k = {round(k)}" else k)
        return None


class ExactZeros(Mechanism):
    name = "exact-zeros"
    explains = BINNED
    doc = ("Zeros written by construction (a Box-Muller radius of 0, mean + std * 0, an "
           "underflow flushed to zero) where the law gives zero almost no mass. Prediction: "
           "the law's zero mass is no explanation (the observed share is beyond any rounding "
           "cell, > 10x the law's); the rate is the parameter. It explains the binned checks where "
           "the histogram fits the law with the zeros added, else atoms alone.")

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
        return self.match(note, parameter=share, explains=explains)
