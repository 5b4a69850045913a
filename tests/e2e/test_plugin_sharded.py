"""Sharded groups end to end: real pytest (pytester, in a subprocess), real xdist, real ranks.

`pytest suites --world-sizes ...` adds a group per (candidate, case, dtype, device, world size,
placement); each xdist worker starts its own ranks. These runs check what a user sees: the rows,
their case labels and repro lines, verdicts that do not depend on -n, W = 2 and W = 4 side by side,
and a rank that dies costing its group error rows while the report is still written.
"""

from __future__ import annotations

import textwrap

import pytest

import pandas as pd

SMALL = ("--profile", "smoke", "--samples", "4096")


def test_sharded_verdicts_do_not_depend_on_xdist_and_say_how_to_reproduce(suite):
    """W = 1 and W = 4 side by side, -n 0 against -n 2 (each worker starts its own 4 ranks)."""
    args = ("--candidate", "exact-counter", "--candidate", "local-shard", *SMALL,
            "--cases", "abs-bounds-trap", "--dtypes", "bfloat16", "--world-sizes", "1,4",
            "--placements", "shard0,replicate")
    serial_result, serial = suite(*args, "-n", "0", report="serial")
    result, parallel = suite(*args, "-n", "2", report="parallel")
    assert result.ret == 1, result.stdout.str()[-3000:]
    keys = ["candidate", "case", "dtype", "device", "check"]
    cols = keys + ["verdict", "statistic", "p_value", "n", "seed"]
    a = serial[cols].sort_values(keys).reset_index(drop=True)
    b = parallel[cols].sort_values(keys).reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b)
    assert set(parallel.worker) - {"main"}, "the -n 2 run did not use xdist workers"
    ran = parallel[parallel.verdict != "skip"]
    assert (ran.groupby(["candidate", "case", "dtype", "device"]).worker.nunique() == 1).all()

    cases = set(parallel.case)
    assert {"abs-bounds-trap", "abs-bounds-trap@w4-shard0", "abs-bounds-trap@w4-replicate"} <= cases
    sharded = parallel[parallel.case.str.contains("@")]
    assert set(sharded.world_size) == {4} and set(sharded.case_id) == {"abs-bounds-trap"}
    assert {"replicas", "shards", "sharding"} <= set(sharded.check)
    assert not {"contract", "generator"} & set(sharded.check)  # plain-tensor checks stay plain
    assert not {"replicas", "shards", "sharding"} & set(parallel[~parallel.case.str.contains("@")].check)

    good = parallel[parallel.candidate == "exact-counter"]
    assert set(good.verdict) <= {"pass", "skip"}, good[good.verdict != "pass"][["case", "check", "message"]]
    assert good[good.verdict == "skip"].message.str.startswith("not applicable").all()
    assert (good.check.isin(["replicas", "shards", "sharding", "finite", "bounds"])
            & (good.verdict == "pass")).sum() >= 5  # a run of skips would pass the line above
    bad = sharded[(sharded.candidate == "local-shard") & (sharded.check == "shards")]
    assert set(bad.verdict) == {"fail", "skip"}  # fail on shard0, not applicable on replicate
    row = bad[bad.verdict == "fail"].iloc[0]
    assert "bit-identical" in row.message
    assert "--world-sizes" in row.repro and "--placements shard0" in row.repro
    assert row.case.endswith("@w4-shard0")
    out = result.stdout.str()
    assert "sharded: world sizes 4" in out and "report written to" in out


@pytest.mark.slow  # 43 s: the finding on torch itself; the shards check's power is proved in CI
#                    by the known-bad local-shard (tests/unit/harness/test_sharded_checks.py)
def test_the_issue_command_reports_identical_shards(suite):
    """pytest suites --candidate torch --world-sizes 2 --placements shard0,shard1 (one case)."""
    result, df = suite("--candidate", "torch", "--world-sizes", "2", "--placements",
                       "shard0,shard1", *SMALL, "--cases", "normal-2sigma", "--dtypes", "bfloat16",
                       "-n", "2")
    assert result.ret == 1
    shards = df[df.check == "shards"]
    assert len(shards) == 2 and set(shards.verdict) == {"fail"}
    assert shards.message.str.contains("bit-identical at the same local index").all()
    assert "may not have complete support on cpu device mesh" in " ".join(df.details.astype(str))


def test_a_rank_that_dies_costs_its_group_error_rows_and_the_report_is_written(suite, pytester):
    pytester.makepyfile(dies=textwrap.dedent('''
        import os
        import torch
        from candidates.dtensor_samplers import exact_counter_trunc_normal_

        def fn(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
            from torch.distributed.tensor import DTensor
            if isinstance(tensor, DTensor) and tensor.device_mesh.get_coordinate()[0] == 1:
                os._exit(9)
            return exact_counter_trunc_normal_(tensor, mean, std, a, b, generator)
    '''))
    result, df = suite("--candidate", "dies.py:fn", "--candidate", "exact-counter", *SMALL,
                       "--cases", "abs-bounds-trap", "--dtypes", "bfloat16", "--world-sizes", "2",
                       "--placements", "shard0,shard1", "-n", "2")
    assert result.ret == 1
    dead = df[df.candidate == "fn"] if (df.candidate == "fn").any() else df[df.candidate.str.contains("dies")]
    assert len(dead) and set(dead.verdict) <= {"error", "skip"}, dead[["case", "check", "verdict"]]
    assert dead[dead.verdict == "error"].message.str.contains("rank 1 died \\(exit code 9\\)").all()
    good = df[df.candidate == "exact-counter"]
    from harness.checks import CHECKS

    # a row per check, two layouts; the API checks (contract, generator, threads) run on plain
    # groups only, inplace on the shape axis only
    per_group = len(CHECKS.for_kind("sharded"))
    assert set(good.verdict) <= {"pass", "skip"} and len(good) == len(dead) == 2 * per_group
    assert good[good.verdict == "skip"].message.str.startswith("not applicable").all()
    assert (good.verdict == "pass").sum() >= per_group  # not a run of skips
    assert (pytester.path / "report" / "summary.md").is_file()
