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
* ``run``: one signature, ``run(context) -> Result``, the context being the runner of the group
  (`CheckContext`);
* ``doc`` (one line: the test's docstring), ``method`` (the long text: null, false-alarm rate,
  effect, MDE), ``unit`` (of its effect and MDE) and ``mde`` (the minimum detectable effect as a
  function of the law and n, no sampling);
* ``families``: the statistic families (`harness.families`) whose state it reads: the engine
  folds the families of the checks that apply to a group, and nothing else.

A statistical check is declared with `statistical`, from its pure function
``(Summary, RoundedLaw, *, alpha) -> Outcome``: its run is the runner's two-stage rule.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Protocol

from .group import GROUP_KINDS

#: Every group that draws from the candidate (the Summary checks and the statistics).
DRAWN = frozenset({"grid", "compiled", "shape", "sharded"})
#: Unsharded grid groups the API checks call the candidate for, on tensors of their own.
PLAIN = frozenset({"grid"})
SHAPE_AXIS = frozenset({"shape"})
SHARDED = frozenset({"sharded"})
CANDIDATE = frozenset({"candidate"})

KINDS = ("hard", "statistical", "api")


class CheckContext(Protocol):
    """What a check's ``run`` is given: the runner of one group (`harness.runner.CaseRunner`, its
    sharded subclass, or `harness.runner.CandidateRunner` for candidate-scope checks)."""

    candidate: Any
    dtype: Any
    device: str
    config: Any

    def seed(self, what) -> int: ...


@dataclass(frozen=True)
class Check:
    """One check (see the module docstring)."""

    name: str
    kind: str
    scope: frozenset
    doc: str
    run: Callable[[Any], Any]
    method: str = ""
    unit: str | dict = ""
    outcome: Callable | None = None  # statistical: (Summary, law, *, alpha) -> Outcome
    mde: Callable | None = None  # (law, n, shape, alpha) -> float, or {component: float}
    families: tuple = ()  # the statistic families (harness.engine.Family) whose state it reads

    def __post_init__(self) -> None:
        if not self.name.isidentifier():
            raise ValueError(f"check name {self.name!r} must be an identifier (it names a test)")
        if self.kind not in KINDS:
            raise ValueError(f"check {self.name}: kind must be one of {KINDS}, got {self.kind!r}")
        unknown = set(self.scope) - set(GROUP_KINDS)
        if not self.scope or unknown:
            raise ValueError(f"check {self.name}: scope {sorted(self.scope)} must be a non-empty "
                             f"subset of {GROUP_KINDS}")

    def applies_to(self, kind: str) -> bool:
        """Whether the check runs on a group of this kind."""
        return kind in self.scope

    @property
    def test_name(self) -> str:
        return f"test_{self.name}"


def statistical(name: str, outcome: Callable, *, doc: str, method: str, unit: str | dict,
                mde: Callable | None, families: tuple = (), scope: frozenset = DRAWN,
                kind: str = "statistical") -> Check:
    """A check from its pure function ``(Summary, law, *, alpha) -> Outcome``: its run is the
    runner's two-stage rule (``kind="hard"`` for one whose every failure is decisive: a
    difference the law cannot give)."""

    def run(context):
        return context.two_stage(name, outcome)

    return Check(name, kind, scope, doc, run, method=method, unit=unit, outcome=outcome, mde=mde,
                 families=tuple(families))


def on_draw(name: str, judge: Callable, *, kind: str = "hard", scope: frozenset = DRAWN,
            doc: str, method: str = "", unit: str = "", families: tuple = ()) -> Check:
    """A check of the group's stage-1 Summary: ``judge(context, summary) -> Result``; a draw
    that failed (raised, hung, crashed) is the check's result, as for every check of the draw."""

    def run(context):
        return context.on_draw(name, lambda summary: judge(context, summary))

    return Check(name, kind, scope, doc, run, method=method, unit=unit, families=tuple(families))


def calling(name: str, call: Callable, *, scope: frozenset = PLAIN, timeout_cap: float,
            doc: str, method: str = "") -> Check:
    """An API check: ``call(context, seed, timeout) -> Result`` calls the candidate on tensors of
    its own, under the crash guard of the group; a call is allowed up to ``--case-timeout``,
    capped at `timeout_cap` seconds."""

    def run(context):
        timeout = min(context.config.case_timeout, timeout_cap)
        return context.guarded(name, lambda: call(context, context.seed(name), timeout))

    return Check(name, "api", scope, doc, run, method=method)
