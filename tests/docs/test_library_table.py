"""The library candidates are listed once, in `candidates.libraries.LIBRARIES`: the table of
docs/candidates.md is the one `library_table` renders from it, row for row."""

from __future__ import annotations

from pathlib import Path

from candidates.libraries import LIBRARIES, LIBRARY_TABLE_HEADER, library_table

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "candidates.md"


def table_of(text: str) -> str:
    """The library table of a page's text: from its header line to the next blank line."""
    start = text.index(LIBRARY_TABLE_HEADER.splitlines()[0])
    end = text.find("\n\n", start)
    return text[start:end if end >= 0 else None]


def test_the_docs_library_table_is_the_one_libraries_gives():
    table = table_of(PAGE.read_text(encoding="utf-8"))
    assert table == library_table(), (
        "docs/candidates.md's library table differs from LIBRARIES; paste the output of "
        "python -c 'from candidates.libraries import library_table; print(library_table())'")
    assert len(table.splitlines()) == len(LIBRARIES) + 2


def test_a_page_that_drifted_from_libraries_is_found():
    text = PAGE.read_text(encoding="utf-8")
    numpyro = next(line for line in library_table().splitlines() if line.startswith("| `numpyro`"))
    assert table_of(text.replace(numpyro + "\n", "").replace(numpyro, "")) != library_table()
    assert table_of(text.replace("| `mlx` |", "| `mlx2` |")) != library_table()
