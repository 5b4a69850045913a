"""The hooks of every process that collects the conformance tests: the grid as pytest's tests.

`GridPlugin` parametrizes each check's test with the case groups it runs on (one id per group,
shared by every check of it), deselects the groups of other partitions and pytest's placeholder
for an empty parameter list, keeps every check of one group together (its Summary is drawn once
and shared), marks the tests the session skips, notes each test's row skeleton, and gives the
tests their ``verify`` fixture (`verify.Verifier`). It is registered in every process: the xdist
workers and a run without -n collect; a controller of workers does not, unless it only collects.
"""

from __future__ import annotations

import pytest

from ..checks import CHECKS
from ..fleet.group_ledger import group_of_nodeid
from ..group import ApiGroup, Group
from ..session.run_plan import HarnessSession
from ..session.rows import row_skeleton
from ..session.xfails import stale_lines
from .verify import Verifier


def check_of(item) -> str | None:
    """The check a conformance test runs (its ``harness_check`` mark); None for other tests."""
    marker = item.get_closest_marker("harness_check")
    return marker.args[0] if marker else None


def group_of(item):
    """The case group (or candidate-scope group) a conformance test is parametrized with."""
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return None
    param = callspec.params.get("conformance_case") or callspec.params.get("api_case")
    return param if isinstance(param, (Group, ApiGroup)) else None


def empty_parametrization(item) -> bool:
    """A harness test whose parameter list was empty in this run (e.g. `contract` in a run of
    sharded groups only): pytest's placeholder, deselected rather than reported as a skip."""
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return False
    params = callspec.params
    return any(k in params and not isinstance(params[k], (Group, ApiGroup))
               for k in ("conformance_case", "api_case"))


def deselect_other_partitions(partition, config, items) -> None:
    """Keep the conformance tests of this partition's groups; the others are deselected (not
    skipped: another partition runs them). Tests the harness did not parametrize are left alone."""
    keep, drop = [], []
    for item in items:
        mine = group_of(item) is None or partition.owns(group_of_nodeid(item.nodeid))
        (keep if mine else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def warn_stale_xfails(config, s: HarnessSession) -> None:
    """array-api-tests style: warn about xfails lines that match no test of the configured
    candidates on the whole grid (not merely the tests this run selected)."""
    for p in stale_lines(s.xfails, s.candidates, s.sharded_cases, s.layouts, s.cases):
        config.issue_config_time_warning(
            pytest.PytestConfigWarning(f"xfails file line {p.line}: {p.pattern!r} matches no test"),
            stacklevel=2)


class GridPlugin:
    """Parametrization, collection and the ``verify`` fixture of one process.

    `workers`: the xdist workers sharing the groups (1 outside a worker), for the case budget;
    `warns_stale_xfails`: whether this process warns about xfails lines that match no test (the
    process that owns the run: a worker does not repeat it).
    """

    def __init__(self, session: HarnessSession, workers: int, warns_stale_xfails: bool):
        self.session = session
        self.workers = workers
        self.warns_stale_xfails = warns_stale_xfails

    def pytest_generate_tests(self, metafunc):
        """The id is the case group (harness.fleet.group_ledger): every check of a group shares it."""
        marker = metafunc.definition.get_closest_marker("harness_check")
        check = marker.args[0] if marker else None
        for fixture in ("conformance_case", "api_case"):
            if fixture in metafunc.fixturenames:
                metafunc.parametrize(fixture, [pytest.param(c, id=c.id)
                                               for c in self.session.groups_for(check)])

    def pytest_collection_modifyitems(self, session, config, items):
        s = self.session
        if s.partition is not None:
            deselect_other_partitions(s.partition, config, items)

        order = {name: i for i, name in enumerate(CHECKS.names())}
        empty = [item for item in items if empty_parametrization(item)]
        if empty:
            config.hook.pytest_deselected(items=empty)
            items[:] = [item for item in items if not empty_parametrization(item)]
        # Keep every check of one (candidate, case, dtype, device) together: its Summary is
        # generated once and shared, and a runner cache of a few cases suffices.
        indexed = list(enumerate(items))

        def key(pair):
            i, item = pair
            param = group_of(item)
            check = check_of(item)
            if param is None or check is None:
                return (0, "", i, 0)
            return (1, param.id, order.get(check, 99), i)

        items[:] = [item for _, item in sorted(indexed, key=key)]
        groups = {group_of(i).id for i in items if isinstance(group_of(i), Group)}
        s.apply_budget(len(groups), self.workers)
        for item in items:
            param, check = group_of(item), check_of(item)
            if param is None or check is None:
                continue
            reason = s.skip_reason(param.candidate, param.dtype, param.device, param)
            if reason:
                item.add_marker(pytest.mark.skip(reason=reason))
            s.node_params[item.nodeid] = row_skeleton(param, check)
        if self.warns_stale_xfails:
            warn_stale_xfails(config, s)

    @pytest.fixture
    def verify(self, request) -> Verifier:
        """verify(check_name, param): run one check and turn its verdict into the test's outcome."""
        return Verifier(self.session, request)
