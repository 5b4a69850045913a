"""The blind set (tests/blind/blind_samplers.py) and the held-out set
(tests/blind/holdout_samplers.py, written while the catalog was being changed on the first and
kept out of that work) through `harness.check`: the catalog never names a library's
construction for them, names >= 90 % of the samplers' causes right, and gives each sampler the
level its effect in sigma calls for. The samplers the catalog misnames or the grading
mislevels today are listed (`MISNAMED`, `MISLEVELLED`) as strict xfails: each flips to a
failure the day it is named right, so the lists can only shrink by a change that earns it.

Per sampler, on the case and dtype where its defect shows (`Blind`), at
`SAMPLES` values (stage 2 at 4x where stage 1 only suspects): its failing rows about the values
(level not api; a row named stall or api is about the call, not the values) give

* the names: every mechanism its rows name. Named right when the expected mechanism is named
  and no other (a row left `unexplained` names nothing; a sampler whose cause has no catalog
  row is named right when every row is unexplained); fully explained when every row names it
  (one group, one story); a false naming is any mechanism named that is not the cause;
* the level: the worst of its rows' (harmful > undetermined > fine);
* a library named: the row's mechanism is `library-construction`, or its note calls the
  sampler a library's kernel without "reads like".

`PYTHONPATH=. python tests/blind/test_blind_set.py` prints the table, the figures and every
row's note (docs/method/naming.md quotes them).

Failure chances. The runs use the default run seed, so every verdict, name and level is a
deterministic function of the code: the outcome changes only where the catalog or the
grading does. Over run seeds: each sampler's decisive check fails at stage 1 with p1 <= 1e-50 (0
for most: impossible values or counts), a defect of z >= 15 that no seed misses; the
catalog's rows match a wrong law with probability <= FALSE_MATCH = 1e-9 each and miss a true
one with probability <= AGREE_LEVEL = 1e-6 each (its own bounds), <= 21 * 1e-9 + 12 * 1e-6 per
sampler, 3.4e-4 over the 28 that any one name differs, and one name moves the accuracy by 3.6
points (26 of 28 named right: one name lost would read 89 %); each level's figures hold their true values with probability >= 1 - 1e-6 each
(`harness.diagnosis.grading.effects`), and the set's levels sit away from the thresholds
(docs/method/naming.md).
"""

from __future__ import annotations

import math
import time
from collections import Counter
from dataclasses import dataclass

import pytest
from blind_samplers import BLIND, Blind
from holdout_samplers import HOLDOUT

import harness
from harness.cases import parse_case_spec

pytestmark = [pytest.mark.blind, pytest.mark.usefixtures("one_thread")]

#: Values per sampler at stage 1.
SAMPLES = 1 << 19
#: The share of the set the catalog must name right.
ACCURACY = 0.9
#: The levels from least to most severe (a sampler's level is its worst row's).
SEVERITY = ("fine", "undetermined", "harmful")
#: Verdicts of a failing row.
FAILING = ("fail", "xfail", "error")
#: Rows named for the call, not the values.
ABOUT_THE_CALL = ("api", "stall", "")
#: Words of a note that name a library's kernel.
LIBRARY_WORDS = ("jax", "xla", "mlx", "timm", "numpyro", "paddle", "tensorflow", "keras",
                 "torch <= 2.11", "torch-legacy")


@dataclass(frozen=True)
class Reading:
    """What the harness said of one blind sampler."""

    blind: Blind
    names: tuple  # every mechanism its failing rows name, most rows first
    level: str  # its worst failing row's level ("" where no row failed)
    library_named: bool
    rows: int  # failing rows about the values
    seconds: float
    decide_n: float = math.nan  # the n an undetermined level needs, by the harness's estimate
    strongest_p: float = math.nan  # the smallest stage-1 p-value of its failing rows
    details: tuple = ()  # (check, mechanism, level, note) of each failing row

    @property
    def named_right(self) -> bool:
        """The expected mechanism named, and no other: rows left unexplained name nothing (a
        sampler expected unexplained is named right when every row is)."""
        expected = self.blind.mechanism
        if expected == "unexplained":
            return self.names == ("unexplained",)
        return expected in self.names and set(self.names) <= {expected, "unexplained"}

    @property
    def fully_explained(self) -> bool:
        """Every failing row names the expected mechanism (one group, one story)."""
        return self.names == (self.blind.mechanism,)

    @property
    def false_names(self) -> tuple:
        return tuple(n for n in self.names if n not in (self.blind.mechanism, "unexplained"))

    @property
    def level_right(self) -> bool:
        return self.level == self.blind.level


def names_a_library(mechanism: str, note: str) -> bool:
    """Whether a row calls its sampler a library's construction (module docstring)."""
    if mechanism == "library-construction":
        return True
    text = (note or "").lower()
    return "reads like" not in text and any(word in text for word in LIBRARY_WORDS)


def read(blind: Blind, samples: int = SAMPLES) -> Reading:
    """One sampler through `harness.check` on its case and dtype (module docstring)."""
    start = time.perf_counter()
    case = parse_case_spec(blind.case) if "=" in blind.case else blind.case
    df = harness.check(blind.fn, cases=[case], dtypes=[blind.dtype], devices=["cpu"],
                       profile="smoke", samples=samples, progress=False)
    seconds = time.perf_counter() - start
    failing = df[df.verdict.isin(FAILING) & (df.level != "api")
                 & ~df.mechanism.fillna("").isin(ABOUT_THE_CALL)]
    names = tuple(name for name, _ in Counter(failing.mechanism).most_common())
    levels = [lv for lv in failing.level if lv in SEVERITY]
    level = max(levels, key=SEVERITY.index) if levels else ""
    library = any(names_a_library(m, n) for m, n in zip(failing.mechanism,
                                                          failing.mechanism_note.fillna("")))
    stage_one = failing.p_value_stage1.dropna()
    strongest = float(stage_one.min()) if len(stage_one) else math.nan
    undecided = failing[failing.level == "undetermined"]
    decide_n = (float(undecided["severity_decide_n"].max())
                if len(undecided) and "severity_decide_n" in undecided else math.nan)
    return Reading(blind, names, level, library, len(failing), seconds, decide_n, strongest,
                   tuple(zip(failing.check, failing.mechanism, failing.level,
                             failing.mechanism_note.fillna(""))))


def figures(readings) -> dict:
    """Naming accuracy, the fully explained, the false-naming rate (samplers with a mechanism
    named that is not their cause), the samplers with a library named, and the levels right."""
    total = len(readings)
    return {
        "samplers": total,
        "named_right": sum(r.named_right for r in readings),
        "accuracy": sum(r.named_right for r in readings) / total,
        "fully_explained": sum(r.fully_explained for r in readings),
        "false_naming_rate": sum(bool(r.false_names) for r in readings) / total,
        "library_named": sum(r.library_named for r in readings),
        "levels_right": sum(r.level_right for r in readings),
    }


def table(readings) -> str:
    """The markdown table docs/method/naming.md quotes."""
    lines = ["| sampler | case, dtype | expected name | got | expected level | got level |",
             "|---|---|---|---|---|---|"]
    for r in readings:
        b = r.blind
        got = ", ".join(r.names) or "(no failing row)"
        mark = "" if r.named_right else " ✗"
        level_mark = "" if r.level_right else " ✗"
        lines.append(f"| {b.name} | {b.case} {b.dtype} | {b.mechanism} | {got}{mark} | "
                     f"{b.level} | {r.level or '-'}{level_mark} |")
    return "\n".join(lines)


#: The samplers the catalog misnames today, with what it names: each one's name test is a
#: strict xfail, so that a catalog change that names it right fails the run until the entry
#: goes (and one that breaks a sampler named right fails it too). docs/method/naming.md says
#: why each is missed.
MISNAMED = {
    "phi-space-float32": "unexplained",
    "zero-dither-rounding": "uniform-proposals",
}
#: The samplers whose level the grading gets other than their effect in sigma calls for.
MISLEVELLED = {
    "phi-space-float32": "harmful: sigma is the truncated law's own std (2.9e-6 of the "
                         "case's), so a move of 6e-8 of the case's std reads 0.02 sigma",
}
#: The whole set: the blind samplers and the held-out ones (written while the catalog was being
#: changed on the first, and kept out of that work).
SAMPLERS = BLIND + HOLDOUT
BY_NAME = {b.name: b for b in SAMPLERS}
HELD_OUT = frozenset(b.name for b in HOLDOUT)


@pytest.fixture(scope="module")
def readings() -> dict:
    return {b.name: read(b) for b in SAMPLERS}


def _known(table: dict, why: str):
    return [pytest.param(name, marks=pytest.mark.xfail(strict=True, reason=f"{why}: {table[name]}"))
            if name in table else name for name in BY_NAME]


def test_the_set_is_large_enough():
    assert len(BLIND) >= 12 and len(HOLDOUT) >= 8 and len(BY_NAME) == len(SAMPLERS)
    assert set(MISNAMED) <= set(BY_NAME) and set(MISLEVELLED) <= set(BY_NAME)


def test_no_library_construction_is_named(readings):
    named = [name for name, r in readings.items() if r.library_named]
    assert not named, f"a library's construction named for {named}\n{table(readings.values())}"


@pytest.mark.parametrize("name", _known(MISNAMED, "the catalog names"))
def test_the_catalog_names_the_cause(readings, name):
    r = readings[name]
    assert r.named_right, f"{name}: expected {r.blind.mechanism}, got {r.names}: {r.details}"


@pytest.mark.parametrize("name", _known(MISLEVELLED, "the grading reads"))
def test_the_level_is_the_effect_in_sigma(readings, name):
    r = readings[name]
    assert r.level_right, f"{name}: expected {r.blind.level}, got {r.level}: {r.details}"


def test_the_catalog_names_nine_in_ten(readings):
    result = figures(readings.values())
    assert result["accuracy"] >= ACCURACY, f"{result}\n{table(readings.values())}"


if __name__ == "__main__":
    import torch

    torch.set_num_threads(1)
    clock = time.perf_counter()
    found = []
    for blind in SAMPLERS:
        reading = read(blind)
        found.append(reading)
        print(f"{blind.name}: {reading.names} {reading.level} (decided at n {reading.decide_n:.3g}; "
              f"p1 {reading.strongest_p:.3g}; {reading.seconds:.1f} s)", flush=True)
        for check, mechanism, level, note in reading.details:
            print(f"    {check}: {mechanism} [{level}] {note[:160]}")
    print(table(found))
    print("the whole set:", figures(found))
    print("held out:", figures([r for r in found if r.blind.name in HELD_OUT]))
    print(f"{time.perf_counter() - clock:.0f} s")
