"""The figure of a failing group: the observed histogram over the exact rounded law, and a P-P plot.

`render_figure` draws one PNG from a group's figure data (`reports.case_data`: the finite bins
coalesced into groups of about equal value width, `g_*`, and full-resolution windows at the
boundaries and the impossible values, `f_*`); which figures a report draws, and over how many
processes, is `reports.figure_jobs`.

Densities (count / (n * width) and mass / width) are plotted rather than counts so that bins of
very different widths (ordered-key bins double in width every binade) read as one smooth curve.
"""

from __future__ import annotations

import math
import os

import numpy as np

from .case_data import load_case_data

#: Every panel's title height (axes fraction), stated: left to matplotlib, each title's place is
#: found by measuring every tick label of its axes, a third of a figure's render time.
TITLE_Y = 1.02


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
