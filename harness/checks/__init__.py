"""The checks: hard ones (no statistics; any violation fails at once) and statistical ones
(two-stage, stated false-alarm rate and minimum detectable effect).

`SUMMARY_CHECKS` read one Summary; `API_CHECKS` call the candidate on small tensors of their own;
`STATISTICAL_CHECKS` map (Summary, RoundedLaw) to an Outcome and go through `harness.run.CaseRunner`.
"""

from .hard import check_arguments, check_bounds, check_contract, check_finite, check_generator, check_written

try:  # the statistical checks live in their own module
    from .statistical import CHECK_DOCS, STATISTICAL_CHECKS
except ImportError:  # pragma: no cover - only while that module is being written
    STATISTICAL_CHECKS, CHECK_DOCS = {}, {}

SUMMARY_CHECKS = ("finite", "written", "bounds")
CASE_API_CHECKS = ("contract", "generator")
CANDIDATE_API_CHECKS = ("arguments",)

__all__ = [
    "check_arguments", "check_bounds", "check_contract", "check_finite", "check_generator",
    "check_written", "STATISTICAL_CHECKS", "CHECK_DOCS", "SUMMARY_CHECKS", "CASE_API_CHECKS",
    "CANDIDATE_API_CHECKS",
]
