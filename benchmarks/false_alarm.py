"""The false-alarm rate of a whole run, beside the per-check one: how many statistical verdicts a
run holds (counted on its report), how many of them an exact sampler fails on average, and the
chance that it fails at least one.

A statistical check fails a sampler that writes the law exactly only if its stage-1 p-value is
below ``alpha_decide``, or below ``alpha_suspect`` and the p-value of a fresh stream, drawn for
stage 2, below ``alpha_fail``: at most alpha_decide + alpha_suspect x alpha_fail per check (1e-6
at the defaults, `harness.error_control`, docs/method/calibration.md). Over the N statistical verdicts of a run the expected number of false
fails is at most N times that, and so, by the union bound, is the chance of at least one (the
checks of one group share their draws, so their verdicts are not independent; the bound does not
need them to be).

    pytest suites -n 2 --report-dir /tmp/pr-report
    python benchmarks/false_alarm.py /tmp/pr-report

prints the count and the sentence docs/method/calibration.md states for the `pr` run of torch;
tests/docs/test_false_alarm.py holds the page's figures to `run_false_alarm`.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from harness.error_control import per_check_rate  # noqa: E402
from harness.runner import RunConfig  # noqa: E402

#: Verdicts a statistical check gives on a group it judged (a skip judged nothing; an error row
#: is the harness's or the candidate's crash, not a verdict on the values).
JUDGED = ("pass", "fail", "xfail")


def run_false_alarm(verdicts: int, alpha_suspect: float | None = None,
                    alpha_fail: float | None = None) -> dict:
    """The false-alarm figures of a run of `verdicts` statistical verdicts at the given levels (the
    run's defaults, `RunConfig`, where not given): the per-check rate, the expected number of false
    fails, and the chance of at least one (union bound)."""
    defaults = RunConfig()
    rate = per_check_rate(defaults.alpha_suspect if alpha_suspect is None else alpha_suspect,
                          defaults.alpha_fail if alpha_fail is None else alpha_fail)
    expected = verdicts * rate
    return {"verdicts": verdicts, "per_check": rate, "expected": expected,
            "at_least_one": min(1.0, expected)}


def statistical_verdicts(rows) -> int:
    """How many statistical verdicts a report's rows hold: the rows that carry a stage-2 level
    (only the two-stage checks do) and judged their group."""
    import pandas as pd

    frame = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(rows)
    if frame.empty or "alpha_fail" not in frame:
        return 0
    return int((frame["alpha_fail"].notna() & frame["verdict"].isin(JUDGED)).sum())


def sentence(verdicts: int) -> str:
    """What docs/method/calibration.md says of a `pr` run of torch holding `verdicts` verdicts."""
    f = run_false_alarm(verdicts)
    return (f"A whole `pr` run of torch holds {verdicts:,} statistical verdicts: an exact sampler "
            f"fails at most {f['expected']:.2g} of them on average, and a run fails one or more "
            f"with probability at most {f['at_least_one']:.2g}, about one run in "
            f"{round(1 / f['at_least_one'], -1):,.0f}.")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("report_dir", help="a run's report directory (pytest suites --report-dir)")
    args = parser.parse_args(argv)
    from record.store import read_results

    n = statistical_verdicts(read_results(args.report_dir))
    print(f"{n} statistical verdicts in {args.report_dir}")
    print(sentence(n))
    return 0


if __name__ == "__main__":
    sys.exit(main())
