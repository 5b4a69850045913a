"""Turn a ``--candidate`` spec into a `Candidate`.

Spec forms:

* a registered name: ``torch``, ``exact``, ... (`candidates.REGISTRY`), a library adapter ``jax``,
  ``keras-torch``, ``timm``, ... (`candidates.libraries.LIBRARIES`: its adapter module is imported
  only now, its library only when it draws), or a self-test name ``selftest-...``
  (`candidates.catalog.SELFTEST_REGISTRY`);
* ``pkg.mod:fn`` — imported with importlib; the part after the colon may be a dotted attribute path
  (``pkg.mod:Sampler.fill``);
* ``path/to/file.py:fn`` — the file is imported by path under a module name derived from its absolute
  path (``_harness_candidate_<hash>_<stem>``), so resolving the same file twice reuses the module and
  every xdist worker gets the same name. The file's directory is *not* put on sys.path.

The resolved object is adapted according to its declarations (see `candidates.protocol`); an object
that already is a `Candidate` is used as is (its ``spec`` set to the one given).

Versions: the installed distribution's version (importlib.metadata) of the module's top-level package,
else a ``__version__`` on the module or one of its parents, else sha256[:12] of the module's file. For a
path spec: sha256[:12] of the file. A ``harness_version`` declaration wins over all of these.

Anything that does not resolve raises `CandidateNotFound`, whose message is ONE line naming the spec
and what was not found, fit for a pytest usage error without a traceback.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import importlib.util
import os
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

from candidates.libraries import LIBRARIES
from candidates.libraries import make as make_library_candidate
from candidates.protocol import Candidate
from candidates.catalog import REGISTRY, SELFTEST_REGISTRY, registered_names

__all__ = ["CandidateNotFound", "resolve", "restore", "registered_names", "load_attribute"]


class CandidateNotFound(Exception):
    """A ``--candidate`` spec that does not resolve; ``str(e)`` is one line."""

    def __init__(self, spec: Any, reason: str):
        self.spec = spec
        self.reason = " ".join(str(reason).split())  # one line, whatever the underlying error said
        super().__init__(f"--candidate {spec!r}: {self.reason}")


def resolve(spec: str | Candidate) -> Candidate:
    """The `Candidate` for ``spec`` (see the module docstring); CandidateNotFound if it does not resolve."""
    if isinstance(spec, Candidate):
        return spec
    if not isinstance(spec, str) or not spec.strip():
        raise CandidateNotFound(spec, "expected a registered name, pkg.mod:fn or path/to/file.py:fn")
    spec = spec.strip()
    if spec in REGISTRY:
        return _pickled_by_spec(REGISTRY[spec]())
    if spec in LIBRARIES:
        return _pickled_by_spec(make_library_candidate(spec))
    if spec in SELFTEST_REGISTRY:
        return _pickled_by_spec(SELFTEST_REGISTRY[spec]())
    where, sep, attr_path = spec.rpartition(":")
    if not sep:
        hint = ""
        if spec.startswith("selftest-"):
            hint = f"; self-test names: {', '.join(SELFTEST_REGISTRY)}"
        raise CandidateNotFound(
            spec, f"no registered candidate named {spec!r} (registered: {', '.join(registered_names())}{hint}); "
                  "or give pkg.mod:fn or path/to/file.py:fn")
    obj, label, version = load_attribute(spec)
    if isinstance(obj, Candidate):
        cand = obj
        cand.spec = spec
    elif not callable(obj):
        raise CandidateNotFound(spec, f"{label}:{attr_path} is not callable (it is a {type(obj).__name__})")
    else:
        try:
            cand = Candidate(obj, spec=spec, version=getattr(obj, "harness_version", None) or version)
        except (TypeError, ValueError) as e:  # bad harness_* declarations
            raise CandidateNotFound(spec, f"bad candidate declaration on {label}:{attr_path}: {e}") from None
    if _looks_like_path(where):
        cand.resolve_spec = f"{Path(where).expanduser().resolve()}:{attr_path}"
    return _pickled_by_spec(cand)


def load_attribute(spec: str):
    """(object, label, version) named by ``pkg.mod:attr.path`` or ``path/file.py:attr.path``:
    what `resolve` and ``--cases-from`` load; CandidateNotFound (one line) when it does not."""
    where, sep, attr_path = spec.rpartition(":")
    if not sep or not where or not attr_path:
        raise CandidateNotFound(spec, "expected pkg.mod:fn or path/to/file.py:fn")
    if _looks_like_path(where):
        module, label, version = _import_path(spec, where)
    else:
        module, label, version = _import_module(spec, where)
    obj = module
    for i, part in enumerate(attr_path.split(".")):
        if not part.isidentifier():
            raise CandidateNotFound(spec, f"{attr_path!r} is not a dotted attribute path")
        if not hasattr(obj, part):
            owner = label if i == 0 else f"{label}:{'.'.join(attr_path.split('.')[:i])}"
            kind = "module" if i == 0 else type(obj).__name__
            raise CandidateNotFound(spec, f"{kind} {owner!r} has no attribute {part!r}")
        obj = getattr(obj, part)
    return obj, label, version


def _pickled_by_spec(cand: Candidate) -> Candidate:
    """Pickle `cand` as its spec: an xdist worker or a rank process resolves it again."""
    cand.restore = restore
    return cand


def restore(resolve_spec: str, spec: str) -> Candidate:
    """Unpickling: resolve the (absolute) spec, then show the spec the user gave."""
    cand = resolve(resolve_spec)
    if cand.name == resolve_spec:
        cand.name = spec
    cand.spec = spec
    cand.resolve_spec = resolve_spec
    return cand


def _looks_like_path(where: str) -> bool:
    return where.endswith(".py") or "/" in where or os.sep in where


def _import_module(spec: str, modname: str):
    try:
        module = importlib.import_module(modname)
    except ModuleNotFoundError as e:
        # Missing the module itself (or a parent package) vs. the module failing to import a dependency.
        if e.name and (modname == e.name or modname.startswith(e.name + ".")):
            raise CandidateNotFound(spec, f"module {modname!r} not found"
                                    + _not_importable_hint(spec, modname)) from None
        raise CandidateNotFound(spec, f"importing module {modname!r} failed: {type(e).__name__}: {e}") from None
    except (Exception, SystemExit) as e:  # the user's module raised at import: still a one-line usage error
        raise CandidateNotFound(spec, f"importing module {modname!r} failed: {type(e).__name__}: {e}") from None
    return module, modname, _module_version(modname, module)


def _not_importable_hint(spec: str, modname: str) -> str:
    """Where a module that does not import sits in the working directory (pytest puts the
    harness's root on sys.path, not the directory it is run from): how to name it instead."""
    top = modname.split(".")[0]
    here = Path.cwd()
    found = next((name for name, path in ((f"{top}.py", here / f"{top}.py"),
                                          (f"{top}/", here / top / "__init__.py"))
                  if path.is_file()), None)
    if found is None or any(Path(entry or ".").resolve() == here for entry in sys.path):
        return ""
    path = Path(*modname.split(".")).with_suffix(".py")
    if not (here / path).is_file():
        path = Path(*modname.split("."), "__init__.py")
    return (f": ./{found} is in the working directory, which pytest does not put on sys.path; "
            f"give the file (--candidate {path}:{spec.partition(':')[2]}) or run with "
            f"PYTHONPATH=.")


def _import_path(spec: str, where: str):
    path = Path(where).expanduser()
    if not path.is_file():
        raise CandidateNotFound(spec, f"file {where!r} not found" + ("" if path.suffix == ".py" else " (expected a .py file)"))
    path = path.resolve()
    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()[:12]
    # Named after the absolute path (not the content): the same file maps to the same module in every
    # process; two files with the same stem never collide.
    stem = "".join(c if c.isalnum() else "_" for c in path.stem)
    modname = f"_harness_candidate_{hashlib.sha256(str(path).encode()).hexdigest()[:10]}_{stem}"
    module = sys.modules.get(modname)
    if module is None:
        loader_spec = importlib.util.spec_from_file_location(modname, path)
        if loader_spec is None or loader_spec.loader is None:
            raise CandidateNotFound(spec, f"cannot import {where!r} as a Python file")
        module = importlib.util.module_from_spec(loader_spec)
        # Registered before exec so dataclasses, pickling and self-imports inside the file work.
        sys.modules[modname] = module
        try:
            loader_spec.loader.exec_module(module)
        except (Exception, SystemExit) as e:
            del sys.modules[modname]
            raise CandidateNotFound(spec, f"importing file {where!r} failed: {type(e).__name__}: {e}") from None
    return module, where, digest


@lru_cache(maxsize=1)
def _packages_distributions() -> dict[str, list[str]]:
    try:
        return importlib.metadata.packages_distributions()
    except Exception:  # broken metadata somewhere in site-packages must not break resolving
        return {}


def _module_version(modname: str, module) -> str:
    top = modname.split(".")[0]
    for dist in _packages_distributions().get(top, []):
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    parts = modname.split(".")
    for i in range(len(parts), 0, -1):
        mod = sys.modules.get(".".join(parts[:i]))
        v = getattr(mod, "__version__", None) if mod is not None else None
        if isinstance(v, str) and v:
            return v
    f = getattr(module, "__file__", None)
    if f and os.path.isfile(f):
        return hashlib.sha256(Path(f).read_bytes()).hexdigest()[:12]
    return "unknown"
