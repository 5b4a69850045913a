"""The extremes family: per-row minima and maxima along the last dimension, and `check_extremes`,
them against the exact order-statistic law of a row.

State (`ExtremesState`): ``row_min``/``row_max`` (float64) of the first `ROW_EXTREMES_CAP` rows of
the draw, and ``n_rows_total``, the rows seen (more than those kept). A sharded part keeps its rows
by *global* slot (call * rows_per_call + global row), +inf/-inf (the identities of min and max)
where it has no element of the row, so that a row cut across ranks is one row again after
`Summary.merge`.

A row holds m = ``summary.row_len`` iid draws of the rounded law Y; rounding is monotone, so the
row minimum of the rounded values is RN(min X) and its law is exact from the law's CDF:

    P(rowmin <= v) = 1 - P(Y > v)^m,   P(rowmin < v) = 1 - P(Y >= v)^m
    P(rowmax >  v) = 1 - P(Y <= v)^m,  P(rowmax >= v) = 1 - P(Y < v)^m

computed as -expm1(m * log P) with log P from whichever of P(Y <= v) / P(Y > v) is accurate
(log1p of the small complement), so probabilities like 1e-300 survive. The law is discrete, so the
probability-integral transform is randomized, U = F(v-) + V (F(v) - F(v-)) with V ~ U(0,1) from a
generator seeded by a fixed constant and a hash of the row extremes (deterministic per data, fresh
between stages); under H0 the U are exactly iid U(0,1).
"""

from __future__ import annotations

import math

from dataclasses import dataclass, field

import numpy as np
import torch
from scipy import stats

from ..declaration import statistical
from ..engine import Family
from ..result import Outcome
from ..summary import Summary
from .common import bonferroni, clip_p, data_seed, ks_crit, not_applicable, quiet

#: How many row extremes (per-slice minima/maxima along the last dim) a Summary keeps at most.
ROW_EXTREMES_CAP = 1 << 16


def _empty() -> np.ndarray:
    return np.empty(0, dtype=np.float64)


@dataclass
class ExtremesState:
    """Row minima and maxima of the first ROW_EXTREMES_CAP rows, and the rows seen."""

    row_min: np.ndarray = field(default_factory=_empty)
    row_max: np.ndarray = field(default_factory=_empty)
    n_rows_total: int = 0  # rows seen (may exceed the number kept)

    @classmethod
    def merge(cls, parts, whole) -> "ExtremesState":
        out = cls(n_rows_total=max(int(p.n_rows_total) for p in parts))
        kept = max(len(p.row_min) for p in parts)
        if kept == 0:
            return out
        if len(parts) == 1:
            out.row_min, out.row_max = parts[0].row_min.copy(), parts[0].row_max.copy()
            return out
        if any(len(p.row_min) != kept for p in parts):
            raise ValueError("Summary.merge: parts kept different numbers of row slots")
        out.row_min = np.minimum.reduce([np.asarray(p.row_min, dtype=np.float64) for p in parts])
        out.row_max = np.maximum.reduce([np.asarray(p.row_max, dtype=np.float64) for p in parts])
        return out


class ExtremesFold:
    """The extremes of the first ROW_EXTREMES_CAP rows: their cost and memory stay fixed
    whatever n is."""

    @classmethod
    def start(cls, law, shape: tuple, fold):
        return cls(fold) if fold.box is None else PartExtremesFold(fold)

    def __init__(self, fold):
        self.owner = fold
        self.state = ExtremesState()
        self.kept: list = []
        self.n_kept = 0

    def fold(self, chunk) -> None:
        m = self.owner.s.row_len
        batch = chunk.batch
        if m < 1 or batch[0].numel() == 0:
            return
        rows_per_call = batch[0].numel() // m
        self.state.n_rows_total += chunk.calls * rows_per_call
        room = ROW_EXTREMES_CAP - self.n_kept
        if room <= 0:
            return
        rows = batch.reshape(-1, m)[:room]
        # Two reductions: aminmax along dim 1 takes a slow path on CPU (6x their time).
        lo, hi = rows.amin(dim=1), rows.amax(dim=1)
        self.kept.append((lo.to(torch.float64).cpu().numpy(), hi.to(torch.float64).cpu().numpy()))
        self.n_kept += rows.shape[0]

    def finish(self, whole: Summary) -> ExtremesState:
        if self.kept:
            self.state.row_min = np.concatenate([lo for lo, _ in self.kept])
            self.state.row_max = np.concatenate([hi for _, hi in self.kept])
        return self.state


def part_slots(fold, calls: int) -> tuple | None:
    """A sharded part's chunk of `calls` calls: (calls taken, their global row slots, which slots
    are kept), or None where every slot of the chunk is beyond ROW_EXTREMES_CAP."""
    shape = tuple(fold.s.shape)
    rows_per_call = math.prod(shape[:-1]) if shape else 1
    first_call = fold.s.n_calls - calls  # the fold counted this chunk's calls already
    if first_call * rows_per_call >= ROW_EXTREMES_CAP:
        return None
    take = min(calls, math.ceil((ROW_EXTREMES_CAP - first_call * rows_per_call) / rows_per_call))
    call_base = (first_call + np.arange(take, dtype=np.int64)) * rows_per_call
    slots = call_base[:, None] + np.asarray(fold.box.row_ids)[None, :]
    return take, slots, slots < ROW_EXTREMES_CAP


def part_rows_kept(fold) -> int:
    """How many row slots a sharded part keeps (the whole's rows, up to ROW_EXTREMES_CAP)."""
    s = fold.s
    shape = tuple(s.shape)
    if s.row_len < 1 or math.prod(shape) == 0:
        return 0
    return min(ROW_EXTREMES_CAP, s.n_calls * (math.prod(shape[:-1]) if shape else 1))


class PartExtremesFold:
    """A sharded part's row extremes, by global slot (see the module docstring)."""

    def __init__(self, fold):
        self.owner = fold
        self.state = ExtremesState()
        shape = tuple(fold.s.shape)
        self.whole_numel = math.prod(shape)
        self.rows_per_call = math.prod(shape[:-1]) if shape else 1
        self.row_min = np.full(ROW_EXTREMES_CAP, np.inf)
        self.row_max = np.full(ROW_EXTREMES_CAP, -np.inf)

    def fold_empty(self, calls: int) -> None:
        """Calls of which the part holds no element: their rows are seen all the same."""
        if self.owner.s.row_len >= 1 and self.whole_numel:
            self.state.n_rows_total += calls * self.rows_per_call

    def fold(self, chunk) -> None:
        if self.owner.s.row_len < 1 or self.whole_numel == 0:
            return
        self.state.n_rows_total += chunk.calls * self.rows_per_call
        taken = part_slots(self.owner, chunk.calls)
        if taken is None:
            return
        take, slots, keep = taken
        local_m = self.owner.box.local_shape[-1]
        rows = chunk.batch[:take].reshape(take, -1, local_m)
        self.row_min[slots[keep]] = rows.amin(dim=2).to(torch.float64).cpu().numpy()[keep]
        self.row_max[slots[keep]] = rows.amax(dim=2).to(torch.float64).cpu().numpy()[keep]

    def finish(self, whole: Summary) -> ExtremesState:
        kept = part_rows_kept(self.owner)
        self.state.row_min = self.row_min[:kept].copy()
        self.state.row_max = self.row_max[:kept].copy()
        return self.state


FAMILY = Family("extremes", ExtremesFold.start)

N_COMPONENTS = 4  # KS of the row-min PITs, KS of the row-max PITs, smallest of each


def _log_pair(below, above):
    """Logs of two complementary probabilities, each taken from the accurate side (log1p of the
    other when that one is small)."""
    below = np.asarray(below, dtype=np.float64)
    above = np.asarray(above, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        log_below = np.where(above < 0.5, np.log1p(-np.minimum(above, 1.0)), np.log(below))
        log_above = np.where(below < 0.5, np.log1p(-np.minimum(below, 1.0)), np.log(above))
    return log_below, log_above, below, above


def _log_probs(law, v: np.ndarray):
    """(log P(Y <= v), log P(Y > v), P(Y <= v), P(Y > v)) and (log P(Y < v), log P(Y >= v),
    P(Y < v), P(Y >= v)), the law evaluated once per distinct bit pattern of `v` (row extremes
    repeat: in a 16-bit dtype a few hundred values hold them all)."""
    v = np.ascontiguousarray(v, dtype=np.float64)
    patterns, inverse = np.unique(v.view(np.uint64), return_inverse=True)
    distinct = patterns.view(np.float64)
    le, gt = (np.asarray(p, dtype=np.float64)[inverse] for p in law.prob_le_gt(distinct))
    lt, ge = (np.asarray(p, dtype=np.float64)[inverse] for p in law.prob_lt_ge(distinct))
    return _log_pair(le, gt), _log_pair(lt, ge)


def _one_minus_pow(log_p: np.ndarray, m: int) -> np.ndarray:
    """1 - P^m from log P (log P = -inf gives 1)."""
    with np.errstate(invalid="ignore", over="ignore"):
        return np.clip(-np.expm1(m * log_p), 0.0, 1.0)


def row_extreme_pits(law, row_min: np.ndarray, row_max: np.ndarray, m: int, rng):
    """Randomized PITs: U (row minima; small = too low) and W (row maxima; small = too high),
    plus masks of rows outside the law's support (impossible)."""
    both = _log_probs(law, np.concatenate([row_min, row_max]))
    (log_le, log_gt, le, gt), (log_lt, log_ge, lt, ge) = (
        tuple(x[:row_min.size] for x in half) for half in both)
    f_hi = _one_minus_pow(log_gt, m)  # P(rowmin <= v)
    f_lo = _one_minus_pow(log_ge, m)  # P(rowmin < v)
    u = f_lo + rng.random(row_min.size) * np.maximum(f_hi - f_lo, 0.0)
    imp_min = (le <= 0) | (ge <= 0)

    (log_le2, log_gt2, le2, gt2), (log_lt2, log_ge2, lt2, ge2) = (
        tuple(x[row_min.size:] for x in half) for half in both)
    g_lo = _one_minus_pow(log_le2, m)  # P(rowmax > v)
    g_hi = _one_minus_pow(log_lt2, m)  # P(rowmax >= v)
    w = g_lo + rng.random(row_max.size) * np.maximum(g_hi - g_lo, 0.0)
    imp_max = (le2 <= 0) | (ge2 <= 0)
    return np.clip(u, 0.0, 1.0), np.clip(w, 0.0, 1.0), imp_min, imp_max


def _ks_uniform(x: np.ndarray) -> tuple[float, float]:
    if x.size == 0:
        return 0.0, math.nan
    res = stats.kstest(x, "uniform")
    return float(res.statistic), clip_p(res.pvalue)


def _smallest_pit_p(x: np.ndarray) -> float:
    """P(min of R iid U(0,1) <= observed min) = 1 - (1 - min)^R."""
    if x.size == 0:
        return math.nan
    u = float(x.min())
    return clip_p(-math.expm1(x.size * math.log1p(-min(u, 1.0))) if u < 1 else 1.0)


def extremes_mde(law, n: int, shape: tuple, alpha: float, cap: int | None = None) -> float:
    """KS distance of the row-extreme PITs from uniform detectable with power ~0.5 (the level
    alpha/4 critical value with R = min(n / row_len, cap) rows, rows the last dim of `shape`)."""
    row_len = int(shape[-1]) if shape else 0
    if row_len <= 1:
        return math.nan
    rows = n // row_len
    rows = min(rows, ROW_EXTREMES_CAP if cap is None else cap)
    if rows <= 0:
        return math.nan
    return ks_crit(alpha / N_COMPONENTS, rows)


@quiet
def check_extremes(summary: Summary, law, *, alpha: float = 1e-3) -> Outcome:
    unit = "D (row-extreme PIT vs uniform)"
    m = int(summary.row_len)
    rmin = np.asarray(summary.extremes.row_min, dtype=np.float64)
    rmax = np.asarray(summary.extremes.row_max, dtype=np.float64)
    if m <= 1:
        return not_applicable(f"rows of length {m}", unit)
    if rmin.size == 0:
        return not_applicable("no rows", unit)
    keep = ~(np.isnan(rmin) | np.isnan(rmax))  # rows with NaN fail the finite check
    idx = np.flatnonzero(keep)
    rmin_k, rmax_k = rmin[keep], rmax[keep]
    if idx.size == 0:
        return not_applicable("every row holds a NaN", unit)
    # The stage's seed joins the data hash: on a one-atom law every run has the same row
    # extremes, and the randomized PIT must still get fresh V draws per run.
    stream = np.array([int(summary.notes.get("seed", 0)) % (1 << 63)], dtype=np.int64)
    rng = data_seed(rmin_k, rmax_k, stream)
    u, w, imp_min, imp_max = row_extreme_pits(law, rmin_k, rmax_k, m, rng)
    d_min, p_ks_min = _ks_uniform(u)
    d_max, p_ks_max = _ks_uniform(w)
    p_small_min = _smallest_pit_p(u)
    p_small_max = _smallest_pit_p(w)
    comps = [p_ks_min, p_ks_max, p_small_min, p_small_max]
    p, _ = bonferroni(comps)

    scale = float(law.std) if float(law.std) > 0 else float(law.dist.std)
    mean = float(law.mean)
    rows_per_call = max(1, math.prod(summary.shape[:-1])) if len(summary.shape) else 1

    def sig(v):
        return f"{(v - mean) / scale:+.4g} sigma"

    i_u, i_w = int(np.argmin(u)), int(np.argmin(w))
    if u[i_u] <= w[i_w]:
        i, which, v, pit = i_u, "min", rmin_k[i_u], u[i_u]
        pit_txt = f"P(row min <= v) ~ {pit:.3g}"
    else:
        i, which, v, pit = i_w, "max", rmax_k[i_w], w[i_w]
        pit_txt = f"P(row max >= v) ~ {pit:.3g}"
    row = int(idx[i])
    decisive = bool(imp_min.any() or imp_max.any())
    n_imp = int(imp_min.sum() + imp_max.sum())
    msg = (f"worst row {row} (call {row // rows_per_call}): {which} {v:.8g} ({sig(v)}), {pit_txt}; "
           f"KS D min {d_min:.3g} / max {d_max:.3g} over {u.size} rows of {m}")
    if decisive:
        msg = f"{n_imp} row extremes outside the law's support; " + msg
    d = max(d_min, d_max)
    details = {"p_ks_min": p_ks_min, "p_ks_max": p_ks_max, "p_smallest_min": p_small_min,
               "p_smallest_max": p_small_max, "rows": int(u.size), "worst_row": row,
               "worst_sigma": float((v - mean) / scale), "n_impossible": n_imp}
    return Outcome(statistic=d, p_value=0.0 if decisive else p, effect=d, effect_unit=unit,
                   mde=ks_crit(alpha / N_COMPONENTS, int(u.size)), message=msg, decisive=decisive,
                   details=details)


EXTREMES = statistical(
    "extremes", check_extremes, families=(FAMILY,),
    doc='Row minima and maxima against the exact order-statistic law.',
    method=(
        "Per-row minima and maxima (along the last dimension) against the exact order-statistic "
        "law of a row of m iid draws of the rounded law: P(rowmin <= v) = 1 - P(Y > v)^m etc., "
        "computed in log space. Randomized probability-integral transform for the discrete law "
        "(V from a fixed seed mixed with a hash of the data: deterministic verdicts), so under the "
        "null the PITs are exactly iid U(0, 1). Four components, Bonferroni: KS of the row-min "
        "PITs and of the row-max PITs against U(0, 1), and the smallest PIT of each side against "
        "the law of the minimum of R uniforms, 1 - (1 - u)^R (one row far beyond what the law "
        "allows barely moves a KS statistic over 65536 rows but gets p ~ R u). A row extreme "
        "outside the law's support is decisive. This is the '9 of 10 rows have minimum -100 "
        "sigma' check. False-alarm rate <= alpha (exact under the null up to KS's own accuracy). "
        "Effect: the larger KS distance. MDE: the level alpha/4 KS critical value at R rows."
    ),
    unit="D (row-extreme PIT vs uniform)",
    mde=extremes_mde,
)
