"""The position family: what only the place of an element in a tensor reveals, and
`check_position`, whether the elements a kernel treats apart (the first and last, the
vector-loop remainders, the row ends) follow the law of the rest of the tensor.

State (`PositionState`): the position classes (`harness.key_bins.position_classes`) and, for each,
the counts of its elements over the law's coarse groups of equal mass
(`harness.key_bins.position_bins`), int64[classes, groups]: a kernel whose remainder loop or boundary
block is wrong shows in its class however small it is. Memory grows neither with n nor with the
shape: a class is arithmetic on the flat index (a run of flat indices, or of columns in every
row), read from each chunk by slicing it. A sharded part folds a box of the tensor, not the
tensor in row-major order: no position classes.
"""

from __future__ import annotations

import math

from dataclasses import dataclass

import numpy as np
import torch
from scipy import stats

from ..key_bins import position_bins, position_classes
from ..declaration import statistical
from ..engine import Family
from ..result import Outcome
from ..summary import Summary
from . import binned
from .binned import gof_groups, w_mde
from .common import bonferroni, cached_on_law, clip_p, not_applicable, quiet

#: Each merged group of a class expects at least this many elements (more than gof's Cochran 5:
#: the classes are small, and the chi-square approximation must hold at the p-values that fail).
POSITION_MIN_EXPECTED = 10.0


@dataclass
class PositionState:
    """Counts of each position class's elements over the law's coarse groups."""

    classes: tuple  # the class names
    groups: int
    counts: np.ndarray  # int64[classes, groups]

    @classmethod
    def merge(cls, parts, whole) -> "PositionState | None":
        if len({(tuple(p.classes), p.groups) for p in parts}) != 1:
            return None
        return cls(tuple(parts[0].classes), parts[0].groups,
                   np.sum([np.asarray(p.counts) for p in parts], axis=0))


class PositionFold:
    """Counts of each position class over the law's coarse groups, on the device. A class's
    elements are read from each chunk by slicing (a run of columns of every row) or by a few
    multi-indices (a run of at most 31 flat indices, held from `start`): nothing the size of
    the tensor is built or kept, and what a chunk costs beyond itself is its classes' values."""

    @classmethod
    def start(cls, law, shape: tuple, fold) -> "PositionFold | None":
        classes = position_classes(tuple(shape)) if law is not None and fold.positional else []
        if not classes:
            return None
        edges, masses = law_groups(law)
        if masses.size < 2:
            return None
        return cls(fold, tuple(shape), classes, edges, masses.size)

    def __init__(self, fold, shape: tuple, classes, edges, groups: int):
        self.owner = fold
        device = fold.device
        # Values compared with the coarse edges exactly: float64 for float64, else float32.
        self.edge_dtype = torch.float64 if fold.dtype == torch.float64 else torch.float32
        self.edges = torch.as_tensor(edges, dtype=self.edge_dtype, device=device)
        # A run of flat indices is short (the first, the last, a numel remainder: < 32
        # elements) but may cross rows: its multi-indices select it from a batch of any strides.
        self.selectors = []
        for c in classes:
            if c.flat is not None:
                where = np.unravel_index(np.arange(*c.flat, dtype=np.int64), shape)
                self.selectors.append((slice(None),) + tuple(torch.as_tensor(w, device=device)
                                                             for w in where))
            else:
                self.selectors.append((Ellipsis, slice(*c.cols)))
        self.counts = torch.zeros(len(classes), groups, dtype=torch.int64, device=device)
        self.classes = tuple(c.name for c in classes)
        self.groups = groups

    def fold(self, chunk) -> None:
        batch = chunk.batch
        for c, selector in enumerate(self.selectors):
            # searchsorted copies a strided input anyway (and warns): one contiguous copy here
            values = batch[selector].to(self.edge_dtype).contiguous().view(-1)
            self.counts[c] += torch.bincount(torch.searchsorted(self.edges, values),
                                             minlength=self.groups)

    def finish(self, whole: Summary) -> PositionState:
        return PositionState(self.classes, self.groups, self.counts.cpu().numpy())


FAMILY = Family("position", PositionFold.start)


def law_groups(law):
    """`position_bins` of `law`, found once per law."""
    return cached_on_law(law, "_position_bins", position_bins)


def group_totals(summary: Summary, law) -> np.ndarray:
    """Elements of the whole draw in each coarse group of `law` (`law_groups`), from the Summary's
    histogram: every histogram bin (a fine bin for a narrow law) lies inside one group, the group
    of its largest value (edges fall on bin boundaries). Bins without a finite value (NaN, inf)
    go to the first or last group by their side, as the engine's searchsorted puts those values."""
    bins = summary.binned
    fine = law.fine_bins is not None and bins.fine_hist is not None
    if fine:
        inner = np.asarray(bins.fine_hist, dtype=np.float64)
        counts = inner[1:-1]
        below, above = float(inner[0]), float(inner[-1])
    else:
        counts = np.asarray(bins.hist, dtype=np.float64)
        below = above = 0.0
    groups = law_groups(law)[1].size
    totals = np.bincount(bin_groups(law, fine), weights=counts, minlength=groups)[:groups]
    totals[0] += below
    totals[-1] += above
    return totals


def bin_groups(law, fine: bool) -> np.ndarray:
    """The coarse group (`law_groups`) of each histogram bin of `law`, of each fine bin where
    `fine`: a function of the law alone, found once per law (every stage's check and the
    diagnosis read it, a searchsorted over up to 2^20 bins)."""
    def build(law):
        edges, masses = law_groups(law)
        lo, hi = law.fine_bin_bounds() if fine else law.fmt.hist_bin_bounds()
        hi, lo = np.asarray(hi, dtype=np.float64), np.asarray(lo, dtype=np.float64)
        side = np.where(np.arange(hi.size) < hi.size // 2, -np.inf, np.inf)
        value = np.where(np.isfinite(hi), hi, np.where(np.isfinite(lo), lo, side))
        return np.minimum(np.searchsorted(edges, value, side="left"), masses.size - 1)

    return cached_on_law(law, "_position_bin_groups", build, key=fine)


def class_test(counts: np.ndarray, totals: np.ndarray, masses: np.ndarray):
    """(X2, df, p, w, n_eff, worst group, observed, expected) of one class against the rest of
    the draw (a 2 x G homogeneity chi-square, groups merged by the law's masses to expect
    POSITION_MIN_EXPECTED in the class); None when the class or the rest is too small for two
    merged groups."""
    n_c = float(counts.sum())
    rest = np.maximum(totals - counts, 0.0)
    n_r = float(rest.sum())
    if n_c <= 0 or n_r <= 0:
        return None
    pos, starts = gof_groups(masses, n_c, POSITION_MIN_EXPECTED)
    df = int(starts.size) - 1
    if df < 1:
        return None
    # Values outside every positive-mass group (impossible ones) count with their neighbours:
    # what they say is the finite/bounds checks' business; here only where they fall matters.
    cuts = pos[starts]
    cuts[0] = 0
    obs_c = np.add.reduceat(counts, cuts)
    obs_r = np.add.reduceat(rest, cuts)
    both = obs_c + obs_r
    live = both > 0
    obs_c, obs_r, both = obs_c[live], obs_r[live], both[live]
    df = int(both.size) - 1
    if df < 1:
        return None
    n = n_c + n_r
    exp_c, exp_r = n_c * both / n, n_r * both / n
    resid = (obs_c - exp_c) / np.sqrt(exp_c)
    x2 = float(np.sum(resid * resid) + np.sum((obs_r - exp_r) ** 2 / exp_r))
    n_eff = n_c * n_r / n
    j = int(np.argmax(np.abs(resid)))
    return (x2, df, clip_p(stats.chi2.sf(x2, df)), math.sqrt(max(x2 - df, 0.0) / n_eff), n_eff,
            int(np.flatnonzero(live)[j]), float(obs_c[j]), float(exp_c[j]))


@quiet
def check_position(summary: Summary, law, *, alpha: float = 1e-3) -> Outcome:
    """Per position class, its elements' coarse groups against the rest of the draw's (2 x G
    chi-square of homogeneity; groups merged by the law's masses); Bonferroni over the classes
    tested. A sampler wrong everywhere fails the marginal checks, not this one: it says that some
    positions are drawn from another law than the others."""
    unit = "Cohen's w (worst position class vs the rest)"
    state = summary.states.get(FAMILY.name)
    classes = state.classes if state is not None else ()
    if state is None or not classes:
        return not_applicable("no position classes (a tensor of one element, a law of one "
                              "group, or a sharded part)", unit)
    _, masses = law_groups(law)
    position_counts = np.asarray(state.counts, dtype=np.float64)
    totals = group_totals(summary, law)
    tested = []
    for name, counts in zip(classes, position_counts):
        result = class_test(counts, totals, masses)
        if result is not None:
            tested.append((name, int(counts.sum()), result))
    if not tested:
        return not_applicable("every position class holds too few elements at this n", unit)
    p, k = bonferroni([r[2] for _, _, r in tested])
    name, n_c, (x2, df, _, w, _, group, obs, exp) = tested[k]
    smallest = min(tested, key=lambda t: t[2][4])
    mde = w_mde(smallest[2][1], smallest[2][4], alpha / len(tested))
    msg = (f"class {name} ({n_c} elements) vs the rest of the tensor: chi2 {x2:.4g} on {df} df "
           f"(w {w:.3g}); coarse group {group} of {masses.size}: {obs:.0f} observed vs {exp:.4g} "
           f"expected from the other positions; {len(tested)} of {len(classes)} classes tested")
    return Outcome(statistic=x2, p_value=p, effect=w, effect_unit=unit, mde=mde, message=msg,
                   details={"class": name, "classes_tested": [t[0] for t in tested]})


def position_mde(law, n: int, shape: tuple, alpha: float) -> float:
    """Cohen's w the position check detects with power 0.5 in its smallest class tested, at n
    samples of a tensor of `shape` (no sampling)."""

    numel = max(1, math.prod(shape)) if shape else 1
    calls = max(1, n // numel)
    _, masses = law_groups(law)
    if masses.size < 2:
        return math.nan
    sizes = []
    for c in position_classes(tuple(shape)):
        n_c = calls * c.size
        n_r = calls * numel - n_c
        _, starts = gof_groups(masses, n_c, POSITION_MIN_EXPECTED)
        if starts.size >= 2 and n_r > 0:
            sizes.append((n_c * n_r / (n_c + n_r), int(starts.size) - 1))
    if not sizes:
        return math.nan
    n_c, df = min(sizes)
    return w_mde(df, n_c, alpha / len(sizes))


POSITION = statistical(
    "position", check_position,
    families=(FAMILY, binned.FAMILY),
    doc='The law of elements by position: first, last, vector-loop remainders, row ends.',
    method=(
        "The law of elements by their flat position in the tensor: the first and the last element, "
        "the remainders of numel modulo 2, 4, 8, 16 and 32 (what a vectorized loop's remainder "
        "writes), the first and last element of every row and the row remainders modulo 8 and 32 "
        "(`harness.key_bins.position_classes`; empty, whole-tensor and duplicate classes dropped). Each "
        "class's elements, pooled over the calls, are counted in the law's 16 coarse groups of "
        "about equal exact mass (runs of histogram bins; `harness.key_bins.position_bins`), groups "
        "merged to expect >= 10 elements; Pearson chi-square per class, Bonferroni over the classes "
        "tested (a class needs two merged groups). Null: every position has the law's marginal. "
        "Catches a remainder loop, a boundary block or a row end written by another code path, "
        "however small a share of the tensor it is. False-alarm rate <= alpha up to the chi-square "
        "approximation. Effect: Cohen's w of the worst class. MDE: the w detectable with power 0.5 "
        "in the smallest class tested, at level alpha / classes."
    ),
    unit="Cohen's w (smallest position class)",
    mde=position_mde,
)
