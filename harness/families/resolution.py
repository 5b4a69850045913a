"""The resolution family: the law at the resolution of single values (32/64-bit dtypes), and its
checks, equal-value pairs, coarse lattices and last bits.

State (`ResolutionState`): over the draw's first `harness.key_bins.RESOLUTION_SCAN` finite values,
pooled across calls (``scanned`` of them): blocks of ``collision_block`` consecutive ones (the
last one shorter), sorted, give the equal-value pairs (no block where the law makes the check
n/a): ``collision_compared`` = sum of C(m, 2) over the blocks, ``collision_triples`` = sum of
C(m, 2) (m - 2) (`harness.key_bins.block_pair_slots`); ``lattice_counts[i]`` is how many of them are
representable in ``lattice_names[i]``; ``low_bit_counts[j]`` how many end in the ``low_bits``-bit
pattern j. A merge adds the parts' blocks: each part pools its own values (the same law per
block).

A 32/64-bit histogram bin holds 2^12 / 2^44 values, so a sampler whose randomness or arithmetic is
coarser than the dtype it writes (23 or 24 random bits behind a float32, float32 arithmetic behind
a float64, a last bit dropped) puts the right mass into every bin and passes every binned check.
Two statistics see it, each against an exact law from the reference:

* `check_collisions`: the engine sorts blocks of m consecutive values (the draw's first
  `harness.key_bins.RESOLUTION_SCAN`, pooled across calls; the last block shorter) and counts the
  pairs of equal values in each. Under iid draws of the rounded law a block's pairs have mean
  C(m, 2) q2 and variance
  C(m, 2) [(q2 - q2^2) + 2 (m - 2)(q3 - q2^2)], q2 = sum_v P(Y = v)^2 and q3 = sum_v P(Y = v)^3
  (`RoundedLaw.collision_prob`, `collision_cube`); blocks are independent. The figure users read
  is the effective number of equally likely values 1 / q2, estimated as (pairs compared) / (equal
  pairs), in bits: `resolution_bits`.
* `check_lattices`: how many of the scanned values are representable in a coarser format
  (bfloat16 and float16 in a float32 tensor, float32 in a float64 one) against the law's mass
  on that lattice (`RoundedLaw.lattice_mass`: 2^-16, 2^-13, 2^-29 of the law for a wide one).
* `check_low_bits`: the scanned values by the last `LAST_BITS` bits of their bit
  patterns (16 classes) against the law's masses of those classes
  (`RoundedLaw.low_bit_masses`: not uniform near the bounds, zeros and powers of two, nor for a
  law of few values per std): Pearson chi-square.

The name is `reference.resolution`'s on purpose: a family is named after the part of the law it
judges (`reference.resolution` computes the collision and lattice masses this family tests).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from scipy import special, stats

from reference.dtypes import dtype_name, float_format

from ..key_bins import (COARSE_LATTICES, COLLISION_BLOCK_MIN, RESOLUTION_SCAN, block_pair_slots,
                    collision_block)
from ..declaration import statistical
from ..engine import Family
from ..result import Outcome
from ..summary import Summary
from .binned import w_mde
from .common import binom_two_sided, bonferroni, clip_p, not_applicable, quiet

#: The last bits of each scanned value's bit pattern counted by class (32/64-bit dtypes): 16 classes.
LAST_BITS = 4

COLLISIONS_UNIT = "obs/exp equal pairs"
LATTICES_UNIT = "obs/exp values on a coarser lattice"
LOW_BITS_UNIT = f"Cohen's w of the last-{LAST_BITS}-bit classes"
#: Classes expecting fewer scanned values than this are pooled (the chi-square approximation).
LOW_BITS_MIN_EXPECTED = 5.0
#: Two-sided confidence level of the bits-of-randomness figure.
FIGURE_LEVEL = 0.95


@dataclass
class ResolutionState:
    """Equal-value pairs in blocks, values on coarser lattices, last-bit classes."""

    collision_block: int = 0
    collision_blocks: int = 0
    collision_pairs: int = 0
    collision_compared: float = 0.0
    collision_triples: float = 0.0
    scanned: int = 0
    lattice_names: tuple = ()
    lattice_counts: np.ndarray | None = None
    low_bits: int = 0
    low_bit_counts: np.ndarray | None = None

    @classmethod
    def merge(cls, parts, whole) -> "ResolutionState":
        """Blocks, lattice and low-bit counts add when every part used the same block size,
        lattices and bits (parts of one law do); otherwise the whole has none."""
        first = parts[0]
        out = cls()
        if any((p.collision_block, tuple(p.lattice_names))
               != (first.collision_block, tuple(first.lattice_names)) for p in parts):
            return out
        for name in ("collision_blocks", "collision_pairs", "scanned"):
            setattr(out, name, sum(int(getattr(p, name)) for p in parts))
        out.collision_compared = sum(float(p.collision_compared) for p in parts)
        out.collision_triples = sum(float(p.collision_triples) for p in parts)
        out.collision_block = first.collision_block
        out.lattice_names = tuple(first.lattice_names)
        if all(p.lattice_counts is not None for p in parts) and out.lattice_names:
            out.lattice_counts = np.sum([np.asarray(p.lattice_counts, dtype=np.int64)
                                         for p in parts], axis=0)
        if all(p.low_bit_counts is not None and p.low_bits == first.low_bits for p in parts):
            out.low_bits = first.low_bits
            out.low_bit_counts = np.sum([np.asarray(p.low_bit_counts, dtype=np.int64)
                                         for p in parts], axis=0)
        return out


class ResolutionFold:
    """32/64-bit laws: the first RESOLUTION_SCAN finite values of the draw are counted on the
    coarser lattices and by their last LAST_BITS bits and, in blocks of the law's
    `collision_block` values (pooled across calls and chunks: a leftover shorter than one block
    waits for the next chunk, and `finish` sorts the last one as a shorter block), sorted for
    their equal-value pairs."""

    @classmethod
    def start(cls, law, shape: tuple, fold) -> "ResolutionFold | None":
        if law is None or fold.exact_hist or fold.bits < 32:
            return None
        return cls(law, fold)

    def __init__(self, law, fold):
        self.owner = fold
        names = COARSE_LATTICES.get(dtype_name(fold.dtype), ())
        self.state = ResolutionState(
            collision_block=collision_block(float(law.collision_prob), fold.bits),
            lattice_names=names, lattice_counts=np.zeros(len(names), dtype=np.int64),
            low_bits=LAST_BITS, low_bit_counts=np.zeros(1 << LAST_BITS, dtype=np.int64))
        self.left = RESOLUTION_SCAN
        self.pool = None

    def fold(self, chunk) -> None:
        take = min(self.left, chunk.numel)
        if take <= 0:
            return
        self.left -= take
        flat, ints = chunk.flat[:take], chunk.ints[:take]
        if chunk.finite is not None:
            keep = chunk.finite[:take]
            flat, ints = flat[keep], ints[keep]
        s = self.state
        s.scanned += int(flat.numel())
        for i, name in enumerate(s.lattice_names):
            s.lattice_counts[i] += on_lattice(flat, name)
        s.low_bit_counts += low_bit_classes(ints, s.low_bits)
        m = s.collision_block
        if not m:
            return
        pool = ints if self.pool is None else torch.cat([self.pool, ints])
        blocks = pool.numel() // m
        self.pool = pool[blocks * m:].clone()
        if blocks:
            self._count_block_pairs(pool[:blocks * m].view(blocks, m))

    def _count_block_pairs(self, rows: torch.Tensor) -> None:
        """Sort each row (a block) on the device and add its equal pairs and pair slots."""
        s = self.state
        rows = sort_rows(rows)
        compared, triples = block_pair_slots([rows.shape[1]] * rows.shape[0])
        s.collision_blocks += rows.shape[0]
        s.collision_compared += compared
        s.collision_triples += triples
        s.collision_pairs += equal_pairs_in_sorted_rows(rows)

    def finish(self, whole: Summary) -> ResolutionState:
        """The leftover of the last block is a shorter block of its own (two values at least)."""
        pool, self.pool = self.pool, None
        if pool is not None and pool.numel() >= 2:
            self._count_block_pairs(pool.view(1, -1))
        return self.state


#: Rows at least this long are sorted one at a time: torch sorts a 1-D integer tensor by radix
#: sort on CPU, but the rows of a 2-D one each by a comparison sort (~10x slower at 2**18).
LONG_ROW = 1 << 12


def sort_rows(rows: torch.Tensor) -> torch.Tensor:
    """Each row of a 2-D tensor in ascending order."""
    if rows.shape[1] < LONG_ROW:
        return torch.sort(rows, dim=1).values
    return torch.stack([torch.sort(row).values for row in rows])


def equal_pairs_in_sorted_rows(rows: torch.Tensor) -> int:
    """Pairs of equal elements within each row of a row-sorted 2-D tensor: sum over runs of c
    equal elements of C(c, 2). A run of c is c - 1 neighbours equal, so it is a run of c - 1
    True flags, and a run of L flags adds L (L + 1) / 2; a False column in front of each row
    keeps runs of different rows apart."""
    n_rows, m = rows.shape
    if m < 2:
        return 0
    flags = torch.zeros((n_rows, m), dtype=torch.bool, device=rows.device)
    torch.eq(rows[:, 1:], rows[:, :-1], out=flags[:, 1:])
    idx = flags.view(-1).nonzero().squeeze(1)
    if idx.numel() == 0:
        return 0
    starts = torch.ones(idx.numel(), dtype=torch.bool, device=rows.device)
    starts[1:] = idx[1:] != idx[:-1] + 1
    first = starts.nonzero().squeeze(1)
    ends = torch.cat([first[1:], torch.tensor([idx.numel()], device=rows.device)])
    runs = (ends - first).to(torch.int64)
    return int((runs * (runs + 1) // 2).sum())


def on_lattice(flat: torch.Tensor, coarse: str) -> int:
    """How many of the finite values `flat` are representable in the coarser format `coarse`
    (`lattice_mask`)."""
    return int(torch.count_nonzero(lattice_mask(flat, coarse)))


def lattice_mask(flat: torch.Tensor, coarse: str) -> torch.Tensor:
    """Which of the finite values `flat` are representable in the coarser format `coarse`:
    bfloat16 is float32's top 16 bits (its values are the float32 patterns whose low 16 bits are
    0); float16 and float32 by a round trip through them (a value beyond their range comes back
    infinite, one they cannot hold comes back changed)."""
    if coarse == "bfloat16" and flat.dtype == torch.float32:
        return torch.bitwise_and(flat.view(torch.int32), 0xFFFF) == 0
    return flat.to(getattr(torch, coarse)).to(flat.dtype) == flat


def low_bit_classes(ints: torch.Tensor, bits: int) -> np.ndarray:
    """How many of the values (their integer views `ints`) end in each pattern of `bits` bits:
    int64[2**bits]. The sign bit is the top one, so the last bits are the significand's."""
    low = torch.bitwise_and(ints, (1 << bits) - 1).to(torch.int64)
    return torch.bincount(low, minlength=1 << bits).cpu().numpy()


FAMILY = Family("resolution", ResolutionFold.start)


def pair_law(compared: float, triples: float, q2: float, q3: float) -> tuple[float, float]:
    """(mean, dispersion) of the equal pairs in blocks of iid values comparing `compared` =
    sum C(m, 2) pairs, `triples` = sum C(m, 2) (m - 2) (`harness.key_bins.block_pair_slots`): mean
    compared q2; dispersion = variance / mean, the variance summing over pairs of pairs (two
    pairs sharing one value are correlated through it: P(three equal) = q3)."""
    mean = compared * q2
    if mean <= 0:
        return 0.0, 1.0
    var = compared * (q2 - q2 * q2) + 2.0 * triples * max(q3 - q2 * q2, 0.0)
    return mean, max(1.0, var / mean)


def quasi_poisson_p(count: float, mean: float, dispersion: float) -> float:
    """Two-sided p-value of `count` under count / d ~ Poisson(mean / d) (d = dispersion; d = 1
    is the exact Poisson test), doubling the smaller tail; the regularized incomplete gamma
    functions give the Poisson tails at non-integer counts."""
    if mean <= 0:
        return 1.0 if count == 0 else 0.0
    k, lam = count / dispersion, mean / dispersion
    upper = 1.0 if k <= 0 else float(special.gammainc(k, lam))  # P(N >= k)
    lower = float(special.gammaincc(k + 1.0, lam))  # P(N <= k)
    return clip_p(2.0 * min(upper, lower))


def resolution_bits(pairs_compared: float, count: float, dispersion: float = 1.0,
                    level: float = FIGURE_LEVEL) -> tuple[float, float, float]:
    """log2 of the effective number of equally likely values, (pairs compared) / (equal pairs),
    with its confidence interval (exact Poisson limits of count / d, scaled back): (estimate,
    low, high); the estimate and the high end are +inf where no pair was equal."""
    tail = (1.0 - level) / 2.0
    k = count / dispersion
    hi_count = dispersion * stats.chi2.ppf(1.0 - tail, 2.0 * k + 2.0) / 2.0
    lo_count = dispersion * stats.chi2.ppf(tail, 2.0 * k) / 2.0 if k > 0 else 0.0
    log_pairs = math.log2(pairs_compared)
    est = log_pairs - math.log2(count) if count > 0 else math.inf
    low = log_pairs - math.log2(hi_count)
    high = log_pairs - math.log2(lo_count) if lo_count > 0 else math.inf
    return est, low, high


def law_bits(law) -> float:
    """The law's own figure: log2 of 1 / sum_v P(Y = v)^2."""
    q2 = float(law.collision_prob)
    return -math.log2(q2) if q2 > 0 else math.inf


def figure_text(bits: float, low: float, high: float, own: float) -> str:
    """The figure as users read it: '≈ 2^23.0 equally likely values (95% CI 2^22.9 .. 2^23.1),
    where the law's own figure is 2^26.0'."""
    level = f"{FIGURE_LEVEL:.0%}"
    if math.isinf(bits):
        head = f"> 2^{low:.1f} equally likely values (no equal pair; {level} bound)"
    else:
        head = (f"≈ 2^{bits:.1f} equally likely values ({level} CI 2^{low:.1f} .. "
                + (f"2^{high:.1f})" if math.isfinite(high) else "∞)"))
    return f"{head}, where the law's own figure is 2^{own:.1f}"


def _not_applicable_reason(summary: Summary, law) -> str | None:
    if float_format(summary.dtype).bits < 32:
        return "16-bit and narrower dtypes: the histogram counts every value (gof, spikes)"
    state = summary.states.get(FAMILY.name)
    if state is None:
        return "the Summary was folded without the resolution scan"
    if state.collision_block == 0:
        q2 = float(law.collision_prob)
        return (f"the law is too concentrated for blocks of >= {COLLISION_BLOCK_MIN} values "
                f"(2^{-math.log2(q2):.1f} equally likely values; its values are judged one by "
                f"one in its fine bins and by spikes)" if q2 > 0 else "the law has no values")
    if state.collision_compared <= 0:
        return f"fewer than two values scanned ({state.scanned})"
    return None


@quiet
def check_collisions(summary: Summary, law, *, alpha: float = 1e-3) -> Outcome:
    """Equal-value pairs within blocks of m values against B C(m, 2) q2 (quasi-Poisson, two-sided)."""
    reason = _not_applicable_reason(summary, law)
    if reason is not None:
        return not_applicable(reason, COLLISIONS_UNIT)
    state = summary.resolution
    m, blocks = int(state.collision_block), int(state.collision_blocks)
    q2, q3 = float(law.collision_prob), float(law.collision_cube)
    compared = float(state.collision_compared)
    mean, disp = pair_law(compared, float(state.collision_triples), q2, q3)
    count = int(state.collision_pairs)
    p = quasi_poisson_p(count, mean, disp)
    bits, low, high = resolution_bits(compared, count, disp)
    own = law_bits(law)
    ratio = count / mean if mean > 0 else math.inf
    figure = figure_text(bits, low, high, own)
    scanned = int(state.scanned)
    msg = (f"{count} equal pairs in {blocks} block(s) of <= {m} values ({scanned} scanned), "
           f"{mean:.4g} expected (x{ratio:.3g}): {figure}")
    if p < alpha and count > mean:
        msg += ("; the values repeat more often than the law allows: fewer random bits, or "
                "arithmetic coarser than the dtype")
    details = {"bits": bits, "bits_lo": low, "bits_hi": high, "law_bits": own,
               "resolution": figure, "pairs": count, "pairs_expected": mean, "block": m,
               "blocks": blocks}
    return Outcome(statistic=float(count), p_value=p, effect=ratio, effect_unit=COLLISIONS_UNIT,
                   mde=collisions_ratio_mde(mean, disp, alpha), message=msg, details=details)


def collisions_ratio_mde(mean: float, dispersion: float, alpha: float) -> float:
    """obs/exp ratio of equal pairs whose median count sits on the upper critical count at
    level alpha / 2 (one side of the two-sided test)."""
    if mean <= 0:
        return math.nan
    lam = mean / dispersion
    crit = float(stats.poisson.isf(alpha / 2.0, lam)) + 1.0
    return crit * dispersion / mean


def collisions_mde(law, n: int, shape: tuple, alpha: float) -> float:
    """`check_collisions`' MDE at n samples (no sampling): the blocks of the first
    RESOLUTION_SCAN values (NaN where the check does not apply)."""
    q2 = float(law.collision_prob)
    m = collision_block(q2, law.fmt.bits)
    scanned = min(int(n), RESOLUTION_SCAN)
    if not m or scanned < 2:
        return math.nan
    sizes = [m] * (scanned // m) + ([scanned % m] if scanned % m >= 2 else [])
    mean, disp = pair_law(*block_pair_slots(sizes), q2, float(law.collision_cube))
    return collisions_ratio_mde(mean, disp, alpha)


@quiet
def check_lattices(summary: Summary, law, *, alpha: float = 1e-3) -> Outcome:
    """Scanned values on each coarser lattice against Bin(scanned, the law's lattice mass):
    exact two-sided binomial tests, Bonferroni over the lattices."""
    state = summary.states.get(FAMILY.name)
    names = tuple(state.lattice_names) if state is not None else ()
    if not names or state.lattice_counts is None:
        return not_applicable("16-bit and narrower dtypes: the histogram counts every value",
                              LATTICES_UNIT)
    n = int(state.scanned)
    if n == 0:
        return not_applicable("no finite value scanned", LATTICES_UNIT)
    counts = np.asarray(state.lattice_counts, dtype=np.int64)
    masses = np.array([float(law.lattice_mass(name)) for name in names])
    ps = binom_two_sided(counts, n, masses)
    p, worst = bonferroni(ps)
    decisive = bool(np.any((masses <= 0) & (counts > 0)))
    expected = n * masses
    ratios = np.where(expected > 0, counts / np.where(expected > 0, expected, 1.0), np.inf)
    i = int(worst)
    parts = [f"{names[j]}: {int(counts[j])} of {n} ({counts[j] / n:.4g}; the law {masses[j]:.4g}, "
             f"{expected[j]:.4g} expected)" for j in range(len(names))]
    msg = "values on coarser lattices: " + "; ".join(parts)
    if p < alpha:
        msg += (f"; {names[i]} values {ratios[i]:.3g} times as often as the law puts there: "
                + (f"values computed in {names[i]} and written wider, or a resolution coarser "
                   f"than the dtype's near them" if counts[i] > expected[i] else
                   "the values avoid that lattice: a resolution coarser than the dtype's that "
                   "misses it"))
    details = {"lattices": {names[j]: [int(counts[j]), float(masses[j])] for j in range(len(names))},
               "scanned": n}
    return Outcome(statistic=float(counts[i]), p_value=p, effect=float(ratios[i]),
                   effect_unit=LATTICES_UNIT, mde=lattices_ratio_mde(n, masses, alpha),
                   message=msg, decisive=decisive, details=details)


def lattices_ratio_mde(n: int, masses: np.ndarray, alpha: float) -> float:
    """obs/exp ratio at the better-powered lattice whose median count sits on the upper
    critical count at level alpha / (2 K)."""
    best = math.nan
    k = max(1, len(masses))
    for q in masses:
        if not q > 0:
            continue
        crit = float(stats.binom.isf(alpha / (2.0 * k), n, q)) + 1.0
        r = crit / (n * q)
        best = r if math.isnan(best) else min(best, r)
    return best


def lattices_mde(law, n: int, shape: tuple, alpha: float) -> float:
    """`check_lattices`' MDE at n samples (no sampling)."""
    names = COARSE_LATTICES.get(law.fmt.name, ())
    if not names:
        return math.nan
    masses = np.array([float(law.lattice_mass(name)) for name in names])
    return lattices_ratio_mde(min(int(n), RESOLUTION_SCAN), masses, alpha)


LOW_BITS_DOC = (
    f"The last {LAST_BITS} bits of each value's bit pattern (the significand's last bits), over "
    "the values collisions and lattices scan (32/64-bit dtypes: the draw's first 2^19 finite "
    f"values, pooled across calls; 16-bit dtypes count every value already): 2^{LAST_BITS} "
    "classes against the law's masses of the same classes (`RoundedLaw.low_bit_masses`, summed "
    "over the law's values binade by binade: not uniform near the bounds, the zeros and the "
    "powers of two, nor where the law holds few values per std). Null: iid draws of the rounded "
    "law, so the class counts are multinomial. Pearson chi-square, classes expecting fewer than "
    "5 values pooled (2^4 - 1 = 15 df for a wide law); not applicable where fewer than two "
    "classes remain (a law of a value or two); a value in a class the law gives no mass is "
    "decisive. Catches a last step that truncates or drops bits, arithmetic that leaves the last "
    "bits to chance, and randomness coarser than the dtype's lattice where the law holds "
    "~1 value per 2^-53 of probability (the inverse CDF of one 53-bit uniform in float64: its "
    "values are too few to reach every float64 with its mass). False-alarm rate <= alpha up to "
    "the chi-square approximation (each class expects ~32 000 values for a wide law). Effect: "
    "Cohen's w = sqrt(chi2 / n). MDE: the w detected with power 0.5 at level alpha (~0.0066 at "
    "2^19 values and 15 df; a cleared last bit is w = 1, 16 % too many values in one class of "
    "16 is w ~ 0.04)."
)


def low_bit_cells(expected: np.ndarray) -> list[np.ndarray]:
    """The classes tested: each class expecting at least LOW_BITS_MIN_EXPECTED values alone, the
    others pooled into one cell (with the smallest of the rest until the pool expects that many
    too). Classes the law gives no mass stay out (a value there is decisive)."""
    order = [int(j) for j in np.argsort(expected, kind="stable") if expected[j] > 0]
    pool = [j for j in order if expected[j] < LOW_BITS_MIN_EXPECTED]
    rest = [j for j in order if expected[j] >= LOW_BITS_MIN_EXPECTED]
    while pool and rest and sum(expected[j] for j in pool) < LOW_BITS_MIN_EXPECTED:
        pool.append(rest.pop(0))
    cells = [np.array([j]) for j in rest]
    if pool and sum(expected[j] for j in pool) >= LOW_BITS_MIN_EXPECTED:
        cells.append(np.array(pool))
    elif pool and cells:  # a pool too small to stand alone joins the smallest cell
        cells[0] = np.concatenate([cells[0], pool])
    return cells


def low_bit_law(law, bits: int = LAST_BITS) -> np.ndarray:
    """The law's probabilities of the 2^bits classes among its finite values (they sum to 1;
    all zero where the law has no finite value)."""
    masses = np.asarray(law.low_bit_masses(bits), dtype=np.float64)
    total = float(masses.sum())
    return masses / total if total > 0 else masses


@quiet
def check_low_bits(summary: Summary, law, *, alpha: float = 1e-3) -> Outcome:
    """The scanned values' last-bit classes against the law's (Pearson chi-square, pooled cells)."""
    state = summary.states.get(FAMILY.name)
    if float_format(summary.dtype).bits < 32 or state is None or state.low_bit_counts is None:
        return not_applicable("16-bit and narrower dtypes: the histogram counts every value "
                              "(gof, spikes)", LOW_BITS_UNIT)
    counts = np.asarray(state.low_bit_counts, dtype=np.int64)
    n = int(counts.sum())
    if n == 0:
        return not_applicable("no finite value scanned", LOW_BITS_UNIT)
    bits = int(state.low_bits)
    probs = low_bit_law(law, bits)
    expected = n * probs
    cells = low_bit_cells(expected)
    width = f"0{bits}b"
    impossible = (probs <= 0) & (counts > 0)
    if impossible.any():
        j = int(np.flatnonzero(impossible)[0])
        return Outcome(statistic=math.inf, p_value=0.0, effect=math.inf, effect_unit=LOW_BITS_UNIT,
                       mde=math.nan, decisive=True,
                       message=(f"{int(counts[impossible].sum())} of {n} scanned values end in "
                                f"a bit pattern the law never ends in (first: {j:{width}})"),
                       details={"counts": counts.tolist(), "probs": probs.tolist()})
    if len(cells) < 2:
        return not_applicable("the law's values end in too few bit patterns to compare "
                              f"(fewer than two classes expect {LOW_BITS_MIN_EXPECTED:g} of the "
                              f"{n} scanned values)", LOW_BITS_UNIT)
    obs = np.array([counts[c].sum() for c in cells], dtype=np.float64)
    exp = np.array([expected[c].sum() for c in cells])
    chi2 = float(np.sum((obs - exp) ** 2 / exp))
    df = len(cells) - 1
    p = clip_p(stats.chi2.sf(chi2, df))
    ratios = np.where(expected > 0, counts / np.where(expected > 0, expected, 1.0), np.nan)
    worst = int(np.nanargmax(np.abs(counts - expected) / np.sqrt(np.maximum(expected, 1e-300))))
    msg = (f"last {bits} bits of {n} scanned values: chi2 {chi2:.4g} on {df} df; class "
           f"{worst:{width}} {int(counts[worst])} vs {expected[worst]:.6g} expected "
           f"(x{ratios[worst]:.3g})")
    if p < alpha:
        msg += ("; the values' last bits are not the law's: a last step that truncates or drops "
                "bits, or randomness or arithmetic coarser than the dtype's lattice")
    details = {"counts": counts.tolist(), "probs": probs.tolist(), "df": df, "chi2": chi2,
               "worst_class": worst, "worst_ratio": float(ratios[worst])}
    return Outcome(statistic=chi2, p_value=p, effect=math.sqrt(chi2 / n), effect_unit=LOW_BITS_UNIT,
                   mde=w_mde(df, n, alpha), message=msg, details=details)


def low_bits_mde(law, n: int, shape: tuple, alpha: float) -> float:
    """`check_low_bits`' MDE at n samples (no sampling): Cohen's w detected with power 0.5 over
    the first RESOLUTION_SCAN values (NaN where the check does not apply)."""
    if law.fmt.bits < 32:
        return math.nan
    scanned = min(int(n), RESOLUTION_SCAN)
    if scanned <= 0:
        return math.nan
    cells = low_bit_cells(scanned * low_bit_law(law))
    return w_mde(len(cells) - 1, scanned, alpha) if len(cells) >= 2 else math.nan


COLLISIONS = statistical(
    "collisions", check_collisions, families=(FAMILY,), about="single-values",
    doc='Equal values no more (or less) often than the law allows: the bits of randomness.',
    method=(
        "Equal values, at the resolution of single values (32/64-bit dtypes; 16-bit ones count "
        "every value already). The engine takes the first 2^19 finite values of a draw, pooled "
        "across calls, in blocks of m consecutive values (m = 2^18, halved while m q > 2^-8, q "
        "the law's collision probability; not applicable below m = 256, a law of a few thousand "
        "values judged one by one by fine bins and spikes), sorts each block on the device and "
        "counts its pairs of equal values (the last block shorter). Null: iid draws of the rounded law; a block's pairs "
        "have mean C(m, 2) q and variance C(m, 2) [(q - q^2) + 2 (m - 2)(q3 - q^2)], q = sum "
        "P(Y = v)^2, q3 = sum P(Y = v)^3 (the reference's, exact from the atoms or from h^(k-1) "
        "int f^k per bin, relative error O((h / std)^2)); blocks are independent. The total T is "
        "tested as T / d ~ Poisson(mean / d), d = variance / mean (d = 1 + ~2e-3 for a wide "
        "law: the exact Poisson test), two-sided by doubling the smaller tail. Catches too few "
        "random bits (23 or 24-bit uniforms behind a float32: x8, x4), arithmetic coarser than "
        "the dtype (float32 values in a float64 tensor: ~2^29 times the law's pairs) and a "
        "dropped last bit (x2). False-alarm rate ~alpha (measured over seeds: "
        "tests/calibration). Effect: obs/exp pairs; the message and the results' `resolution` "
        "column give the figure: log2 of the effective number of equally likely values, (pairs "
        "compared) / (equal pairs), with a 95% CI, next to the law's own log2(1 / q). MDE: the "
        "obs/exp ratio whose median count sits on the upper critical count at alpha / 2 (float32 "
        "N(0, 1) at +-2: ~1.1, a tenth of a bit; float64: ~2^19, the law expects 2^-19 pairs)."
    ),
    unit=COLLISIONS_UNIT,
    mde=collisions_mde,
)

LATTICES = statistical(
    "lattices", check_lattices, families=(FAMILY,), about="single-values",
    doc="No more values on a coarser format's lattice than the law puts there.",
    method=(
        "Values representable in a coarser format: bfloat16 and float16 values in a float32 "
        "tensor, float32 values in a float64 one (a sampler that computes in the coarser format "
        "and writes wider produces nothing else). Among the same first 2^19 finite values of a "
        "draw as collisions, the count on each lattice is Bin(scanned, the law's exact mass on "
        "it) under iid draws of the rounded law (RoundedLaw.lattice_mass: atom by atom where "
        "the support holds <= 2^22 coarse values, always for 16-bit ones; 2^-29 P(2^-126 <= "
        "|X| <= float32 max) for a wide float64 law, relative error ~2^-23); exact two-sided "
        "binomial tests, Bonferroni over the lattices; a count on a lattice the law gives no "
        "mass is decisive. False-alarm rate <= alpha. Effect: obs/exp at the worst lattice. "
        "MDE: the obs/exp ratio at the better-powered lattice whose median count sits on its "
        "upper critical count at alpha / (2 lattices)."
    ),
    unit=LATTICES_UNIT,
    mde=lattices_mde,
)

LOW_BITS = statistical(
    "low_bits", check_low_bits, families=(FAMILY,), about="single-values",
    doc="The last 4 bits of single 32/64-bit values against the law's mass of each class.",
    method=LOW_BITS_DOC,
    unit=LOW_BITS_UNIT,
    mde=low_bits_mde,
)
