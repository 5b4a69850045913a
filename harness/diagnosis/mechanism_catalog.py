"""The catalog of defect mechanisms: `diagnose` names every mechanism whose prediction one
Summary matches, `explain` names the one that explains one row.

Each row of `MECHANISMS` is one mechanism (`harness.diagnosis.match.Mechanism`): its name, the
checks it explains, and its test, the prediction computed by the reference set against the
observation with its uncertainty (`harness.diagnosis.evidence`: a departure from the law at
`FALSE_MATCH` and an agreement with the prediction). A Summary that matches no row leaves its
failures `unexplained`: no match is ever forced.

    matches = diagnose(summary, law)           # once per Summary
    mechanism, note = explain("atoms", "fail", message, matches, candidate="torch")

Two names come from the row alone, not from a Summary: `stall` (a call that did not return
within its timeout) and `api` (the contract, the arguments, the generator, a raise or a crash:
no distribution defect).

The rows of one group are told one story (`story`): each check gets the first match that
explains it, the same for every row, and a note that says which checks the story's other
mechanisms explain. A match that repeats one library's own kernel (`Match.kernel_of`) is named
only for the candidates that run it; for any other candidate it never names a row, and appears
after the named mechanism as "reads like <that kernel>": the catalog says what a sampler no
library wrote does to its values, never whose kernel it is.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

from ..checks.hard import HANG
from ..families.binned import GOF
from .evidence import AGREE_LEVEL, FALSE_MATCH, MODEL_TOL, Evidence
from .match import Match, Mechanism
from .mechanisms.bound_atoms import Clamp, CoarseUniform, ExactZeros, RoundsFirst
from .mechanisms.coarse_construction import CoarseConstruction
from .mechanisms.dependence import Dependence
from .mechanisms.directed_rounding import DirectedRounding
from .mechanisms.fine_structure import DtypeArithmetic, FewRandomBits
from .mechanisms.inverse_cdf import InverseCdfInDtype
from .mechanisms.law_shape import Scaled, Shifted, ShiftedClamped, TailCut
from .mechanisms.library_laws import LibraryConstruction
from .mechanisms.misplaced import Hole, OutsideSupport, PointMass
from .mechanisms.position_class import PositionClass
from .mechanisms.proposals import UniformProposals
from .mechanisms.repeated_shards import RepeatedShards
from .scope import api_checks, candidate_name

__all__ = ["MECHANISMS", "NAMES", "Match", "Mechanism", "Story", "diagnose", "explain", "story",
           "FALSE_MATCH", "AGREE_LEVEL", "MODEL_TOL"]

#: The rows, most specific first: where two match one check, `explain` names the first, a law
#: that fits the histogram before a match on the atoms alone (uniform-proposals predicts every
#: value of its law, the zeros its lattice writes included; inverse-cdf-in-dtype every value of
#: an inverse CDF computed in the dtype, whose uniform's end cell is coarse-uniform's atom).
#: coarse-construction comes last and claims only the checks no earlier row explains (its law
#: fits the histogram, which would otherwise put it before the rows that read one check each).
#: repeated-shards comes before dependence: copied shards are why rows repeat across a shard
#: boundary, which dependence reads.
MECHANISMS: tuple[Mechanism, ...] = (
    UniformProposals(),
    ExactZeros(), RoundsFirst(), Clamp(), ShiftedClamped(), InverseCdfInDtype(), CoarseUniform(),
    TailCut(), Shifted(), Scaled(), DtypeArithmetic(), FewRandomBits(), LibraryConstruction(),
    RepeatedShards(), Dependence(), DirectedRounding(), PointMass(), Hole(), OutsideSupport(),
    PositionClass(), CoarseConstruction(),
)
#: Every name a row's `mechanism` may hold.
NAMES = tuple(dict.fromkeys(m.name for m in MECHANISMS)) + ("stall", "api", "unexplained")

#: Checks of the candidate's API and contract: their failures are `api`, whatever the Summary.
API_CHECKS = api_checks()
#: Words of a row's message that say a call did not return (`harness.checks.hard.failed_draw`,
#: `harness.runner.CaseRunner.guarded`).
STALL_WORDS = ("candidate hang", "does not return", "did not return", "timed out", "timeout")
#: Words that say the draw raised or crashed: the candidate's contract, not its law.
RAISE_WORDS = ("candidate raised", "candidate crashed")

_MEMO: dict = {}


def diagnose(summary, law, first=None) -> tuple[Match, ...]:
    """Every row of the catalog whose prediction the Summary matches, in catalog order
    (computed once per Summary object: later calls return the same tuple). `first`: the group's
    stage-1 Summary where `summary` is its stage 2's (`Evidence.holder`)."""
    key = id(summary)
    held = _MEMO.get(key)
    if held is not None and held[0]() is summary and held[1] == id(first):
        return held[2]
    evidence = Evidence(summary, law, first)
    found = []
    # the matches so far: a late row that reads the whole law leaves to them what they explain
    evidence.memo["earlier"] = found
    for mechanism in MECHANISMS:
        try:
            match = mechanism.test(evidence)
        except (ValueError, ArithmeticError, KeyError, IndexError):
            match = None  # a law the reference cannot price for this row: no match, not a crash
        if match is not None:
            found.append(match)
    matches = tuple(found)
    try:
        ref = weakref.ref(summary, lambda _, k=key: _MEMO.pop(k, None))
    except TypeError:
        return matches
    _MEMO[key] = (ref, id(first), matches)
    return matches


def explain(check: str, verdict: str, message: str, matches,
            candidate=None) -> tuple[str, str]:
    """(mechanism, note) for one row: `stall` for a call that did not return, `api` for the API
    checks and a draw that raised, else the mechanism the group's story names for `check`
    (`story`), else ("unexplained", ""). Pass and skip rows explain nothing: ("", "").
    `candidate`: the row's candidate (its registered name or spec, or the Candidate), which
    decides whether a library's kernel may be named (`story`)."""
    if verdict in ("pass", "skip"):
        return "", ""
    text = (message or "").lower()
    if check == HANG.name or any(word in text for word in STALL_WORDS):
        return "stall", (message or "")[:200]
    if check in API_CHECKS or any(word in text for word in RAISE_WORDS):
        return "api", ""
    return story(tuple(matches or ()), candidate_name(candidate)).row(check)


#: Characters of a library kernel's note quoted where it is only "read like".
LIKE_CHARS = 160
#: Checks listed by name where a note says which rows another mechanism explains.
LISTED_CHECKS = 6


@dataclass(frozen=True)
class Story:
    """One group's story: the mechanism that explains each check (`named`), and the matches of a
    library kernel the candidate does not run (`alike`), which only say what the rows read like.

    Every row of a group is explained from the one Summary's matches, so rows that one match
    explains share it; where the story names several mechanisms, each row's note says which
    checks the others explain."""

    named: dict
    alike: tuple

    def row(self, check: str) -> tuple[str, str]:
        like = next((f"reads like {m.kernel} ({m.name}: {m.note[:LIKE_CHARS]})"
                     for m in self.alike if check in m.explains), "")
        match = self.named.get(check)
        parts = [match.note] if match is not None else []
        others = self.others(match)
        if others:
            parts.append(f"the group's other rows, where they fail: {others}")
        if like:
            parts.append(like)
        return ("unexplained" if match is None else match.name), "; ".join(parts)

    def others(self, match: Match | None) -> str:
        """'dependence explains independence, repetition': what the story's mechanisms other
        than `match`'s explain ('' where it names no other)."""
        by_name: dict = {}
        for check, other in sorted(self.named.items()):
            if match is None or other.name != match.name:
                by_name.setdefault(other.name, []).append(check)
        texts = []
        for name, checks in by_name.items():
            shown = ", ".join(checks[:LISTED_CHECKS]) + (", ..." if len(checks) > LISTED_CHECKS
                                                          else "")
            texts.append(f"{name} explains {shown}")
        return "; ".join(texts)


def may_name(match: Match, candidate: str) -> bool:
    """Whether the catalog may name `match` for `candidate`: a generic mechanism always, a
    library's kernel only for the candidates that run it."""
    return not match.library or candidate in match.kernel_of


def story(matches: tuple, candidate: str = "") -> Story:
    """The group's story from its Summary's matches: for each check, the first match that
    explains it among those the catalog may name for `candidate` (`may_name`): a match whose
    checks another explains too, and more, after it (one cause that explains every row another
    explains, and more, is the group's story); then a generic mechanism before a library's
    kernel (the kernel says whose code wrote the values, the generic mechanism what it did to
    them); then a whole alternative law that fits the histogram before a match on the atoms
    alone (two mechanisms can share a bound atom's signature, not a histogram); then catalog
    order. The kernels of libraries the candidate does not run are kept as what the rows read
    like, after the named mechanism."""
    named: dict = {}
    nameable = [m for m in matches if may_name(m, candidate)]

    def rank(match: Match) -> tuple:
        covered = any(match.explains < other.explains for other in nameable)
        return covered, match.library, GOF.name not in match.explains

    for match in sorted(nameable, key=rank):
        for check in match.explains:
            named.setdefault(check, match)
    alike = tuple(m for m in matches if not may_name(m, candidate))
    return Story(named, alike)
