"""A law given value by value, and what it predicts of one Summary: `CoarseLaw` (the output
values' keys and their probabilities) and `read`, which sets each of its predictions against the
statistic a check judges and names the checks whose statistic agrees.

Two kinds of mechanism hold such a law: a construction enumerated over its uniform's lattice
(`coarse_construction`: a library's inverse CDF where the dtype holds few values), and a step
done in a coarser format (`fine_structure.DtypeArithmetic`: every value on the float16 lattice of
a float32 tensor is the law rounded into float16, value by value). What the law predicts is the
same for both:

* the equal pairs of the resolution scan at sum p^2 (`predicted_pairs`, MODEL_TOL), where that
  moves them off the rounded law's count (`moves`);
* the judged histogram (main or fine bins) and the localized mass bins, by a chi-square fit at
  AGREE_LEVEL, the bins a value's key range spans pooled (`pooled_fit`: an erfinv the reference
  repeats only to a few ulps could move a value across a bin's edge);
* the equal successive elements at sum p^2 (MODEL_TOL), where the other independence components
  agree with independence;
* the coarser lattices' counts and the last bits' classes from the law's shares.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from scipy import stats

from ...families.independence import INDEPENDENCE
from ...families.localized import LocalBins
from ...families.resolution import (COLLISIONS, LATTICES, LOW_BITS, lattice_mask, low_bit_cells,
                                    pair_law)
from ..evidence import AGREE_LEVEL, MODEL_TOL, Evidence, agrees, chi2_fit, count_sd, fine_bin_index
from ..scope import checks_reading

#: The checks whose statistic a wrong law at the bins' resolution moves: those reading only the
#: histogram, the atoms, the moments, the extremes and the localized bins.
BINNED = checks_reading("binned", "atoms", "moments", "extremes", "localized")
#: The checks the main (or fine) histogram decides, and those the localized mass bins decide.
HISTOGRAM = checks_reading("binned", "atoms", "moments", "extremes")
LOCAL = BINNED - HISTOGRAM


@dataclass(frozen=True)
class CoarseLaw:
    """A law of output values: their ordered keys (ascending, distinct), their probabilities, and
    for each the key range an error of the reference's repetition could move it over."""

    keys: np.ndarray
    probs: np.ndarray
    lo_keys: np.ndarray
    hi_keys: np.ndarray
    v_values: int
    #: None where the keys are the law's own values; for a law held on cells of a uniform
    #: (`coarse_construction.cell_law`) the effective number of cells, whose drawn points'
    #: values are a stratified sample: right at the resolution of bins, the last bits' shares
    #: estimated
    sample_size: float | None = None

    @classmethod
    def exact(cls, keys: np.ndarray, probs: np.ndarray) -> "CoarseLaw":
        """A law known value by value (its keys ascending and distinct)."""
        keys = np.asarray(keys, dtype=np.uint64)
        return cls(keys, np.asarray(probs, dtype=np.float64), keys, keys, int(keys.size))

    @property
    def values_exact(self) -> bool:
        return self.sample_size is None

    @property
    def q2(self) -> float:
        return float(np.sum(self.probs ** 2))

    def indexed(self, index_of) -> list:
        """`index_of` (a map from ordered keys to bins) of the values' keys, and of the lowest
        and highest keys an erfinv error could move them to: computed once for an exact
        kernel's law, whose three are one array (millions of keys on a whole lattice)."""
        first = index_of(self.keys)
        if self.lo_keys is self.keys and self.hi_keys is self.keys:
            return [first, first, first]
        return [first, index_of(self.lo_keys), index_of(self.hi_keys)]


# -- the pieces every prediction of the resolution scan shares -----------------------------------

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


def moves(observed: float, predicted: float, law: float) -> bool:
    """Whether a prediction is off the law's value by more than MODEL_TOL of it, on the side the
    observation is: a prediction within the model tolerance of the law cannot account for a
    failing row, however well the count agrees with it."""
    return abs(predicted - law) > MODEL_TOL * abs(law) and (predicted - law) * (observed - law) > 0


def class_fit(counts: np.ndarray, shares: np.ndarray, inflation: float) -> float:
    """Chi-square p-value of the class counts against `shares` (classes expecting < 5 pooled,
    `low_bit_cells`), the statistic divided by `inflation` for the prediction's own error; 0
    where a class the prediction forbids holds a value."""
    if np.any((shares <= 0) & (counts > 0)):
        return 0.0
    n = float(counts.sum())
    cells = low_bit_cells(n * shares)
    if len(cells) < 2:
        return 0.0
    obs = np.array([counts[c].sum() for c in cells])
    exp = np.array([n * shares[c].sum() for c in cells])
    chi2 = float(np.sum((obs - exp) ** 2 / exp)) / inflation
    return float(stats.chi2.sf(chi2, len(cells) - 1))


def pooled_fit(hist, law_probs_by_bin, bin_lo, bin_hi) -> float | None:
    """Chi-square p of `hist` against bin masses, the bins between each value's bin_lo and bin_hi
    pooled (an erfinv error could move the value across their edges)."""
    size = hist.size
    joined = np.zeros(size + 1, dtype=np.int64)
    spans = bin_hi > bin_lo
    np.add.at(joined, bin_lo[spans] + 1, 1)
    np.add.at(joined, bin_hi[spans] + 1, -1)
    # joined[i] > 0: bin i is pooled with bin i - 1
    inside = np.cumsum(joined)[:size] > 0
    group = np.cumsum(~inside) - 1
    groups = int(group[-1]) + 1
    return chi2_fit(np.bincount(group, weights=hist, minlength=groups),
                    np.bincount(group, weights=law_probs_by_bin, minlength=groups))


#: The level at which the rounded law, its bins pooled as a fit pools them, must still be
#: rejected for the fit to explain a row: the default alpha a failing row's check reached.
POOLED_DEPARTURE = 1e-3


def binned_fit(counts, index: list, coarse: CoarseLaw, law_probs, what: str):
    """(whether the counts fit the law and not the rounded law, a note, the fit's p): the law's
    values put in their bins (`index`: each value's bin and the lowest and highest an erfinv
    error could move it to), then `pooled_fit`, against the law and against the rounded law's
    bin masses `law_probs` pooled alike. A pooled fit explains a failing row only where the
    rounded law, pooled alike, is still rejected (p < POOLED_DEPARTURE): where the pooling
    leaves too few bins to tell the two apart (a law held on cells as fine as the bins pools
    them all into one), the fit cannot account for the row, however well it agrees. None where
    no fit can be computed."""
    size = int(np.asarray(law_probs).size)
    probs = np.bincount(index[0], weights=coarse.probs, minlength=size)[:size]
    counts = np.asarray(counts, dtype=np.float64)
    p = pooled_fit(counts, probs, index[1], index[2])
    if p is None:
        return None
    if not np.any(index[2] > index[1]):
        return p >= AGREE_LEVEL, f"{what} fit p {p:.2g}", p
    p_law = pooled_fit(counts, np.asarray(law_probs, dtype=np.float64), index[1], index[2])
    ok = p >= AGREE_LEVEL and p_law is not None and p_law < POOLED_DEPARTURE
    return ok, f"{what} fit p {p:.2g} (the rounded law's, pooled alike, {p_law:.2g})", p


# -- the predictions, each (agrees, note[, the fit's p]) or None where it cannot be made -------

def pairs(ev: Evidence, coarse: CoarseLaw):
    """The resolution scan's equal pairs at the law's sum p^2."""
    count = scanned_pairs(ev)
    out = ev.outcome(COLLISIONS)
    if count is None or not out.applicable:
        return None
    mean, sd = predicted_pairs(ev, coarse.q2)
    law_mean, _ = predicted_pairs(ev, float(ev.law.collision_prob))
    ok = agrees(count, mean, sd, MODEL_TOL) and moves(count, mean, law_mean)
    return ok, (f"equal pairs {count}, predicted {mean:.4g} +- {sd:.2g} "
                f"(2^{-math.log2(coarse.q2):.2f} equally likely values), the law "
                f"{law_mean:.4g}")


def histogram(ev: Evidence, coarse: CoarseLaw):
    """The judged histogram (main or fine bins)."""
    judged = ev.judged_hist
    if judged is None:
        return None
    bins, hist = judged
    fmt = ev.law.fmt
    if bins.fine:
        index = coarse.indexed(lambda k: fine_bin_index(k.astype(np.uint64), bins))
    else:
        shift = np.uint64(fmt.bits - ev.summary.hist_bits)
        index = coarse.indexed(lambda k: (k >> shift).astype(np.int64))
    return binned_fit(hist, index, coarse, bins.probs, "the histogram's")


def mass_bins(ev: Evidence, coarse: CoarseLaw):
    """The localized mass bins (spikes, scan), where they are not the exact per-value ones."""
    bins = LocalBins.of(ev.law)
    counts = bins.counts(ev.summary)
    if counts is None or bins.exact:
        return None
    index = coarse.indexed(
        lambda k: np.asarray(bins.mass.bin_of_keys(k.astype(np.uint64)), dtype=np.int64))
    return binned_fit(counts, index, coarse, bins.probs, "the mass bins'")


def successive(ev: Evidence, coarse: CoarseLaw):
    """The equal successive elements at the law's sum p^2, the other components quiet."""
    if not ev.has("independence"):
        return None
    out = ev.outcome(INDEPENDENCE)
    state = ev.state("independence")
    count, equal = int(state.n_pairs_successive), int(state.n_equal_successive)
    if not out.applicable or count <= 0:
        return None
    name = "p[equal elements in successive calls]"
    others = [p for key, p in out.details.items() if key.startswith("p[") and key != name]
    mean = count * coarse.q2
    sd = math.sqrt(count * coarse.q2 * (1.0 - coarse.q2))
    ok = agrees(equal, mean, sd, MODEL_TOL) and all(p >= AGREE_LEVEL for p in others)
    return ok, f"equal successive elements {equal}, predicted {mean:.4g} +- {sd:.2g}"


def lattices(ev: Evidence, coarse: CoarseLaw):
    """Each coarser lattice's count at the law's mass on it."""
    state = ev.summary.resolution
    if not state.lattice_names or state.lattice_counts is None or int(state.scanned) == 0:
        return None
    n, fmt = int(state.scanned), ev.law.fmt
    # the law's values in the dtype (exact), tested as the engine counts them
    values = torch.from_numpy(fmt.values_from_keys(coarse.keys.astype(np.uint64))).to(
        getattr(torch, ev.summary.dtype))
    ok, parts = True, []
    for name, count in zip(state.lattice_names, state.lattice_counts):
        on = lattice_mask(values, name).numpy()
        mass = float(coarse.probs[on].sum())
        ok &= agrees(int(count) / n, mass, count_sd(n, mass), MODEL_TOL)
        parts.append(f"{name} values {int(count)}, predicted {n * mass:.4g}")
    return ok, "; ".join(parts)


def low_bits(ev: Evidence, coarse: CoarseLaw):
    """The last bits' classes at the law's shares (a sampled law's with their own error)."""
    state = ev.summary.resolution
    if state.low_bit_counts is None:
        return None
    bits = int(state.low_bits)
    counts = np.asarray(state.low_bit_counts, dtype=np.float64)
    n = float(counts.sum())
    if n <= 0:
        return None
    patterns = ev.law.fmt.bits_from_keys(coarse.keys.astype(np.uint64)).astype(np.int64)
    shares = np.bincount(patterns & ((1 << bits) - 1), weights=coarse.probs,
                         minlength=1 << bits)
    if np.any((shares <= 0) & (counts > 0)):
        return False, "the last bits: a class the law leaves empty is written"
    if np.count_nonzero(shares) == 1:
        return True, f"the last {bits} bits: every value in the one class the law writes"
    if len(low_bit_cells(n * shares)) < 2:
        return None
    # a sampled law's shares carry their own error: the two samples' chi-square
    inflation = 1.0 if coarse.values_exact else 1.0 + n / coarse.sample_size
    p = class_fit(counts, shares, inflation)
    return p >= AGREE_LEVEL, f"the last {bits} bits' fit p {p:.2g}", p


def read(ev: Evidence, coarse: CoarseLaw, written: str,
         anchored: frozenset = frozenset()) -> tuple[set, str, float] | None:
    """(the checks whose statistic agrees with `coarse`, the note opening with `written`, the
    smallest p of the fits that agree). None where neither the equal pairs nor the histogram
    agrees and no check of `anchored` is given: the law is not this sampler's (the histogram
    agrees where it fits, even where its pooled bins cannot tell the law from the rounded one,
    and then explains none of its checks). `anchored`: checks the caller's own signature
    already explains (a lattice every value lies on), which stand for the law whatever the
    equal pairs and the histogram say."""
    explains, parts, fits = set(anchored), [written], [1.0]

    def take(found, checks) -> None:
        # found: (agrees, text) or (agrees, text, the fit's p)
        if found is None:
            return
        ok, text, *p = found
        parts.append(text)
        if ok:
            explains.update(checks)
            fits.extend(p)

    take(pairs(ev, coarse) if coarse.values_exact else None, {COLLISIONS.name})
    judged = histogram(ev, coarse)
    take(judged, HISTOGRAM)
    # the histogram agrees with the law even where it cannot tell it from the rounded law
    if not explains and (judged is None or judged[2] < AGREE_LEVEL):
        return None
    take(mass_bins(ev, coarse), LOCAL)
    for check, fn in ((INDEPENDENCE.name, successive), (LATTICES.name, lattices),
                      (LOW_BITS.name, low_bits)):
        take(fn(ev, coarse) if coarse.values_exact or check == LOW_BITS.name else None,
             {check})
    return explains, "; ".join(parts), min(fits)
