"""Case groups: the unit of work that must stay whole on one worker, and the ledger that proves it.

Every check of one (candidate, case, dtype, device) reads the same draw, so they form a group that
one worker runs from start to end. The group of a test is the harness's own: the parametrization
id in its node id (``suites/test_conformance.py::test_gof[exact-normal-2sigma-float32-cpu]`` is in
group ``exact-normal-2sigma-float32-cpu``). Nothing here depends on xdist's ``xdist_group`` marks,
on its ``--dist loadgroup`` option, or on the node-id suffix xdist adds for them: pytest 9.2 stopped
honouring the private attribute through which xdist 3.8 adds that suffix, and every group
silently became one test per group.

`GroupLedger` runs on the xdist controller and records which worker reported each group. A group
reported by a second worker while the first is still alive was split (a scheduler other than the
harness's, or a defect in it): the run says so as an error naming the cause.
"""

from __future__ import annotations

import re

#: The module of the conformance tests (one ``test_<check>`` per check).
CONFORMANCE_MODULE = "suites/test_conformance.py"

# The test function's name, its parametrization id, and the optional "@group" suffix that
# `--dist loadgroup` appends on pytest < 9.2 (ignored: the id is the group).
_NODEID = re.compile(r"::test_(?P<check>\w+)\[(?P<param>.*)\](?:@[^\[\]]*)?$")


def conformance_nodeid(check: str, group: str) -> str:
    """The node id of `check` on the group whose id is `group` (`record.ids`)."""
    return f"{CONFORMANCE_MODULE}::test_{check}[{group}]"


def nodeid_parts(nodeid: str) -> tuple[str, str] | None:
    """(check, parametrization id) of a parametrized test's node id, None for any other."""
    match = _NODEID.search(nodeid)
    return (match["check"], match["param"]) if match else None


def group_of_nodeid(nodeid: str) -> str:
    """The group of a test: its parametrization id; a test without one is a group of its own."""
    parts = nodeid_parts(nodeid)
    return parts[1] if parts else nodeid


class GroupLedger:
    """Which worker runs each group; catches a group split across live workers.

    A worker that crashes hands its unfinished groups on legitimately: xdist reschedules them to
    another worker, so a group moving away from a crashed worker is not a split. (A worker that
    finished normally is not "down" here: it left no group unfinished.)
    """

    def __init__(self) -> None:
        self.owner: dict[str, str] = {}
        self.down: set[str] = set()
        self.splits: dict[str, list[str]] = {}

    def worker_down(self, worker: str) -> None:
        """`worker` crashed."""
        self.down.add(worker)

    def record(self, group: str, worker: str) -> bool:
        """Note that `worker` ran a test of `group`; True when that splits the group."""
        first = self.owner.setdefault(group, worker)
        if first == worker:
            return False
        if first in self.down:
            self.owner[group] = worker
            return False
        workers = self.splits.setdefault(group, [first])
        if worker not in workers:
            workers.append(worker)
        return True

    def split_message(self, group: str, scheduler: str) -> str:
        workers = " and ".join(self.splits.get(group, []))
        return (f"case group split across live workers {workers}: the xdist scheduler "
                f"({scheduler}) did not keep this case's checks on one worker, so they did not "
                f"share one draw. A scheduling defect, not a candidate failure; rerun with -n 0, "
                f"and report it with the pytest and pytest-xdist versions")
