"""Defects (`reports.defects`) and the first screen they lead summary.md and index.html with:
one defect per (candidate, mechanism, level), its worst group by severity (NaN-safe), its note
and reproduce line; reports without the diagnosis' columns still read (unrated, unexplained)."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from record.store import normalize
from reports.defects import (FAIL_ON, LEVEL_ORDER, allowed_reason, defects, gated, level_of,
                             mechanism_of, severity_text, tally_text)
from reports.html import index_html
from reports.overview import MAX_DEFECTS, summary_markdown

from report_rows import row

TRAP_NOTE = "atom at a: predicted 2.0e-3 (2^-9, k=9), observed 1.96e-3 +- 4e-5"


def _sev(w1=math.nan, misplaced=math.nan, **more) -> dict:
    figures = {"severity_w1_sigma": w1, "severity_w1_floor": 1e-4,
               "severity_misplaced": misplaced, "severity_misplaced_floor": 1e-4}
    figures.update({f"severity_{k}": v for k, v in more.items()})
    return figures


def diagnosed_rows() -> list[dict]:
    """torch-legacy-like: a harmful coarse-uniform defect in two bf16 groups (the trap the worse),
    a fine-structure low-bits defect in float64, an api defect, and passing rows."""
    rows = []
    for check in ("atoms", "gof", "tails", "extremes"):
        rows.append(row("abs-bounds-trap", "bfloat16", check, "fail", level="harmful",
                        mechanism="coarse-uniform", mechanism_note=TRAP_NOTE,
                        **_sev(0.31, 0.004, shift_sigma=98.0, shift_share=0.002)))
        rows.append(row("normal-2sigma", "bfloat16", check, "fail", level="harmful",
                        mechanism="coarse-uniform", mechanism_note="atom at a: k=9 (other)",
                        **_sev(0.02, 0.001)))
    rows.append(row("normal-2sigma", "float64", "low_bits", "fail", level="fine",
                    mechanism="few-random-bits", mechanism_note="k = 53", **_sev(1e-6, 1e-5)))
    rows.append(row("tail-5", "float64", "low_bits", "xfail", level="fine",
                    mechanism="few-random-bits", mechanism_note="k = 53", **_sev(math.nan, 2e-5)))
    rows.append(row("api", "float32", "arguments", "fail", level="api", mechanism="api",
                    mechanism_note="std < 0 accepted"))
    rows += [row("normal-2sigma", "float32", c, "pass", level="", mechanism="") for c in
             ("gof", "atoms")]
    return rows


def _frame(rows) -> pd.DataFrame:
    return normalize(pd.DataFrame(rows))


def test_one_defect_per_candidate_mechanism_and_level():
    found = defects(_frame(diagnosed_rows()))
    assert [(d.level, d.mechanism) for d in found] == [
        ("harmful", "coarse-uniform"), ("fine", "few-random-bits"), ("api", "api")]
    harmful, fine, api = found
    assert harmful.rows == 8 and len(harmful.groups) == 2 and harmful.known == 0
    assert harmful.worst == ("abs-bounds-trap", "bfloat16", "cpu")  # W1 0.31 beats 0.02
    assert harmful.groups[0] == harmful.worst
    assert harmful.note == TRAP_NOTE
    assert "--cases abs-bounds-trap" in harmful.repro and "--dtypes bfloat16" in harmful.repro
    assert harmful.severity["w1_sigma"] == 0.31 and harmful.severity["shift_sigma"] == 98.0
    assert set(harmful.checks) == {"atoms", "gof", "tails", "extremes"}
    # The NaN W1 of tail-5 does not win or crash: normal-2sigma's 1e-6 is a number.
    assert fine.worst == ("normal-2sigma", "float64", "cpu") and fine.known == 1
    assert api.severity == {} and api.note == "std < 0 accepted"
    assert tally_text(found) == "3 defects: 1 harmful, 1 fine-structure, 1 api"


def test_the_worst_group_falls_back_to_misplaced_when_w1_is_nan():
    rows = [row("a", "bfloat16", "gof", "fail", level="harmful", mechanism="clamp",
                **_sev(math.nan, 0.001)),
            row("b", "bfloat16", "gof", "fail", level="harmful", mechanism="clamp",
                **_sev(math.nan, 0.05)),
            row("c", "bfloat16", "gof", "fail", level="harmful", mechanism="clamp",
                **_sev(math.nan, math.nan))]
    (d,) = defects(_frame(rows))
    assert d.worst == ("b", "bfloat16", "cpu")
    assert [g[0] for g in d.groups] == ["b", "a", "c"]


@pytest.mark.parametrize("drop", [True, False], ids=["no-columns", "empty-values"])
def test_a_report_without_the_diagnosis_reads_as_unrated_and_unexplained(drop):
    rows = [row("tail-5", "float32", "gof", "fail"), row("tail-5", "float32", "ks", "fail"),
            row("trap", "bfloat16", "atoms", "error"), row("trap", "float32", "gof", "pass")]
    if not drop:
        for r in rows:
            r.update(level=None, mechanism=float("nan"), mechanism_note=None)
    df = _frame(rows)
    (d,) = defects(df)
    assert (d.level, d.level_name, d.mechanism, d.rows, len(d.groups)) == (
        "", "unrated", "unexplained", 3, 2)
    assert d.severity == {} and d.note == "" and d.repro and d.basis == ""
    assert tally_text([d]) == "1 defect: 0 harmful, 0 fine-structure, 0 api, 1 unrated"
    text = summary_markdown(df, {})
    assert "**torch (2.13.0)**: 1 defect:" in text and "**unrated** `unexplained`" in text


def test_plain_row_dicts_read_as_the_table_does():
    def facts(found):  # the table's order of rows is sorted, so the checks' order may differ
        return [(d.candidate, d.mechanism, d.level, d.rows, set(d.groups), set(d.checks), d.worst,
                 d.note, d.severity) for d in found]

    rows = diagnosed_rows()
    assert facts(defects(rows)) == facts(defects(_frame(rows)))


def test_no_failing_row_is_no_defect():
    assert defects(_frame([row()])) == []
    assert defects(pd.DataFrame()) == []
    assert "none: no fail, xfail or error row" in summary_markdown(_frame([row()]), {})


def test_levels_and_mechanisms_of_odd_values():
    assert [level_of(v) for v in ("harmful", "", None, math.nan, "bogus")] == [
        "harmful", "", "", "", ""]
    assert [mechanism_of(v) for v in ("clamp", "", None, math.nan)] == [
        "clamp", "unexplained", "unexplained", "unexplained"]


@pytest.mark.parametrize("fail_on, passes", [("any", ()), ("fine", ("api",)),
                                              ("harmful", ("fine", "api"))])
def test_the_gate_allows_only_levels_below_it(fail_on, passes):
    for level in LEVEL_ORDER:
        assert gated(level, fail_on) is (level not in passes), (fail_on, level)
        reason = allowed_reason(level, fail_on)
        assert (reason is None) is gated(level, fail_on)
    assert gated(None, "harmful") and gated("", "harmful")  # unrated: nothing says it is below
    assert allowed_reason("fine", "harmful") == "allowed by --fail-on harmful: fine-structure"
    assert set(FAIL_ON) == {"any", "fine", "harmful"}


def test_severity_text_names_each_figure_and_skips_nan():
    text = severity_text({"w1_sigma": 0.31, "w1_floor": 1e-4, "misplaced": 0.004,
                          "shift_sigma": 98.0, "shift_share": 0.002, "beyond6": 0.002,
                          "beyond6_floor": 1e-6, "beyond4": math.nan})
    assert text.startswith("W1 0.31σ (floor 0.0001σ) · misplaced 0.4%")
    assert "0.2% of the values moved by 98σ" in text and "excess beyond 6σ 0.2%" in text
    assert "beyond 4σ" not in text
    assert severity_text({}) == "" and severity_text({"w1_sigma": math.nan}) == ""


def test_summary_leads_with_the_defects_on_one_screen():
    df = _frame(diagnosed_rows())
    text = summary_markdown(df, {"fail_on": "harmful"})
    head = text.split("\n## torch")[0]
    assert "**torch (2.13.0)**: 3 defects: 1 harmful, 1 fine-structure, 1 api" in head
    first = next(ln for ln in head.splitlines() if ln.startswith("- **harmful**"))
    assert "`coarse-uniform`" in first and "W1 0.31σ" in first
    assert "8 rows in 2 groups" in first
    assert f"worst `abs-bounds-trap` bfloat16: {TRAP_NOTE}" in first
    assert "  `pytest suites --candidate torch --cases abs-bounds-trap" in head
    assert head.index("**harmful**") < head.index("**fine-structure**") < head.index("**api**")
    assert "Gate `--fail-on harmful`" in head and "2 failing row(s) below it" in head
    # The row list stays below, each row with its level.
    rows = text.split("Failures (")[1]
    assert "**low_bits** (fine-structure, few-random-bits)" in rows


def test_twelve_defects_fit_the_first_screen():
    rows = []
    for i in range(30):
        level = LEVEL_ORDER[i % 3]
        rows.append(row(f"case-{i}", "bfloat16", "gof", "fail", level=level,
                        mechanism=f"mech-{i}", mechanism_note="n" * 300, **_sev(i / 10, 0.01)))
    text = summary_markdown(_frame(rows), {})
    head = text.split("\n## torch")[0].splitlines()
    assert len(head) <= 40, len(head)
    assert sum(ln.startswith("- **") for ln in head) == MAX_DEFECTS
    assert f"- … {30 - MAX_DEFECTS} more defect(s) in index.html" in head


def test_index_html_leads_with_every_defect():
    page = index_html(_frame(diagnosed_rows()), {"fail_on": "fine"})
    top = page.split("<h2>torch (2.13.0)</h2>")[0]
    assert "3 defects: 1 harmful, 1 fine-structure, 1 api" in top
    assert "coarse-uniform" in top and "few-random-bits" in top and "W1 0.31σ" in top
    assert "--fail-on fine" in top
    assert "--cases abs-bounds-trap" in top
    rows = page.split("<h3>Failures (")[1]
    assert "<b>low_bits</b> (fine-structure, few-random-bits)" in rows


def test_the_worst_groups_basis_says_why_in_both_views():
    """The figures that decided a defect's level (``level_basis``) are its worst group's, on the
    defect's line of summary.md and in its level cell of index.html; a level with none (fine,
    api) adds nothing."""
    rows = diagnosed_rows()
    for r in rows:
        if r["level"] == "harmful":
            r["level_basis"] = ("moved@0.5 lo 0.21 > 0.03" if r["case"] == "abs-bounds-trap"
                                else "w1 lo 0.021 > 0.02")
        elif r["level"]:
            r["level_basis"] = ""
    rows.append(row("tail-5", "bfloat16", "gof", "fail", level="undetermined",
                    mechanism="coarse-uniform", level_basis="open: tail@64 (hi 2.1e-4 > 1e-5); "
                    "decided at n ≈ 1.4e6", **_sev(0.01, 0.001)))
    df = _frame(rows)
    harmful, undetermined, fine, api = defects(df)
    assert harmful.worst == ("abs-bounds-trap", "bfloat16", "cpu")
    assert harmful.basis == "moved@0.5 lo 0.21 > 0.03"  # the worst group's, not the other's
    assert undetermined.basis.startswith("open: tail@64") and fine.basis == api.basis == ""
    head = summary_markdown(df, {}).split("\n## torch")[0]
    assert "- **harmful** (moved@0.5 lo 0.21 > 0.03) `coarse-uniform`" in head
    assert ("- **undetermined** (open: tail@64 (hi 2.1e-4 > 1e-5); decided at n ≈ 1.4e6) "
            "`coarse-uniform`") in head
    assert "- **fine-structure** `few-random-bits`" in head
    page = index_html(df, {})
    assert "harmful<br><small>moved@0.5 lo 0.21 &gt; 0.03</small></td>" in page
    assert "fine-structure</td>" in page
