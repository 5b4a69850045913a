"""The conformance tests: one per check of `harness.checks.CHECKS`, each run on every group its
scope names: every (candidate, case, dtype, device) of the run, its shape-axis and path groups,
and every sharded group (candidate, case, dtype, device, world size, placement) of a run with
--world-sizes; `arguments` once per (candidate, dtype, device).

The checks are declared in `harness/checks/`; this module only names them for pytest. Run with
`pytest suites --candidate SPEC` (see README.md for the options).
"""

from harness.plugin import conformance_tests

globals().update(conformance_tests())
