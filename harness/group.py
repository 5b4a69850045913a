"""The case group: the unit of a run. One candidate judged on one case, in one dtype on one
device, and on a sharded group one layout; every check of a group reads the group's one draw.

`Group` is the parameter of every conformance test and `ApiGroup` that of the candidate's
argument handling (no case). Their ids and the report's case label are written by the one format
of `record.ids`; what a group is drawn at (its shape class, its execution path) is asked of its
`harness.cases.Case`, never read back out of an id. Imports: `record.ids` and `reference` only.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from record.ids import API_CASE, CaseLabel, GroupId, format_case_label, format_group_id
from reference.dtypes import dtype_name

from .cases import COMPILED_PATHS


#: The kinds of group, which say which checks a group runs (a check's scope names kinds):
#: ``grid``: an unsharded group of a case at its own shape (eager or a path other than compile);
#: ``compiled``: the same on a torch.compile path (no API checks: each new tensor shape of
#: theirs would compile anew); ``shape``: a case on the shape axis; ``sharded``: a DTensor
#: parameter on W ranks; ``candidate``: an `ApiGroup`, once per (candidate, dtype, device).
GROUP_KINDS = ("grid", "compiled", "shape", "sharded", "candidate")


def group_kind(*, shaped: bool, path: str, sharded: bool) -> str:
    """The kind of a case group (see `GROUP_KINDS`), from what its case and layout say."""
    if sharded:
        return "sharded"
    if shaped:
        return "shape"
    return "compiled" if path in COMPILED_PATHS else "grid"


@dataclass(frozen=True)
class Group:
    """One (candidate, case, dtype, device[, layout]). A layout (`harness.sharded.layout.Layout`)
    makes it a sharded group on W ranks; a case on the shape axis or on another execution path
    (`harness.cases.shaped`, `harness.cases.on_path`) is a case of its own.

    What the session and the runner read of a group (its kind, path, ids, case label) is a pure
    function of these five fields, worked out by whoever makes the group (`group_names`, from the
    candidate's name alone: naming a group needs no candidate) and read as plain values after
    (no field of those takes part in equality or the repr)."""

    candidate: object
    case: object
    dtype: torch.dtype
    device: str
    layout: object | None = None
    path: str = field(kw_only=True, repr=False, compare=False)
    shape_class: str = field(kw_only=True, repr=False, compare=False)
    #: Which checks the group runs (`GROUP_KINDS`), asked of its case and layout.
    kind: str = field(kw_only=True, repr=False, compare=False)
    #: The case as this group names it: the case's label and the layout's.
    label: CaseLabel = field(kw_only=True, repr=False, compare=False)
    group_id: GroupId = field(kw_only=True, repr=False, compare=False)
    #: ``candidate-case[:shape][+path]-dtype-device[-layout]`` (`record.ids`).
    id: str = field(kw_only=True, repr=False, compare=False)
    #: The report's case column: ``case[:shape][+path][@layout]`` (`record.ids`).
    case_label: str = field(kw_only=True, repr=False, compare=False)


def group_names(candidate_name: str, case, dtype: torch.dtype, device: str,
                layout=None) -> dict:
    """The fields of a `Group` that follow from its five, for the candidate named
    `candidate_name`: ``Group(cand, case, dtype, device, layout, **group_names(cand.name, case,
    dtype, device, layout))``."""
    label = case.label if layout is None else CaseLabel(case.label.case, case.label.shape,
                                                         case.label.path, layout.label)
    group_id = GroupId(candidate_name, label, dtype_name(dtype), device)
    return dict(path=case.path, shape_class=case.shape_class,
                kind=group_kind(shaped=bool(case.shape_class), path=case.path,
                                sharded=layout is not None),
                label=label, group_id=group_id, id=format_group_id(group_id),
                case_label=format_case_label(label))


@dataclass(frozen=True)
class ApiGroup:
    """One (candidate, dtype, device) whose argument handling is checked on plain tensors; its
    ids are given by whoever makes it (`api_group_names`), as a `Group`'s."""

    candidate: object
    dtype: torch.dtype
    device: str
    group_id: GroupId = field(kw_only=True, repr=False, compare=False)
    #: ``candidate-dtype-device`` (`record.ids`).
    id: str = field(kw_only=True, repr=False, compare=False)

    case_label = API_CASE
    kind = "candidate"


def api_group_names(candidate_name: str, dtype: torch.dtype, device: str) -> dict:
    """The fields of an `ApiGroup` that follow from its three (`group_names`)."""
    group_id = GroupId(candidate_name, None, dtype_name(dtype), device)
    return dict(group_id=group_id, id=format_group_id(group_id))


def id_clash(named) -> str | None:
    """One line naming two different groups that would share an id, None where every id names
    one group. `named`: (id, identity, description) per group, the identity equal for equal
    groups (the session gives each group's candidate spec, case label, dtype and device).
    Candidate names and case ids both hold '-': ``exact`` on a case ``counter-x`` and
    ``exact-counter`` on a case ``x`` would both be ``exact-counter-x-...``."""
    seen: dict = {}
    for group_id, identity, description in named:
        other = seen.setdefault(group_id, (identity, description))
        if other[0] != identity:
            return (f"group id {group_id!r} would name two groups, {other[1]} and "
                    f"{description}: give the case another id (--case ...,id=NAME)")
    return None
