"""How far a sample's values are from the rounded law, in units a model's owner reads, and what
the exact sampler reads at the same n: the severity figures and their noise floors.

Every figure comes from the Summary's main histogram (the binned family's counts, or a narrow
law's fine bins: `harness.families.common.LawBins`) against the law's masses of the same bins, on
a *coarse* resolution: the bins are grouped into cells of width sigma/64 on the z scale
(z = (x - mean) / sigma, sigma the law's std as the engine standardizes), a bin wider than a cell
(a 16-bit atom of a coarse lattice, a float32 bin far out) a cell of its own. Each cell stands at
the middle of its bins' z range. The statistic is then a function of the cells T(Y) of the values,
and T(Y_1), ..., T(Y_n) are iid draws of the law pushed onto the cells: each floor below is a
bound for exactly that, at the run's n, exceeded by an exact sampler with probability at most
`DELTA` (1e-6) per figure. No draw, no loop over values: a few vectorized passes over the bins,
the law's part cached on the law.

* ``w1_sigma``: the Wasserstein-1 distance between the sample and the law, in sigma:
  sum |F_n - F| dz over the cells. ``w1_floor``: E W1 <= sum sqrt(F (1 - F) / n) dz (Jensen,
  every n) plus Bousquet's deviation for the supremum of an empirical process (W1 is the sup over
  1-Lipschitz h of the mean of h(Y_i) - E h(Y), whose variance is at most Var Y, here ~1),
  with the range U of the values that n draws reach but with probability DELTA / 2:
  E + sqrt(2 t (v + 2 U E) / n) + U t / (3 n), t = ln(2 / DELTA).
* ``misplaced``: the share of the values that must move to another cell to give the law's cell
  masses (total variation over the cells). ``misplaced_floor``: E TV <= sum sqrt(p (1 - p) / n) / 2
  plus McDiarmid's sqrt(ln(1 / DELTA) / (2 n)) (one value moves TV by at most 1 / n).
* ``shift_share``, ``shift_sigma``: the worst displacement of a share of the values beyond noise.
  The values move to the law by the monotone coupling (quantile u of the sample to quantile u of
  the law, the optimal transport on the line); quantile u is displaced by
  d(u) = |Q_n(u) - Q(u)|. Under the law, with probability >= 1 - DELTA, every Q_n(u) lies in
  [Q(u - e), Q(u + e)] (Massart's DKW bound, e = sqrt(ln(4 / DELTA) / (2 n))) clipped to the range
  n draws reach (probability DELTA / 4 each side): a quantile outside that band is beyond noise.
  Among those, sorted by displacement, the share s and the displacement G(s) that at least s of
  the values moved by are the pair of largest s G(s): "0.2 % of the values moved by at least
  94 sigma" is shift_share 0.002, shift_sigma 94. Its floor is 0: an exact sampler reads 0 and 0
  but with probability DELTA.
* ``beyond4``, ``beyond6``: the share of the values beyond 4 (6) sigma minus the law's (cells
  whose middle is beyond), signed: excess > 0, deficit < 0. ``beyond4_floor``: the larger distance
  of the two DELTA / 2 quantiles of Bin(n, p) from n p, over n: |beyond4| exceeds it with
  probability <= DELTA.

Values that are not finite (NaN, +-inf) where the law has none: misplaced counts them, the
coarse figures over the line read inf.

May import: `harness.families` (the bins), `harness.engine` (the scale), the floors below them.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from ...engine import standard_scale
from ...families.common import LawBins, cached_on_law

#: The chance that an exact sampler's figure exceeds its floor, per figure.
DELTA = 1e-6
#: Cells per sigma: the coarse resolution.
CELLS_PER_SIGMA = 64
#: The tail figures' thresholds, in sigma.
TAIL_SIGMAS = (4, 6)

#: Values further than this many sigma from the mean count as this far (keeps the sums finite).
FAR = 1e15
#: Shares of the values below this are float rounding of the cumulative masses, not values
#: (a share of a sample is a multiple of 1 / n).
NO_SHARE = 1e-12

#: The figures, in the order of the rows' columns (floors beside their figures).
NAMES = ("w1_sigma", "w1_floor", "misplaced", "misplaced_floor", "shift_sigma", "shift_share",
         "beyond4", "beyond4_floor", "beyond6", "beyond6_floor")


class LawCells:
    """The law's side of the figures, built once per law: the cells, their z, their masses."""

    def __init__(self, law):
        bins = LawBins.of(law)
        probs = np.asarray(bins.probs, dtype=np.float64)
        lo, hi = _bin_bounds(law, bins)
        center, scale = float(law.mean), standard_scale(law)
        finite = np.isfinite(lo) & np.isfinite(hi)
        with np.errstate(all="ignore"):
            z = np.clip((lo / 2 + hi / 2 - center) / scale, -FAR, FAR)
        cell = np.floor(np.where(finite, z, 0.0) * CELLS_PER_SIGMA)
        idx = np.flatnonzero(finite)
        # Bins are in value order: a cell is a run of finite bins with one cell number.
        first = np.ones(idx.size, dtype=bool)
        first[1:] = (cell[idx][1:] != cell[idx][:-1]) | (np.diff(idx) != 1)
        self.finite_bins = idx
        self.starts = np.flatnonzero(first)
        zf = z[idx]
        ends = np.r_[self.starts[1:], idx.size] - 1
        self.z = (zf[self.starts] + zf[ends]) / 2
        self.probs = np.add.reduceat(probs[idx], self.starts) if idx.size else np.zeros(0)
        self.nonfinite_mass = float(probs[~finite].sum())
        self.nonfinite_bins = np.flatnonzero(~finite)

    @classmethod
    def of(cls, law) -> "LawCells":
        return cached_on_law(law, "_severity_cells", cls)

    def cell_counts(self, counts: np.ndarray) -> tuple[np.ndarray, int]:
        """(counts per cell, count outside every cell: non-finite values)."""
        c = np.asarray(counts, dtype=np.int64)
        per_cell = (np.add.reduceat(c[self.finite_bins], self.starts) if self.finite_bins.size
                    else np.zeros(0, dtype=np.int64))
        return per_cell, int(c[self.nonfinite_bins].sum())


def _bin_bounds(law, bins: LawBins) -> tuple[np.ndarray, np.ndarray]:
    """Smallest and largest value of each of the bins `bins` counts (NaN where none): a narrow
    law's bins below and above its fine bins stand at the fine bins' ends."""
    if not bins.fine:
        lo, hi = law.fmt.hist_bin_bounds()
        return np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64)
    lo, hi = (np.asarray(x, dtype=np.float64) for x in law.fine_bin_bounds())
    return np.r_[lo[0], lo, hi[-1]], np.r_[lo[0], hi, hi[-1]]


def severity(summary, law, delta: float = DELTA) -> dict:
    """The severity figures and floors of one Summary against its law (`NAMES`); each floor
    exceeded by an exact sampler with probability at most `delta`."""
    cells = LawCells.of(law)
    per_cell, nonfinite = cells.cell_counts(LawBins.of(law).counts(summary))
    n = int(per_cell.sum()) + nonfinite
    out = dict.fromkeys(NAMES, math.nan)
    if n == 0 or cells.z.size == 0:
        return out
    finite_mass = 1.0 - cells.nonfinite_mass
    keep = (cells.probs > 0) | (per_cell > 0)
    z, p = cells.z[keep], cells.probs[keep] / finite_mass
    q = per_cell[keep] / n
    out.update(misplaced_figures(p * finite_mass, q, nonfinite / n, cells.nonfinite_mass, n,
                                 delta))
    if nonfinite and cells.nonfinite_mass == 0:
        out.update(w1_sigma=math.inf, shift_sigma=math.inf, shift_share=nonfinite / n)
    else:
        n_finite = n - nonfinite
        q = per_cell[keep] / max(n_finite, 1)
        out.update(w1_figures(z, p, q, n_finite, delta))
        out.update(shift_figures(z, p, q, n_finite, delta))
    for k in TAIL_SIGMAS:
        out.update(tail_figures(k, z, p * finite_mass, per_cell[keep], n, delta))
    return out


def misplaced_figures(p, q, q_nonfinite: float, p_nonfinite: float, n: int,
                      delta: float = DELTA) -> dict:
    """Total variation over the cells (and the non-finite values as one more cell)."""
    tv = 0.5 * (np.abs(q - p).sum() + abs(q_nonfinite - p_nonfinite))
    mean = 0.5 * (np.sqrt(p * (1 - p)).sum() + math.sqrt(p_nonfinite * (1 - p_nonfinite)))
    floor = mean / math.sqrt(n) + math.sqrt(math.log(1 / delta) / (2 * n))
    return {"misplaced": float(tv), "misplaced_floor": float(floor)}


def cdf_gap(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """F_q - F_p at the top of each cell, summed from the nearer end (no 1 - F cancellation)."""
    lower = np.cumsum(q) - np.cumsum(p)
    upper = np.cumsum((p - q)[::-1])[::-1]  # sum over cells >= i
    upper = np.r_[upper[1:], 0.0]  # sum over cells > i
    return np.where(np.cumsum(p) <= 0.5, lower, upper)


def reach(p: np.ndarray, n: int, delta: float = DELTA) -> tuple[int, int]:
    """The first and last cell that n draws reach but with probability delta / 4 on each side:
    the cells below the first (above the last) hold at most delta / (4 n) of the mass."""
    tail = delta / (4 * n)
    lower = np.cumsum(p)
    upper = np.cumsum(p[::-1])[::-1]
    i0 = int(np.searchsorted(lower, tail, side="right"))
    i1 = int(np.flatnonzero(upper > tail)[-1]) if np.any(upper > tail) else p.size - 1
    return min(i0, p.size - 1), max(i1, min(i0, p.size - 1))


def w1_figures(z, p, q, n: int, delta: float = DELTA) -> dict:
    """W1 over the cells and its floor (module docstring)."""
    if n == 0:
        return {"w1_sigma": math.nan, "w1_floor": math.nan}
    dz = np.diff(z)
    gap = cdf_gap(p, q)[:-1]
    w1 = float(np.sum(np.abs(gap) * dz))
    f = np.minimum(np.cumsum(p), np.r_[np.cumsum(p[::-1])[::-1][1:], 0.0])[:-1]
    mean = float(np.sum(np.sqrt(np.clip(f * (1 - f), 0, None)) * dz)) / math.sqrt(n)
    mu = float(np.dot(p, z))
    var = float(np.dot(p, (z - mu) ** 2))
    i0, i1 = reach(p, n, delta)
    span = float(z[i1] - z[i0])
    t = math.log(2 / delta)
    floor = mean + math.sqrt(2 * t * (var + 2 * span * mean) / n) + span * t / (3 * n)
    return {"w1_sigma": w1, "w1_floor": floor}


def shift_figures(z, p, q, n: int, delta: float = DELTA) -> dict:
    """The worst displacement of a share beyond noise (module docstring)."""
    if n == 0:
        return {"shift_sigma": math.nan, "shift_share": math.nan}
    fp, fq = np.cumsum(p), np.cumsum(q)
    fp /= fp[-1]
    fq /= fq[-1]
    u = np.unique(np.concatenate([fp, fq, [0.0]]))
    u = u[(u >= 0) & (u <= 1)]
    width = np.diff(u)
    mid = (u[:-1] + u[1:]) / 2
    last = z.size - 1

    def quantile(x):
        return z[np.minimum(np.searchsorted(fp, x, side="left"), last)]

    sample = z[np.minimum(np.searchsorted(fq, mid, side="left"), last)]
    law = quantile(mid)
    e = math.sqrt(math.log(4 / delta) / (2 * n))
    i0, i1 = reach(p, n, delta)
    low = np.where(mid - e > 0, quantile(np.clip(mid - e, 0, 1)), z[0])
    high = np.where(mid + e < 1, quantile(np.clip(mid + e, 0, 1)), z[last])
    low, high = np.maximum(low, z[i0]), np.minimum(high, z[i1])
    beyond = ((sample < low) | (sample > high)) & (width > NO_SHARE)
    if not beyond.any():
        return {"shift_sigma": 0.0, "shift_share": 0.0}
    d, w = np.abs(sample - law)[beyond], width[beyond]
    order = np.argsort(-d, kind="stable")
    d, share = d[order], np.cumsum(w[order])
    k = int(np.argmax(share * d))
    return {"shift_sigma": float(d[k]), "shift_share": float(share[k])}


def tail_figures(k: int, z, p, counts, n: int, delta: float = DELTA) -> dict:
    """The share beyond k sigma minus the law's, and its binomial floor."""
    out = np.abs(z) > k
    law_share = float(p[out].sum())
    observed = float(counts[out].sum()) / n
    if law_share <= 0:
        floor = 0.0
    else:
        mean = n * law_share
        hi = float(stats.binom.isf(delta / 2, n, law_share))
        lo = float(stats.binom.ppf(delta / 2, n, law_share))
        floor = max(hi - mean, mean - lo) / n
    return {f"beyond{k}": observed - law_share, f"beyond{k}_floor": floor}


def beyond_floor(figures: dict) -> tuple:
    """The coarse figures beyond their floors, by name: what makes a failure harmful."""
    names = []
    if figures.get("w1_sigma", math.nan) > figures.get("w1_floor", math.nan):
        names.append("w1_sigma")
    if figures.get("misplaced", math.nan) > figures.get("misplaced_floor", math.nan):
        names.append("misplaced")
    if figures.get("shift_share", 0.0) > 0:
        names.append("shift_share")
    for k in TAIL_SIGMAS:
        if abs(figures.get(f"beyond{k}", math.nan)) > figures.get(f"beyond{k}_floor", math.nan):
            names.append(f"beyond{k}")
    return tuple(names)
