"""No file of the repository holds torch's source: the rule, held without storing torch's text.

The lines to look for are read from the installed torch's torch/nn/init.py (every line longer
than `MIN_LENGTH` characters once stripped of its indentation), and every file of the working
tree that git tracks or would track is searched for them. A file fails when it holds one of
torch's prose lines (a comment, or a line of a docstring or string literal: torch's words), or
`MAX_CODE_LINES` + 1 of its code lines (a copy). One code line alone is allowed: a formula
anyone modelling torch's arithmetic writes the same way (the harness's diagnosis does).
"""

from __future__ import annotations

import io
import subprocess
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
#: Shorter lines are too common to tell a copy from code of our own ("return tensor").
MIN_LENGTH = 40
#: Code lines of torch's a file may hold (see the module docstring).
MAX_CODE_LINES = 1
#: Not searched when git cannot list the tree: environments and caches.
SKIPPED_DIRS = {".git", ".venv", "venv", ".tox", "__pycache__", "node_modules", "site"}


def _installed_init() -> str:
    import importlib.util

    spec = importlib.util.find_spec("torch")
    return (Path(next(iter(spec.submodule_search_locations))) / "nn" / "init.py").read_text(
        encoding="utf-8")


def torch_lines(source: str) -> tuple[set[str], set[str]]:
    """(prose, code): the stripped lines of `source` longer than MIN_LENGTH, split by whether
    the line is a comment or lies inside a string token."""
    prose_rows = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            prose_rows.add(token.start[0])
        elif token.type == tokenize.STRING:
            prose_rows.update(range(token.start[0], token.end[0] + 1))
    prose, code = set(), set()
    for row, line in enumerate(source.splitlines(), 1):
        text = line.strip()
        if len(text) > MIN_LENGTH:
            (prose if row in prose_rows else code).add(text)
    return prose, code - prose


def _tree_files(root: Path) -> list[Path]:
    """The files git tracks or would track under root (all files, where git is not there)."""
    try:
        listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
                                cwd=root, capture_output=True, check=True).stdout
        names = [n for n in listed.decode("utf-8").split("\0") if n]
        return [p for p in (root / n for n in names) if p.is_file()]
    except (OSError, subprocess.CalledProcessError):
        return [p for p in root.rglob("*")
                if p.is_file() and not SKIPPED_DIRS & set(p.relative_to(root).parts)]


def copies(paths, prose: set[str], code: set[str]) -> list[str]:
    """Where a file holds torch's text, by the rule of the module docstring."""
    found = []
    for path in paths:
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue  # binary: no source text
        words = [line for line in prose if line in text]
        lines = [line for line in code if line in text]
        if words or len(lines) > MAX_CODE_LINES:
            found.append(f"{path}: {len(words)} prose and {len(lines)} code lines of torch's "
                         f"torch/nn/init.py, e.g. {(words + lines)[0]!r}")
    return found


@pytest.fixture(scope="module")
def init_lines() -> tuple[set[str], set[str]]:
    return torch_lines(_installed_init())


def test_the_rule_reads_both_kinds_of_line(init_lines):
    prose, code = init_lines
    assert len(prose) >= 20 and len(code) >= 20


def test_no_file_of_the_repository_holds_torch_source(init_lines):
    found = copies(_tree_files(ROOT), *init_lines)
    assert not found, "\n".join(found)


def test_a_copy_is_found_and_one_formula_line_is_not(tmp_path, init_lines):
    prose, code = init_lines
    source = _installed_init().splitlines(keepends=True)
    (tmp_path / "copied.py").write_text("".join(source[len(source) // 2:][:60]), encoding="utf-8")
    (tmp_path / "quoted.md").write_text(f"torch says: {sorted(prose)[0]}\n", encoding="utf-8")
    (tmp_path / "formula.py").write_text(f"def ours():\n    {sorted(code)[0]}\n", encoding="utf-8")
    found = copies(sorted(tmp_path.iterdir()), prose, code)
    assert [line.split(":")[0] for line in found] == [str(tmp_path / "copied.py"),
                                                     str(tmp_path / "quoted.md")]
