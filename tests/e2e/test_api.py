"""`harness.check` gives the rows of `pytest suites` with the same options, bit for bit, and
`harness.law` the exact law; both without pytest's collection."""

from __future__ import annotations

import math

import pandas as pd
import pytest

import harness
from record.store import VOLATILE, read_results

ARGS = dict(cases=["normal-2sigma", "abs-bounds-trap", "tail-5"], dtypes=["float32", "bfloat16"],
            profile="smoke", samples=4096)
CLI = ("--profile", "smoke", "--samples", "4096", "--cases", "normal-2sigma,abs-bounds-trap,tail-5",
       "--dtypes", "float32,bfloat16")
KEYS = ["candidate", "case", "dtype", "device", "check"]


def _comparable(df: pd.DataFrame) -> pd.DataFrame:
    cols = [c for c in df.columns if c not in VOLATILE]
    return df[cols].sort_values(KEYS).reset_index(drop=True)


def test_check_gives_the_rows_of_pytest_suites(suite, tmp_path):
    """exact passes, clamp fails, jax (not installed here, or installed) skips or runs: every
    non-volatile column equal, verdict, statistic, p-values, n, seeds and messages included."""
    result, _ = suite("--candidate", "exact", "--candidate", "clamp", *CLI, "-n", "2")
    assert result.ret == 1, result.stdout.str()[-3000:]
    cli = read_results(str(suite.path / "report"))
    df = harness.check(["exact", "clamp"], progress=False, report_dir=str(tmp_path / "api"), **ARGS)
    api = read_results(str(tmp_path / "api"))
    assert len(api) == len(cli) == len(df) > 60
    assert set(api.verdict) >= {"pass", "fail"}  # not a run of skips
    pd.testing.assert_frame_equal(_comparable(api), _comparable(cli))
    # The DataFrame returned is the table written.
    assert _comparable(df).shape == _comparable(api).shape
    assert (df.verdict.sort_values().values == api.verdict.sort_values().values).all()


def test_check_takes_a_function_and_names_bad_options():
    def my_sampler(tensor, mean, std, a, b, generator=None):
        return tensor.uniform_(max(a, -1.0), min(b, 1.0), generator=generator)

    df = harness.check(my_sampler, cases=["normal-2sigma"], dtypes=["float32"], profile="smoke",
                       samples=4096, progress=False)
    assert set(df.candidate) == {"my_sampler"}
    assert (df.verdict == "fail").any() and (df.verdict == "pass").any()
    with pytest.raises(harness.api.OptionError, match="--samples"):
        harness.check("exact", samples=-5, progress=False)
    with pytest.raises(TypeError, match="no_such_option"):
        harness.check("exact", no_such_option=1, progress=False)


def test_law_is_the_rounded_law():
    law = harness.law("vit-pos-embed", "bfloat16")
    assert law.rn_a == -0.0400390625
    assert math.isclose(law.atom_a, 2.35741885045318e-04, rel_tol=1e-9)
    assert math.isclose(float(law.probs.sum()), 1.0, rel_tol=1e-12)
