"""`reports compare --fail-on harmful|fine|any`: a new failure below the gate's level is listed
and does not fail the gate; one at or above it does, and so does a row no diagnosis rated; a
failure that rose from below the gate to it is new at the gate; lost coverage, a partial NEW and
an unreadable report fail whatever the setting; a bad value is one line and exit 2."""

from __future__ import annotations

import pandas as pd
import pytest

from record.store import normalize
from reports.__main__ import main as cli
from reports.compare import compare

from report_rows import row

FAIL_ON = ("any", "fine", "harmful")


def _base() -> list[dict]:
    return [row(c, "float32", k) for c in ("normal-2sigma", "tail-5") for k in ("gof", "ks")]


def _new(changes: dict) -> list[dict]:
    out = []
    for r in _base():
        out.append(dict(r, **changes.get((r["case"], r["check"]), {})))
    return out


def _fail(level, mechanism="coarse-uniform") -> dict:
    return {"verdict": "fail", "message": "chi2 off", "level": level, "mechanism": mechanism,
            "repro": "pytest suites -k test_gof"}


def _compare(base, new, **kw):
    return compare(normalize(pd.DataFrame(base)), normalize(pd.DataFrame(new)), **kw)


@pytest.mark.parametrize("level, gates", [
    ("harmful", {"any": 1, "fine": 1, "harmful": 1}),
    # undetermined: its figures cannot rule harm out at this n, so every gate counts it
    ("undetermined", {"any": 1, "fine": 1, "harmful": 1}),
    ("fine", {"any": 1, "fine": 1, "harmful": 0}),
    ("api", {"any": 1, "fine": 0, "harmful": 0}),
    ("", {"any": 1, "fine": 1, "harmful": 1}),  # unrated: nothing says it is below the gate
    (None, {"any": 1, "fine": 1, "harmful": 1}),  # a report written before the levels
])
def test_a_new_failure_gates_at_its_level(level, gates):
    new = _new({("tail-5", "gof"): _fail(level)})
    if level is None:
        for r in new:
            r.pop("level", None)
            r.pop("mechanism", None)
    for fail_on in FAIL_ON:
        text, status = _compare(_base(), new, fail_on=fail_on)
        assert status == gates[fail_on], (level, fail_on, text)
        if status == 0:
            below = text.split(f"## New failures below the gate (--fail-on {fail_on}")[1]
            assert "`tail-5` float32 cpu **gof**" in below.split("\n## ")[0]
            assert "## New failures (0)" in text
            assert "1 below --fail-on" in text and "**Verdict: OK**" in text
        else:
            assert "## New failures (1)" in text


def test_the_default_is_today_behaviour():
    new = _new({("tail-5", "gof"): _fail("api")})
    text, status = _compare(_base(), new)
    assert status == 1 and "below the gate" not in text and "Gate `--fail-on" not in text
    assert "[api] (BASE passed)" in text


def test_a_failure_that_rises_to_the_gate_is_new_there():
    base = _new({("tail-5", "gof"): _fail("fine", "few-random-bits")})
    new = _new({("tail-5", "gof"): _fail("harmful")})
    assert _compare(base, new, fail_on="any")[1] == 0  # failing in both: not a regression
    text, status = _compare(base, new, fail_on="harmful")
    assert status == 1 and "(BASE failed at fine-structure)" in text
    # and one that falls below it, or stays below it, is not
    assert _compare(new, base, fail_on="harmful")[1] == 0
    assert _compare(base, base, fail_on="harmful")[1] == 0


def test_a_key_is_as_grave_as_its_gravest_failing_row():
    # Two candidates in NEW: one fails the key at api, the other at harmful.
    new = _new({("tail-5", "gof"): _fail("api")})
    new.append(dict(new[2], candidate="other", **_fail("harmful")))
    assert new[2]["case"] == "tail-5" and new[2]["check"] == "gof"
    assert _compare(_base(), new, fail_on="harmful")[1] == 1


def test_lost_coverage_and_a_partial_new_fail_whatever_the_gate():
    new = [r for r in _base() if r["case"] != "tail-5"]
    for fail_on in FAIL_ON:
        assert _compare(_base(), new, fail_on=fail_on)[1] == 1
        text, status = _compare(_base(), _base(), fail_on=fail_on, new_partial="cut short")
        assert status == 1 and "NEW is partial" in text


def test_an_unknown_gate_is_refused():
    with pytest.raises(ValueError, match="fail_on: unknown 'worst'"):
        _compare(_base(), _base(), fail_on="worst")


def _dir(tmp_path, name, rows) -> str:
    from reports.render import write_run

    d = tmp_path / name
    write_run(rows, str(d))
    return str(d)


def test_the_command_line(tmp_path, capsys):
    base = _dir(tmp_path, "base", _base())
    new = _dir(tmp_path, "new", _new({("tail-5", "gof"): _fail("fine")}))
    assert cli(["compare", base, new]) == 1
    assert cli(["compare", base, new, "--fail-on", "fine"]) == 1
    assert cli(["compare", base, new, "--fail-on", "harmful"]) == 0
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        cli(["compare", base, new, "--fail-on", "worst"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--fail-on: invalid choice: 'worst'" in err and "Traceback" not in err
    # An untrusted report is exit 2 at any gate.
    (tmp_path / "new" / "results.parquet").write_bytes(b"garbage")
    assert cli(["compare", base, new, "--fail-on", "harmful"]) == 2
