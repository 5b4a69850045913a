"""The mechanisms of values written in the wrong place, the rest of the law intact:
`point-mass` (one value, or one narrow bin, gets an extra share p of the draws: a fallback
value, a clamped NaN), `hole` (a narrow interval inside the support is never written: a table
entry skipped, a lattice with a gap) and `outside-support` (values where the law has no mass,
outside [RN(a), RN(b)] or beyond its reach, the others the law's).

Each is a one-parameter mixture of the rounded law, read on the finest exact bins the Summary
holds (`harness.families.localized.LocalBins`: every value in 16-bit, the law's mass bins of
~2^-18.5 otherwise): the parameter comes from the bins that depart, and the match holds only
where every other bin fits the mixture (chi-square p >= AGREE_LEVEL), so a sampler wrong
elsewhere as well is never named by them.
"""

from __future__ import annotations

import numpy as np

from reference.dtypes import float_format

from ...checks.hard import BOUNDS, FINITE, not_finite
from ...families.localized import SCAN, SPIKES, LocalBins
from ...families.resolution import COLLISIONS, LATTICES
from ..evidence import (AGREE_LEVEL, FALSE_MATCH, MODEL_TOL, Evidence, agrees, chi2_fit,
                        count_sd, share_text)
from ..match import Match, Mechanism
from .bound_atoms import BINNED, bound_value, law_atom
from .value_law import predicted_pairs, scanned_pairs


def local_counts(ev: Evidence) -> tuple[LocalBins, np.ndarray] | None:
    """(bins, counts) of the finest exact bins (None: the Summary folded none)."""
    if not ev.has("binned"):
        return None
    bins = LocalBins.of(ev.law)
    counts = bins.counts(ev.summary)
    if counts is None or int(counts.sum()) <= 0:
        return None
    return bins, counts


def fit_text(p: float) -> str:
    return f"every other bin fits it (chi-square p {p:.2g})"


class PointMass(Mechanism):
    name = "point-mass"
    explains = BINNED
    doc = ("One value (or one mass bin) gets an extra share p of the draws: (1 - p) law + p at "
           "v (p = 1: every draw is v). p from the bin's excess, (c/n - q) / (1 - q); "
           "prediction: every other bin of the finest histogram fits the mixture, and the equal "
           "pairs and the values on coarser lattices are the mixture's.")

    def test(self, ev: Evidence) -> Match | None:
        local = local_counts(ev)
        if local is None:
            return None
        out = ev.outcome(SPIKES)
        if not out.applicable or out.p_value >= FALSE_MATCH or "worst_bin" not in out.details:
            return None
        bins, counts = local
        j, n = int(out.details["worst_bin"]), float(counts.sum())
        q = float(bins.probs[j])
        share = min((counts[j] / n - q) / (1.0 - q), 1.0)
        if not share > 0.0:
            return None
        mixture = (1.0 - share) * bins.probs
        mixture[j] += share
        p = chi2_fit(counts, mixture)
        if p is None or p < AGREE_LEVEL:
            return None
        if share >= 1.0:
            note = f"every one of the {int(n)} draws is {bins.label(j)}, where the law puts {q:.3g}"
        else:
            note = (f"{bins.label(j)}: {int(counts[j])} of {int(n)} draws "
                    f"({share_text(counts[j] / n, int(n))}), the law {q:.3g}: an extra "
                    f"{share:.3g} of the draws there; {fit_text(p)}")
        explains = set(self.explains)
        pairs = self.pairs_agree(ev, share, q)
        if pairs is not None:
            explains.add(COLLISIONS.name)
            note += f"; {pairs}"
        value = self.value(ev, bins, j, share)
        if value is not None and self.lattices_agree(ev, share, value):
            explains.add(LATTICES.name)
            note += f"; the values on coarser lattices as the mixture's ({value!r} on each)"
        return self.match(note, parameter=share, explains=frozenset(explains))

    @staticmethod
    def value(ev: Evidence, bins: LocalBins, j: int, share: float) -> float | None:
        """The value that holds the extra share: the bin's only value, or a bound's atom
        holding it (None: a bin of many values, none of them known to hold it)."""
        for side in ("a", "b"):
            count = ev.atom_count(side)
            if agrees(count / ev.n, share + law_atom(ev.law, side), count_sd(ev.n, share)):
                return bound_value(ev.law, side)
        if bins.n_values(j, j) == 1:
            key = j if bins.exact else int(bins.mass.key_ranges([j])[0][0])
            return float(ev.law.fmt.values_from_keys(np.array([key], dtype=np.uint64))[0])
        return None

    @staticmethod
    def lattices_agree(ev: Evidence, share: float, value: float) -> bool:
        """Whether the scanned values on each coarser lattice agree with the mixture's share
        there: (1 - p) the law's lattice mass, plus p where `value` is on that lattice."""
        if not ev.has("resolution"):
            return False
        state = ev.summary.resolution
        if not state.lattice_names or state.lattice_counts is None or int(state.scanned) <= 0:
            return False
        scanned = int(state.scanned)
        for name, count in zip(state.lattice_names, state.lattice_counts):
            on = float(float_format(name).round(np.array([value]))[0]) == value
            predicted = (1.0 - share) * float(ev.law.lattice_mass(name)) + share * on
            if not agrees(int(count) / scanned, predicted, count_sd(scanned, predicted)):
                return False
        return True

    @staticmethod
    def pairs_agree(ev: Evidence, share: float, q: float) -> str | None:
        """The equal pairs the mixture predicts, where they agree with the scan's (None: no
        scan, or no agreement)."""
        count = scanned_pairs(ev)
        if count is None:
            return None
        q2 = float(ev.law.collision_prob)
        mixed = (1.0 - share) ** 2 * q2 + 2.0 * share * (1.0 - share) * q + share * share
        mean, sd = predicted_pairs(ev, mixed)
        if not agrees(count, mean, sd, MODEL_TOL):
            return None
        return f"{count} equal pairs, the mixture predicts {mean:.4g} +- {sd:.2g}"


class Hole(Mechanism):
    name = "hole"
    explains = BINNED
    doc = ("A narrow interval inside the support never written: the law conditioned outside "
           "it. The interval: the scan's empty window, widened over the empty bins next to it; "
           "prediction: every other bin fits the law without the hole's mass.")

    def test(self, ev: Evidence) -> Match | None:
        local = local_counts(ev)
        if local is None:
            return None
        out = ev.outcome(SCAN)
        if (not out.applicable or out.p_value >= FALSE_MATCH or out.effect >= 0
                or "worst_bins" not in out.details):
            return None
        bins, counts = local
        j0, j1 = (int(j) for j in out.details["worst_bins"])
        if counts[j0:j1 + 1].any():
            return None  # a deficit, not a hole
        while j0 > bins.first and counts[j0 - 1] == 0:
            j0 -= 1
        while j1 < bins.last and counts[j1 + 1] == 0:
            j1 += 1
        if j0 <= bins.first or j1 >= bins.last:
            return None  # an end of the support: tail-cut's, not a hole
        mass = float(bins.probs[j0:j1 + 1].sum())
        rest = bins.probs.copy()
        rest[j0:j1 + 1] = 0.0
        p = chi2_fit(counts, rest / (1.0 - mass))
        if p is None or p < AGREE_LEVEL:
            return None
        n = int(counts.sum())
        note = (f"nothing in {bins.label(j0, j1)}, where the law puts {mass:.3g} "
                f"({n * mass:.4g} expected); {fit_text(p)}")
        return self.match(note, parameter=mass)


class OutsideSupport(Mechanism):
    name = "outside-support"
    explains = BINNED | {BOUNDS.name, FINITE.name}
    doc = ("Values written where the rounded law has no mass: outside [RN(a), RN(b)] (an "
           "unclamped path, an overflow), beyond the law's reach inside them (a value 10^4 "
           "sigma out that no draw of the law rounds to), or not finite where the law gives "
           "NaN and the infinities no mass (erfinv(1) = inf kept by a clip to an infinite "
           "bound). The share is the parameter; it explains the bounds check, the finite check "
           "where such values are among them, and the binned checks where the values inside "
           "fit the law or none is inside.")

    def test(self, ev: Evidence) -> Match | None:
        local = local_counts(ev)
        if local is None or not ev.has("support"):
            return None
        bins, counts = local
        support = ev.summary.support
        off = bins.probs <= 0
        nonfinite = not_finite(support, ev.law)
        outside = int(counts[off].sum())
        if int(counts.sum()) < ev.n:  # bins that leave the infinities out
            outside += int(support.n_posinf) + int(support.n_neginf)
        if outside <= 0 and nonfinite <= 0:
            return None
        n = int(counts.sum())
        share = min(max(outside, nonfinite) / n, 1.0)
        low, high = float(support.min), float(support.max)
        span = (f"written from {low:.6g} ({(low - ev.mean) / ev.std:+.3g} sigma) to {high:.6g} "
                f"({(high - ev.mean) / ev.std:+.3g} sigma)" if low <= high else "none finite")
        note = (f"{outside} of {n} values where the law has no mass ({share:.3g}; the law 0), "
                f"{span}; the law's values lie in [{float(ev.law.rn_a):.6g}, "
                f"{float(ev.law.rn_b):.6g}]")
        checks = {BOUNDS.name}
        if nonfinite:
            checks.add(FINITE.name)
            note += (f"; {nonfinite} not finite (NaN {support.n_nan}, +inf {support.n_posinf}, "
                     f"-inf {support.n_neginf}), where the law gives them no mass")
        inside = np.where(off, 0, counts)
        if inside.sum() == 0:
            return self.match(note + "; none is inside", parameter=share,
                              explains=frozenset(BINNED | checks))
        p = chi2_fit(inside, bins.probs)
        if p is not None and p >= AGREE_LEVEL:
            return self.match(note + f"; the values inside fit the law (chi-square p {p:.2g})",
                              parameter=share, explains=frozenset(BINNED | checks))
        return self.match(note, parameter=share, explains=frozenset(checks))
