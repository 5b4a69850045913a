"""Text that cannot go stale: every dotted name of the harness's packages that the README, the
docs, a docstring or a comment mentions (``harness.fleet.partition``, ``record.leases.lease``)
resolves to a module or an attribute. A module that moves, or a function renamed, fails here
until every text that names it says the new name."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import io
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("harness", "reference", "record", "reports", "candidates")
NAME = re.compile(r"(?<![\w./-])((?:%s)(?:\.[A-Za-z_]\w*)+)" % "|".join(PACKAGES))
#: A trailing part that is a file suffix: `candidates.md` is a page, not a module.
SUFFIXES = {"md", "py", "txt", "json", "csv", "yml", "yaml", "parquet", "png", "html", "npz"}
SOURCES = ("harness", "reference", "record", "reports", "candidates", "benchmarks", "suites",
           "tests", "examples", ".ci")


def _prose(path: Path) -> str:
    """A page whole; of a Python file, its docstrings and comments (code is checked by running)."""
    text = path.read_text(encoding="utf-8")
    if path.suffix != ".py":
        return text
    parts = []
    tree = ast.parse(text)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            parts.append(ast.get_docstring(node) or "")
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.COMMENT:
            parts.append(tok.string)
    return "\n".join(parts)


def _resolves(name: str) -> bool:
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            fields = {f.name for f in dataclasses.fields(obj)} if dataclasses.is_dataclass(obj) else set()
            if not hasattr(obj, attr) and attr not in fields:
                return False
            obj = getattr(obj, attr, None)
        return True
    return False


def _texts() -> list[Path]:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    code = [p for top in SOURCES for p in sorted((ROOT / top).rglob("*.py"))
            if "node_modules" not in p.parts]
    return pages + code


def test_every_dotted_name_the_texts_mention_resolves():
    stale = {}
    for path in _texts():
        for name in set(NAME.findall(_prose(path))):
            if name.rsplit(".", 1)[-1] in SUFFIXES or _resolves(name):
                continue
            stale.setdefault(name, []).append(str(path.relative_to(ROOT)))
    assert not stale, "names that do not resolve:\n" + "\n".join(
        f"  {name}: {', '.join(where)}" for name, where in sorted(stale.items()))


@pytest.mark.parametrize("name, ok", [("record.leases.lock_report_dir", True),
                                      ("reports.report.Report.partial", True),
                                      ("harness.leases", False),
                                      ("harness.fleet.partition.nothing_here", False)])
def test_the_resolver_can_fail(name, ok):
    assert _resolves(name) is ok


def test_no_file_cites_a_design_document_outside_the_tree():
    """The project's own design document is docs/architecture.md; a file citing another one
    (that a reader of the repository cannot open) fails."""
    citing = [str(p.relative_to(ROOT)) for p in [*_texts(), ROOT / ".importlinter", ROOT / "tox.ini"]
              if "DESIGN.md" in p.read_text(encoding="utf-8") and p != Path(__file__)]
    assert not citing, citing


def test_every_mechanism_has_a_row_in_the_method_docs():
    """The catalog's rows and the mechanism table of docs/method/checks.md name the same
    mechanisms: a row added to the catalog without its prediction and test documented fails."""
    from harness.diagnosis.mechanism_catalog import MECHANISMS

    table = (ROOT / "docs" / "method" / "checks.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"^\| `([a-z0-9-]+)`", table, flags=re.MULTILINE))
    missing = sorted({m.name for m in MECHANISMS} - documented)
    assert not missing, f"mechanisms without a row in docs/method/checks.md: {missing}"
