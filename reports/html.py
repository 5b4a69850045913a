"""index.html: the summary for a browser, plus a figure per failing (candidate, case, dtype, device).

One self-contained file (inline CSS, no scripts, no server): opened as file://, it leads with the
harm thresholds in force and the defects (`reports.defects`, every one of them, per candidate),
then shows the same grid (a failing cell: its worst level, coloured by it), failure
lines and environment as summary.md, the known failures (xfail) with their causes,
and the PNGs rendered by reports.figures, which sit next to it in the report directory.
"""

from __future__ import annotations

import html
import os

import pandas as pd

from . import defects as D
from . import overview as S

CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 1.5em 2em; color: #222; }
h1 { font-size: 1.5em; margin-bottom: .2em; } h2 { margin-top: 1.6em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: .6em 0; }
td, th { border: 1px solid #ccc; padding: .25em .7em; text-align: center; }
th { background: #f3f3f3; } td.case { text-align: left; font-family: monospace; }
td.pass { background: #e3f5e1; color: #1b6e1b; } td.fail { background: #fbdada; color: #a00; font-weight: bold; }
td.error { background: #f7c6a3; color: #7a2e00; font-weight: bold; } td.xfail { background: #fff2c2; }
td.skip { background: #f0f0f0; color: #888; } td.none { color: #bbb; }
td.harmful { background: #fbdada; color: #a00; font-weight: bold; } td.fine { background: #fff2c2; }
td.api { background: #e8e8f8; } td.undetermined { background: #fde2c4; color: #7a4a00; }
td.unrated { background: #fbdada; color: #a00; }
table.fails td { text-align: left; vertical-align: top; } table.fails td.case { white-space: nowrap; } table.fails td.msg { max-width: 46em; }
code { font-size: 12px; background: #f5f5f5; padding: 0 .25em; word-break: break-all; }
.counts span { margin-right: 1.2em; } .muted { color: #777; }
div.coverage { background: #fbdada; border: 1px solid #a00; padding: 0 1em; }
figure { margin: 1em 0 2em 0; } figure img { max-width: 100%; border: 1px solid #ddd; }
figcaption { font-weight: bold; margin-bottom: .3em; }
ul.env li { font-family: monospace; font-size: 12.5px; }
"""


def e(x) -> str:
    return html.escape("" if x is None else str(x))


def _grid_table(df: pd.DataFrame, cand: str, figs: dict, order=()) -> str:
    g = S.grid(df, cand, order)
    limited = S.budget_limited(df, cand, order)
    marked = set(zip(limited["case"], limited["dtype"]))
    rows = ["<table class='grid'><tr><th>case</th>" + "".join(f"<th>{e(d)}</th>" for d in g.columns) + "</tr>"]
    for case in g.index:
        cells = []
        for d in g.columns:
            v = g.loc[case, d]
            sym = e(S.cell_text(v))
            # A failing cell links to its figure when there is one.
            anchor = next((_anchor(k) for k in figs if k[0] == cand and k[1] == case and k[2] == d), None)
            linked = anchor and (S.is_level_cell(v) or v == "xfail")
            inner = f"<a href='#{anchor}'>{sym}</a>" if linked else sym
            if (case, d) in marked:
                inner += f" <span title='budget-limited'>{S.BUDGET_MARK}</span>"
            cells.append(f"<td class='{e(v or 'none')}'>{inner}</td>")
        rows.append(f"<tr><td class='case'>{e(case)}</td>{''.join(cells)}</tr>")
    rows.append("</table>")
    return "\n".join(rows)


def _axis_table(axis: pd.DataFrame) -> str:
    rows = ["<table class='grid'><tr><th>case</th>" + "".join(f"<th>{e(c)}</th>" for c in axis.columns) + "</tr>"]
    for case in axis.index:
        cells = "".join(f"<td class='{e(axis.loc[case, c] or 'none')}'>{e(S.cell_text(axis.loc[case, c]))}</td>"
                        for c in axis.columns)
        rows.append(f"<tr><td class='case'>{e(case)}</td>{cells}</tr>")
    rows.append("</table>")
    return "\n".join(rows)


def _anchor(key) -> str:
    return "fig-" + "-".join(str(k).replace(":", "_") for k in key)


def _fail_table(rows: pd.DataFrame, with_device: bool, cause: bool = False) -> str:
    head = ["case", "dtype"] + (["device"] if with_device else []) + ["check", "observed vs expected", "effect"]
    head.append("known cause" if cause else "reproduce")
    out = ["<table class='fails'><tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr>"]
    for _, r in rows.iterrows():
        cells = [f"<td class='case'>{e(r['case'])}</td>", f"<td>{e(r['dtype'])}</td>"]
        if with_device:
            cells.append(f"<td>{e(r['device'])}</td>")
        mark = "" if r["verdict"] == "fail" else f"<b>{e(r['verdict'])}</b> "
        cells += [f"<td><b>{e(r['check'])}</b>{e(S.level_tag(r))}</td>",
                  f"<td class='msg'>{mark}{e(S.one_line(r.get('message'), 400))}</td>",
                  f"<td>{e(S.effect_text(r))}</td>"]
        tail = r.get("xfail_cause") if cause else (f"<code>{e(r.get('repro'))}</code>" if r.get("repro") else "")
        cells.append(f"<td>{e(tail) if cause else tail}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</table>")
    return "\n".join(out)


def _defects_section(df: pd.DataFrame, env: dict) -> str:
    """Per candidate its tally and every defect: level (with the figures that decided it),
    mechanism, severity, the groups and rows it explains, the worst group with its note, the
    reproduce line."""
    found = D.defects(df)
    parts = ["<h2 id='defects'>Defects</h2>"]
    gate = S.gate_text(env, df)
    if gate:
        parts.append(f"<p>{e(gate)}</p>")
    if not found:
        return "\n".join(parts + ["<p class='muted'>none: no fail, xfail or error row</p>"])
    with_device = S.multi_device(df)
    head = ["level", "mechanism", "severity", "rows and groups", "worst group", "reproduce"]
    for cand in S.candidates(df):
        mine = [d for d in found if d.candidate == cand]
        if not mine:
            continue
        parts.append(f"<p><b>{e(S.candidate_label(df, cand))}</b>: {e(D.tally_text(mine))}</p>")
        parts.append("<table class='fails'><tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr>")
        for d in mine:
            worst = D.group_text(d.worst, with_device).replace("`", "")
            parts.append(
                f"<tr><td class='{e(d.level or 'none')}'>{e(d.level_name)}"
                + (f"<br><small>{e(d.basis)}</small>" if d.basis else "") + "</td>"
                f"<td><b>{e(d.mechanism)}</b></td><td>{e(D.severity_text(d.severity))}</td>"
                f"<td class='msg'>{e(D.groups_text(d, with_device, 8).replace('`', ''))}</td>"
                f"<td class='msg'>{e(worst)}" + (f": {e(d.note)}" if d.note else "") + "</td>"
                + (f"<td><code>{e(d.repro)}</code></td>" if d.repro else "<td></td>") + "</tr>")
        parts.append("</table>")
    return "\n".join(parts)


def _resolution_table(rows: pd.DataFrame, with_device: bool) -> str:
    """The bits-of-randomness figure of each 32/64-bit group next to its law's own figure."""
    head = ["case", "dtype"] + (["device"] if with_device else []) + ["collisions", "bits of randomness"]
    out = ["<table class='fails'><tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr>"]
    for _, r in rows.iterrows():
        cells = [f"<td class='case'>{e(r['case'])}</td>", f"<td>{e(r['dtype'])}</td>"]
        if with_device:
            cells.append(f"<td>{e(r['device'])}</td>")
        cells += [f"<td class='{e(r['verdict'])}'>{e(S.SYMBOL.get(r['verdict'], '?'))}</td>",
                  f"<td class='msg'>{e(r['resolution'])}</td>"]
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</table>")
    return "\n".join(out)


def _budget_table(limited: pd.DataFrame, with_device: bool) -> str:
    head = ["case", "dtype"] + (["device"] if with_device else []) + ["n drawn", "n asked", "MDE at that n"]
    out = ["<table class='fails'><tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr>"]
    for _, r in limited.iterrows():
        cells = [f"<td class='case'>{e(r['case'])}</td>", f"<td>{e(r['dtype'])}</td>"]
        if with_device:
            cells.append(f"<td>{e(r['device'])}</td>")
        cells += [f"<td>{int(r['n']):,}</td>", f"<td>{int(r['n_target']):,}</td>",
                  f"<td class='msg'>{e(r['mdes'])}</td>"]
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</table>")
    return "\n".join(out)


def _map_section(image: str, env: dict, boundaries) -> str:
    """The failure map (reports.map's PNG) and the explorer's shrunk boundaries, all of them."""
    facts = S.explore_text(env)
    parts = ["<h2 id='failure-map'>Failure map</h2>",
             "<p class='muted'>" + (f"{e(facts)}. " if facts else "")
             + "Every explored and grid case on the plane of its standardized bounds "
               "α = (a − μ)/σ, β = (b − μ)/σ, one panel per dtype; colour: the worst verdict over "
               "its checks; size: −log10 p of its worst failing check; diamonds: grid cases; "
               "±∞ at the panel edges. Black segments: the boundary of a failing region found by "
               "shrinking (α vertical, β horizontal); notes: log σ and μ boundaries.</p>",
             f"<figure><img src='{e(image)}' alt='failure map over the standardized bounds'>"
             "</figure>"]
    regions = [b for b in boundaries or () if isinstance(b, dict)]
    if regions:
        parts.append(f"<h3>Failure regions ({len(regions)})</h3><ul>")
        parts += [f"<li>{e(S.region_text(b))}"
                  + (f"<br><code>{e(b['repro'])}</code>" if b.get("repro") else "") + "</li>"
                  for b in regions]
        parts.append("</ul>")
    return "\n".join(parts)


def index_html(df: pd.DataFrame, env: dict | None, figs: dict | None = None,
               map_image: str | None = None, boundaries=None) -> str:
    """The page. `map_image`: the failure map's file name (reports.map), shown with the
    explorer's `boundaries` (boundaries.json's items) in a "Failure map" section."""
    env = env or {}
    figs = figs or {}
    with_device = S.multi_device(df)
    parts = ["<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
             "<title>Truncated-normal conformance</title>", f"<style>{CSS}</style></head><body>",
             "<h1>Truncated-normal conformance</h1>"]
    c = S.counts(df)
    parts.append("<p class='counts'>" + ("".join(f"<span><b>{v}</b> {e(k)}</span>" for k, v in c.items())
                                         or "no results") + "</p>")
    parts.append(f"<p class='thresholds'>Levels decided at {e(S.thresholds_line(env))}</p>")
    if env.get("coverage_problems"):  # a merged partitioned run with holes
        parts.append("<div class='coverage'><p><b>Coverage</b></p><ul>"
                     + "".join(f"<li>{e(line)}</li>" for line in env["coverage_problems"])
                     + "</ul></div>")
    parts.append(_defects_section(df, env))
    if map_image:
        parts.append(_map_section(map_image, env, boundaries))
    order = env.get("cases") or ()
    for cand in S.candidates(df):
        sub = df[df["candidate"] == cand]
        parts.append(f"<h2>{e(S.candidate_label(df, cand))}</h2>")
        parts.append(_grid_table(df, cand, figs, order))
        for column, title in (("shape_class", "Shape axis"), ("path", "Execution paths")):
            axis = S.axis_grid(df, cand, column, order)
            if len(axis):
                parts.append(f"<h3>{title}</h3>")
                parts.append(_axis_table(axis))
        limited = S.budget_limited(df, cand, order)
        if len(limited):
            parts.append(f"<h3>Budget-limited ({len(limited)})</h3>")
            parts.append("<p class='muted'>Fewer samples than the profile asks: smaller effects "
                         "than these MDEs can pass. Rerun with <code>--case-budget 0</code> or the "
                         "<code>--samples</code> of a reproduce line.</p>")
            parts.append(_budget_table(limited, with_device))
        res = S.resolution_rows(df, cand, order)
        if len(res):
            parts.append(f"<h3>Bits of randomness ({len(res)})</h3>")
            parts.append("<p class='muted'>The effective number of equally likely values, from "
                         "the equal-value pairs among the first 2<sup>19</sup> values of each "
                         "32/64-bit draw (check <code>collisions</code>), next to the rounded "
                         "law's own figure: fewer bits mean values that repeat more often than "
                         "the law allows.</p>")
            parts.append(_resolution_table(res, with_device))
        fails = S.failures(df, cand, preferred=order)
        if len(fails):
            parts.append(f"<h3>Failures ({len(fails)})</h3>")
            parts.append(_fail_table(fails, with_device))
        xf = S.failures(df, cand, verdicts=("xfail",), preferred=order)
        if len(xf):
            parts.append(f"<h3>Known failures (xfail, {len(xf)})</h3>")
            parts.append(_fail_table(xf, with_device, cause=True))
        mine = sorted(k for k in figs if k[0] == cand)
        if mine:
            parts.append("<h3>Figures</h3>")
            parts.append("<p class='muted'>Observed density (blue) over the exact rounded law "
                         "(black), log scale; below: both boundary regions at full resolution and "
                         "the P-P plot with the deviation of the CDFs (orange).</p>")
        for key in mine:
            checks = ", ".join(sub[(sub["case"] == key[1]) & (sub["dtype"] == key[2]) & (sub["device"] == key[3])
                                   & sub["verdict"].isin(("fail", "xfail"))]["check"])
            parts.append(f"<figure id='{e(_anchor(key))}'><figcaption>{e(key[1])} · {e(key[2])} · "
                         f"{e(key[3])} — failing: {e(checks)}</figcaption>"
                         f"<img src='{e(figs[key])}' alt='histogram and P-P plot of {e(key[1])} "
                         f"{e(key[2])}'></figure>")
    parts.append(f"<p class='muted'>{e(S.table_legend())}. Each cell is the worst verdict over "
                 f"the checks and devices of that case and dtype; a failing cell shows the worst "
                 f"level among its failing rows.</p>")
    parts.append("<h2>Environment</h2><ul class='env'>")
    parts += [f"<li>{e(line)}</li>" for line in S.env_lines(env, df)]
    parts.append("</ul><p class='muted'>Full table: <a href='results.csv'>results.csv</a> · "
                 "<a href='environment.json'>environment.json</a> · <a href='summary.md'>summary.md</a></p>")
    parts.append("</body></html>\n")
    return "\n".join(parts)


def write_index(df: pd.DataFrame, env: dict, report_dir: str, figs: dict | None = None,
                map_image: str | None = None, boundaries=None) -> str:
    path = os.path.join(report_dir, "index.html")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(index_html(df, env, figs, map_image, boundaries))
    return path
