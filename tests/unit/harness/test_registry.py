"""The check registry: one declaration per check, and what the harness derives from it."""

from __future__ import annotations

import pytest

from harness.checks import CHECKS, Check, Registry
from harness.group import GROUP_KINDS, group_kind
from harness.declaration import DRAWN, statistical


def test_every_check_is_declared_once_with_what_the_plumbing_needs():
    assert len(set(CHECKS.names())) == len(CHECKS) >= 25
    for check in CHECKS:
        assert check.doc and check.doc.endswith((".", ")")), check.name
        assert [callable(b) for b in (check.judge, check.outcome, check.call) if b] == [True], \
            check.name
        if check.outcome is not None:
            assert check.method, check.name
            assert check.unit, check.name
        if check.kind == "statistical":
            assert "alpha" in check.method and len(check.method) > 200, check.name


def test_the_suite_has_one_test_per_check_named_and_documented_by_it():
    import suites.test_conformance as suite

    tests = {name: fn for name, fn in vars(suite).items() if name.startswith("test_")}
    assert list(tests) == [c.test_name for c in CHECKS]
    for check in CHECKS:
        fn = tests[check.test_name]
        assert fn.__doc__ == check.doc
        assert [m.args for m in fn.pytestmark if m.name == "harness_check"] == [(check.name,)]


@pytest.mark.parametrize("kind, has, lacks", [
    ("grid", {"finite", "hang", "contract", "generator", "threads", "gof", "collisions"},
     {"inplace", "replicas", "shards", "sharding", "arguments"}),
    ("compiled", {"finite", "hang", "gof"}, {"contract", "generator", "threads", "inplace"}),
    ("shape", {"inplace", "written", "gof"}, {"contract", "generator", "threads", "sharding"}),
    ("sharded", {"finite", "gof", "replicas", "shards", "sharding"},
     {"contract", "inplace", "arguments"}),
    ("candidate", {"arguments"}, {"finite", "gof", "contract"}),
])
def test_which_groups_run_which_checks(kind, has, lacks):
    names = {c.name for c in CHECKS.for_kind(kind)}
    assert has <= names and not (lacks & names)


def test_group_kind_asks_the_group_not_its_id():
    assert group_kind(shaped=False, path="eager", sharded=False) == "grid"
    assert group_kind(shaped=False, path="deterministic", sharded=False) == "grid"
    assert group_kind(shaped=False, path="compile", sharded=False) == "compiled"
    assert group_kind(shaped=True, path="compile", sharded=False) == "shape"
    assert group_kind(shaped=False, path="eager", sharded=True) == "sharded"
    assert set(GROUP_KINDS) == {"grid", "compiled", "shape", "sharded", "candidate"}


def test_the_registry_order_judges_a_groups_draw_first_then_calls_its_api():
    names = CHECKS.names()
    assert names[:4] == ("finite", "written", "bounds", "hang")
    grid = CHECKS.for_kind("grid")
    last_hard = max(names.index(c.name) for c in grid if c.kind == "hard")
    first_stat = min(names.index(c.name) for c in CHECKS.of_kind("statistical"))
    last_stat = max(names.index(c.name) for c in grid if c.kind == "statistical")
    first_api = min(names.index(c.name) for c in grid if c.kind == "api")
    assert last_hard < first_stat and last_stat < first_api


def test_a_bad_declaration_is_refused_with_its_name():
    with pytest.raises(ValueError, match="identifier"):
        Check("low-bits", "hard", DRAWN, "doc.", lambda ctx: None)
    with pytest.raises(ValueError, match="kind"):
        Check("x", "fuzzy", DRAWN, "doc.", lambda ctx: None)
    with pytest.raises(ValueError, match="scope"):
        Check("x", "hard", frozenset({"everywhere"}), "doc.", lambda ctx: None)
    with pytest.raises(ValueError, match="needs one body"):
        Check("x", "hard", DRAWN, "doc.")
    with pytest.raises(ValueError, match="needs one body"):
        Check("x", "hard", DRAWN, "doc.", lambda facts, s: None, call=lambda f, s, t: None)
    with pytest.raises(ValueError, match="declared twice: gof"):
        Registry((*CHECKS, CHECKS["gof"]))
    with pytest.raises(KeyError, match="unknown check 'nope'"):
        CHECKS["nope"]


def test_a_new_check_is_one_declaration():
    """A check declared with `statistical` runs through the runner's two stages, appears in the
    groups its scope names and in the MDE table, with nothing else written for it."""
    from candidates import resolve
    from harness.cases import case_by_id
    from harness.result import Outcome
    from harness.runner import CaseRunner, RunConfig
    import torch

    def check_mean_sign(summary, law, *, alpha=1e-3):
        return Outcome(statistic=0.0, p_value=0.5, effect=0.0, effect_unit="sigma",
                       message="mean sign looked at")

    extra = statistical("mean_sign", check_mean_sign, doc="A toy.", method="A toy, alpha.",
                        unit="sigma", mde=lambda law, n, shape, alpha: 0.25)
    registry = Registry((*CHECKS, extra))
    assert registry.for_kind("grid")[-1] == extra
    assert "mean_sign" not in {c.name for c in registry.for_kind("candidate")}
    runner = CaseRunner(resolve("exact"), case_by_id("normal-2sigma"), torch.bfloat16, "cpu",
                        RunConfig(profile="smoke"))
    result = runner.run(extra)
    assert (result.check, result.verdict, result.n_stage1) == ("mean_sign", "pass", result.n)
    assert result.n > 0 and result.candidate_s > 0  # it drew, and was charged the draw
    law = runner.law
    assert registry.mdes(law, 1000, (64, 64))["mean_sign"] == (0.25, "sigma")
