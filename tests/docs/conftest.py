"""Collects the docs' fenced code blocks as test items: see docblocks.py for what each item does.

Wiring: pytest only walks ``testpaths = tests``, so README.md and docs/ are never offered to a
``pytest_collect_file`` hook the usual way (``pytest_collect_file = Sybil(...).pytest()``). This
hook hangs the documents off ``tests/docs/test_docs.py`` instead: when pytest collects that file,
it also returns one sybil file node per document, with node ids such as
``README.md::line:20,column:1`` and ``docs/api.md::line:12,column:1``. So ``pytest tests``,
``pytest tests/docs`` and ``pytest tests/docs/test_docs.py`` all collect them.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sybil.integration.pytest import SybilFile

from docblocks import SYBIL, documents

ANCHOR = Path(__file__).resolve().parent / "test_docs.py"


class Documents(pytest.Collector):
    """README.md and the pages of docs/, one sybil file node each (a collector of collectors:
    a ``pytest_collect_file`` hook returns one node, not a list)."""

    def collect(self):
        for doc in documents():
            if SYBIL.should_parse(doc):
                yield SybilFile.from_parent(self, path=doc, sybils=[SYBIL])


def pytest_collect_file(file_path, parent):
    """Beside tests/docs/test_docs.py's own tests, the documents' code blocks."""
    if file_path.resolve() != ANCHOR:
        return None
    return Documents.from_parent(parent, name="docs", path=ANCHOR)
