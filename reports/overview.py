"""summary.md: one screen per run, for people (and `python -m reports show`).

It leads with the harm thresholds the levels were decided at (environment.json's
``harm_thresholds``; "default" for a run that recorded none) and the defects (`reports.defects`):
per candidate "N defects: H harmful, F fine-structure, A api", then each defect on one item (its
level, mechanism, severity, the groups and rows it explains, its worst group with the
mechanism's note, one reproduce line), and the
``--fail-on`` gate where it was not ``any``. Below that, per candidate: a grid of cases x dtypes
holding the worst verdict over the checks and devices of that cell, a failing cell showing the
worst level among its fail rows (``harm``, ``undet``, ``fine``, ``api``; ``unrated`` where no
diagnosis rated them), the same for the shape axis and the paths, then every failure on one
line (where, which check, its level and mechanism, observed vs expected as the check's message,
the effect, the command that reproduces it), then the environment in three lines.
The helpers here (worst verdict, failure lines, environment lines) are shared with reports.html so
that both views say the same thing.
"""

from __future__ import annotations

import math
import re

import pandas as pd

from record.ids import API_CASE, parse_case_label
from reference.dtypes import DTYPES

from .defects import (DEFAULT_FAIL_ON, FAIL_ON, LEVEL_NAMES, LEVEL_ORDER, UNRATED, defect_rows,
                      defects, gated, groups_text, group_text, level_of, severity_text, tally_text)

#: Worst first. A cell where some checks passed and others were skipped is a pass: skipping a
#: check (e.g. no meta-tensor support claimed) says nothing against the samples.
RANK = {"error": 5, "fail": 4, "xfail": 3, "pass": 2, "skip": 1}
SYMBOL = {"pass": "✔", "fail": "✘", "error": "error", "xfail": "xfail", "skip": "skip", None: "·"}
FAILING = ("fail", "error")
#: How a failing cell reads: the worst level among its fail rows, in a word short enough to keep
#: a terminal's table aligned. A level of `reports.defects.LEVEL_ORDER` missing here reads as its
#: LEVEL_NAMES entry.
LEVEL_TOKEN = {"harmful": "harm", "undetermined": "undet", "fine": "fine", "api": "api",
               UNRATED: "unrated"}
#: The cell value of a failing cell whose fail rows no diagnosis rated (level "").
UNRATED_CELL = "unrated"
#: The harm thresholds' text where a run recorded none (a report written before them, or a run
#: at the defaults of a harness that did not write them).
DEFAULT_THRESHOLDS = "default"
#: Failure lines shown in all (split among the candidates, at least 5 each) before "... N more":
#: keeps the file about one screen; index.html and results.csv list them all.
MAX_FAILURE_LINES = 24
#: The staging prefix of a statistical check's message ("stage 1 p=... at n=...; stage 2 ...: ");
#: the p-values are in the table, the line keeps the observed-vs-expected part.
_STAGE_PREFIX = re.compile(r"^stage 1 p=\S+ at n=\d+(; stage 2 p=\S+ at n=\d+)?: ")
#: The model report's file (`reports.model`), written where the run recorded a model's calls.
MODEL_REPORT = "model.md"


def worst(verdicts) -> str | None:
    vs = [v for v in verdicts if isinstance(v, str)]
    return max(vs, key=lambda v: RANK.get(v, 6)) if vs else None


def _ordered(values, preferred=()) -> list:
    """Unique values: those in `preferred` first in that order, then the rest sorted."""
    present = list(dict.fromkeys(v for v in values if isinstance(v, str)))
    head = [p for p in preferred if p in present]
    return head + sorted(v for v in present if v not in head)


def case_order(df: pd.DataFrame, preferred=()) -> list:
    """The cases of `df`, those in `preferred` (the run's own order, from environment.json's
    ``cases``: the grid's, textbook case first) first, the rest sorted; the API checks last."""
    cases = _ordered(df["case"], tuple(preferred or ()))
    # Candidate-level API checks are not a case: last row of the grid.
    return [c for c in cases if c != API_CASE] + ([API_CASE] if API_CASE in cases else [])


def dtype_order(df: pd.DataFrame) -> list:
    return _ordered(df["dtype"], tuple(DTYPES))


def main_rows(df: pd.DataFrame) -> pd.DataFrame:
    """The rows of the grid's own groups: not the shape axis, not another execution path."""
    keep = pd.Series(True, index=df.index)
    if "shape_class" in df.columns:
        keep &= df["shape_class"].isin(["grid"]) | df["shape_class"].isna()
    if "path" in df.columns:
        keep &= df["path"].isin(["eager"]) | df["path"].isna()
    return df[keep]


def base_case(label) -> str:
    """The grid case of a case label: ``normal-2sigma:61x67+compile`` -> ``normal-2sigma``
    (`record.ids`); a text that is no case label is its own."""
    try:
        return parse_case_label(label).case
    except ValueError:
        return str(label)


def worst_level(levels) -> str:
    """The worst of `levels` in `reports.defects.LEVEL_ORDER` ("" unrated where none is rated)."""
    rated = [level_of(v) for v in levels]
    return min(rated, key=LEVEL_ORDER.index) if rated else UNRATED


def cell_of(rows: pd.DataFrame) -> str | None:
    """What one table cell holds for its rows: the worst verdict (`worst`), except that a cell
    whose worst verdict is fail holds the worst level among its fail rows (a key of
    `reports.defects.LEVEL_NAMES`, UNRATED_CELL for ""). None where nothing ran."""
    verdict = worst(rows["verdict"])
    if verdict != "fail":
        return verdict
    levels = rows.loc[rows["verdict"] == "fail", "level"] if "level" in rows.columns else ()
    return worst_level(levels) or UNRATED_CELL


def is_level_cell(value) -> bool:
    """Whether a cell of `cell_of` is a failing cell (it holds a level, not a verdict)."""
    return isinstance(value, str) and value not in RANK


def cell_text(value) -> str:
    """A cell of `cell_of` as the tables write it: a verdict's symbol, or a level's token."""
    if not is_level_cell(value):
        return SYMBOL.get(value, "?")
    level = UNRATED if value == UNRATED_CELL else value
    return LEVEL_TOKEN.get(level) or LEVEL_NAMES.get(level, value)


def cell_legend() -> str:
    """The tokens of the failing cells in words, worst level first (`LEVEL_ORDER`)."""
    parts = []
    for level in LEVEL_ORDER:
        token, name = LEVEL_TOKEN.get(level) or LEVEL_NAMES[level], LEVEL_NAMES[level]
        parts.append(token if token == name else f"{token}: {name}")
    return ", ".join(parts)


def table_legend() -> str:
    """What the cells of the case x dtype, shape and path tables say, in one line."""
    return (f"Cells: ✔ pass · a failing cell's worst level ({cell_legend()}) · error: harness or "
            f"candidate crash · xfail: known · skip · '·' not run · {BUDGET_MARK} budget-limited "
            f"· ✘ a failing row")


def _cell_table(sub: pd.DataFrame, column: str, index: list, columns: list) -> pd.DataFrame:
    """`index` (cases) x `columns` (values of `column`) of `cell_of` over `sub`'s rows, grouped
    by its ``case`` and `column`; None where nothing ran."""
    out = pd.DataFrame(index=index, columns=columns, dtype=object)
    for (case, value), rows in sub.groupby(["case", column], sort=False):
        out.loc[case, value] = cell_of(rows)
    return out.astype(object).where(out.notna(), None)


def axis_grid(df: pd.DataFrame, candidate: str, column: str, preferred=()) -> pd.DataFrame:
    """Base cases x the values of `column` (shape_class or path) of `cell_of` over the dtypes,
    devices and checks: the shape axis (or the paths) in one screen."""
    if column not in df.columns:
        return pd.DataFrame()
    sub = df[(df["candidate"] == candidate) & df[column].notna()]
    skip = {"shape_class": "grid", "path": "eager"}[column]
    sub = sub[sub[column] != skip]
    if not len(sub):
        return pd.DataFrame()
    sub = sub.assign(case=sub["case"].map(base_case))
    order = [c for c in preferred if c in set(sub["case"])] + sorted(set(sub["case"]) - set(preferred))
    return _cell_table(sub, column, order, list(dict.fromkeys(sub[column])))


def grid(df: pd.DataFrame, candidate: str, preferred=()) -> pd.DataFrame:
    """cases x dtypes of `cell_of` (the worst verdict; a failing cell's worst level; None where
    nothing ran) for one candidate, over the grid's own groups (`main_rows`; `axis_grid` shows
    the shape axis and the paths)."""
    sub = main_rows(df[df["candidate"] == candidate])
    return _cell_table(sub, "dtype", case_order(sub, preferred), dtype_order(sub))


def candidates(df: pd.DataFrame) -> list:
    return _ordered(df["candidate"])


def candidate_label(df: pd.DataFrame, candidate: str) -> str:
    versions = _ordered(df.loc[df["candidate"] == candidate, "candidate_version"])
    return f"{candidate} ({', '.join(versions)})" if versions else candidate


def counts(df: pd.DataFrame) -> dict:
    c = df["verdict"].value_counts()
    return {v: int(c.get(v, 0)) for v in ("pass", "fail", "error", "xfail", "skip") if c.get(v, 0)}


def fmt_num(x, digits: int = 3) -> str:
    try:
        x = float(x)
    except (TypeError, ValueError):
        return ""
    if math.isnan(x):
        return ""
    return f"{x:.{digits}g}"


def effect_text(row) -> str:
    e = fmt_num(row.get("effect"))
    if not e:
        return ""
    unit = row.get("effect_unit") or ""
    mde = fmt_num(row.get("mde"), 2)
    return f"effect {e}{(' ' + unit) if unit else ''}" + (f" (MDE {mde})" if mde else "")


def one_line(text, limit: int = 200) -> str:
    s = " ".join(str(text or "").split())
    return s if len(s) <= limit else s[: limit - 1] + "…"


def short_message(text, limit: int = 150) -> str:
    """The check's message on one line, without the staging prefix."""
    return one_line(_STAGE_PREFIX.sub("", one_line(text, 2000)), limit)


def failures(df: pd.DataFrame, candidate: str | None = None, verdicts=FAILING,
             preferred=()) -> pd.DataFrame:
    sub = df if candidate is None else df[df["candidate"] == candidate]
    sub = sub[sub["verdict"].isin(verdicts)]
    order = {c: i for i, c in enumerate(case_order(df, preferred))}
    dorder = {d: i for i, d in enumerate(dtype_order(df))}
    key = sub.assign(_c=sub["case"].map(order), _d=sub["dtype"].map(dorder))
    return key.sort_values(["_c", "_d", "device", "check"], kind="stable").drop(columns=["_c", "_d"])


def multi_device(df: pd.DataFrame) -> bool:
    return df["device"].nunique(dropna=True) > 1


#: At most this many "bits of randomness" lines per candidate in summary.md (failing groups first).
MAX_RESOLUTION_LINES = 16


def resolution_rows(df: pd.DataFrame, candidate: str, preferred=()) -> pd.DataFrame:
    """The `collisions` rows of a candidate's grid groups that carry the bits-of-randomness
    figure (32/64-bit groups where the check applied): failing ones first, then by case order."""
    if "resolution" not in df.columns:
        return df.iloc[0:0]
    sub = main_rows(df[(df["candidate"] == candidate) & (df["check"] == "collisions")])
    sub = sub[sub["resolution"].notna() & (sub["resolution"].astype(str) != "")]
    order = {c: i for i, c in enumerate(case_order(df, preferred))}
    dorder = {d: i for i, d in enumerate(dtype_order(df))}
    key = sub.assign(_f=~sub["verdict"].isin(FAILING + ("xfail",)), _c=sub["case"].map(order),
                     _d=sub["dtype"].map(dorder))
    return key.sort_values(["_f", "_c", "_d", "device"], kind="stable").drop(columns=["_f", "_c", "_d"])


def resolution_line(row, with_device: bool) -> str:
    """'`case` dtype: ≈ 2^23.0 equally likely values (95% CI ...), where the law's own figure
    is 2^26.0' with the verdict's symbol."""
    where = f"`{row['case']}` {row['dtype']}" + (f" {row['device']}" if with_device else "")
    return f"- {SYMBOL.get(row['verdict'], '?')} {where}: {row['resolution']}"


def level_tag(row) -> str:
    """' (harmful, coarse-uniform)' for a row the diagnosis rated; "" otherwise."""
    level, mechanism = row.get("level"), row.get("mechanism")
    if not isinstance(level, str) or level not in LEVEL_NAMES or not level:
        return ""
    named = f", {mechanism}" if isinstance(mechanism, str) and mechanism else ""
    return f" ({LEVEL_NAMES[level]}{named})"


def failure_line(row, with_device: bool) -> str:
    where = f"`{row['case']}` {row['dtype']}" + (f" {row['device']}" if with_device else "")
    mark = "✘" if row["verdict"] == "fail" else "error"
    parts = [f"{mark} {where} **{row['check']}**{level_tag(row)}: "
             f"{short_message(row.get('message'))}"]
    eff = effect_text(row)
    if eff:
        parts.append(eff)
    if row.get("repro"):
        parts.append(f"`{row['repro']}`")
    return "- " + " · ".join(parts)


#: Marks a grid cell whose case drew fewer samples than the profile asks (a per-case budget).
BUDGET_MARK = "⏱"


def _is_true(value) -> bool:
    return isinstance(value, (bool, int)) and bool(value) or str(value).lower() == "true"


def budget_limited(df: pd.DataFrame, candidate: str | None = None, preferred=()) -> pd.DataFrame:
    """One row per budget-limited (candidate, case, dtype, device): the n drawn, the n asked for,
    and the minimum detectable effect each statistical check still has at that n."""
    if "budget_limited" not in df.columns:
        return pd.DataFrame(columns=["candidate", "case", "dtype", "device", "n", "n_target", "mdes"])
    sub = df if candidate is None else df[df["candidate"] == candidate]
    sub = sub[sub["budget_limited"].map(_is_true)]
    out = []
    for key, grp in sub.groupby(["candidate", "case", "dtype", "device"], sort=False):
        mdes = [f"{r['check']} {fmt_num(r['mde'], 2)}" + (f" {r['effect_unit']}" if r.get("effect_unit") else "")
                for _, r in grp.sort_values("check").iterrows() if fmt_num(r.get("mde"))]
        n = pd.to_numeric(grp["n_stage1"], errors="coerce").max()
        target = pd.to_numeric(grp["n_target"], errors="coerce").max()
        out.append(dict(zip(["candidate", "case", "dtype", "device"], key), n=n, n_target=target,
                        mdes=", ".join(mdes)))
    frame = pd.DataFrame(out, columns=["candidate", "case", "dtype", "device", "n", "n_target", "mdes"])
    order = {c: i for i, c in enumerate(case_order(df, preferred))}
    return frame.assign(_c=frame["case"].map(order)).sort_values(["_c", "dtype", "device"]).drop(columns="_c")


def budget_line(row, with_device: bool) -> str:
    where = f"`{row['case']}` {row['dtype']}" + (f" {row['device']}" if with_device else "")
    share = f" ({row['n'] / row['n_target']:.1%})" if row["n_target"] and row["n_target"] > 0 else ""
    text = f"- {BUDGET_MARK} {where}: n {int(row['n']):,} of {int(row['n_target']):,}{share}"
    return text + (f" · MDE at that n: {row['mdes']}" if row["mdes"] else "")


def env_lines(env: dict, df: pd.DataFrame | None = None) -> list[str]:
    """The environment in three lines: the run, the software, the machine."""
    g = env.get
    run = [f"run {g('run_id', '?')}" + (f" started {g('started')}" if g("started") else "")]
    if g("merged_from"):
        run.append(f"merged from {len(g('merged_from'))} runs")
    if g("profile"):
        n = f", n={g('n_stage1')}" if g("n_stage1") else (f", n={g('samples')}" if g("samples") else "")
        run.append(f"profile {g('profile')}{n}")
    if g("run_seed") is not None:
        run.append(f"seed {g('run_seed')}")
    if g("alpha_suspect") is not None:
        run.append(f"α suspect {g('alpha_suspect'):g} / fail {g('alpha_fail'):g}")
    if g("bounds"):
        run.append(f"bounds {g('bounds')}")
    soft = " · ".join(f"{k} {g(k)}" for k in ("python", "torch", "numpy", "scipy") if g(k))
    if g("torch_cuda"):
        soft += f" (CUDA {g('torch_cuda')})"
    devices = g("device_names") or {}
    if devices:
        devs = ", ".join(f"{d}" + (f" ({n})" if n and not d.startswith("cpu") else "")
                         for d, n in devices.items())
    elif df is not None and len(df):
        devs = ", ".join(_ordered(df["device"]))
    else:
        devs = ""
    machine = [f"{g('cpu', '?')} ({g('cpu_count', '?')} cores)"]
    if g("hostname"):
        machine.append(g("hostname"))
    if devs:
        machine.append(f"devices {devs}")
    if g("command"):
        machine.append(f"`{g('command')}`")
    return [" · ".join(run), soft or "versions unknown", " · ".join(machine)]


#: Boundary lines of the explorer's failure regions shown before "... N more" (boundaries.json
#: and index.html list them all).
MAX_REGION_LINES = 10


def explore_text(env: dict) -> str:
    """The exploration of a run in a few words (environment.json's ``explore``: n, seed, fwer);
    "" when the run explored nothing."""
    ex = env.get("explore") if isinstance(env, dict) else None
    if not isinstance(ex, dict):
        return ""
    parts = [f"{ex['n']} explored case(s) (Sobol)" if ex.get("n") is not None else "explored cases"]
    if ex.get("seed") is not None:
        parts.append(f"seed {ex['seed']}")
    if ex.get("fwer") is not None:
        parts.append(f"family-wise false-alarm rate ≤ {fmt_num(ex['fwer'], 2) or ex['fwer']}")
    return " · ".join(parts)


def region_text(item: dict) -> str:
    """One shrunk boundary in words: the harness's own ("line"), else built from its fields."""
    text = item.get("line")
    if not text:
        d = {">=": "≥", "<=": "≤"}.get(item.get("direction"), item.get("direction") or "at")
        name = {"alpha": "α", "beta": "β", "log_std": "log σ", "mean": "μ"}.get(
            item.get("parameter"), item.get("parameter"))
        text = (f"fails for {name} {d} {fmt_num(item.get('boundary'))} "
                f"({item.get('case')}, {item.get('dtype')})")
    return one_line(text)


def region_line(item: dict) -> str:
    """One shrunk boundary as a summary.md line, with the command that reproduces it."""
    return "- " + region_text(item) + (f" · `{item['repro']}`" if item.get("repro") else "")


#: Defects shown in all on the first screen (split among the candidates, at least MIN_DEFECTS
#: each) before "... N more": two lines each, so the screen stays one; index.html lists them all.
MAX_DEFECTS = 12
MIN_DEFECTS = 3


def defect_line(d, with_device: bool) -> str:
    """One defect as a list item of two lines: level and the figures that decided it,
    mechanism, severity, the groups and rows it explains, the worst group and its note; then its
    reproduce line."""
    basis = f" ({one_line(d.basis, 160)})" if d.basis else ""
    parts = [f"**{d.level_name}**{basis} `{d.mechanism}`"]
    sev = severity_text(d.severity)
    if sev:
        parts.append(sev)
    parts.append(groups_text(d, with_device))
    worst = f"worst {group_text(d.worst, with_device)}"
    parts.append(worst + (f": {one_line(d.note, 160)}" if d.note else ""))
    line = "- " + " · ".join(parts)
    return line + (f"\n  `{d.repro}`" if d.repro else "")


def thresholds_text(env: dict) -> str:
    """The harm thresholds the run's levels were decided at, as environment.json records them
    next to ``fail_on`` (``moved@0.25=0.1,...,mean=0.01``); DEFAULT_THRESHOLDS where it records
    none or an empty value."""
    value = env.get("harm_thresholds") if isinstance(env, dict) else None
    if isinstance(value, dict):
        value = ",".join(f"{k}={v}" for k, v in value.items())
    text = one_line(value, 400) if isinstance(value, str) else ""
    return text or DEFAULT_THRESHOLDS


def thresholds_line(env: dict) -> str:
    """The first screen's line on the thresholds in force."""
    return f"harm thresholds: {thresholds_text(env)}"


def gate_text(env: dict, df: pd.DataFrame) -> str:
    """The run's --fail-on gate in one line ("" for the default, ``any``): which levels fail the
    run and how many failing rows it allowed (their verdicts stay as measured)."""
    fail_on = env.get("fail_on") or DEFAULT_FAIL_ON
    if fail_on == DEFAULT_FAIL_ON or fail_on not in FAIL_ON:
        return ""
    rows = defect_rows(df)
    failing = rows[rows["verdict"] == "fail"]  # an error row is the harness's: never allowed
    allowed = int((~failing["level"].map(lambda v: gated(v, fail_on)).astype(bool)).sum())
    levels = " and ".join(LEVEL_NAMES[v] for v in FAIL_ON[fail_on] if v)
    return (f"Gate `--fail-on {fail_on}`: only {levels} (and unrated) failures fail the run; "
            f"{allowed} failing row(s) below it were allowed (their verdicts stay fail in the "
            f"table).")


def defects_section(df: pd.DataFrame, env: dict) -> list[str]:
    """The first screen: per candidate its tally and its worst defects."""
    found = defects(df)
    out = ["## Defects", ""]
    gate = gate_text(env, df)
    if gate:
        out += [gate, ""]
    if not found:
        return out + ["none: no fail, xfail or error row", ""]
    names = candidates(df)
    cap = max(MIN_DEFECTS, MAX_DEFECTS // max(1, len(names)))
    with_device = multi_device(df)
    for cand in names:
        mine = [d for d in found if d.candidate == cand]
        if not mine:
            continue
        out.append(f"**{candidate_label(df, cand)}**: {tally_text(mine)}")
        out.append("")
        out.extend(defect_line(d, with_device) for d in mine[:cap])
        if len(mine) > cap:
            out.append(f"- … {len(mine) - cap} more defect(s) in index.html")
        out.append("")
    return out


def summary_markdown(df: pd.DataFrame, env: dict | None = None, boundaries=None) -> str:
    """summary.md; `boundaries`: the explorer's shrunk boundaries (boundaries.json's items),
    listed as "Failure regions" when there are any."""
    env = env or {}
    out = ["# Truncated-normal conformance", ""]
    c = counts(df)
    out.append("**" + ", ".join(f"{v} {k}" for k, v in c.items()) + "**" if c else "**no results**")
    out.append("")
    out.append(f"Levels decided at {thresholds_line(env)}")
    out.append("")
    if env.get("recorded"):
        out.append(f"Model report: [{MODEL_REPORT}]({MODEL_REPORT}): per parameter, the call that "
                   f"initialized it, the sampler, the verdict and the worst check.")
        out.append("")
    for line in env.get("coverage_problems") or ():  # a merged partitioned run with holes
        out.append(f"> ⚠ {line}")
    if env.get("coverage_problems"):
        out.append("")
    out.extend(defects_section(df, env))
    out += [table_legend(), ""]
    with_device = multi_device(df)
    cap = max(5, MAX_FAILURE_LINES // max(1, len(candidates(df))))
    order = env.get("cases") or ()
    for cand in candidates(df):
        sub = df[df["candidate"] == cand]
        g = grid(df, cand, order)
        out.append(f"## {candidate_label(df, cand)}")
        out.append("")
        out.append("| case | " + " | ".join(g.columns) + " |")
        out.append("|---|" + "---|" * len(g.columns))
        limited = budget_limited(df, cand, order)
        marked = set(zip(limited["case"], limited["dtype"]))
        for case in g.index:
            cells = [cell_text(g.loc[case, d]) + (f" {BUDGET_MARK}" if (case, d) in marked else "")
                     for d in g.columns]
            out.append(f"| {case} | " + " | ".join(cells) + " |")
        out.append("")
        for column, title in (("shape_class", "Shape axis (worst over dtypes and checks)"),
                              ("path", "Execution paths")):
            axis = axis_grid(df, cand, column, order)
            if len(axis):
                out.append(f"{title}:")
                out.append("")
                out.append("| case | " + " | ".join(axis.columns) + " |")
                out.append("|---|" + "---|" * len(axis.columns))
                for case in axis.index:
                    out.append(f"| {case} | " + " | ".join(cell_text(axis.loc[case, v])
                                                          for v in axis.columns) + " |")
                out.append("")
        if len(limited):
            out.append(f"Budget-limited ({len(limited)}): fewer samples than the profile asks, "
                       f"so smaller effects than these can pass; rerun with `--case-budget 0` "
                       f"or the `--samples` of a reproduce line:")
            out.append("")
            out.extend(budget_line(r, with_device) for _, r in limited.iterrows())
            out.append("")
        res = resolution_rows(df, cand, order)
        if len(res):
            out.append("Bits of randomness (equal-value pairs among the first 2^19 values of each "
                       "32/64-bit draw):")
            out.append("")
            out.extend(resolution_line(r, with_device) for _, r in res.head(MAX_RESOLUTION_LINES).iterrows())
            if len(res) > MAX_RESOLUTION_LINES:
                out.append(f"- … {len(res) - MAX_RESOLUTION_LINES} more in index.html / results.csv")
            out.append("")
        fails = failures(df, cand, preferred=order)
        if len(fails):
            out.append(f"Failures ({len(fails)}):")
            out.append("")
            for _, row in fails.head(cap).iterrows():
                out.append(failure_line(row, with_device))
            if len(fails) > cap:
                out.append(f"- … {len(fails) - cap} more in index.html / results.csv")
            out.append("")
        nx = int((sub["verdict"] == "xfail").sum())
        if nx:
            out.append(f"{nx} known failure(s) (xfail) not listed; see index.html.")
            out.append("")
    regions = [b for b in boundaries or () if isinstance(b, dict)]
    if regions:
        head = explore_text(env)
        out.append(f"## Failure regions ({len(regions)})")
        out.append("")
        out.append("Where the failures of explored cases stop (bisection in α, β, log σ, μ)"
                   + (f"; {head}" if head else "") + "; drawn on the failure map in index.html:")
        out.append("")
        out.extend(region_line(b) for b in regions[:MAX_REGION_LINES])
        if len(regions) > MAX_REGION_LINES:
            out.append(f"- … {len(regions) - MAX_REGION_LINES} more in index.html / boundaries.json")
        out.append("")
    out.append("Environment:")
    out.append("")
    out.extend(f"- {line}" for line in env_lines(env, df))
    out.append("")
    return "\n".join(out)
