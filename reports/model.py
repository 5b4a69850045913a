"""model.md: the report a training team reads after ``--cases-from`` judged its model.

One line per parameter (per judging candidate): the call that initialized it (the function, its
arguments, the tensor's shape and the dtype it holds, and whether it was drawn in another dtype
and cast), the sampler that judged it, the verdict over every check of that call, and the worst
check in one line (the worst verdict first, then the smallest p-value), with the command that
reproduces it. Read from the rows and the run's ``recorded`` facts (plain dicts the plugin wrote:
`harness.session.run_plan.recorded_call_facts`); summary.md links to it.
"""

from __future__ import annotations

import math

import pandas as pd

from .overview import (API_CASE, MODEL_REPORT, RANK, SYMBOL, effect_text, one_line,
                      short_message, worst)

__all__ = ["model_markdown", "MODEL_REPORT", "worst_row"]


def worst_row(rows: pd.DataFrame):
    """The row people should read first: the worst verdict, then the smallest p-value."""
    def key(item):
        _, row = item
        p = row.get("p_value")
        p = float(p) if isinstance(p, (int, float)) and not math.isnan(float(p)) else math.inf
        return (-RANK.get(row.get("verdict"), 0), p, str(row.get("check")))

    ranked = sorted(rows.iterrows(), key=key)
    return ranked[0][1] if ranked else None


def _call_text(call: dict) -> str:
    text = f"`{call['call']}` {call['shape']} {call['dtype']}"
    if call.get("drawn_in"):
        text += f" (drawn in {call['drawn_in']}, cast)"
    return text


def _worst_text(row) -> str:
    if row is None:
        return "not run"
    parts = [f"**{row['check']}**: {short_message(row.get('message'), 140)}"]
    effect = effect_text(row)
    if effect and row.get("verdict") in ("fail", "error", "xfail"):
        parts.append(effect)
    if row.get("verdict") in ("fail", "error") and row.get("repro"):
        parts.append(f"`{row['repro']}`")
    return " · ".join(parts)


def _cell(text: str) -> str:
    return one_line(text, 600).replace("|", "\\|")


def model_markdown(df: pd.DataFrame, env: dict | None = None) -> str | None:
    """model.md's text, or None for a run that recorded no model."""
    calls = [c for c in (env or {}).get("recorded") or () if isinstance(c, dict)]
    if not calls:
        return None
    rows = df[df["case"] != API_CASE] if "case" in df else df
    out = ["# Model report", ""]
    for model in dict.fromkeys(c["model"] for c in calls):
        mine = [c for c in calls if c["model"] == model]
        out += [f"## `{model}`", "",
                f"{sum(int(c.get('calls') or 1) for c in mine)} truncated-normal call(s), "
                f"{len(mine)} distinct; each judged with the sampler named (the function that "
                f"made the call, unless `--candidate` chose another).", "",
                "| parameter | call | sampler | verdict | worst check |", "|---|---|---|---|---|"]
        for call in mine:
            judged = rows[rows["case"] == call["case"]]
            names = call.get("parameters") or ["(no parameter holds it)"]
            by_candidate = list(judged.groupby("candidate", sort=False)) or [(None, judged)]
            for candidate, sub in by_candidate:
                sampler = candidate or call["sampler"]
                if candidate is not None and sub["candidate_spec"].iloc[0] != call["sampler"]:
                    sampler += f" (the model calls {call['sampler']})"
                verdict = worst(sub["verdict"]) if len(sub) else None
                worst_check = _worst_text(worst_row(sub) if len(sub) else None)
                for name in names:
                    out.append("| " + " | ".join(_cell(t) for t in (
                        f"`{name}`", _call_text(call), sampler,
                        f"{SYMBOL.get(verdict, '·')} {verdict or 'not run'}", worst_check)) + " |")
        out.append("")
    out.append("Verdict: the worst over the call's checks (✔ pass · ✘ fail · error · xfail: "
               "known · skip). Worst check: the worst verdict, then the smallest p-value.")
    out.append("")
    return "\n".join(out)
