"""The ``level_basis`` column: a Result's row carries it, the results table puts it next to
``level`` and writes it as text to parquet and csv alike, and a table written before the column
existed still reads (the column empty, the defects' basis "")."""

from __future__ import annotations

import os

from harness.result import Result
from record.store import COLUMNS, TEXT_COLUMNS, read_results, results_frame, write_tables
from reports.defects import defects

HARMFUL = "moved@0.5 lo 0.05 > 0.03"
OPEN = "open: tail@64 (hi 0.00021 > 1e-5); decided at n ≈ 1.4e6"


def _rows() -> list[dict]:
    keys = dict(candidate="clamp", case="normal-2sigma", device="cpu")
    out = []
    for dtype, check, basis, level in (("float32", "gof", HARMFUL, "harmful"),
                                       ("bfloat16", "gof", OPEN, "undetermined"),
                                       ("float64", "low_bits", "", "fine")):
        result = Result(check, "fail", message="m", level=level, level_basis=basis,
                        mechanism="clamp", severity={"w1_sigma": 0.1})
        out.append(dict(keys, dtype=dtype) | result.as_row())
    out.append(dict(keys, dtype="float32") | Result("ks", "pass").as_row())
    return out


def test_a_results_row_carries_its_basis_next_to_its_level():
    row = Result("gof", "fail", level="harmful", level_basis=HARMFUL).as_row()
    assert row["level_basis"] == HARMFUL
    assert Result("gof", "pass").as_row()["level_basis"] == ""
    assert COLUMNS.index("level_basis") == COLUMNS.index("level") + 1
    assert "level_basis" in TEXT_COLUMNS
    assert list(results_frame(_rows()).columns).index("level_basis") == COLUMNS.index("level_basis")


def test_parquet_and_csv_keep_the_basis_as_text(tmp_path):
    write_tables(results_frame(_rows()), str(tmp_path))
    for name in ("results.parquet", "results.csv"):
        other = "results.csv" if name == "results.parquet" else "results.parquet"
        os.rename(tmp_path / other, tmp_path / f"{other}.aside")
        try:
            df = read_results(str(tmp_path))
        finally:
            os.rename(tmp_path / f"{other}.aside", tmp_path / other)
        basis = dict(zip(df["dtype"] + "/" + df["check"], df["level_basis"]))
        assert basis["float32/gof"] == HARMFUL and basis["bfloat16/gof"] == OPEN, name
        # An empty basis reads back as no text (csv cannot tell "" from missing): never "nan".
        assert basis["float64/low_bits"] in ("", None) and basis["float32/ks"] in ("", None), name
    found = {d.level: d.basis for d in defects(read_results(str(tmp_path)))}
    assert found == {"harmful": HARMFUL, "undetermined": OPEN, "fine": ""}


def test_a_table_written_before_the_column_still_reads(tmp_path):
    old = results_frame(_rows()).drop(columns=["level_basis"])
    old.to_csv(tmp_path / "results.csv", index=False)
    old.astype({c: "string" for c in TEXT_COLUMNS if c in old.columns}).to_parquet(
        tmp_path / "results.parquet", index=False)
    df = read_results(str(tmp_path))
    assert "level_basis" in df.columns and df["level_basis"].isna().all()
    found = defects(df)
    assert {d.level for d in found} == {"harmful", "undetermined", "fine"}
    assert all(d.basis == "" for d in found)
