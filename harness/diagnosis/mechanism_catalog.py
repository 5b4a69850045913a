"""The catalog of defect mechanisms: `diagnose` names every mechanism whose prediction one
Summary matches, `explain` names the one that explains one row.

Each row of `MECHANISMS` is one mechanism (`harness.diagnosis.match.Mechanism`): its name, the
checks it explains, and its test, the prediction computed by the reference set against the
observation with its uncertainty (`harness.diagnosis.evidence`: a departure from the law at
`FALSE_MATCH` and an agreement with the prediction). A Summary that matches no row leaves its
failures `unexplained`: no match is ever forced.

    matches = diagnose(summary, law)           # once per Summary
    mechanism, note = explain("atoms", "fail", message, matches)

Two names come from the row alone, not from a Summary: `stall` (a call that did not return
within its timeout) and `api` (the contract, the arguments, the generator, a raise or a crash:
no distribution defect).
"""

from __future__ import annotations

import weakref

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
from .scope import api_checks

__all__ = ["MECHANISMS", "NAMES", "Match", "Mechanism", "diagnose", "explain", "FALSE_MATCH",
           "AGREE_LEVEL", "MODEL_TOL"]

#: The rows, most specific first: where two match one check, `explain` names the first, a law
#: that fits the histogram before a match on the atoms alone (uniform-proposals predicts every
#: value of its law, the zeros its lattice writes included). coarse-construction comes last and
#: claims only the checks no earlier row explains (its law fits the histogram, which would
#: otherwise put it before the rows that read one check each).
MECHANISMS: tuple[Mechanism, ...] = (
    UniformProposals(),
    ExactZeros(), RoundsFirst(), Clamp(), ShiftedClamped(), CoarseUniform(), InverseCdfInDtype(),
    TailCut(), Shifted(), Scaled(), DtypeArithmetic(), FewRandomBits(), LibraryConstruction(),
    Dependence(), DirectedRounding(), PointMass(), Hole(), OutsideSupport(), PositionClass(),
    CoarseConstruction(),
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


def explain(check: str, verdict: str, message: str, matches) -> tuple[str, str]:
    """(mechanism, note) for one row: `stall` for a call that did not return, `api` for the API
    checks and a draw that raised, else the first match that explains `check` (those whose law
    fits the histogram first, in catalog order), else ("unexplained", ""). Pass and skip rows
    explain nothing: ("", "")."""
    if verdict in ("pass", "skip"):
        return "", ""
    text = (message or "").lower()
    if check == HANG.name or any(word in text for word in STALL_WORDS):
        return "stall", (message or "")[:200]
    if check in API_CHECKS or any(word in text for word in RAISE_WORDS):
        return "api", ""
    matches = tuple(matches or ())
    # A whole alternative law that fits the histogram outranks a match on the atoms alone: two
    # mechanisms can share a bound atom's signature, not a histogram.
    for match in sorted(matches, key=lambda m: GOF.name not in m.explains):
        if check in match.explains:
            return match.name, match.note
    return "unexplained", ""
