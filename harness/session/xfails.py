"""The xfails file: known failures as globs over test names, each with its cause, and the warning
about lines that match no test of the configured candidates (array-api-tests style)."""

from __future__ import annotations

import re

from reference.dtypes import DTYPES

from ..cases import GRID, PATHS, SHAPES, SHARDED_CASES, on_path, shaped
from ..checks import CHECKS
from ..sharded.layout import PLACEMENTS, RANK_SEEDS, Layout


class XfailPattern:
    """One line of the xfails file: a glob over test names (only * and ? are wildcards, so the
    brackets of `check[candidate-case-dtype-device]` are literal) and the cause."""

    def __init__(self, pattern: str, cause: str, line: int):
        self.pattern, self.cause, self.line = pattern, cause, line
        self.regex = re.compile(
            "".join(".*" if ch == "*" else "." if ch == "?" else re.escape(ch) for ch in pattern) + r"\Z")

    def matches(self, test_name: str) -> bool:
        return self.regex.match(test_name) is not None


def load_xfails(path: str) -> list[XfailPattern]:
    patterns = []
    with open(path, encoding="utf-8") as fh:
        for lineno, raw in enumerate(fh, 1):
            text, _, cause = raw.partition("#")
            text = text.strip()
            if text:
                patterns.append(XfailPattern(text, cause.strip() or "no cause given", lineno))
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
