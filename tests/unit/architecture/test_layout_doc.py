"""docs/architecture.md's Layout block lists the tree as it is: every module of our packages is
named in the paragraph of its folder, and every module the block names exists there."""

from __future__ import annotations

import re
from pathlib import Path

from candidate_trace import packages

ROOT = Path(__file__).resolve().parents[3]
PACKAGES = packages()  # the root packages `.importlinter` names
DOC = ROOT / "docs" / "architecture.md"
#: An entry of the block starts at an indent of 0 (a package), 2 or 4 (a folder or module inside
#: the entry above it); a line indented further continues the entry before it.
ENTRY = re.compile(r"^( {0,4})(?=\S)([a-z_][a-z0-9_]*)(/|\.py)?")
MODULE = re.compile(r"(?<![\w.])((?:[a-z_]+/)*[a-z_][a-z0-9_]*\.py)\b")


def layout_block(text: str) -> list[str]:
    """The lines of the fenced block under '## Layout'."""
    section = text.split("\n## Layout\n", 1)[1]
    return section.split("```text\n", 1)[1].split("\n```", 1)[0].splitlines()


def named_modules(lines: list[str]) -> dict[str, set[str]]:
    """{folder path: the module file names its entry names}, folders nested by indentation."""
    named: dict[str, set[str]] = {}
    stack: list[str] = []
    folder = None
    for line in lines:
        match = ENTRY.match(line)
        if match:
            depth = len(match[1]) // 2
            if match[3] == "/":
                stack = stack[:depth] + [match[2]]
                folder = "/".join(stack)
                line = line[match.end():]
            else:  # a module of the entry above (`  api.py ...`), or a top-level line of files
                stack = stack[:depth]
                folder = "/".join(stack) or None
        if folder is None or folder.split("/")[0] not in PACKAGES:
            continue
        for path in MODULE.findall(line):  # `libraries/jax.py`: a module of that subfolder
            *sub, module = path.split("/")
            named.setdefault("/".join([folder, *sub]), set()).add(module)
    return named


def tree_modules() -> dict[str, set[str]]:
    """{folder path: its module file names}, __init__.py left out unless it holds code of its own."""
    tree: dict[str, set[str]] = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if "__pycache__" in path.parts:
                continue
            folder = path.parent.relative_to(ROOT).as_posix()
            if path.name == "__init__.py":
                continue
            tree.setdefault(folder, set()).add(path.name)
    return tree


def test_the_layout_names_every_module_of_the_tree():
    named = named_modules(layout_block(DOC.read_text()))
    tree = tree_modules()
    missing = {f"{folder}/{m}" for folder, modules in tree.items()
               for m in modules - named.get(folder, set())}
    assert not missing, f"docs/architecture.md's Layout does not name: {sorted(missing)}"


def test_the_layout_names_no_module_that_is_not_in_the_tree():
    named = named_modules(layout_block(DOC.read_text()))
    tree = tree_modules()
    stale = {f"{folder}/{m}" for folder, modules in named.items()
             for m in modules - tree.get(folder, set()) if m != "__init__.py"}
    assert not stale, f"docs/architecture.md's Layout names modules the tree lacks: {sorted(stale)}"


def test_the_check_reads_a_layout_it_is_given():
    """The parser itself: a folder's paragraph, a nested folder, a module named with its subfolder."""
    lines = ["harness/     cases.py seeds.py", "  engine/    draw.py, fold.py (the loop,",
             "             chunks)", "    inner/   deep.py", "  api.py     y.py",
             "candidates/  protocol.py, libraries/jax.py", "conftest.py tox.ini engine.py"]
    assert named_modules(lines) == {"harness": {"cases.py", "seeds.py", "api.py", "y.py"},
                                    "harness/engine": {"draw.py", "fold.py"},
                                    "harness/engine/inner": {"deep.py"},
                                    "candidates": {"protocol.py"},
                                    "candidates/libraries": {"jax.py"}}
