"""The conformance tests and the bridge from a check's outcome to a pytest outcome.

`conformance_tests` makes one pytest test per check of `harness.checks.CHECKS` (what
``suites/test_conformance.py`` defines); each calls the ``verify`` fixture (`grid.GridPlugin`),
a `Verifier`: it runs the check through the run's `HarnessSession`, puts the row on the test's
report (the controller records it, `controller.ControllerPlugin`) and passes, skips, xfails or
fails the test as the row's verdict says.
"""

from __future__ import annotations

import os

import pytest

from record.store import case_data_path
from reference.dtypes import dtype_name
from reports.case_data import save_case_data

from ..checks import CHECKS
from ..figure_data import figure_data
from ..session.run_plan import HarnessSession
from ..session.rows import ROW_KEY


def conformance_tests() -> dict:
    """``test_<name>`` -> the pytest test of each check of `harness.checks.CHECKS`, in its order:
    what ``suites/test_conformance.py`` defines. A case-group check takes the ``conformance_case``
    parameter, a candidate-scope one ``api_case``; the test's docstring is the check's doc."""
    return {check.test_name: _conformance_test(check) for check in CHECKS}


def _conformance_test(check):
    if check.applies_to("candidate"):
        def test(verify, api_case):
            verify(check.name, api_case)
    else:
        def test(verify, conformance_case):
            verify(check.name, conformance_case)
    test.__name__ = test.__qualname__ = check.test_name
    test.__doc__ = check.doc
    return pytest.mark.harness_check(check.name)(test)


class Verifier:
    """verify(check_name, param): run one check and turn its verdict into the test's outcome."""

    def __init__(self, session: HarnessSession, request):
        self.s = session
        self.request = request

    def __call__(self, check: str, param) -> None:
        out = self.s.run_check(check, param, os.environ.get("PYTEST_XDIST_WORKER", "main"),
                               on_failure=self._save_case_data)
        self.request.node.user_properties.append((ROW_KEY, out.row))
        if out.verdict == "pass":
            return
        if out.verdict == "skip":
            pytest.skip(out.text)
        if out.xfail is not None:
            pytest.xfail(f"known: {out.xfail.cause} -- {out.text}")
        if out.allowed is not None:  # below --fail-on: the row's verdict stays fail
            pytest.xfail(f"{out.allowed} -- {out.text}")
        if out.verdict == "error":
            pytest.fail(f"HARNESS ERROR {out.text}\n  reproduce: {out.repro}", pytrace=False)
        pytest.fail(f"{out.text}\n  reproduce: {out.repro}", pytrace=False)

    def _save_case_data(self, param, runner) -> None:
        """Keep the failing case's histogram for the report's figure (never changes a verdict)."""
        s = self.s
        key = (param.candidate.name, param.case_label, dtype_name(param.dtype), param.device)
        if not s.report.report_dir or key in s.saved_case_data:
            return
        summary = next((runner.cached_summary(st) for st in (2, 1)
                        if runner.cached_summary(st) is not None), None)
        if summary is None:
            return
        s.saved_case_data.add(key)
        try:
            save_case_data(case_data_path(s.report.report_dir, *key),
                           figure_data(summary, runner.law), meta={"candidate": key[0], "case": key[1], "device": key[3]})
        except Exception as exc:  # a figure problem must not change a verdict
            runner.warnings.append(f"case data not saved: {type(exc).__name__}: {exc}")
