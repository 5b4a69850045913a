"""What the figure of a failing group draws, taken from its Summary and its law as plain arrays.

Rows do not carry histograms, so a worker that sees a group fail hands `figure_data(summary,
law)` to `reports.case_data.save_case_data`, which keeps it as one small .npz per (candidate,
case, dtype, device); the report renders it at the end of the run (`reports.figures`). The
histogram is read through the binned family's public accessor (`binned.histogram`); the report
never reads a family's state.

What is kept (and why not the raw 2**20-bin histogram): a float32/float64 histogram has 2**20
bins and the law puts positive mass on several hundred thousand of them, megabytes per case. A
figure cannot show more than a few thousand columns, so the data holds

* `g_*`: the finite bins coalesced into runs of consecutive bins of about equal value width
  (~1500 across where samples landed or the law expects some; each group is still an exact
  interval of representable values): count, law mass, smallest and largest value, and the width of
  the real interval that rounds into the group;
* `f_*`: full resolution (one row per histogram bin) in a window of bins around each boundary
  (RN(a) and RN(b), or the ends of the support where a bound is infinite) and for every bin with
  samples where the law has no mass (the impossible values, which are usually the story).
"""

from __future__ import annotations

import math

import numpy as np

from .families.atoms import atom_counts
from .families.binned import histogram
from .families.support import support_counts
from .summary import Summary

#: Coalesced groups across the visible value range (where samples are or the law expects some)...
TARGET_GROUPS = 1500
#: ... and at most this many over every finite bin with samples or mass (tails beyond that range).
MAX_GROUPS = 12000
#: Full-resolution bins kept on each side of a boundary bin.
BOUNDARY_WINDOW = 48
#: At most this many impossible bins (samples where the law has no mass) kept, largest counts first.
MAX_IMPOSSIBLE = 4096
#: The counts a figure's title lists where they are not zero, by their names in the data.
COUNT_NAMES = ("n_nan", "n_posinf", "n_neginf", "n_unwritten", "n_outside_rounded",
               "n_outside_strict", "n_at_rn_a", "n_at_rn_b")


def cell_widths(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Width of the real interval that rounds into each bin: from the midpoint with the previous
    bin's largest value to the midpoint with the next bin's smallest; NaN where undefined (NaN and
    infinite bins, the bin of -0 next to +0)."""
    with np.errstate(invalid="ignore", over="ignore"):
        lo_f = np.where(np.isfinite(lo), lo, np.nan)
        hi_f = np.where(np.isfinite(hi), hi, np.nan)
        upper = np.empty_like(lo_f)
        lower = np.empty_like(lo_f)
        upper[:-1] = (hi_f[:-1] / 2 + lo_f[1:] / 2)  # halves first: no overflow near max_finite
        upper[-1] = np.nan
        lower[1:] = (hi_f[:-1] / 2 + lo_f[1:] / 2)
        lower[0] = np.nan
        # At the ends of the finite range there is no neighbour: use the bin's own extent.
        upper = np.where(np.isnan(upper), hi_f, upper)
        lower = np.where(np.isnan(lower), lo_f, lower)
        w = upper - lower
    return np.where(w > 0, w, np.nan)


_FORMAT_BINS: dict = {}


def format_bins(fmt) -> tuple:
    """(lo, hi, cell width) of each main histogram bin of `fmt`, read-only, found once per
    format (a float32 law's 2^20 bins cost ~20 ms, and every failing group saves its data)."""
    held = _FORMAT_BINS.get(fmt.name)
    if held is None:
        lo, hi = (np.array(v, dtype=np.float64) for v in fmt.hist_bin_bounds())
        held = (lo, hi, cell_widths(lo, hi))
        for array in held:
            array.setflags(write=False)
        _FORMAT_BINS[fmt.name] = held
    return held


def bin_of(fmt, value: float, shift: int, nbins: int) -> int | None:
    """The main histogram bin of `value` (None: not finite, or a value `fmt` cannot key)."""
    if value is None or not math.isfinite(value):
        return None
    try:
        key = int(np.asarray(fmt.ordered_keys(np.array([value], dtype=np.float64))).ravel()[0])
    except Exception:  # a format that cannot key this value: no window for it
        return None
    return min(max(key >> shift, 0), nbins - 1)


def coalesced_groups(hist: np.ndarray, probs: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                     width: np.ndarray, n: int) -> dict:
    """The finite bins in groups of about equal *value* width (`g_*`): the figure's x axis is
    linear in value, so key-uniform groups would spend the resolution on the subnormals."""
    fin = np.isfinite(lo) & np.isfinite(hi)
    occ = np.flatnonzero(fin & ((hist > 0) | (probs > 0)))
    if not occ.size:
        empty = np.zeros(0)
        return dict(g_count=empty, g_prob=empty, g_lo=empty, g_hi=empty, g_width=empty)
    idx = np.arange(occ[0], occ[-1] + 1)
    idx = idx[fin[idx]]
    vis = idx[(hist[idx] > 0) | (probs[idx] * max(n, 1) >= 1e-3)]
    vis = vis if vis.size else idx
    with np.errstate(over="ignore", invalid="ignore"):
        half_lo = lo[idx] / 2  # halves: no overflow between -max_finite and +max_finite
        x0 = lo[vis[0]] / 2
        delta = (hi[vis[-1]] / 2 - x0) / TARGET_GROUPS
        delta = delta if delta > 0 else max(abs(x0) * 1e-12, 1e-300)
        while (hi[idx[-1]] / 2 - half_lo[0]) / delta > MAX_GROUPS:
            delta *= 2
        raw = np.floor((half_lo - x0) / delta)
    _, gid = np.unique(raw, return_inverse=True)
    gid = gid.ravel()
    ngroups = int(gid.max()) + 1
    g_lo = np.full(ngroups, np.inf)
    g_hi = np.full(ngroups, -np.inf)
    np.minimum.at(g_lo, gid, lo[idx])
    np.maximum.at(g_hi, gid, hi[idx])
    g_count = np.bincount(gid, weights=hist[idx].astype(np.float64), minlength=ngroups)
    g_prob = np.bincount(gid, weights=probs[idx], minlength=ngroups)
    g_width = np.bincount(gid, weights=np.nan_to_num(width[idx], nan=0.0), minlength=ngroups)
    g_width[g_width <= 0] = np.nan
    return dict(g_count=g_count, g_prob=g_prob, g_lo=g_lo, g_hi=g_hi, g_width=g_width)


def full_resolution_bins(hist: np.ndarray, probs: np.ndarray, fin: np.ndarray, law, shift: int,
                         n: int) -> tuple:
    """(lower window, upper window, kept bins): the bins shown at full resolution, at both
    boundaries (or support ends), at the observed extremes and wherever samples sit on no mass."""
    nbins = hist.size
    pos = np.flatnonzero(probs > 0)
    seen = np.flatnonzero(hist > 0)
    lower_c = bin_of(law.fmt, float(law.rn_a), shift, nbins)
    upper_c = bin_of(law.fmt, float(law.rn_b), shift, nbins)
    # An infinite bound has no boundary bin: show the end of the tail that matters instead, the
    # farthest of (where the law still expects ~1/1000 of a sample, the most extreme sample).
    expect = np.flatnonzero(fin & (probs * max(n, 1) >= 1e-3))
    fin_seen = seen[fin[seen]] if seen.size else seen
    if lower_c is None:
        ends = [int(x[0]) for x in (expect, fin_seen, pos) if x.size][:2]
        lower_c = min(ends) if ends else 0
    if upper_c is None:
        ends = [int(x[-1]) for x in (expect, fin_seen, pos) if x.size][:2]
        upper_c = max(ends) if ends else nbins - 1
    centers = {lower_c, upper_c}
    if fin_seen.size:
        centers |= {int(fin_seen[0]), int(fin_seen[-1])}
    # Boundary windows reach mostly inward: the law's side of the bound is what has a shape.
    lower_w = (max(lower_c - BOUNDARY_WINDOW // 4, 0), min(lower_c + BOUNDARY_WINDOW, nbins - 1))
    upper_w = (max(upper_c - BOUNDARY_WINDOW, 0), min(upper_c + BOUNDARY_WINDOW // 4, nbins - 1))
    keep = set(range(lower_w[0], lower_w[1] + 1)) | set(range(upper_w[0], upper_w[1] + 1))
    for c in centers - {lower_c, upper_c}:
        keep.update(range(max(c - BOUNDARY_WINDOW, 0), min(c + BOUNDARY_WINDOW + 1, nbins)))
    impossible = np.flatnonzero((hist > 0) & (probs <= 0))
    if impossible.size > MAX_IMPOSSIBLE:
        impossible = impossible[np.argsort(-hist[impossible], kind="stable")[:MAX_IMPOSSIBLE]]
    keep.update(int(k) for k in impossible)
    return lower_w, upper_w, np.array(sorted(keep), dtype=np.int64)


def figure_data(summary: Summary, law) -> dict:
    """The figure data of one group: ``about`` (dtype, and the law's mean and std, for the
    figure's title) and the named numpy scalars and arrays `reports.case_data.save_case_data`
    keeps, in the order it keeps them.

    `summary`: a Summary folded with the binned family; `law`: reference.RoundedLaw of the case
    and dtype."""
    hist = histogram(summary)
    nbins = hist.size
    probs = np.asarray(law.hist_bin_probs(), dtype=np.float64)
    lo, hi, width = format_bins(law.fmt)
    bits = int(getattr(law.fmt, "bits", 0) or 0)
    shift = max(bits - int(summary.hist_bits), 0)
    n = int(summary.n)
    fin = np.isfinite(lo) & np.isfinite(hi)
    groups = coalesced_groups(hist, probs, lo, hi, width, n)
    lower_w, upper_w, f_bin = full_resolution_bins(hist, probs, fin, law, shift, n)

    about = {"dtype": str(summary.dtype)}
    dist = getattr(law, "dist", None)
    if dist is not None:
        about.update(mean=float(dist.loc), std=float(dist.scale))
    support = support_counts(summary)
    counts = {k: np.int64(v) for k, v in {**support, **atom_counts(summary)}.items()
              if k in COUNT_NAMES}
    return dict(
        about=about,
        n=np.int64(summary.n), hist_bits=np.int64(summary.hist_bits),
        n_nonfinite_bins=np.int64(int(hist[~fin].sum())),
        rn_a=np.float64(law.rn_a), rn_b=np.float64(law.rn_b),
        a=np.float64(summary.a), b=np.float64(summary.b),
        atom_a=np.float64(getattr(law, "atom_a", np.nan)),
        atom_b=np.float64(getattr(law, "atom_b", np.nan)),
        worst_outside=np.float64(support["worst_outside"]),
        lower_window=np.array(lower_w, dtype=np.int64),
        upper_window=np.array(upper_w, dtype=np.int64),
        **groups,
        f_bin=f_bin, f_count=hist[f_bin], f_prob=probs[f_bin], f_lo=lo[f_bin], f_hi=hi[f_bin],
        f_width=width[f_bin],
        **counts)
