"""The failure map: every explored and grid case of a report on the plane of its standardized bounds
(α, β) = ((a − μ)/σ, (b − μ)/σ), one panel per dtype (one row of panels per candidate when a report
holds several), as one PNG (`render_map`, `python -m reports map DIR`).

What a point says:

* colour: the case's verdict in that dtype, the worst over its checks and devices
  (`reports.overview.worst`: error, fail, xfail, pass, skip);
* size, for a case with failing rows: −log10 of the smallest p-value over them (p = 0, or a failing
  row without a p-value, a zero-probability event, counts as p = 10^−`P_CAP`);
* marker: explored cases (labels ``explore-<seed>-<i>``) are dots, grid cases diamonds labelled with
  their name. Labels with a suffix (``:<shape>``, ``+<path>``, ``@<layout>``) are other groups of a
  case already on the map and are left off; so are the candidate-level API rows (case ``api``).

The axes are linear over the explorer's range [−40, 40]; ±∞ sits at the panel edges (±`INF_AT`,
ticks "−∞"/"+∞"), and a finite bound beyond ±40 (a grid case such as the absolute-bounds trap, at
−100σ) is drawn at ±`CLIP_AT`, in the grey band between the two. Cases lie above the diagonal α = β.

Shrunk boundaries (``boundaries.json``, written by the harness's explorer: the edge of a failing
case's region found by bisection) are drawn where they are: an α boundary as a short vertical
segment at α = boundary across the case's β, a β boundary as a horizontal one, each joined to its
case by a dotted line; log σ and μ boundaries as a small note at the case's point.

Cheap on purpose (a map is drawn at the end of every explored run): one scatter per verdict and
marker, the segments as one LineCollection, a fixed layout (no ``bbox_inches="tight"``, which draws
the figure twice), notes capped per panel: 1000 cases in four dtypes take about 0.6 s of CPU.
"""

from __future__ import annotations

import json
import math
import os
import warnings

import numpy as np
import pandas as pd

from record.store import ReportError, read_environment, read_results

from . import overview as S

#: Case labels of the explorer's cases start with this.
EXPLORE_PREFIX = "explore-"
#: The explorer's shrunk boundaries, in the report directory.
BOUNDARIES = "boundaries.json"
#: The map's default file name, in the report directory.
MAP_NAME = "map.png"
#: The parameters a boundary can be on, and how the map writes them.
PARAMETERS = {"alpha": "α", "beta": "β", "log_std": "log σ", "mean": "μ"}
DIRECTIONS = {">=": "≥", "<=": "≤"}

#: The explorer's finite range of α and β ...
LIMIT = 40.0
#: ... where ±∞ is drawn, and where a finite value beyond ±LIMIT is drawn.
INF_AT = 45.0
CLIP_AT = 42.5
#: −log10 p of a failing row with p = 0 (or without a p-value).
P_CAP = 300.0

#: Verdict colours (worst first, the legend's order).
COLORS = {"error": "#e07b00", "fail": "#d62728", "xfail": "#d4b000", "pass": "#2ca02c",
          "skip": "#9a9a9a"}
#: Marker area (points²) of a case without failing rows, and the largest one (p at the cap).
SIZE_MIN, SIZE_MAX = 14.0, 110.0
#: Half the length of a boundary segment, in α/β units.
SEGMENT = 2.0
#: Notes (log σ and μ boundaries) and grid-case labels per panel at most.
MAX_NOTES = 40
MAX_LABELS = 40

#: The layout, in inches at DPI: panels of PANEL×PANEL, fixed margins (the legend below).
DPI = 100
PANEL = 4.2
GAP_W, GAP_H = 0.55, 0.75
LEFT, RIGHT, TOP, BOTTOM = 0.75, 0.25, 0.95, 0.9


# ------------------------------------------------------------------------------------------------
# What goes on the map


def is_explored(label) -> bool:
    return isinstance(label, str) and label.startswith(EXPLORE_PREFIX)


def on_map(label) -> bool:
    """A plain grid case or an explored case: no suffix (shape, path, layout), not the API rows."""
    return isinstance(label, str) and label != S.API_CASE and S.base_case(label) == label


def has_explored(df: pd.DataFrame) -> bool:
    """Whether `df` holds rows of explored cases (then the report gets a failure map)."""
    return df is not None and len(df) > 0 and "case" in df.columns and \
        bool(df["case"].map(is_explored).any())


def _number(x) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


def read_boundaries(report_dir: str) -> list[dict]:
    """The shrunk boundaries of a report (``boundaries.json``; [] when there is none). Never raises:
    an unreadable file, or an item without case, dtype, a known parameter and a numeric boundary,
    is left out with a warning (the boundaries are a view, the table is the record)."""
    path = os.path.join(report_dir, BOUNDARIES)
    if not os.path.exists(path):
        return []
    try:
        with open(path, encoding="utf-8") as fh:
            items = json.load(fh)
    except (OSError, ValueError) as exc:
        warnings.warn(f"reports: {BOUNDARIES} is unreadable ({type(exc).__name__}); no boundaries "
                      f"drawn", stacklevel=2)
        return []
    if not isinstance(items, list):
        warnings.warn(f"reports: {BOUNDARIES} is not a list; no boundaries drawn", stacklevel=2)
        return []
    out, bad = [], 0
    for item in items:
        if (isinstance(item, dict) and isinstance(item.get("case"), str)
                and isinstance(item.get("dtype"), str) and item.get("parameter") in PARAMETERS
                and not math.isnan(_number(item.get("boundary")))):
            out.append(item)
        else:
            bad += 1
    if bad:
        warnings.warn(f"reports: {bad} item(s) of {BOUNDARIES} lack case, dtype, parameter or "
                      f"boundary; left out", stacklevel=2)
    return out


def _column(df: pd.DataFrame, name: str) -> np.ndarray:
    if name not in df.columns:
        return np.full(len(df), np.nan)
    return pd.to_numeric(df[name], errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)


def case_points(df: pd.DataFrame) -> pd.DataFrame:
    """One row per (candidate, case, dtype) on the map: alpha, beta (the harness's columns where
    present, else from a, b, mean, std), verdict (worst over checks and devices), nlp (−log10 of
    the smallest p over the failing rows, capped at P_CAP; NaN without failing rows), explored."""
    cols = ["candidate", "case", "dtype", "alpha", "beta", "verdict", "nlp", "explored"]
    if df is None or not len(df):
        return pd.DataFrame(columns=cols)
    labels = pd.Series(df["case"].unique())
    sub = df[df["case"].isin(labels[labels.map(on_map)])]  # per label, not per row: 1000s of rows
    if not len(sub):
        return pd.DataFrame(columns=cols)
    a, b, mean, std = (_column(sub, c) for c in ("a", "b", "mean", "std"))
    with np.errstate(divide="ignore", invalid="ignore"):
        alpha = np.where(np.isnan(_column(sub, "alpha")), (a - mean) / std, _column(sub, "alpha"))
        beta = np.where(np.isnan(_column(sub, "beta")), (b - mean) / std, _column(sub, "beta"))
    p = _column(sub, "p_value")
    failing = (sub["verdict"] == "fail").to_numpy()
    with np.errstate(divide="ignore", invalid="ignore"):
        nlp = np.where(failing, np.minimum(np.where(np.isnan(p) | (p <= 0), P_CAP, -np.log10(p)),
                                           P_CAP), np.nan)
    rank = sub["verdict"].map(S.RANK).fillna(-1)
    work = pd.DataFrame({"candidate": sub["candidate"].to_numpy(), "case": sub["case"].to_numpy(),
                         "dtype": sub["dtype"].to_numpy(), "alpha": alpha, "beta": beta,
                         "rank": rank.to_numpy(), "nlp": nlp})
    keys = ["candidate", "case", "dtype"]
    # Vectorised worst (the rank order of reports.overview.worst): a groupby max over the ranks.
    g = work.groupby(keys, sort=False)
    out = g.agg(alpha=("alpha", "first"), beta=("beta", "first"), rank=("rank", "max"),
                nlp=("nlp", "max")).reset_index()
    by_rank = {r: v for v, r in S.RANK.items()}
    out["verdict"] = out["rank"].map(lambda r: by_rank.get(r))
    out = out[out["verdict"].notna() & out["alpha"].notna() & out["beta"].notna()]
    out["explored"] = out["case"].map(is_explored)
    return out[cols].reset_index(drop=True)


def position(x) -> np.ndarray:
    """Where a standardized bound is drawn: itself within ±LIMIT, ±CLIP_AT beyond, ±INF_AT at ±∞."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        return np.where(np.isinf(x), np.sign(x) * INF_AT,
                        np.where(np.abs(x) > LIMIT, np.sign(x) * CLIP_AT, x))


def marker_size(nlp) -> np.ndarray:
    """Marker area: SIZE_MIN without failing rows, growing with sqrt(−log10 p) up to SIZE_MAX."""
    nlp = np.asarray(nlp, dtype=np.float64)
    frac = np.sqrt(np.clip(np.nan_to_num(nlp, nan=0.0), 0.0, P_CAP) / P_CAP)
    return np.where(np.isnan(nlp), SIZE_MIN, SIZE_MIN + (SIZE_MAX - SIZE_MIN) * frac)


def figure_size(nrows: int, ncols: int) -> tuple[float, float]:
    """The map's size in inches (at DPI) for nrows × ncols panels."""
    return (LEFT + RIGHT + ncols * PANEL + (ncols - 1) * GAP_W,
            TOP + BOTTOM + nrows * PANEL + (nrows - 1) * GAP_H)


def _fmt(x: float) -> str:
    return "+∞" if x == math.inf else "−∞" if x == -math.inf else f"{x:.3g}".replace("-", "−")


def note_text(item: dict) -> str:
    """A boundary as the map writes it: ``α ≥ 2.03``, ``log σ ≤ −3``."""
    d = DIRECTIONS.get(item.get("direction"), "|")
    return f"{PARAMETERS.get(item.get('parameter'), item.get('parameter'))} {d} {_fmt(_number(item.get('boundary')))}"


def title_lines(env: dict | None, df: pd.DataFrame | None = None) -> list[str]:
    """The map's title: what it shows, the exploration (n, seed, family-wise false-alarm rate)."""
    lines = ["Failure map over the standardized bounds α = (a − μ)/σ, β = (b − μ)/σ"]
    facts = S.explore_text(env or {})
    cands = S.candidates(df) if df is not None and len(df) else []
    if cands:
        facts = (facts + " · " if facts else "") + "candidate" + ("s " if len(cands) > 1 else " ") + \
            ", ".join(cands)
    if facts:
        lines.append(facts)
    return lines


# ------------------------------------------------------------------------------------------------
# Drawing


def _panel_axes(ax, label_size: float = 7.5):
    ticks = [-INF_AT, -30, -15, 0, 15, 30, INF_AT]
    labels = ["−∞", "−30", "−15", "0", "15", "30", "+∞"]
    lim = (-INF_AT - 2.5, INF_AT + 2.5)
    ax.set_xlim(*lim)
    ax.set_ylim(*lim)
    ax.set_aspect("equal", adjustable="box")
    ax.set_xticks(ticks, labels, fontsize=label_size)
    ax.set_yticks(ticks, labels, fontsize=label_size)
    # Beyond ±40 (finite values drawn at ±CLIP_AT, ±∞ at the edge): a grey band.
    for lo, hi in ((lim[0], -LIMIT), (LIMIT, lim[1])):
        ax.axvspan(lo, hi, color="0.93", lw=0, zorder=0)
        ax.axhspan(lo, hi, color="0.93", lw=0, zorder=0)
    # α ≥ β holds no case: the lower-right triangle, a lighter grey.
    ax.fill([lim[0], lim[1], lim[1]], [lim[0], lim[0], lim[1]], color="0.97", lw=0, zorder=0.5)
    ax.plot(lim, lim, color="0.6", lw=0.7, zorder=1)
    ax.set_xlabel("α = (a − μ)/σ", fontsize=8)
    ax.set_ylabel("β = (b − μ)/σ", fontsize=8)


def _draw_points(ax, pts: pd.DataFrame):
    x, y = position(pts["alpha"]), position(pts["beta"])
    sizes = marker_size(pts["nlp"])
    explored = pts["explored"].to_numpy(dtype=bool)
    verdicts = pts["verdict"].to_numpy()
    # Passing cases first, failing last: the failures sit on top.
    for v in ("skip", "pass", "xfail", "fail", "error"):
        for kind in (True, False):
            m = (verdicts == v) & (explored == kind)
            if not m.any():
                continue
            if kind:
                ax.scatter(x[m], y[m], s=sizes[m], c=COLORS[v], marker="o", linewidths=0,
                           alpha=0.75, zorder=3)
            else:
                ax.scatter(x[m], y[m], s=sizes[m] * 1.3, c=COLORS[v], marker="D",
                           edgecolors="black", linewidths=0.6, zorder=4)
    grid = np.flatnonzero(~explored)
    for i in grid[:MAX_LABELS]:
        ax.annotate(str(pts["case"].iloc[i]), (x[i], y[i]), xytext=(3, 2),
                    textcoords="offset points", fontsize=5.5, color="0.2", zorder=6)
    if grid.size > MAX_LABELS:
        ax.text(0.02, 0.02, f"{grid.size - MAX_LABELS} grid labels not shown",
                transform=ax.transAxes, fontsize=6, color="0.4")


def _boundary_point(item: dict, pts: pd.DataFrame):
    """(α, β) of a boundary's case: its "point" when it has one, else the case's point on the map."""
    point = item.get("point") if isinstance(item.get("point"), dict) else {}
    alpha, beta = _number(point.get("alpha")), _number(point.get("beta"))
    if math.isnan(alpha) or math.isnan(beta):
        mine = pts[pts["case"] == item["case"]]
        if not len(mine):
            return None
        alpha, beta = float(mine["alpha"].iloc[0]), float(mine["beta"].iloc[0])
    return alpha, beta


def _draw_boundaries(ax, items: list[dict], pts: pd.DataFrame) -> int:
    """Segments for α and β boundaries, notes for log σ and μ ones; returns how many were drawn."""
    from matplotlib.collections import LineCollection

    segments, links, notes = [], [], {}
    for item in items:
        where = _boundary_point(item, pts)
        if where is None:
            continue
        px, py = (float(v) for v in position(np.array(where)))
        at = float(position(_number(item["boundary"])))
        if item["parameter"] == "alpha":
            segments.append([(at, py - SEGMENT), (at, py + SEGMENT)])
            links.append([(px, py), (at, py)])
        elif item["parameter"] == "beta":
            segments.append([(px - SEGMENT, at), (px + SEGMENT, at)])
            links.append([(px, py), (px, at)])
        else:
            notes.setdefault((px, py), []).append(note_text(item))
    if segments:
        ax.add_collection(LineCollection(links, colors="0.15", linewidths=0.6, linestyles=":",
                                         zorder=5))
        ax.add_collection(LineCollection(segments, colors="black", linewidths=1.6, zorder=5))
    for (px, py), texts in list(notes.items())[:MAX_NOTES]:
        ax.annotate("; ".join(texts), (px, py), xytext=(4, -7), textcoords="offset points",
                    fontsize=5.5, color="#6a006a", zorder=6)
    if len(notes) > MAX_NOTES:
        ax.text(0.98, 0.02, f"{len(notes) - MAX_NOTES} σ/μ notes not shown", ha="right",
                transform=ax.transAxes, fontsize=6, color="0.4")
    return len(segments) + sum(len(t) for t in notes.values())


def _legend(fig, verdicts, have_grid: bool, have_explored: bool, have_fail: bool,
            have_segments: bool, have_notes: bool):
    from matplotlib.lines import Line2D

    handles = []
    for v in COLORS:
        if v in verdicts:
            handles.append(Line2D([], [], ls="", marker="o", ms=6, color=COLORS[v], label=v))
    if have_explored:
        handles.append(Line2D([], [], ls="", marker="o", ms=5, color="0.45", label="explored case"))
    if have_grid:
        handles.append(Line2D([], [], ls="", marker="D", ms=5, color="0.45", mec="black",
                              label="grid case"))
    if have_fail:
        for nlp, text in ((3.0, "p = 1e-3"), (30.0, "p = 1e-30"), (P_CAP, f"p ≤ 1e-{P_CAP:g}")):
            ms = math.sqrt(float(marker_size(nlp)))
            handles.append(Line2D([], [], ls="", marker="o", ms=ms, color=COLORS["fail"],
                                  alpha=0.75, label=text))
    if have_segments:
        handles.append(Line2D([], [], color="black", lw=1.6, label="α | β boundary (shrunk)"))
    if have_notes:
        handles.append(Line2D([], [], ls="", marker="$σ$", color="#6a006a",
                              label="log σ / μ boundary (note)"))
    w, _ = fig.get_size_inches()
    ncol = max(1, min(len(handles), int(w // 1.45)))
    fig.legend(handles=handles, loc="lower center", ncol=ncol, fontsize=7.5, frameon=False,
               bbox_to_anchor=(0.5, 0.01), handletextpad=0.3, columnspacing=1.2)


def render_map(df: pd.DataFrame, png_path: str, env: dict | None = None,
               boundaries: list[dict] | None = None) -> dict:
    """Draw the map of `df`'s cases to `png_path`. Returns what it drew: path, panels
    [(candidate, dtype)], points, boundaries. ReportError when `df` holds no case rows."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = case_points(df)
    if not len(pts):
        raise ReportError("no case rows to map (only API rows, or no bounds)")
    cands = S.candidates(pts)
    dtypes = S.dtype_order(pts)
    nrows, ncols = len(cands), len(dtypes)
    width, height = figure_size(nrows, ncols)
    fig = plt.figure(figsize=(width, height), dpi=DPI)
    items = list(boundaries or ())
    failing = pts[pts["verdict"].isin(S.FAILING)]
    drawn_bounds = 0
    have_segments = have_notes = False
    panels = []
    for r, cand in enumerate(cands):
        for c, dtype in enumerate(dtypes):
            left = (LEFT + c * (PANEL + GAP_W)) / width
            bottom = (BOTTOM + (nrows - 1 - r) * (PANEL + GAP_H)) / height
            ax = fig.add_axes((left, bottom, PANEL / width, PANEL / height))
            _panel_axes(ax)
            mine = pts[(pts["candidate"] == cand) & (pts["dtype"] == dtype)]
            _draw_points(ax, mine)
            # A boundary names no candidate: draw it where its case failed for this candidate,
            # or (when it failed for none of them) in every candidate's panel.
            own = [it for it in items if it["dtype"] == dtype]
            failed_here = set(failing[(failing["candidate"] == cand) & (failing["dtype"] == dtype)]["case"])
            failed_any = set(failing[failing["dtype"] == dtype]["case"])
            own = [it for it in own if it["case"] in failed_here or it["case"] not in failed_any]
            drawn_bounds += _draw_boundaries(ax, own, mine)
            have_segments |= any(it["parameter"] in ("alpha", "beta") for it in own)
            have_notes |= any(it["parameter"] in ("log_std", "mean") for it in own)
            nfail = int(mine["verdict"].isin(S.FAILING).sum())
            head = f"{cand} · {dtype}" if nrows > 1 else dtype
            ax.set_title(f"{head}: {nfail} of {len(mine)} case(s) failing", fontsize=9)
            panels.append((cand, dtype))
    fig.suptitle("\n".join(title_lines(env, df)), fontsize=10.5, y=1 - 0.12 / height, va="top")
    _legend(fig, set(pts["verdict"]), bool((~pts["explored"]).any()), bool(pts["explored"].any()),
            bool(pts["nlp"].notna().any()), have_segments, have_notes)
    try:
        fig.savefig(png_path, dpi=DPI, pil_kwargs={"compress_level": 3})  # zlib's 6: 2x slower
    except OSError as exc:
        raise ReportError(f"cannot write {png_path!r} ({type(exc).__name__}: {exc})") from None
    finally:
        plt.close(fig)
    return {"path": png_path, "panels": panels, "points": len(pts), "boundaries": drawn_bounds}


def render_map_dir(report_dir: str, out: str | None = None) -> str:
    """The map of a report directory (default ``DIR/map.png``); ReportError (one line) when the
    directory cannot be read or holds no case rows. Returns the PNG's path."""
    df = read_results(report_dir)
    try:
        render = render_map(df, out or os.path.join(report_dir, MAP_NAME),
                            read_environment(report_dir), read_boundaries(report_dir))
    except ReportError as exc:
        raise ReportError(f"{report_dir!r}: {exc}") from None
    return render["path"]
