"""The floors of the house: the import contract holds (and fails on an upward import), no private
name crosses a module, every module says what it is for, and each list of names has one source."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PACKAGES = ("reference", "candidates", "record", "harness", "reports")
LINT = [sys.executable, "-c", "import sys; from importlinter.cli import lint_imports_command; "
        "sys.exit(lint_imports_command())"]


def _modules(*roots: str):
    for root in roots:
        yield from sorted((ROOT / root).rglob("*.py"))


def _lint(cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(LINT + ["--no-cache"], cwd=cwd, capture_output=True, text=True,
                          timeout=300)


def test_the_import_contract_holds():
    result = _lint(ROOT)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "0 broken" in result.stdout


def test_the_import_contract_fails_on_an_upward_import(tmp_path):
    """The contract is not a formality: the engine importing the session breaks it."""
    for name in PACKAGES:
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / ".importlinter", tmp_path / ".importlinter")
    bits = tmp_path / "harness" / "engine" / "bits.py"
    bits.write_text(bits.read_text()
                    + "\nfrom ..session import run_plan  # upward, on purpose\n")
    result = _lint(tmp_path)
    assert result.returncode == 1, result.stdout[-3000:]
    assert "BROKEN" in result.stdout
    assert "harness.engine.bits -> harness.session.run_plan" in result.stdout


def _our_module_aliases(tree: ast.Module) -> set[str]:
    """Names a module binds to modules of ours (``from harness import engine``, ``import x as y``)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] in PACKAGES:
                    names.add(a.asname or a.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").split(".")[0] in PACKAGES):
            names.update(a.asname or a.name for a in node.names)
    return names


def test_no_private_name_is_used_outside_its_module():
    """``from x import _name`` or ``module._name`` across our modules (tests and benchmarks too)."""
    crossings = []
    for path in _modules(*PACKAGES, "tests", "benchmarks", "suites"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        ours = _our_module_aliases(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").split(".")[0] in PACKAGES):
                crossings += [f"{path.relative_to(ROOT)}:{node.lineno}: import {a.name}"
                              for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
            elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                  and node.value.id in ours and node.attr.startswith("_")
                  and not node.attr.startswith("__")):
                crossings.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value.id}.{node.attr}")
    assert not crossings, "\n".join(crossings)


def test_every_module_opens_with_a_docstring():
    missing = [str(p.relative_to(ROOT)) for p in _modules(*PACKAGES, "suites", "benchmarks")
               if not ast.get_docstring(ast.parse(p.read_text(encoding="utf-8")))]
    assert not missing, missing


def test_each_package_says_what_it_may_import():
    packages = [p for root in PACKAGES for p in sorted((ROOT / root).rglob("__init__.py"))]
    missing = [str(p.relative_to(ROOT)) for p in packages
               if "May import:" not in (ast.get_docstring(ast.parse(p.read_text("utf-8"))) or "")]
    assert not missing, missing


def test_the_dtype_names_are_written_once():
    """The dtype names have one source (reference.dtypes)."""
    literal = ("float64", "float32", "float16", "bfloat16")
    places = []
    for path in _modules(*PACKAGES):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Tuple) and all(isinstance(e, ast.Constant) for e in node.elts):
                if tuple(e.value for e in node.elts) == literal:
                    places.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert len(places) == 1, places


def test_no_list_of_check_names_but_the_registry():
    """Which checks exist, and which groups run them, is said once (harness.checks.CHECKS): no
    tuple, list or set of check names in the harness, the record or the reports (a known-bad
    candidate's `caught_by` is data about it, not a list the plumbing reads)."""
    from harness.checks import CHECKS

    names = set(CHECKS.names())
    places = []
    for path in _modules("harness", "record", "reports"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, (ast.Tuple, ast.List, ast.Set)) and len(node.elts) >= 2
                    and all(isinstance(e, ast.Constant) and e.value in names for e in node.elts)):
                places.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not places, places


def test_an_import_error_fails_at_start_up_with_its_cause(tmp_path):
    """No silent fallback: a statistical check module that does not import stops the import of
    the checks with its own error (it used to vanish from the check list)."""
    for name in PACKAGES:
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    broken = tmp_path / "harness" / "families" / "moments.py"
    broken.write_text(broken.read_text() + "\nimport no_such_module_xyz\n")
    result = subprocess.run([sys.executable, "-c", "import harness.checks"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert "no_such_module_xyz" in result.stderr
