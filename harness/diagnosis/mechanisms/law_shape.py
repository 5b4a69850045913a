"""The mechanisms that move the law's shape: `shifted` (also shifted, then clamped back into
[a, b]), `scaled` and `tail-cut`.

Each is a one-parameter family of alternative laws TN(mu + d, sigma, a, b), TN(mu, s sigma, a,
b), TN(mu, sigma, a', b'): the parameter is estimated from the statistic it moves most (the
mean, the std, the extremes), the alternative law is built by the reference, and the match
holds where the statistics it did not fit agree with the alternative's (the std for a shift,
the mean and the kurtosis for a scale) and the binned histogram fits it.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from reference import TruncatedNormal

from ...families.binned import KS
from ...families.moments import MOMENTS
from ..evidence import AGREE_LEVEL, DEPART_Z, EMPTY_EXPECTED, Evidence, agrees
from ..match import Match, Mechanism
from .bound_atoms import (BINNED, REPEATED, bound_departures, bound_value, law_atom,
                          pairs_agree)

#: The relative step of the numerical derivative of the mean in mu.
STEP = 1e-3


def fit_text(fits: bool | None, what: str) -> str:
    if fits is None:
        return ""
    return f"; the histogram fits the {what}" if fits else ""


class Shifted(Mechanism):
    name = "shifted"
    explains = BINNED
    doc = ("The location is off: TN(mu + d, sigma, a, b). d from the observed mean (the "
           "mean's slope in mu from the reference); prediction: the std of the shifted law.")

    def test(self, ev: Evidence) -> Match | None:
        m = ev.moments
        if m is None or not m["mean_sd"] > 0:
            return None
        z = (m["mean"] - m["law_mean"]) / m["mean_sd"]
        if abs(z) < DEPART_Z:
            return None
        dist, mu, sigma = ev.dist, ev.mean, ev.std
        h = STEP * sigma
        slope = (TruncatedNormal(mu + h, sigma, dist.a, dist.b).mean
                 - TruncatedNormal(mu - h, sigma, dist.a, dist.b).mean) / (2 * h)
        if not slope > 1e-6:
            return None  # the bounds hide the location
        shift = (m["mean"] - m["law_mean"]) / slope
        try:
            moved = TruncatedNormal(mu + shift, sigma, dist.a, dist.b)
        except ValueError:
            return None
        std_pred = m["law_std"] + (moved.std - dist.std)
        if not agrees(m["std"], std_pred, m["std_sd"]):
            return None
        fits = ev.fits(ev.alternative(mu + shift, sigma, dist.a, dist.b))
        if fits is False:
            return None
        note = (f"mean {m['mean']:.6g} vs the law's {m['law_mean']:.6g} "
                f"({(m['mean'] - m['law_mean']) / m['law_std']:+.4f} +- "
                f"{m['mean_sd'] / m['law_std']:.2g} law sigma): mu shifted by "
                f"{shift / sigma:+.4f} sigma predicts the std {std_pred:.6g}, observed "
                f"{m['std']:.6g} +- {m['std_sd']:.2g}" + fit_text(fits, "shifted law"))
        return self.match(note, parameter=shift / sigma,
                          explains=None if fits else frozenset({MOMENTS.name, KS.name}))


class ShiftedClamped(Mechanism):
    name = "shifted"
    explains = BINNED | REPEATED
    doc = ("The location is off and the values clamped back into [a, b]: X + d, X ~ TN(mu, "
           "sigma, a, b), clamped. d from the one bound atom that departs (its excess over the "
           "law's is P(X > b - d), or P(X < a - d)), capped by the gap the values leave inside "
           "the other bound (none lies within |d| of it), where the histogram departs too; "
           "prediction: the whole histogram, the "
           "shifted law with its mass beyond the bound on RN(bound) and nothing within |d| of "
           "the other bound, and the equal pairs the atom adds. Placed before `coarse-uniform`, "
           "whose signature (an atom at one bound, the far tail cut) it shares.")

    def test(self, ev: Evidence) -> Match | None:
        sides, off = bound_departures(ev)
        if len(off) != 1 or ev.bins is None or not ev.binned_departs:
            return None  # an atom alone, the rest the law's: not a shift of the whole law
        side = off[0]
        law, dist = ev.law, ev.dist
        excess = ev.atom_count(side) / ev.n - law_atom(law, side)
        if not 0.0 < excess < 0.5:
            return None
        mu, sigma = ev.mean, ev.std
        lo, hi = float(special.ndtr(dist.alpha)), float(special.ndtr(dist.beta))
        z = hi - lo
        if side == "b":
            shift = float(dist.b) - mu - sigma * float(special.ndtri(hi - excess * z))
        else:
            shift = float(dist.a) - mu - sigma * float(special.ndtri(lo + excess * z))
        if not math.isfinite(shift) or shift == 0.0:
            return None
        # every shifted value lies |d| or more inside the other bound: the gap the values leave
        # there caps the atom's noisier estimate of d
        if ev.has("support"):
            edge = (float(ev.summary.support.min) - float(dist.a) if side == "b"
                    else float(dist.b) - float(ev.summary.support.max))
            if math.isfinite(edge) and 0.0 < edge < abs(shift):
                shift = math.copysign(edge, shift)
        try:
            moved = ev.alternative(mu + shift, sigma, float(dist.a) + shift,
                                   float(dist.b) + shift)
        except ValueError:
            return None
        probs = np.array(moved.hist_bin_probs(), dtype=np.float64)
        j = ev.bin_of(bound_value(law, side))
        if side == "b":
            probs[j] += probs[j + 1:].sum()
            probs[j + 1:] = 0.0
        else:
            probs[j] += probs[:j].sum()
            probs[:j] = 0.0
        p = ev.fit(probs)
        if p is None or p < AGREE_LEVEL:
            return None
        atom = ev.atom_count(side) / ev.n
        note = (f"atom at RN({side}) = {bound_value(law, side):.6g}: {atom:.4g} of the values, "
                f"the law {law_atom(law, side):.3g}, the mass a shift of d = "
                f"{shift / sigma:+.4f} sigma carries past the bound; the histogram fits the law "
                f"shifted by d and clamped back into [a, b] (chi-square p {p:.2g}), not the law "
                f"(p {ev.canonical_fit:.2g})")
        explains = set(BINNED)
        if pairs_agree(ev, (1.0 - atom) ** 2 * float(moved.collision_prob) + atom**2):
            explains |= REPEATED
        return self.match(note, parameter=shift / sigma, explains=frozenset(explains))


def solve_scale(dist, target_std: float) -> float | None:
    """The s with TN(mu, s sigma, a, b).std == target_std (bisection on [0.1, 10]; None where
    the bounds keep the std from reaching it)."""
    def gap(s: float) -> float:
        return TruncatedNormal(dist.loc, s * dist.scale, dist.a, dist.b).std - target_std

    lo, hi = 0.1, 10.0
    g_lo, g_hi = gap(lo), gap(hi)
    if not (g_lo < 0 < g_hi):
        return None
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if gap(mid) < 0:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


class Scaled(Mechanism):
    name = "scaled"
    explains = BINNED
    doc = ("The scale is off: TN(mu, s sigma, a, b). s from the observed std; prediction: "
           "the mean and the excess kurtosis of the scaled law.")

    def test(self, ev: Evidence) -> Match | None:
        m = ev.moments
        if m is None or not m["std_sd"] > 0:
            return None
        if abs(m["std"] - m["law_std"]) / m["std_sd"] < DEPART_Z:
            return None
        dist = ev.dist
        s = solve_scale(dist, dist.std + (m["std"] - m["law_std"]))
        if s is None:
            return None
        scaled = TruncatedNormal(dist.loc, s * dist.scale, dist.a, dist.b)
        mean_pred = m["law_mean"] + (scaled.mean - dist.mean)
        kurt_pred = m["law_kurtosis"] + (scaled.kurtosis - dist.kurtosis)
        if not (agrees(m["mean"], mean_pred, m["mean_sd"])
                and agrees(m["kurtosis"], kurt_pred, m["kurtosis_sd"])):
            return None
        fits = ev.fits(ev.alternative(dist.loc, s * dist.scale, dist.a, dist.b))
        if fits is False:
            return None
        note = (f"std {m['std']:.6g} +- {m['std_sd']:.2g} vs the law's {m['law_std']:.6g} "
                f"(x{m['std'] / m['law_std']:.4f}): sigma x{s:.4f} predicts the excess "
                f"kurtosis {kurt_pred:.4g}, observed {m['kurtosis']:.4g} +- "
                f"{m['kurtosis_sd']:.2g}, and the mean {mean_pred:.6g}, observed "
                f"{m['mean']:.6g}" + fit_text(fits, "scaled law"))
        return self.match(note, parameter=s,
                          explains=None if fits else frozenset({MOMENTS.name, KS.name}))


class TailCut(Mechanism):
    name = "tail-cut"
    explains = BINNED
    doc = ("No values beyond k sigma: the law cut at the extremes observed. Prediction: the "
           "region beyond holds >= -ln(FALSE_MATCH) expected values and none is there, and the "
           "histogram fits TN(mu, sigma, max(a, min), min(b, max)).")

    def test(self, ev: Evidence) -> Match | None:
        if not ev.has("support") or ev.n <= 0:
            return None
        law, dist = ev.law, ev.dist
        low, high = float(ev.summary.support.min), float(ev.summary.support.max)
        if not (math.isfinite(low) and math.isfinite(high)) or low >= high:
            return None
        below, above = float(law.prob_lt(low)), float(law.prob_gt(high))
        cut_low, cut_high = ev.n * below >= EMPTY_EXPECTED, ev.n * above >= EMPTY_EXPECTED
        if not (cut_low or cut_high):
            return None
        a = low if cut_low else float(dist.a)
        b = high if cut_high else float(dist.b)
        fits = ev.fits(ev.alternative(ev.mean, ev.std, a, b))
        if not fits:
            return None  # the cut law does not fit, or (fine bins) cannot be fitted
        parts, ks = [], []
        for cut, value, mass in ((cut_low, low, below), (cut_high, high, above)):
            if cut:
                k = abs(value - ev.mean) / ev.std
                ks.append(k)
                where = "below" if value < ev.mean else "beyond"
                parts.append(f"nothing {where} {value:.6g} ({(value - ev.mean) / ev.std:+.3g} "
                             f"sigma): the law puts {mass:.3g} there ({ev.n * mass:.4g} "
                             f"expected, 0 observed)")
        note = "; ".join(parts) + fit_text(fits, "law cut there")
        return self.match(note, parameter=max(ks))
