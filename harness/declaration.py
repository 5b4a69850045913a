"""What a check is: one `Check` declaration, from which the rest of the harness derives its use.

A check is declared once, next to its math (a statistic family's module, `harness.families`, or
`harness.checks`), and listed once in `harness.checks.registry`. The declaration says everything
the plumbing needs:

* ``name``: the row's ``check`` column, the pytest test ``test_<name>``, the xfails and ``-k``
  name;
* ``kind``: what the verdict rests on — ``hard`` (no statistics: any violation fails),
  ``statistical`` (a p-value through the two stages of `harness.runner.CaseRunner`, stated
  false-alarm rate and MDE) or ``api`` (the candidate called on tensors of the check's own);
* ``scope``: the kinds of group it runs on (`harness.group.GROUP_KINDS`);
* its body, one of three, which the runner of the group runs (`harness.runner.CaseRunner`): an
  ``outcome`` (statistical: the two stages), a ``judge`` of the stage-1 draw, or a ``call`` of
  the candidate on tensors of the check's own (an API check, under the group's crash guard).
  A body is told its group as plain values (`GroupFacts`), never given the runner, so a check
  cannot call back into the runner that runs it. Only a ``call`` is handed the candidate: a
  judge or an outcome judges what was drawn, and never calls the candidate;
* ``doc`` (one line: the test's docstring), ``method`` (the long text: null, false-alarm rate,
  effect, MDE), ``unit`` (of its effect and MDE) and ``mde`` (the minimum detectable effect as a
  function of the law, n, the tensor's shape and alpha, no sampling: `MinimumDetectableEffect`);
* ``families``: the statistic families (`harness.families`) whose state it reads: the engine
  folds the families of the checks that apply to a group, and nothing else;
* ``about``: what a failure of it says (`ABOUT`; `harness.diagnosis.grading.levels`): ``values`` (its
  level follows the group's severity figures: harmful or fine), ``single-values`` (fine
  structure whatever they say: repeats, lattices, last bits) or ``api`` (no statement about the
  values). By default ``values`` for a statistical check and ``api`` for the others.

A statistical check is declared with `statistical`, from its pure function
``(Summary, RoundedLaw, *, alpha) -> Outcome``: its run is the runner's two-stage rule.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Callable, Protocol

from reference import TruncatedNormal, rounded_law

from .group import GROUP_KINDS

#: Every group that draws from the candidate (the Summary checks and the statistics).
DRAWN = frozenset({"grid", "compiled", "shape", "sharded"})
#: Unsharded grid groups the API checks call the candidate for, on tensors of their own.
PLAIN = frozenset({"grid"})
SHAPE_AXIS = frozenset({"shape"})
SHARDED = frozenset({"sharded"})
CANDIDATE = frozenset({"candidate"})

KINDS = ("hard", "statistical", "api")
#: What a check's failure is about (the ``about`` field).
ABOUT = ("values", "single-values", "api")


class MinimumDetectableEffect(Protocol):
    """A check's MDE, one signature for every check: the effect the whole check detects with
    probability 0.5 at level `alpha` from `n` samples of tensors of `shape` drawn from `law`, no
    sampling (a float, or {component: float} for a check with components). A check whose MDE
    does not depend on the shape takes it all the same."""

    def __call__(self, law, n: int, shape: tuple, alpha: float) -> float | dict: ...


@dataclass(frozen=True)
class GroupFacts:
    """What a check's body is told of its group: the case (None for a check of the candidate
    alone), the dtype, the device and the run's `harness.runner.RunConfig`. Not the candidate:
    an API check's ``call`` is handed it beside these (`Check.call`), a judge of the draw never
    sees it."""

    case: Any
    dtype: Any
    device: str
    config: Any

    @cached_property
    def law(self):
        """The case's rounded law (`case_law`), built on first use."""
        return case_law(self.case, self.dtype)


def case_law(case, dtype):
    """`case`'s rounded law in `dtype` (`reference.rounded_law`, cached there); None for no case."""
    if case is None:
        return None
    return rounded_law(TruncatedNormal(case.mean, case.std, case.a, case.b), dtype)


@dataclass(frozen=True)
class Check:
    """One check (see the module docstring)."""

    name: str
    kind: str
    scope: frozenset
    doc: str
    judge: Callable | None = None  # (GroupFacts, stage-1 Summary) -> Result
    method: str = ""
    unit: str | dict = ""
    outcome: Callable | None = None  # statistical: (Summary, law, *, alpha) -> Outcome
    mde: MinimumDetectableEffect | None = None
    call: Callable | None = None  # API: (candidate, GroupFacts, seed, timeout) -> Result
    timeout_cap: float = math.inf  # API: the seconds one call may take at most
    judges_failures: bool = False  # judge: also given a draw that failed (a CandidateFailure)
    families: tuple = ()  # the statistic families (harness.families) whose state it reads
    about: str = ""  # one of ABOUT; "" takes the kind's default

    def __post_init__(self) -> None:
        if not self.about:
            object.__setattr__(self, "about", "values" if self.kind == "statistical" else "api")
        if self.about not in ABOUT:
            raise ValueError(f"check {self.name}: about must be one of {ABOUT}, "
                             f"got {self.about!r}")
        if not self.name.isidentifier():
            raise ValueError(f"check name {self.name!r} must be an identifier (it names a test)")
        if self.kind not in KINDS:
            raise ValueError(f"check {self.name}: kind must be one of {KINDS}, got {self.kind!r}")
        unknown = set(self.scope) - set(GROUP_KINDS)
        if not self.scope or unknown:
            raise ValueError(f"check {self.name}: scope {sorted(self.scope)} must be a non-empty "
                             f"subset of {GROUP_KINDS}")
        bodies = sum(b is not None for b in (self.judge, self.outcome, self.call))
        if bodies != 1:
            raise ValueError(f"check {self.name}: needs one body (a judge, an outcome or a call), "
                             f"has {bodies}")

    def applies_to(self, kind: str) -> bool:
        """Whether the check runs on a group of this kind."""
        return kind in self.scope

    @property
    def test_name(self) -> str:
        return f"test_{self.name}"


def statistical(name: str, outcome: Callable, *, doc: str, method: str, unit: str | dict,
                mde: MinimumDetectableEffect | None, families: tuple = (), scope: frozenset = DRAWN,
                kind: str = "statistical", about: str = "") -> Check:
    """A check from its pure function ``(Summary, law, *, alpha) -> Outcome``: its run is the
    runner's two-stage rule (``kind="hard"`` for one whose every failure is decisive: a
    difference the law cannot give)."""
    return Check(name, kind, scope, doc, method=method, unit=unit, outcome=outcome, mde=mde,
                 families=tuple(families), about=about)


def on_draw(name: str, judge: Callable, *, kind: str = "hard", scope: frozenset = DRAWN,
            doc: str, method: str = "", unit: str = "", failures: bool = False,
            families: tuple = (), about: str = "") -> Check:
    """A check of the group's stage-1 Summary: ``judge(facts, summary) -> Result``; a draw
    that failed (raised, hung, crashed) is the check's result, as for every check of the draw,
    unless `failures`: the judge is then given the `harness.engine.CandidateFailure` too."""
    return Check(name, kind, scope, doc, judge, method=method, unit=unit,
                 judges_failures=failures, families=tuple(families), about=about)


def calling(name: str, call: Callable, *, scope: frozenset = PLAIN, timeout_cap: float,
            doc: str, method: str = "") -> Check:
    """An API check: ``call(candidate, facts, seed, timeout) -> Result`` calls the candidate on
    tensors of its own, under the crash guard of the group; a call is allowed up to
    ``--case-timeout``, capped at `timeout_cap` seconds."""
    return Check(name, "api", scope, doc, method=method, call=call, timeout_cap=timeout_cap)
