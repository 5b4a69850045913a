"""No module of `SIZED` over `MAX_FILE_LINES` lines, no class over `MAX_CLASS_LINES`: a module
that grows past them holds more than one idea, and is split (the rounded law into its parts, the
statistics into their families).

Lines are counted as the source has them (docstrings and comments included); a class runs from
its ``class`` line (decorators excluded) to its last line.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
#: The packages held to the limits.
SIZED = ("harness", "record", "reference", "reports")
MAX_FILE_LINES = 800
MAX_CLASS_LINES = 400


def oversized(source: str, where: str) -> list[str]:
    """'where: what (lines)' for the file, and each class in it, past its limit."""
    found = []
    lines = len(source.splitlines())
    if lines > MAX_FILE_LINES:
        found.append(f"{where}: {lines} lines (at most {MAX_FILE_LINES})")
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef):
            length = node.end_lineno - node.lineno + 1
            if length > MAX_CLASS_LINES:
                found.append(f"{where}:{node.lineno}: class {node.name}: {length} lines "
                             f"(at most {MAX_CLASS_LINES})")
    return found


@pytest.mark.parametrize("package", SIZED)
def test_no_module_or_class_is_over_its_size(package):
    paths = sorted((ROOT / package).rglob("*.py"))
    assert paths, f"no modules found under {package}/"
    found = [line for path in paths
             for line in oversized(path.read_text(encoding="utf-8"),
                                   str(path.relative_to(ROOT)))]
    assert not found, "\n".join(found)


def test_the_limits_are_not_a_formality():
    """A class one line past its limit, and a file one line past its, are found; a class and a
    file at the limits are not."""
    def klass(name: str, lines: int) -> str:
        return f"class {name}:\n" + "    x = 0\n" * (lines - 1)

    at_limit = klass("Fits", MAX_CLASS_LINES)
    assert oversized(at_limit, "m.py") == []
    assert oversized(klass("Long", MAX_CLASS_LINES + 1), "m.py") == [
        f"m.py:1: class Long: {MAX_CLASS_LINES + 1} lines (at most {MAX_CLASS_LINES})"]
    padded = at_limit + "y = 0\n" * (MAX_FILE_LINES - MAX_CLASS_LINES)
    assert oversized(padded, "m.py") == []
    assert oversized(padded + "y = 0\n", "m.py") == [
        f"m.py: {MAX_FILE_LINES + 1} lines (at most {MAX_FILE_LINES})"]
