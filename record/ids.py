"""The names of a case group and of a report's case: the one format and the one parse of each.

A case group (`harness.group.Group`) is one candidate judged on one case, in one dtype on one
device, and on a sharded group one layout. Its id is the parametrization id of its tests, the key
of grid partitions and of the worker ledger, and the report's ``group`` column::

    candidate-case[:shape][+path]-dtype-device[-wN-placement[-perrank]]

An API group (the candidate's argument handling, no case) is ``candidate-dtype-device``. The
report's ``case`` column, the case label, names the case with its shape class, its execution path
and its layout (``API_CASE`` on an API group's rows)::

    case[:shape][+path][@wN-placement[-perrank]]

The harness writes both with `format_group_id` and `format_case_label`; the code that holds only
a string (the xdist controller, the scheduler, the report readers, ``--cases``) reads them with
`parse_group_id`, `group_device` and `parse_case_label`, never by looking for characters itself.

The grammar that makes each parse the inverse of its format: a case id holds letters, digits,
``_``, ``.`` and ``-`` only (`CASE_ID_CHARS`), so the first ``:``, ``+`` or ``@`` ends it; a path
is lowercase words joined by ``-`` and a shape class name holds no ``@`` and does not end in
``+word``, so a trailing ``+word`` is the path (``2^31+1`` is a shape class); dtypes and devices hold no ``-``,
so the group id's tail is read from the right. Candidate names and case ids both hold ``-``: a
group id is split between them by the names of the run's candidates.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from reference.dtypes import DTYPES

#: The case label of an API group's rows (it judges no case).
API_CASE = "api"
#: The characters of a case id (a `--case id=NAME`, a recorded call's, an explored point's).
CASE_ID_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
#: The path of the grid's own groups (no ``+path`` in their names).
DEFAULT_PATH = "eager"

# harness.sharded.layout's `Layout.label`: world size, placement (Shard(d) or Replicate), and
# "-perrank" for a seed of each rank's own.
_LAYOUT = re.compile(r"w[0-9]+-(?:shard[0-9]+|replicate)(?:-perrank)?")
_DEVICE = re.compile(r"[a-z_]+(?::[0-9]+)?")
_CASE_LABEL = re.compile("(?P<case>[" + re.escape("".join(sorted(CASE_ID_CHARS))) + "]+)"
                         r"(?::(?P<shape>[^@:]+?))?(?:\+(?P<path>[a-z]+(?:-[a-z]+)*))?(?:@(?P<layout>[^@]+))?")
_LAYOUT_TAIL = re.compile(r"-(?P<layout>" + _LAYOUT.pattern + r")\Z")
_PATH = re.compile(r"[a-z]+(?:-[a-z]+)*")
# A shape class that ends in ``+word`` (or ``+word-word``) after some other character: before the default path (which
# the label leaves out) the parse would read that ``+word`` as the path.
_SHAPE_PATH_TAIL = re.compile(r".\+[a-z]+(?:-[a-z]+)*\Z", re.DOTALL)


@dataclass(frozen=True)
class CaseLabel:
    """A case as a group names it: its id, its shape class ("": the case's own shape), its
    execution path and its layout label ("": unsharded)."""

    case: str
    shape: str = ""
    path: str = DEFAULT_PATH
    layout: str = ""

    def __str__(self) -> str:
        return format_case_label(self)

    @property
    def plain(self) -> "CaseLabel":
        """This label without its layout: the case part of a group id."""
        return CaseLabel(self.case, self.shape, self.path)


@dataclass(frozen=True)
class GroupId:
    """A group id read back into plain strings: the candidate's name, the case (None for an API
    group), the dtype's name and the device."""

    candidate: str
    case: CaseLabel | None
    dtype: str
    device: str

    def __str__(self) -> str:
        return format_group_id(self)


def is_case_id(text: str) -> bool:
    """Whether `text` can be a case id (non-empty, `CASE_ID_CHARS` only)."""
    return bool(text) and not set(text) - CASE_ID_CHARS


def format_case_label(label: CaseLabel) -> str:
    """``case[:shape][+path][@layout]``; ValueError for parts the parse could not read back."""
    if not _nameable(label):
        raise ValueError(f"{label!r} cannot be named unambiguously: a case id holds "
                         f"letters, digits, '_', '.', '-' only; a path is lowercase words joined "
                         f"by '-'; a shape class holds no ':' or '@' and does not end in '+word'")
    return _label_text(label)


def _nameable(label: CaseLabel) -> bool:
    """Whether `parse_case_label` reads `label`'s text back as `label`, asked of its parts."""
    shape_readable = not label.shape or (
        not {":", "@"} & set(label.shape)
        and (label.path != DEFAULT_PATH or _SHAPE_PATH_TAIL.search(label.shape) is None))
    return (is_case_id(label.case) and shape_readable and _PATH.fullmatch(label.path) is not None
            and (not label.layout or _LAYOUT.fullmatch(label.layout) is not None))


def _label_text(label: CaseLabel) -> str:
    """The text of a label whose parts are nameable (`_nameable`)."""
    text = label.case
    if label.shape:
        text += f":{label.shape}"
    if label.path != DEFAULT_PATH:
        text += f"+{label.path}"
    if label.layout:
        text += f"@{label.layout}"
    return text


def parse_case_label(text: str) -> CaseLabel:
    """The `CaseLabel` `format_case_label` wrote as `text`; ValueError for any other text."""
    match = _CASE_LABEL.fullmatch(str(text))
    if match is None or (match["layout"] is not None and _LAYOUT.fullmatch(match["layout"]) is None):
        raise ValueError(f"not a case label (case[:shape][+path][@layout]): {text!r}")
    return CaseLabel(match["case"], match["shape"] or "", match["path"] or DEFAULT_PATH,
                     match["layout"] or "")


def format_group_id(group: GroupId) -> str:
    """``candidate-case[:shape][+path]-dtype-device[-layout]``, ``candidate-dtype-device`` for an
    API group."""
    parts = [group.candidate]
    if group.case is not None:
        format_case_label(group.case)  # checks the layout too
        parts.append(_label_text(group.case.plain))
    parts += [group.dtype, group.device]
    if group.case is not None and group.case.layout:
        parts.append(group.case.layout)
    if group.dtype not in DTYPES or _DEVICE.fullmatch(group.device) is None or not group.candidate:
        raise ValueError(f"{group!r} cannot be named: dtypes are {', '.join(DTYPES)}, devices "
                         f"torch device names, the candidate's name is not empty")
    return "-".join(parts)


def _tail(text: str) -> tuple[str, str, str, str] | None:
    """(head, dtype, device, layout) of a group id read from the right; None when it has none."""
    for layout_match in (_LAYOUT_TAIL.search(text), None):
        rest = text[:layout_match.start()] if layout_match else text
        parts = rest.rsplit("-", 2)
        if len(parts) == 3 and parts[1] in DTYPES and _DEVICE.fullmatch(parts[2]) and parts[0]:
            return parts[0], parts[1], parts[2], layout_match["layout"] if layout_match else ""
    return None


def group_device(text: str) -> str | None:
    """The device a group id names (``cuda:1``), None for a text that is no group id (the
    parametrization id of a self-test)."""
    tail = _tail(str(text))
    return tail[2] if tail else None


def parse_group_id(text: str, candidates: Iterable[str], cases: Iterable[str] | None = None) -> GroupId:
    """The `GroupId` `format_group_id` wrote as `text`, `candidates` being the names of the run's
    candidates and `cases` its case ids (None: any). ValueError for a text that names no group
    of them, and for one that names two: with candidates ``exact`` and ``exact-counter``,
    ``exact-counter-x-float32-cpu`` is a group of each where the cases ``counter-x`` and ``x``
    may both be (`harness.group.id_clash` refuses such a run)."""
    tail = _tail(str(text))
    if tail is None:
        raise ValueError(f"not a group id (candidate-case-dtype-device): {text!r}")
    head, dtype, device, layout = tail
    known = None if cases is None else set(cases)
    found = []
    for name in sorted(set(candidates)):
        if head == name and not layout:
            found.append(GroupId(name, None, dtype, device))
        elif head.startswith(name + "-"):
            try:
                label = parse_case_label(head[len(name) + 1:])
            except ValueError:
                continue
            if not label.layout and (known is None or label.case in known):
                found.append(GroupId(name, CaseLabel(label.case, label.shape, label.path, layout),
                                     dtype, device))
    if len(found) != 1:
        raise ValueError(f"group id {text!r} names " + (
            f"a group of each of {', '.join(g.candidate for g in found)}" if found else
            f"no group of {', '.join(sorted(set(candidates))) or 'no candidate'}"))
    return found[0]
