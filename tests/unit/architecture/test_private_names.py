"""No module reads another's private attributes: a name with one leading underscore belongs to the
class (or module) that defines it.

Read by the syntax tree (`ast`), per module of the packages in `CHECKED`:

* ``X._name``, where X is not ``self``, ``cls`` or ``super()``, is allowed only inside a class that
  defines ``_name`` itself (another instance of that class: ``other._parts`` in a merge), or on a
  name bound in the same scope to an instance of such a class of this module
  (``law = Law(...); law._cache``); everything else is flagged, a free function of the same module
  reading ``law._frame`` included: it belongs in the class, or the attribute is public;
* ``from m import _name``, and ``m._name`` for a module ``m`` (of ours or not).

Dunder names (``__init__``) are public protocol, and so are the namedtuple methods
(``_replace``, ``_asdict``, ``_fields``, ``_make``) and ``os._exit``: the standard library
documents them as its API, underscore and all. A third-party library's private attribute
(``tensor._local_tensor``) is flagged like ours: it is not that library's promise; the few
reads with no public way round them are listed in `THIRD_PARTY`, each with its reason, and a
listed read the module no longer makes fails the test too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
#: The packages held to the rule.
CHECKED = ("reference", "candidates", "record", "reports", "harness")
#: Every package of the project, for the counts (`private_reads`).
ALL_PACKAGES = ("reference", "candidates", "record", "harness", "reports")
NAMEDTUPLE_API = frozenset({"_replace", "_asdict", "_fields", "_make", "_field_defaults"})
#: Modules whose API has an underscored name, and the names.
DOCUMENTED = {"os": frozenset({"_exit"})}
#: Reads of a third-party library's private names that have no public alternative, by module:
#: {path: {what: why}}.
THIRD_PARTY = {
    "harness/sharded/mesh.py": {
        "from torch.distributed.tensor import _random": "DTensor's RNG tracker lives in this "
        "private module of torch; torch has no public call that drops it",
        "dtensor_random._rng_tracker": "each draw of a reused rank process resets the tracker "
        "(None) so that it starts as a fresh script does; torch offers no public reset",
    },
}


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__") and name not in NAMEDTUPLE_API


def _class_privates(cls: ast.ClassDef) -> set[str]:
    """The private names a class defines: its methods and class attributes, and what its methods
    assign to ``self._x`` / ``cls._x``."""
    names = set()
    for node in cls.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
    for node in ast.walk(cls):
        if (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
                and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
            names.add(node.attr)
    return {n for n in names if _is_private(n)}


def _module_names(tree: ast.Module) -> set[str]:
    """Names the module binds to modules (``import x``, ``import x.y as z``, ``from p import mod``
    where mod is a module of ours is not knowable here: `from` imports are judged by name)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.asname or a.name.split(".")[0] for a in node.names)
    return names


def _scope_nodes(body):
    """The nodes of one scope's statements, not those of the functions and classes inside it."""
    nested = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
    todo = [node for node in body if not isinstance(node, nested)]
    while todo:
        node = todo.pop()
        yield node
        todo += [child for child in ast.iter_child_nodes(node) if not isinstance(child, nested)]


class _Reader(ast.NodeVisitor):
    """Collects the private reads of one module."""

    def __init__(self, tree: ast.Module):
        self.classes = {n.name: _class_privates(n) for n in ast.walk(tree)
                        if isinstance(n, ast.ClassDef)}
        self.modules = _module_names(tree)
        self.class_stack: list[str] = []
        self.bound: list[dict[str, str]] = [self._instances(tree.body)]
        self.found: list[tuple[int, str]] = []

    def _instances(self, body) -> dict[str, str]:
        """Names assigned an instance of a class of this module in one scope: name -> class."""
        out = {}
        for node in _scope_nodes(body):
            if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
                        and isinstance(node.value.func, ast.Name)
                    and node.value.func.id in self.classes):
                out.update((t.id, node.value.func.id) for t in node.targets
                           if isinstance(t, ast.Name))
        return out

    def visit_ClassDef(self, node):
        self.class_stack.append(node.name)
        self.generic_visit(node)
        self.class_stack.pop()

    def visit_FunctionDef(self, node):
        self.bound.append(self._instances(node.body))
        self.generic_visit(node)
        self.bound.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ImportFrom(self, node):
        for a in node.names:
            if _is_private(a.name):
                self.found.append((node.lineno, f"from {node.module or '.'} import {a.name}"))

    def visit_Attribute(self, node):
        self.generic_visit(node)
        if not _is_private(node.attr):
            return
        base = node.value
        if isinstance(base, ast.Name) and base.id in ("self", "cls"):
            return
        if (isinstance(base, ast.Call) and isinstance(base.func, ast.Name)
                and base.func.id == "super"):
            return
        if isinstance(base, ast.Name) and node.attr in DOCUMENTED.get(base.id, ()):
            return
        if isinstance(base, ast.Name) and base.id not in self.modules:
            if any(node.attr in self.classes[c] for c in self.class_stack):
                return
            owner = next((scope[base.id] for scope in reversed(self.bound) if base.id in scope),
                         None)
            if owner is not None and node.attr in self.classes[owner]:
                return
        self.found.append((node.lineno, f"{ast.unparse(base)}.{node.attr}"))


def private_reads(package: str) -> list[str]:
    """'path:line: what' for each private read in a package's modules."""
    found = []
    for path in sorted((ROOT / package).rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        reader = _Reader(tree)
        reader.visit(tree)
        found += [f"{path.relative_to(ROOT)}:{line}: {what}" for line, what in reader.found]
    return found


def _allowed(read: str) -> bool:
    path, _, what = read.split(":", 2)
    return what.strip() in THIRD_PARTY.get(path, {})


@pytest.mark.parametrize("package", CHECKED)
def test_no_module_reads_another_modules_private_attributes(package):
    found = [read for read in private_reads(package) if not _allowed(read)]
    assert not found, "\n".join(found)


def test_every_third_party_read_allowed_is_still_made():
    """An entry of `THIRD_PARTY` the module no longer needs is removed, not left to allow a read
    nobody reviewed."""
    made = {(read.split(":", 2)[0], read.split(":", 2)[2].strip())
            for package in ALL_PACKAGES for read in private_reads(package)}
    stale = [f"{path}: {what}" for path, reads in THIRD_PARTY.items() for what in reads
             if (path, what) not in made]
    assert not stale, "\n".join(stale)


_CATCHES = '''
class Law:
    def __init__(self):
        self._frame = 1

    def merge(self, other):
        return other._frame + self._frame


def mass(law):
    return law._frame


def local():
    law = Law()
    return law._frame


import numpy as np
from m import _hidden
x = np.random._private
'''


def test_the_reader_flags_what_it_should(tmp_path):
    """The rule is not a formality: a free function reading ``law._frame``, a private import and
    a module's private attribute are found; a class reading its own kind, and a name bound to an
    instance of a class of the module, are not."""
    reader = _Reader(tree := ast.parse(_CATCHES))
    reader.visit(tree)
    assert [what for _, what in reader.found] == [
        "law._frame", "from m import _hidden", "np.random._private"]
