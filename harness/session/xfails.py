"""The xfails file: known failures as globs over test names, each with its cause, the warning
about lines that match no test of the configured candidates (array-api-tests style), and the
choice of a shipped file by the installed torch (``--xfails-file auto``).

A line is ``GLOB [mechanism=NAME]  # cause``. With ``mechanism=NAME`` it names a defect rather
than a list of checks: it matches a failing row of a test its glob matches only where the row's
diagnosis (its ``mechanism`` column) is NAME, e.g. ``*[torch-abs-bounds-trap*-bfloat16-*]
mechanism=coarse-uniform  # ...``: every check that mechanism explains there, and no other
failure of those tests.

A shipped file (``xfails/*.txt``) names the torch releases it was measured on in its header, one
line ``# measured on torch: 2.13.0, 2.14.1``; ``auto`` picks the file whose list holds the
installed torch's release (its local build tag dropped: 2.14.1+cu130 is 2.14.1). A release no file
was measured on gets no file: every failure then counts as new, and one line says so."""

from __future__ import annotations

import re
from pathlib import Path

import torch

from reference.dtypes import DTYPES

from ..cases import GRID, PATHS, SHAPES, SHARDED_CASES, on_path, shaped
from ..checks import CHECKS
from ..sharded.layout import PLACEMENTS, RANK_SEEDS, Layout


class XfailPattern:
    """One line of the xfails file: a glob over test names (only * and ? are wildcards, so the
    brackets of `check[candidate-case-dtype-device]` are literal), the cause, and the mechanism
    the row's diagnosis must name (None: any row of a matching test)."""

    def __init__(self, pattern: str, cause: str, line: int, mechanism: str | None = None):
        self.pattern, self.cause, self.line = pattern, cause, line
        self.mechanism = mechanism
        self.regex = re.compile(
            "".join(".*" if ch == "*" else "." if ch == "?" else re.escape(ch) for ch in pattern) + r"\Z")

    def matches(self, test_name: str, mechanism: str | None = None) -> bool:
        """Whether the line names this test's failure: its glob matches `test_name` and, for a
        line with ``mechanism=NAME``, the row's `mechanism` is NAME."""
        if self.mechanism is not None and mechanism != self.mechanism:
            return False
        return self.regex.match(test_name) is not None


def first_match(patterns, test_name: str, mechanism: str | None = None) -> XfailPattern | None:
    """The first of the xfails lines `patterns` naming this test's failure (`mechanism`: its
    row's), None where none does."""
    return next((p for p in patterns if p.matches(test_name, mechanism)), None)


class XfailsFormatError(ValueError):
    """A line of an xfails file that is not ``GLOB [mechanism=NAME]  # cause`` (one line)."""


MECHANISM_KEY = "mechanism="
MECHANISM_NAME = re.compile(r"[a-z0-9][a-z0-9-]*\Z")


def parse_line(text: str, lineno: int) -> tuple[str, str | None]:
    """(glob, mechanism or None) of a line's text before its ``#``."""
    glob, *rest = text.split()
    mechanism = None
    for token in rest:
        name = token.removeprefix(MECHANISM_KEY)
        if not token.startswith(MECHANISM_KEY) or mechanism is not None:
            raise XfailsFormatError(f"line {lineno}: expected 'GLOB [mechanism=NAME]  # cause', "
                                    f"got {text!r}")
        if not MECHANISM_NAME.match(name):
            raise XfailsFormatError(f"line {lineno}: mechanism {name!r} is not a mechanism's "
                                    f"name (lower-case words joined by '-')")
        mechanism = name
    return glob, mechanism


#: ``--xfails-file auto``: the shipped file measured on the installed torch's release.
AUTO = "auto"
#: Where the shipped files are: the repository's xfails/.
SHIPPED_DIR = Path(__file__).resolve().parents[2] / "xfails"
MEASURED_ON = re.compile(r"^#\s*measured on torch:\s*(.*?)\s*$", re.IGNORECASE)


class XfailsChoiceError(ValueError):
    """Two shipped files say they were measured on the same release (one line)."""


def release_of(version: str) -> str:
    """A torch version's public release: '2.14.1+cu130' -> '2.14.1'."""
    return str(version).split("+", 1)[0].strip()


def measured_releases(path) -> tuple[str, ...]:
    """The releases an xfails file's header says it was measured on (none: not a shipped one)."""
    with open(path, encoding="utf-8") as fh:
        for raw in fh:
            if raw.strip() and not raw.lstrip().startswith("#"):
                break  # the header is the comment lines before the first pattern
            m = MEASURED_ON.match(raw.strip())
            if m:
                return tuple(r.strip() for r in m.group(1).split(",") if r.strip())
    return ()


def choose_xfails(version: str | None = None, directory=SHIPPED_DIR) -> tuple[str | None, str]:
    """(the shipped file measured on the release of torch `version` (default: the installed),
    or None; the one line that says which, or that none was and what then happens)."""
    version = torch.__version__ if version is None else version
    release = release_of(version)
    directory = Path(directory)
    files = {p: measured_releases(p) for p in sorted(directory.glob("*.txt"))}
    shown = {p: (p.relative_to(SHIPPED_DIR.parent) if p.is_relative_to(SHIPPED_DIR.parent)
                 else p) for p in files}
    matching = [p for p, releases in files.items() if release in releases]
    if len(matching) > 1:
        raise XfailsChoiceError(
            f"--xfails-file auto: {', '.join(str(shown[p]) for p in matching)} all say they were "
            f"measured on torch {release}; keep it in one")
    if matching:
        path = matching[0]
        return str(path), (f"--xfails-file auto: {shown[path]} (measured on torch "
                           f"{', '.join(files[path])}) for the installed torch {version}")
    measured = "; ".join(f"{shown[p]}: {', '.join(r)}" for p, r in files.items() if r) or "none"
    return None, (f"--xfails-file auto: no xfails file was measured on the installed torch "
                  f"{version} (measured: {measured}); running without one, so every failure "
                  f"counts as new")


def load_xfails(path: str) -> list[XfailPattern]:
    """The lines of an xfails file; XfailsFormatError (one line) for a line it cannot read."""
    patterns = []
    with open(path, encoding="utf-8") as fh:
        for lineno, raw in enumerate(fh, 1):
            text, _, cause = raw.partition("#")
            text = text.strip()
            if text:
                glob, mechanism = parse_line(text, lineno)
                patterns.append(XfailPattern(glob, cause.strip() or "no cause given", lineno,
                                             mechanism))
    return patterns


def stale_lines(patterns: list, candidates, sharded_cases=(), layouts=(), cases=()) -> list:
    """The patterns that match no test of `candidates` on the whole grid (not merely the tests
    a run selected): every case at every shape class and path, every dtype and device, the run's
    own cases (`cases`: --case, --cases-from, --explore), the sharded selection on every
    placement and rank seeding at W = 2 and 4 and the run's own layouts (a sharded line must not
    warn in a run without --world-sizes)."""
    unsharded = [c.name for c in CHECKS if c.scope & {"grid", "compiled", "shape"}]
    of_sharded = [c.name for c in CHECKS.for_kind("sharded")]
    of_candidate = [c.name for c in CHECKS.for_kind("candidate")]
    every_case = {c.id for c in GRID} | {c.id for c in cases}
    every_case |= {shaped(c, s).id for c in GRID for s in SHAPES}
    every_case |= {on_path(c, p).id for c in GRID for p in PATHS}
    names = [f"{check}[{cand.name}-{case}-{dtype}-{device}]"
             for cand in candidates for case in sorted(every_case) for dtype in DTYPES
             for device in ("cpu", "cuda:0") for check in unsharded]
    names += [f"{check}[{cand.name}-{dtype}-{device}]"
              for cand in candidates for dtype in DTYPES for device in ("cpu", "cuda:0")
              for check in of_candidate]
    every_layout = {Layout(w, p, r) for w in (2, 4) for p in PLACEMENTS for r in RANK_SEEDS}
    sharded = set(SHARDED_CASES) | {c.id for c in sharded_cases}
    names += [f"{check}[{cand.name}-{case}-{dtype}-{device}-{layout.label}]"
              for cand in candidates for case in sorted(sharded) for dtype in DTYPES
              for device in ("cpu", "cuda:0")
              for layout in sorted(every_layout | set(layouts), key=str)
              for check in of_sharded]
    # One multiline search per pattern (a test name holds no newline): ~10^5 names.
    text = "\n".join(names)
    return [p for p in patterns
            if re.search("^" + p.regex.pattern.removesuffix(r"\Z") + "$", text, re.M) is None]
