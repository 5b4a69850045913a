"""Defects: a run's failing rows read as what is wrong with each candidate.

A defect is one (candidate, mechanism, level): the catalog's mechanism that explains a set of
fail, xfail and error rows (`harness.diagnosis` writes the columns ``level``, ``level_basis``,
``mechanism``, ``mechanism_note`` and ``severity_<name>``), and how much it matters
(``harmful``, ``undetermined``, ``fine``, ``api``). It lists the groups (case, dtype, device) it
explains, its row count, its worst group by severity (the Wasserstein-1 distance in sigma, then
the misplaced share), that group's note, the figures that decided that group's level (its
``level_basis``) and one reproduce line. summary.md and index.html lead with them;
`reports.compare` and the pytest gate read the same levels.

Rows written before the diagnosis existed (no such columns, or empty values) still read: their
level is "" (shown as ``unrated``), their mechanism ``unexplained``, their basis empty. Plain
rows only: nothing here imports the harness.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pandas as pd

#: The levels, worst first, then the level of a row no diagnosis rated.
LEVEL_ORDER = ("harmful", "undetermined", "fine", "api", "")
#: How each level reads in the report.
LEVEL_NAMES = {"harmful": "harmful", "undetermined": "undetermined", "fine": "fine-structure",
               "api": "api", "": "unrated"}
UNRATED = ""
UNEXPLAINED = "unexplained"
#: The verdicts a defect is made of: what the candidate got wrong, known (xfail) or not.
DEFECT_VERDICTS = ("fail", "xfail", "error")
GROUP = ("case", "dtype", "device")
#: The severity figures the worst group is chosen by, in this order (`severity_<name>`).
WORST_BY = ("w1_sigma", "misplaced")

#: ``--fail-on``: which levels fail a run (pytest) or a comparison (`reports compare`). A row
#: no diagnosis rated fails at every setting: nothing says it is below the gate. An undetermined
#: row fails wherever harmful ones do: its figures cannot rule harm out at this n, and a gate
#: must not pass what it cannot rule out.
FAIL_ON = {"any": ("harmful", "undetermined", "fine", "api", ""),
           "fine": ("harmful", "undetermined", "fine", ""),
           "harmful": ("harmful", "undetermined", "")}
DEFAULT_FAIL_ON = "any"


def level_of(value) -> str:
    """A row's level as text: one of LEVEL_ORDER ("" for a missing, NaN or unknown value)."""
    text = value if isinstance(value, str) else ""
    return text if text in LEVEL_ORDER else UNRATED


def mechanism_of(value) -> str:
    """A row's mechanism: the catalog's name, or ``unexplained`` where none is given."""
    return value if isinstance(value, str) and value.strip() else UNEXPLAINED


def gated(level, fail_on: str = DEFAULT_FAIL_ON) -> bool:
    """Whether a failing row of `level` fails the gate `fail_on` (a key of FAIL_ON)."""
    return level_of(level) in FAIL_ON[fail_on]


def allowed_reason(level, fail_on: str) -> str | None:
    """Why a failing row of `level` does not fail under ``--fail-on fail_on`` (None: it fails)."""
    if gated(level, fail_on):
        return None
    return f"allowed by --fail-on {fail_on}: {LEVEL_NAMES[level_of(level)]}"


@dataclass(frozen=True)
class Defect:
    """One (candidate, mechanism, level) and the rows it explains."""

    candidate: str
    mechanism: str
    level: str  # one of LEVEL_ORDER; "" unrated
    groups: tuple  # (case, dtype, device), worst first
    rows: int
    known: int  # of `rows`, those an xfails line names (verdict xfail)
    checks: tuple  # the checks that fail, in row order
    worst: tuple  # the worst group
    note: str  # the worst group's mechanism note
    severity: dict = field(default_factory=dict)  # the worst group's figures, by name
    repro: str = ""
    basis: str = ""  # the worst group's level_basis: the figures that decided the level

    @property
    def level_name(self) -> str:
        return LEVEL_NAMES[self.level]


def _text(series: pd.Series) -> pd.Series:
    return series.map(lambda v: v if isinstance(v, str) else "")


def severity_columns(df: pd.DataFrame) -> list[str]:
    return [c for c in df.columns if isinstance(c, str) and c.startswith("severity_")]


def _figure(value) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        return math.nan
    return x


def _severity_key(figures: dict) -> tuple:
    """Sort key, worst first: each WORST_BY figure descending, NaN after every number."""
    key = []
    for name in WORST_BY:
        x = figures.get(name, math.nan)
        key += [math.isnan(x), -x if not math.isnan(x) else 0.0]
    return tuple(key)


def defect_rows(df) -> pd.DataFrame:
    """The fail, xfail and error rows of `df` (a results table, or a list of row dicts) with
    ``level`` and ``mechanism`` as text (filled where a report lacks them) and the severity
    columns as numbers."""
    if not isinstance(df, pd.DataFrame):
        df = pd.DataFrame(list(df))
    if "verdict" not in df.columns:
        return df.iloc[0:0]
    sub = df[df["verdict"].isin(DEFECT_VERDICTS)].copy()
    for column in ("candidate", *GROUP, "check", "mechanism_note", "repro", "level_basis"):
        sub[column] = _text(sub[column]) if column in sub.columns else ""
    sub["level"] = (sub["level"].map(level_of) if "level" in sub.columns else UNRATED)
    sub["mechanism"] = (sub["mechanism"].map(mechanism_of) if "mechanism" in sub.columns
                        else UNEXPLAINED)
    for column in severity_columns(sub):
        sub[column] = pd.to_numeric(sub[column], errors="coerce")
    return sub


def group_figures(sub: pd.DataFrame, keys: list, columns: list) -> dict:
    """Each group's severity figures, by its `keys` values: per name the largest over its rows
    (they share one Summary, so they agree; the largest keeps a row that lacks one from hiding
    the others'). One grouped maximum over the table, not a pass per group."""
    if not columns:
        return {}
    maxes = sub.groupby(keys, sort=False)[columns].max()
    names = [c.removeprefix("severity_") for c in columns]
    out = {}
    for key, values in zip(maxes.index, maxes.to_numpy(dtype=float)):
        out[key] = {n: float(v) for n, v in zip(names, values) if not math.isnan(v)}
    return out


def defects(df) -> list[Defect]:
    """The defects of `df` (a results table, or a list of row dicts), by candidate (in row
    order), then level (worst first), then the worst group's severity, then the row count."""
    sub = defect_rows(df)
    if not len(sub):
        return []
    defect_keys = ["candidate", "mechanism", "level"]
    figures_of = group_figures(sub, defect_keys + list(GROUP), severity_columns(sub))
    out = []
    for (candidate, mechanism, level), rows in sub.groupby(defect_keys, sort=False):
        groups = []
        for group, grp in rows.groupby(list(GROUP), sort=False):
            groups.append((tuple(group), grp,
                           figures_of.get((candidate, mechanism, level, *group), {})))
        groups.sort(key=lambda g: _severity_key(g[2]) + (-len(g[1]),))
        worst, worst_rows, figures = groups[0]
        noted = worst_rows[worst_rows["mechanism_note"] != ""]
        with_repro = worst_rows[worst_rows["repro"] != ""]
        with_basis = worst_rows[worst_rows["level_basis"] != ""]
        out.append(Defect(
            candidate=candidate, mechanism=mechanism, level=level,
            groups=tuple(g[0] for g in groups), rows=len(rows),
            known=int((rows["verdict"] == "xfail").sum()),
            checks=tuple(dict.fromkeys(rows["check"])), worst=worst,
            note=noted["mechanism_note"].iloc[0] if len(noted) else "",
            severity=figures, repro=with_repro["repro"].iloc[0] if len(with_repro) else "",
            basis=with_basis["level_basis"].iloc[0] if len(with_basis) else ""))
    order = {c: i for i, c in enumerate(dict.fromkeys(sub["candidate"]))}
    out.sort(key=lambda d: (order[d.candidate], LEVEL_ORDER.index(d.level))
             + _severity_key(d.severity) + (-d.rows,))
    return out


def tally(found) -> dict:
    """Defects per level, in LEVEL_ORDER (levels with none left out)."""
    counts = {level: 0 for level in LEVEL_ORDER}
    for d in found:
        counts[d.level] += 1
    return {level: n for level, n in counts.items() if n}


def tally_text(found) -> str:
    """'N defects: H harmful, F fine-structure, A api' (and 'D undetermined', 'U unrated' where
    there are any)."""
    found = list(found)
    counts = tally(found)
    parts = [f"{counts.get(level, 0)} {LEVEL_NAMES[level]}" for level in ("harmful", "fine", "api")]
    if counts.get("undetermined"):
        parts.insert(1, f"{counts['undetermined']} {LEVEL_NAMES['undetermined']}")
    if counts.get(UNRATED):
        parts.append(f"{counts[UNRATED]} {LEVEL_NAMES[UNRATED]}")
    noun = "defect" if len(found) == 1 else "defects"
    return f"{len(found)} {noun}: " + ", ".join(parts)


def _num(x: float, digits: int = 2) -> str:
    return f"{x:.{digits}g}"


def _share(x: float) -> str:
    return f"{x * 100:.2g}%"


def severity_text(figures: dict) -> str:
    """The severity figures people read, in one short phrase ("" where there are none):
    'W1 0.05σ (floor 3e-4σ) · misplaced 0.21% · 0.2% of the values moved by 98σ'."""
    g = {k: v for k, v in figures.items() if isinstance(v, float) and not math.isnan(v)}
    parts = []
    if "w1_sigma" in g:
        floor = f" (floor {_num(g['w1_floor'])}σ)" if "w1_floor" in g else ""
        parts.append(f"W1 {_num(g['w1_sigma'])}σ{floor}")
    if "misplaced" in g:
        floor = f" (floor {_share(g['misplaced_floor'])})" if "misplaced_floor" in g else ""
        parts.append(f"misplaced {_share(g['misplaced'])}{floor}")
    if g.get("shift_share", 0) > 0 and "shift_sigma" in g:
        parts.append(f"{_share(g['shift_share'])} of the values moved by "
                     f"{_num(g['shift_sigma'])}σ")
    for k in (4, 6):
        name = f"beyond{k}"
        if g.get(name):
            floor = g.get(f"{name}_floor", 0.0)
            if abs(g[name]) > floor:
                sign = "excess" if g[name] > 0 else "deficit"
                parts.append(f"{sign} beyond {k}σ {_share(abs(g[name]))}")
    return " · ".join(parts)


def group_text(group: tuple, with_device: bool = True) -> str:
    case, dtype, device = group
    return f"`{case}` {dtype}" + (f" {device}" if with_device else "")


def groups_text(d: Defect, with_device: bool, shown: int = 3) -> str:
    """'12 rows in 4 groups: `case` dtype, … +1 more'."""
    names = ", ".join(group_text(g, with_device) for g in d.groups[:shown])
    more = f" +{len(d.groups) - shown} more" if len(d.groups) > shown else ""
    rows = f"{d.rows} row" + ("s" if d.rows != 1 else "")
    groups = f"{len(d.groups)} group" + ("s" if len(d.groups) != 1 else "")
    known = f", {d.known} known (xfail)" if d.known else ""
    return f"{rows} in {groups}{known}: {names}{more}"
