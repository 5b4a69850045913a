"""Figures of failing cases: the observed histogram over the exact rounded law, and a P-P plot.

Rows do not carry histograms, so a worker that sees a case fail saves the figure data next to the
report (`save_case_data`, one small .npz per (candidate, case, dtype, device) under
`<report_dir>/case-data/`); at the end of the run the controller renders one PNG per file that
belongs to a failing row (`render_figures`), the defects' worst groups first (`figure_order`) up
to MAX_FIGURES, next to index.html, over a pool of as many processes as the run had workers:
those sit idle by then, and the figures are most of the report's time.

What is saved (and why not the raw 2**20-bin histogram): a float32/float64 histogram has 2**20
bins and the law puts positive mass on several hundred thousand of them, megabytes per case. A
figure cannot show more than a few thousand columns, so the file keeps

* `g_*`: the finite bins coalesced into runs of consecutive bins of about equal value width
  (~1500 across where samples landed or the law expects some; each group is still an exact
  interval of representable values): count, law mass, smallest and largest value, and the width of
  the real interval that rounds into the group;
* `f_*`: full resolution (one row per histogram bin) in a window of bins around each boundary
  (RN(a) and RN(b), or the ends of the support where a bound is infinite) and for every bin with
  samples where the law has no mass (the impossible values, which are usually the story).

Densities (count / (n * width) and mass / width) are plotted rather than counts so that bins of
very different widths (ordered-key bins double in width every binade) read as one smooth curve.
"""

from __future__ import annotations

import glob
import json
import math
import os
import warnings

import numpy as np

from .defects import GROUP, defects
from .store import CASE_DATA_DIR, DISK_ERRNOS

#: Coalesced groups across the visible value range (where samples are or the law expects some)...
TARGET_GROUPS = 1500
#: ... and at most this many over every finite bin with samples or mass (tails beyond that range).
MAX_GROUPS = 12000
#: Full-resolution bins kept on each side of a boundary bin.
BOUNDARY_WINDOW = 48
#: At most this many impossible bins (samples where the law has no mass) kept, largest counts first.
MAX_IMPOSSIBLE = 4096
#: Figures rendered per run at most (each costs ~0.3 s of CPU at session end, when the run's
#: workers are done): every defect's worst group first (`figure_order`; a report of one candidate
#: leads with at most a dozen defects), then each defect's next worst, then the other failing
#: groups.
MAX_FIGURES = 24
#: Processes rendering a report's figures at most: past this, starting them costs more than the
#: figures left to each save.
MAX_FIGURE_PROCESSES = 8
#: Figures per process at least: a process spends ~0.7 s of CPU on its imports, two figures' worth,
#: so a handful of figures is rendered here rather than in a pool.
FIGURES_PER_PROCESS = 3
#: Every panel's title height (axes fraction), stated: left to matplotlib, each title's place is
#: found by measuring every tick label of its axes, a third of a figure's render time.
TITLE_Y = 1.02


# ------------------------------------------------------------------------------------------------
# Saving (worker side)


def _cell_widths(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
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


def _format_bins(fmt) -> tuple:
    """(lo, hi, cell width) of each main histogram bin of `fmt`, read-only, found once per
    format (a float32 law's 2^20 bins cost ~20 ms, and every failing group saves its data)."""
    held = _FORMAT_BINS.get(fmt.name)
    if held is None:
        lo, hi = (np.array(v, dtype=np.float64) for v in fmt.hist_bin_bounds())
        held = (lo, hi, _cell_widths(lo, hi))
        for array in held:
            array.setflags(write=False)
        _FORMAT_BINS[fmt.name] = held
    return held


def _bin_of(fmt, value: float, shift: int, nbins: int) -> int | None:
    if value is None or not math.isfinite(value):
        return None
    try:
        key = int(np.asarray(fmt.ordered_keys(np.array([value], dtype=np.float64))).ravel()[0])
    except Exception:  # a format that cannot key this value: no window for it
        return None
    return min(max(key >> shift, 0), nbins - 1)


def save_case_data(path: str, summary, law, meta: dict | None = None) -> str:
    """Write the figure data of one (candidate, case, dtype, device) to `path` (.npz).

    `summary`: harness.summary.Summary (its `hist` over 2**hist_bits ordered-key bins);
    `law`: reference.RoundedLaw of the case and dtype. `meta` (optional, recommended): candidate,
    case, device, stage ... stored as JSON so the renderer need not parse the file name.
    """
    hist = np.asarray(summary.binned.hist, dtype=np.int64)
    nbins = hist.size
    probs = np.asarray(law.hist_bin_probs(), dtype=np.float64)
    lo, hi, width = _format_bins(law.fmt)
    bits = int(getattr(law.fmt, "bits", 0) or 0)
    shift = max(bits - int(summary.hist_bits), 0)

    # Coalesce the finite bins into groups of about equal *value* width: the figure's x axis is
    # linear in value, so key-uniform groups would spend the resolution on the subnormals.
    n = int(summary.n)
    fin = np.isfinite(lo) & np.isfinite(hi)
    occ = np.flatnonzero(fin & ((hist > 0) | (probs > 0)))
    if occ.size:
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
    else:
        g_lo = g_hi = g_count = g_prob = g_width = np.zeros(0)
    n_nonfinite_bins = int(hist[~fin].sum())

    # Full-resolution windows at both boundaries (or support ends) and at the observed extremes.
    pos = np.flatnonzero(probs > 0)
    seen = np.flatnonzero(hist > 0)
    lower_c = _bin_of(law.fmt, float(law.rn_a), shift, nbins)
    upper_c = _bin_of(law.fmt, float(law.rn_b), shift, nbins)
    # An infinite bound has no boundary bin: show the end of the tail that matters instead, the
    # farthest of (where the law still expects ~1/1000 of a sample, the most extreme sample).
    expect = np.flatnonzero(fin & (probs * max(int(summary.n), 1) >= 1e-3))
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
    f_bin = np.array(sorted(keep), dtype=np.int64)

    info = dict(meta or {})
    info.setdefault("dtype", str(summary.dtype))
    dist = getattr(law, "dist", None)
    for name, attr in (("mean", "loc"), ("std", "scale")):
        if dist is not None and name not in info:
            info[name] = float(getattr(dist, attr))
    scalars = {k: getattr(summary, k, 0) for k in
               ("n_nan", "n_posinf", "n_neginf", "n_unwritten", "n_outside_rounded",
                "n_outside_strict", "n_at_rn_a", "n_at_rn_b")}
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp.npz"  # write then rename: a crash mid-write leaves no half file behind
    np.savez_compressed(
        tmp, meta=np.array(json.dumps(info, default=str)),
        n=np.int64(summary.n), hist_bits=np.int64(summary.hist_bits),
        n_nonfinite_bins=np.int64(n_nonfinite_bins), rn_a=np.float64(law.rn_a), rn_b=np.float64(law.rn_b),
        a=np.float64(summary.a), b=np.float64(summary.b),
        atom_a=np.float64(getattr(law, "atom_a", np.nan)), atom_b=np.float64(getattr(law, "atom_b", np.nan)),
        worst_outside=np.float64(getattr(summary, "worst_outside", np.nan)),
        lower_window=np.array(lower_w, dtype=np.int64), upper_window=np.array(upper_w, dtype=np.int64),
        g_count=g_count, g_prob=g_prob, g_lo=g_lo, g_hi=g_hi, g_width=g_width,
        f_bin=f_bin, f_count=hist[f_bin], f_prob=probs[f_bin], f_lo=lo[f_bin], f_hi=hi[f_bin],
        f_width=width[f_bin],
        **{k: np.int64(v) for k, v in scalars.items()})
    os.replace(tmp, path)
    return path


# ------------------------------------------------------------------------------------------------
# Loading and rendering (controller side)


def load_case_data(path: str, case_ids=()) -> dict:
    """A case-data file; its meta from inside the file, completed from its name (`case_ids`: the
    known case ids, which contain '-' as candidate names do)."""
    with np.load(path, allow_pickle=False) as z:
        data = {k: z[k] for k in z.files}
    meta = json.loads(str(data.pop("meta"))) if "meta" in data else {}
    for k, v in list(data.items()):
        if v.ndim == 0:
            data[k] = v.item()
    data["meta"] = _completed_meta(path, meta, case_ids)
    return data


def load_case_meta(path: str, case_ids=()) -> dict:
    """The meta `load_case_data` gives a file, without reading (or decompressing) its arrays."""
    with np.load(path, allow_pickle=False) as z:
        meta = json.loads(str(z["meta"])) if "meta" in z.files else {}
    return _completed_meta(path, meta, case_ids)


def _completed_meta(path: str, stored: dict, case_ids) -> dict:
    return meta_from_name(path, case_ids) | {k: v for k, v in stored.items() if v is not None}


def meta_from_name(path: str, case_ids=()) -> dict:
    """(candidate, case, dtype, device) from `<candidate>-<case>-<dtype>-<device>.npz`; case ids
    and candidate names both contain '-', so the case is found among `case_ids`."""
    stem = os.path.basename(path)[:-4] if path.endswith(".npz") else os.path.basename(path)
    parts = stem.rsplit("-", 2)
    if len(parts) < 3:
        return {}
    head, dtype, device = parts
    for cid in sorted(case_ids, key=len, reverse=True):
        if head.endswith("-" + cid):
            return {"candidate": head[: -len(cid) - 1], "case": cid, "dtype": dtype, "device": device}
    cand, _, case = head.partition("-")
    return {"candidate": cand, "case": case, "dtype": dtype, "device": device}


def _edges(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Stair edges for contiguous value intervals: midpoints between neighbours."""
    e = np.empty(lo.size + 1)
    e[0], e[-1] = lo[0], hi[-1]
    e[1:-1] = hi[:-1] / 2 + lo[1:] / 2
    return np.maximum.accumulate(e)  # -0/+0 and rounding must not make the edges go backwards


def stairs(ax, values, edges, **kwargs):
    """What `ax.stairs(values, edges, baseline=0, ...)` draws (the same StepPatch, so the same
    pixels), without its cost: `Axes.add_patch` finds the patch's data limits by walking its path
    one segment at a time in Python (a fifth of a figure's CPU time with a few thousand groups). A
    step path is straight lines only, so its extent is that of its vertices, given in one array."""
    from matplotlib.patches import StepPatch

    patch = StepPatch(values, edges, baseline=0, **kwargs)
    ax.add_artist(patch)
    vertices = patch.get_path().vertices
    ax.update_datalim(np.vstack([vertices, [[edges[0], 0.0]]]) if vertices.size
                      else [(edges[0], 0.0)])
    patch.sticky_edges.y.append(0)
    ax.autoscale(enable=None)  # the view follows the data at draw time, as after ax.stairs
    return patch


def _draw_density(ax, lo, hi, width, count, prob, n, label=True):
    """Observed density (filled) over the law's density (line); impossible samples in red."""
    ok = np.isfinite(lo) & np.isfinite(hi) & np.isfinite(width) & (width > 0)
    if not ok.any():
        return None
    lo, hi, width, count, prob = lo[ok], hi[ok], width[ok], count[ok], prob[ok]
    edges = _edges(lo, hi)
    law_d = prob / width
    obs_d = count / (max(n, 1) * width)
    stairs(ax, np.where(obs_d > 0, obs_d, np.nan), edges, fill=True, facecolor="tab:blue",
           linewidth=0, alpha=0.45, label="observed" if label else None)
    stairs(ax, np.where(law_d > 0, law_d, np.nan), edges, fill=False, edgecolor="black", lw=1.1,
           label="exact rounded law" if label else None)
    bad = (count > 0) & (prob <= 0)
    if bad.any():
        mid = lo[bad] / 2 + hi[bad] / 2
        ax.scatter(mid, obs_d[bad], color="red", marker="x", s=30, zorder=5,
                   label="samples where the law has no mass" if label else None)
    return obs_d, law_d, edges, prob * max(n, 1)


def _ylim(ax, obs_d, law_d, expected=None):
    pos_obs = obs_d[obs_d > 0]
    pos_law = law_d[law_d > 0]
    # Show the law down to where it still expects about half a sample per bin.
    seen_law = law_d[(law_d > 0) & (expected >= 0.5)] if expected is not None else pos_law[:0]
    top = max([pos_obs.max() if pos_obs.size else 0, pos_law.max() if pos_law.size else 0, 1e-300])
    if pos_obs.size:
        bottom = min(pos_obs.min() / 5, top / 100)  # two decades at least: readable log ticks
        if seen_law.size:
            bottom = min(bottom, seen_law.min() / 2)
    elif pos_law.size:
        bottom = pos_law.max() * 1e-8
    else:
        bottom = top * 1e-8
    bottom = max(bottom, top * 1e-14)  # the law's tail below this is not what the reader needs
    ax.set_ylim(bottom, top * 3)


def _bound_lines(ax, data, xlo, xhi):
    for key, label, color in (("rn_a", "RN(a)", "tab:green"), ("rn_b", "RN(b)", "tab:red")):
        v = data.get(key)
        if v is not None and math.isfinite(v) and xlo <= v <= xhi:
            ax.axvline(v, color=color, ls="--", lw=0.9, label=f"{label} = {v:.6g}")


def _boundary_panel(ax, data, which: str):
    from matplotlib.ticker import MaxNLocator

    w0, w1 = data["lower_window" if which == "lower" else "upper_window"]
    sel = (data["f_bin"] >= w0) & (data["f_bin"] <= w1)
    bound = data["rn_a" if which == "lower" else "rn_b"]
    name = "RN(a)" if which == "lower" else "RN(b)"
    title = (f"{'lower' if which == 'lower' else 'upper'} boundary: {name} = {bound:.6g}"
             if math.isfinite(bound) else f"{'lower' if which == 'lower' else 'upper'} end of the support"
             f" ({'a' if which == 'lower' else 'b'} infinite)")
    ax.set_title(title, fontsize=9, y=TITLE_Y)
    ax.set_yscale("log")
    drawn = _draw_density(ax, data["f_lo"][sel], data["f_hi"][sel], data["f_width"][sel],
                          data["f_count"][sel].astype(float), data["f_prob"][sel], data["n"], label=False)
    if drawn is None:
        ax.text(0.5, 0.5, "no finite values here", transform=ax.transAxes, ha="center", fontsize=9)
        return
    obs_d, law_d, edges, expected = drawn
    if not ((obs_d > 0).any() or (law_d > 0).any()):
        ax.set_yscale("linear")  # nothing positive to put on a log axis
        ax.set_yticks([])
    if not (law_d > 0).any():
        ax.text(0.5, 0.14, "law mass below 1e-308 here", transform=ax.transAxes, ha="center",
                fontsize=8, color="0.3")
    if not (obs_d > 0).any():
        ax.text(0.5, 0.06, "no samples here", transform=ax.transAxes, ha="center", fontsize=8,
                color="0.3")
    if (obs_d > 0).any() or (law_d > 0).any():
        _ylim(ax, obs_d, law_d, expected)
    else:
        ax.set_ylim(0, 1)
    ax.set_xlim(edges[0], edges[-1])
    _bound_lines(ax, data, edges[0], edges[-1])
    ax.xaxis.set_major_locator(MaxNLocator(4))
    ax.tick_params(labelsize=7)
    ax.set_xlabel("value", fontsize=8)


def _pp_panel(ax, data):
    n = max(int(data["n"]), 1)
    prob = data["g_prob"]
    total = prob.sum()
    f_law = np.concatenate([[0.0], np.cumsum(prob) / (total if total > 0 else 1.0)])
    f_obs = np.concatenate([[0.0], np.cumsum(data["g_count"]) / n])
    ax.plot([0, 1], [0, 1], color="0.6", lw=0.8)
    ax.plot(f_law, f_obs, color="tab:blue", lw=1.2, marker=".", ms=2)
    d = f_obs - f_law
    worst = float(np.max(np.abs(d))) if d.size else float("nan")
    ax.set_xlabel("law CDF", fontsize=8)
    ax.set_ylabel("observed CDF", fontsize=8)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.tick_params(labelsize=7)
    if data.get("n_nonfinite_bins"):
        ax.text(0.02, 0.95, f"{int(data['n_nonfinite_bins'])} non-finite samples not shown",
                transform=ax.transAxes, fontsize=7, va="top")
    ax.set_title(f"P-P plot (max |ΔF| = {worst:.2g}; 99% KS band ±{1.63 / math.sqrt(n):.2g})",
                 fontsize=9, y=TITLE_Y)
    # The deviation on its own axis: at large n the P-P curve hugs the diagonal visibly anyway.
    ax2 = ax.twinx()
    ax2.plot(f_law, d, color="tab:orange", lw=0.9)
    band = 1.63 / math.sqrt(n)
    ax2.axhspan(-band, band, color="tab:orange", alpha=0.12)
    lim = max(abs(worst) if math.isfinite(worst) else 0, band) * 1.3
    ax2.set_ylim(-lim, lim)
    ax2.set_ylabel("observed − law CDF", fontsize=8, color="tab:orange")
    ax2.tick_params(labelsize=7, colors="tab:orange")


def render_figure(data_or_path, png_path: str, checks=()) -> str:
    """One PNG: the density panel over the occupied range, both boundary regions at full
    resolution, and the P-P plot."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import LogLocator, NullLocator

    data = load_case_data(data_or_path) if isinstance(data_or_path, str) else data_or_path
    meta = data.get("meta", {})
    n = int(data["n"])
    fig = plt.figure(figsize=(12, 7.2), dpi=100)
    gs = fig.add_gridspec(2, 3, height_ratios=[1.25, 1], hspace=0.42, wspace=0.38)
    ax = fig.add_subplot(gs[0, :])
    ax.set_yscale("log")
    drawn = _draw_density(ax, data["g_lo"], data["g_hi"], data["g_width"], data["g_count"],
                          data["g_prob"], n)
    if drawn is not None:
        obs_d, law_d, edges, expected = drawn
        # x range: where samples landed or the law expects at least ~1/100 of a sample.
        ok = np.isfinite(data["g_lo"]) & np.isfinite(data["g_hi"]) & np.isfinite(data["g_width"]) \
            & (data["g_width"] > 0)
        cnt, prb = data["g_count"][ok], data["g_prob"][ok]
        vis = np.flatnonzero((cnt > 0) | (prb * max(n, 1) >= 1e-2))
        if vis.size:
            x0, x1 = edges[vis[0]], edges[vis[-1] + 1]
            pad = (x1 - x0) * 0.02 or abs(x0) * 1e-6 or 1e-12
            ax.set_xlim(x0 - pad, x1 + pad)
            part = slice(vis[0], vis[-1] + 1)
            _ylim(ax, obs_d[part], law_d[part], expected[part])
            _bound_lines(ax, data, x0 - pad, x1 + pad)
        ax.legend(fontsize=8, loc="best", framealpha=0.7)
    else:
        ax.text(0.5, 0.5, "no finite samples", transform=ax.transAxes, ha="center")
    ax.set_ylabel("density (1 / value)", fontsize=9)
    ax.set_xlabel("value", fontsize=9)
    ax.tick_params(labelsize=8)
    nonfinite = ", ".join(f"{k[2:]} {int(data.get(k, 0))}" for k in
                          ("n_nan", "n_posinf", "n_neginf", "n_unwritten", "n_outside_rounded")
                          if int(data.get(k, 0) or 0))
    ax.set_title(f"histogram over the exact rounded law, log scale (n = {n:,}"
                 + (f"; {nonfinite}" if nonfinite else "") + ")", fontsize=10, y=TITLE_Y)
    _boundary_panel(fig.add_subplot(gs[1, 0]), data, "lower")
    _boundary_panel(fig.add_subplot(gs[1, 1]), data, "upper")
    _pp_panel(fig.add_subplot(gs[1, 2]), data)
    head = " · ".join(str(meta.get(k)) for k in ("candidate", "case", "dtype", "device") if meta.get(k))
    law = (f"TN(mean {meta.get('mean', '?')}, std {meta.get('std', '?')}, "
           f"a {data['a']:.6g}, b {data['b']:.6g})")
    fails = f" — failing: {', '.join(checks)}" if checks else ""
    fig.suptitle(f"{head}{fails}\n{law}", fontsize=11)
    # A fixed layout: bbox_inches="tight" would draw the figure twice (half the render time).
    fig.subplots_adjust(left=0.065, right=0.94, top=0.86, bottom=0.075)
    for a in fig.axes:
        if a.get_yscale() == "log":
            # No minor ticks: unlabelled, they were half of a figure's tick objects, and ticks
            # are most of its drawing time.
            a.yaxis.set_minor_locator(NullLocator())
            a.yaxis.set_major_locator(LogLocator(numticks=7))
    fig.savefig(png_path)
    plt.close(fig)
    return png_path


def figure_name(meta: dict) -> str:
    parts = [str(meta.get(k, "?")) for k in ("candidate", "case", "dtype", "device")]
    return "fig-" + "-".join(p.replace(os.sep, "_").replace(":", "_").replace(" ", "_")
                             for p in parts) + ".png"


def figure_processes(workers: int | None, figures: int) -> int:
    """How many processes render `figures` figures: the run's workers (xdist's -n; None or 0:
    the CPUs this process may use), at most MAX_FIGURE_PROCESSES and one per FIGURES_PER_PROCESS
    figures. 1: rendered here, one after another."""
    if not workers or workers < 1:
        try:
            workers = len(os.sched_getaffinity(0))
        except AttributeError:  # not on Linux
            workers = os.cpu_count() or 1
    return max(1, min(workers, MAX_FIGURE_PROCESSES, figures // FIGURES_PER_PROCESS))


def render_figures(df, report_dir: str, workers: int | None = None) -> dict:
    """Render a PNG for every case-data file that belongs to a failing row of `df`.

    Returns {(candidate, case, dtype, device): png file name relative to report_dir}. Files that
    match no failing row (left from another run) are ignored; a damaged file costs only its figure
    (a warning); an OSError of the disk (DISK_ERRNOS) propagates. `workers`: processes to render
    with (`figure_processes`); the files, the names and the dict are the same for any number.
    """
    paths = sorted(glob.glob(os.path.join(report_dir, CASE_DATA_DIR, "*.npz")))
    if not paths or df is None or not len(df):
        return {}
    failing = df[df["verdict"].isin(("fail", "xfail"))]
    checks: dict = {}
    for _, r in failing.iterrows():
        checks.setdefault((r["candidate"], r["case"], r["dtype"], r["device"]), []).append(r["check"])
    case_ids = tuple(df["case"].dropna().unique())
    metas = {path: _meta_or_fault(path, case_ids) for path in paths}
    paths = by_figure_order(paths, figure_order(df), metas)
    return _FigureJobs(paths, metas, checks, case_ids, report_dir).run(workers)


def _meta_or_fault(path: str, case_ids: tuple):
    """The file's meta (`load_case_meta`), or the exception that reading it raised (drawing it
    says why); an OSError of the disk (DISK_ERRNOS) propagates."""
    try:
        return load_case_meta(path, case_ids)
    except Exception as exc:
        if isinstance(exc, OSError) and exc.errno in DISK_ERRNOS:
            raise  # the disk, not the data: the run reports it as a fault
        return exc


def figure_key(meta: dict) -> tuple:
    """(candidate, case, dtype, device) of a file's meta, as the rows name a group."""
    return tuple(str(meta.get(k)) for k in ("candidate", *GROUP))


def figure_order(df) -> dict:
    """{(candidate, case, dtype, device): rank} of the groups the defects of `df` name
    (`reports.defects.defects`), in the order figures are drawn: every defect's worst group, in
    the order the report lists the defects, then every defect's second worst, and so on."""
    found = defects(df)
    order: dict = {}
    for depth in range(max((len(d.groups) for d in found), default=0)):
        for d in found:
            if depth < len(d.groups):
                order.setdefault((d.candidate, *d.groups[depth]), len(order))
    return order


def by_figure_order(paths: list, order: dict, metas: dict) -> list:
    """The case-data files, those of the groups in `order` first by rank, the others after them
    in file order (a file whose meta could not be read among them: drawing it says why)."""
    def rank(path: str) -> int:
        meta = metas[path]
        if isinstance(meta, Exception):
            return len(order)
        return order.get(figure_key(meta), len(order))

    return sorted(paths, key=rank)


def _no_figure(path: str, why: str) -> None:
    warnings.warn(f"reports: no figure for {os.path.basename(path)}: {why}", stacklevel=3)


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except OSError:
        pass


def render_job(path: str, tmp: str, checks: list, case_ids: tuple):
    """Render one case-data file into `tmp` (here or in a pool's process): (outcome, warnings),
    plain picklable values, never an exception but an interrupt. Outcome: ("ok",), ("error",
    "Type: message"), or ("disk", errno, strerror, filename) for the parent to raise."""
    with warnings.catch_warnings(record=True) as caught:
        try:
            render_figure(load_case_data(path, case_ids), tmp, checks)
            outcome: tuple = ("ok",)
        except Exception as exc:  # one bad file must not cost the others their figures
            _remove(tmp)
            if isinstance(exc, OSError) and exc.errno in DISK_ERRNOS:
                outcome = ("disk", exc.errno, exc.strerror, exc.filename)
            else:
                outcome = ("error", f"{type(exc).__name__}: {exc}")
    return outcome, [(w.category, str(w.message)) for w in caught]


def _pool_start() -> None:
    import matplotlib

    matplotlib.use("Agg")


class _FigureJobs:
    """The figures of one report, rendered as `render_figure` one after another would leave them:
    the first MAX_FIGURES files (in `figure_order`, then name order) that belong to failing rows
    and render, each under its figure name, whatever the number of processes (`metas`: each
    file's meta, or what reading it raised).

    Each figure is drawn into a hidden temporary file and renamed onto its name in file order as
    the results come in, so that figures finished ahead of their turn never show (past the cap,
    after a failed write) and two files of one name end as the later one."""

    def __init__(self, paths: list, metas: dict, checks: dict, case_ids: tuple, report_dir: str):
        self.paths, self.metas, self.checks = paths, metas, checks
        self.case_ids, self.report_dir = case_ids, report_dir
        self.next_path = 0  # the next file to look at
        self.out: dict = {}
        self.pool = None
        self.pool_failed = False
        self.temps: set = set()

    def run(self, workers: int | None) -> dict:
        try:
            first = True
            while len(self.out) < MAX_FIGURES:
                # Only as many as may still be needed: a later file is drawn only when an earlier
                # one failed, as in a loop one after another.
                wave = self._take(MAX_FIGURES - len(self.out))
                if not wave:
                    break
                if first and figure_processes(workers, len(wave)) > 1:
                    self.pool = self._start_pool(figure_processes(workers, len(wave)))
                first = False
                self._finish(wave, [self._submit(args) for *_, args in wave])
        finally:
            if self.pool is not None:
                self.pool.shutdown(wait=True, cancel_futures=True)
            for tmp in self.temps:  # what a failed write or an interrupt left half done
                _remove(tmp)
        if len(self.out) >= MAX_FIGURES and self.next_path < len(self.paths):
            warnings.warn(f"reports: more than {MAX_FIGURES} failing cases with data; "
                          "figures rendered for the defects' worst ones only", stacklevel=3)
        return self.out

    @staticmethod
    def _start_pool(processes: int):
        # spawn, not fork: the controller has torch's and xdist's threads running, whose locks a
        # fork would copy mid-flight. The pool lives for the whole report: each process pays the
        # imports (~0.7 s of CPU) once, not once per figure.
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        try:
            return ProcessPoolExecutor(max_workers=processes, initializer=_pool_start,
                                       mp_context=multiprocessing.get_context("spawn"))
        except Exception as exc:  # no process pool here (no semaphores): one after another
            warnings.warn(f"reports: figures rendered in this process: no process pool "
                          f"({type(exc).__name__}: {exc})", stacklevel=4)
            return None

    def _take(self, count: int) -> list:
        """The next `count` figures to draw, in file order: (path, key, name, job arguments)."""
        wave = []
        while len(wave) < count and self.next_path < len(self.paths):
            path = self.paths[self.next_path]
            self.next_path += 1
            meta = self.metas[path]
            if isinstance(meta, Exception):
                _no_figure(path, f"{type(meta).__name__}: {meta}")
                continue
            key = figure_key(meta)
            if key not in self.checks:
                continue
            name = figure_name(meta)
            tmp = os.path.join(self.report_dir, f".{name[:-4]}.{self.next_path}.tmp.png")
            self.temps.add(tmp)
            wave.append((path, key, name, (path, tmp, self.checks[key], self.case_ids)))
        return wave

    def _submit(self, args):
        if self.pool is None:
            return None
        try:
            return self.pool.submit(render_job, *args)
        except Exception as exc:  # the pool broke on an earlier figure: this one here
            self._pool_failure(exc)
            return None

    def _pool_failure(self, exc: BaseException) -> None:
        if not self.pool_failed:
            self.pool_failed = True
            warnings.warn(f"reports: a figure process failed ({type(exc).__name__}: {exc}); its "
                          "figures are rendered in this process", stacklevel=5)

    def _finish(self, wave: list, futures: list) -> None:
        for (path, key, name, args), future in zip(wave, futures):
            result = None
            if future is not None:
                try:
                    result = future.result()
                except Exception as exc:  # a process killed, a result that would not pickle
                    self._pool_failure(exc)
            if result is None:
                result = render_job(*args)
            outcome, caught = result
            for category, message in caught:
                warnings.warn(message, category, stacklevel=4)
            if outcome[0] == "disk":  # the disk, not the data: the run reports it as a fault
                code, strerror, filename = outcome[1:]
                final = os.path.join(self.report_dir, name)
                raise OSError(code, strerror, final if filename == args[1] else filename)
            if outcome[0] == "error":
                _no_figure(path, outcome[1])
                continue
            try:
                os.replace(args[1], os.path.join(self.report_dir, name))
            except OSError as exc:
                if exc.errno in DISK_ERRNOS:
                    raise
                _no_figure(path, f"{type(exc).__name__}: {exc}")
                continue
            self.temps.discard(args[1])
            self.out[key] = name
