"""`pytest suites --fail-on harmful|fine|any` and the xfails line that names a mechanism, end to
end (pytester, in a subprocess).

The gate reads a row's ``level`` (and the xfails line its ``mechanism``), which
`harness.diagnosis` writes. The plumbing tests give the rows their level and mechanism with a
conftest that wraps the runners (a test double of the diagnosis: which level a check gets is not
what they test); the last tests read the real diagnosis' levels.
"""

from __future__ import annotations

import pytest

SMOKE = ("--profile", "smoke", "--samples", "4096")

#: The conftest of the plumbing tests: a failing `written` row gets the level and mechanism
#: the environment names (the saboteur selftest-skip-last fails it: it leaves elements unwritten).
RATED_CONFTEST = '''
import os

import harness.runner as runner

pytest_plugins = ["harness.plugin"]
_run = runner.CaseRunner.run


def _rated(self, check):
    result = _run(self, check)
    if result.verdict == "fail" and getattr(check, "name", check) == "written":
        result.level = os.environ.get("TEST_LEVEL", result.level)
        result.mechanism = os.environ.get("TEST_MECHANISM", result.mechanism)
    return result


runner.CaseRunner.run = _rated
'''

@pytest.fixture
def rated(suite, pytester, monkeypatch):
    pytester.makeconftest(RATED_CONFTEST)

    def run(*args, level: str | None = None, mechanism: str | None = None):
        for name, value in (("TEST_LEVEL", level), ("TEST_MECHANISM", mechanism)):
            if value is None:
                monkeypatch.delenv(name, raising=False)
            else:
                monkeypatch.setenv(name, value)
        result, df = suite("--candidate", "selftest-skip-last", *SMOKE, "--cases",
                           "normal-2sigma", "--dtypes", "float32", "-k", "test_written",
                           "-rxX", *args)
        return result, (df.set_index("check").loc["written"] if df is not None else None)

    return run


def test_a_failure_below_the_gate_is_reported_as_xfail_and_its_row_stays_fail(rated, suite):
    result, row = rated("--fail-on", "harmful", level="fine")
    out = result.stdout.str()
    assert result.ret == 0, out[-2000:]
    assert "allowed by --fail-on harmful: fine-structure" in out
    assert "--fail-on harmful: 1 failing row(s) below it allowed" in out
    assert "defects of selftest-skip-last: 1 defect: 0 harmful, 1 fine-structure, 0 api" in out
    assert (row.verdict, row.level) == ("fail", "fine")
    summary = (suite.path / "report" / "summary.md").read_text(encoding="utf-8")
    assert "Gate `--fail-on harmful`" in summary and "1 failing row(s) below it" in summary
    assert "**fine-structure**" in summary

    result, _ = rated("--fail-on", "fine", level="api")
    assert result.ret == 0 and "allowed by --fail-on fine: api" in result.stdout.str()


@pytest.mark.parametrize("fail_on, level", [("fine", "fine"), ("any", "api"),
                                            ("harmful", "harmful"), ("harmful", "undetermined"),
                                            ("harmful", "")],
                         ids=["fine-at-fine", "api-at-any", "harmful-at-harmful",
                              "undetermined-at-harmful", "unrated"])
def test_a_failure_at_or_above_the_gate_fails_the_run(rated, fail_on, level):
    result, row = rated("--fail-on", fail_on, level=level)
    assert result.ret == 1, result.stdout.str()[-2000:]
    assert "allowed by" not in result.stdout.str() and row.verdict == "fail"


def test_the_default_gate_is_any(rated):
    result, _ = rated(level="api")
    assert result.ret == 1 and "allowed by" not in result.stdout.str()


def test_an_xfails_line_may_name_a_mechanism(rated, pytester):
    xf = pytester.path / "xfails.txt"
    xf.write_text("*[selftest-skip-last-normal-2sigma-float32-*]  mechanism=exact-zeros  # zeros\n")
    result, row = rated("--xfails-file", str(xf), mechanism="exact-zeros")
    assert result.ret == 0, result.stdout.str()[-2000:]
    assert (row.verdict, row.xfail_cause) == ("xfail", "zeros")
    # The glob matches the test; a row another mechanism explains is not this line's.
    result, row = rated("--xfails-file", str(xf), mechanism="stall")
    assert result.ret == 1 and row.verdict == "fail"


def test_a_bad_xfails_line_is_one_line(suite, pytester):
    xf = pytester.path / "xfails.txt"
    xf.write_text("gof[*]  mechanism=Coarse_Uniform  # typo\n")
    result, df = suite("--candidate", "exact", *SMOKE, "--xfails-file", str(xf))
    assert result.ret == 4, result.stdout.str()[-1500:]
    err = [line for line in result.stderr.lines if line.strip()]
    assert len(err) == 1 and "line 1: mechanism 'Coarse_Uniform'" in err[0], err


def test_the_bf16_trap_of_torch_legacy_is_harmful_and_fails_at_every_gate(suite):
    result, df = suite("--candidate", "torch-legacy", *SMOKE, "--cases", "abs-bounds-trap",
                       "--dtypes", "bfloat16", "--fail-on", "harmful")
    assert result.ret == 1, result.stdout.str()[-2000:]
    failing = df[df.verdict == "fail"]
    assert len(failing) and "harmful" in set(failing.level)


def test_torch_arguments_are_api_and_pass_the_fine_gate(suite):
    # torch accepts std < 0 and NaN silently: an api failure, no distribution defect.
    args = ("--candidate", "torch", *SMOKE, "--dtypes", "float32", "-k", "test_arguments",
            "-rxX")
    result, df = suite(*args, "--fail-on", "fine")
    assert result.ret == 0, result.stdout.str()[-2000:]
    assert list(df.verdict) == ["fail"] and list(df.level) == ["api"]
    assert "allowed by --fail-on fine: api" in result.stdout.str()
    result, _ = suite(*args)
    assert result.ret == 1
