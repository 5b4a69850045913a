"""Grid partitions end to end: which partition a process is (flags and each CI's variables), how
the grid's groups are assigned, and a 3-partition run on this machine as three real pytest processes whose
merged report equals the unsharded run's, bit for bit.

The assignment and the shard resolution are pure functions, tested directly; the rest runs real
pytest processes (smoke n, two cases, two dtypes, two candidates: 12 groups) and the real
`python -m reports merge` on the parquet they write.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from harness.fleet.partition import (COUNT_VARIABLE, COUNT_VARIABLE_ALIAS, PARTITION_VARIABLES,
                                     PartitionError, PartitionSpec, assign, load_durations, plan,
                                     resolve_partition, stable_hash)
from record.store import VOLATILE, file_digest, read_results, write_tables
from reports.__main__ import main as cli

ROOT = Path(__file__).resolve().parents[2]


# ------------------------------------------------------------------------------------------------
# Which partition: flags, then each CI system's variables


@pytest.mark.parametrize("environ, expected", [
    ({"JOB_COMPLETION_INDEX": "2", COUNT_VARIABLE: "4"}, (2, 4)),
    ({"JOB_COMPLETION_INDEX": "2", COUNT_VARIABLE_ALIAS: "4"}, (2, 4)),  # the former name
    ({"BUILDKITE_PARALLEL_JOB": "0", "BUILDKITE_PARALLEL_JOB_COUNT": "3"}, (0, 3)),
    ({"CIRCLE_NODE_INDEX": "4", "CIRCLE_NODE_TOTAL": "5"}, (4, 5)),
    ({"CI_NODE_INDEX": "1", "CI_NODE_TOTAL": "3"}, (0, 3)),  # GitLab: 1-based
    ({"CI_NODE_INDEX": "3", "CI_NODE_TOTAL": "3"}, (2, 3)),
    # two systems that agree (an Indexed Job inside a CI, say)
    ({"CIRCLE_NODE_INDEX": "1", "CIRCLE_NODE_TOTAL": "2", "CI_NODE_INDEX": "2",
      "CI_NODE_TOTAL": "2"}, (1, 2)),
])
def test_each_ci_system_is_detected(environ, expected):
    spec = resolve_partition(environ=environ)
    assert (spec.id, spec.count) == expected
    assert next(iter(environ)) in spec.source


@pytest.mark.parametrize("environ", [
    {},
    {"CIRCLE_NODE_INDEX": "0", "CIRCLE_NODE_TOTAL": "1"},  # CircleCI without parallelism
    {"CI_NODE_TOTAL": "1"},  # GitLab without `parallel:`
    {"UNRELATED": "1"},
])
def test_no_partition_without_a_split(environ):
    assert resolve_partition(environ=environ) is None


def test_flags_win_and_the_count_alone_takes_a_kubernetes_index():
    env = {"CI_NODE_INDEX": "2", "CI_NODE_TOTAL": "2", "JOB_COMPLETION_INDEX": "3"}
    assert resolve_partition("0", "1", env) == PartitionSpec(0, 1, "--partition-id/--num-partitions")
    spec = resolve_partition(None, "5", env)
    assert (spec.id, spec.count) == (3, 5) and "JOB_COMPLETION_INDEX" in spec.source


@pytest.mark.parametrize("flags, environ, says", [
    (("1", None), {}, "--partition-id 1: give --num-partitions too"),
    ((None, "4"), {}, "--num-partitions 4: give --partition-id too"),
    (("4", "4"), {}, "--partition-id: partition index 4 is not in 0..3"),
    (("-1", "4"), {}, "--partition-id: partition index -1 is not in 0..3"),
    (("0", "0"), {}, "--num-partitions: the partition count must be at least 1"),
    (("one", "4"), {}, "--partition-id: expected an integer, got 'one'"),
    ((None, None), {"JOB_COMPLETION_INDEX": "1"}, "JOB_COMPLETION_INDEX=1 is set but the partition count"),
    ((None, None), {COUNT_VARIABLE: "4"}, f"{COUNT_VARIABLE}=4 is set but JOB_COMPLETION_INDEX is not"),
    ((None, None), {"JOB_COMPLETION_INDEX": "4", COUNT_VARIABLE: "4"},
     "JOB_COMPLETION_INDEX: partition index 4 is not in 0..3"),
    ((None, None), {"BUILDKITE_PARALLEL_JOB": "1"}, "BUILDKITE_PARALLEL_JOB=1 is set but the partition count"),
    ((None, None), {"BUILDKITE_PARALLEL_JOB_COUNT": "4"}, "BUILDKITE_PARALLEL_JOB is not"),
    ((None, None), {"CIRCLE_NODE_INDEX": "2"}, "CIRCLE_NODE_INDEX=2 is set but the partition count"),
    ((None, None), {"CIRCLE_NODE_INDEX": "2", "CIRCLE_NODE_TOTAL": "2"},
     "CIRCLE_NODE_INDEX: partition index 2 is not in 0..1"),
    ((None, None), {"CI_NODE_INDEX": "0", "CI_NODE_TOTAL": "3"},
     "CI_NODE_INDEX: partition index 0 is not in 1..3 (1-based"),
    ((None, None), {"CI_NODE_TOTAL": "3"}, "CI_NODE_TOTAL=3 is set but CI_NODE_INDEX is not"),
    ((None, None), {"CI_NODE_INDEX": "x", "CI_NODE_TOTAL": "3"}, "CI_NODE_INDEX: expected an integer"),
    ((None, None), {"CIRCLE_NODE_INDEX": "0", "CIRCLE_NODE_TOTAL": "2", "CI_NODE_INDEX": "2",
                    "CI_NODE_TOTAL": "2"}, "conflicting partition variables"),
])
def test_half_a_pair_or_an_index_out_of_range_is_one_line(flags, environ, says):
    with pytest.raises(PartitionError) as info:
        resolve_partition(*flags, environ)
    assert says in str(info.value) and "\n" not in str(info.value)


# ------------------------------------------------------------------------------------------------
# Assignment


GROUPS = [f"torch-case{i}-{d}-cpu" for i in range(14) for d in ("float64", "float32", "bfloat16")]


def test_every_group_on_exactly_one_shard_whatever_the_order():
    a, _ = assign(GROUPS, 4)
    b, _ = assign(list(reversed(GROUPS)) + GROUPS[:5], 4)
    assert a == b and set(a) == set(GROUPS)
    sizes = sorted(list(a.values()).count(k) for k in range(4))
    assert sizes[-1] - sizes[0] <= 1  # equal weights: dealt out round-robin in hash order
    order = sorted(GROUPS, key=stable_hash)
    assert [a[g] for g in order[:8]] == [0, 1, 2, 3, 0, 1, 2, 3]


def test_the_hash_is_stable_across_processes_and_python_versions():
    # BLAKE2b of the key: a constant, unlike Python's salted hash()
    assert stable_hash("exact-normal-2sigma-float32-cpu") == 0x455c1c31acf99d73
    code = ("from harness.fleet.partition import assign; import json; "
            f"print(json.dumps(assign({GROUPS!r}, 3)[0], sort_keys=True))")
    outs = {subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                           env=dict(os.environ, PYTHONHASHSEED=seed), check=True).stdout
            for seed in ("1", "2")}
    assert len(outs) == 1


def test_durations_balance_the_shards_longest_first():
    durations = {"big": 10.0, "mid-a": 6.0, "mid-b": 5.0, "small-a": 4.0, "small-b": 3.0}
    a, w = assign(list(durations) + ["unknown"], 2, durations)
    assert w["unknown"] == 5000  # the median of the known durations
    loads = [sum(w[g] for g in a if a[g] == k) for k in range(2)]
    # LPT: big(10) -> 0; mid-a(6) -> 1; mid-b and unknown (5 each) -> 1, 0; small-a(4) -> 1;
    # small-b(3) -> 0 on the tie (15 each): 18 vs 15, where 17 vs 16 is best (LPT is within 4/3)
    assert sorted(loads) == [15000, 18000] and a["big"] != a["mid-a"]
    p = plan(PartitionSpec(1, 2, "test"), list(durations) + ["unknown"], durations, "prev")
    assert p.method == "durations" and p.known == 5 and "durations in prev" in p.describe()
    assert set(p.groups) == {g for g in a if a[g] == 1}


def test_durations_come_from_an_earlier_report(tmp_path):
    from reports.render import write_run

    rows = [{"candidate": "c", "case": case, "dtype": "float32", "device": "cpu", "check": check,
             "verdict": "pass", "group": f"c-{case}-float32-cpu", "candidate_s": cs, "harness_s": 0.5}
            for case, cs in (("a", 1.0), ("b", 3.0)) for check in ("gof", "ks")]
    write_run(rows, str(tmp_path / "prev"))
    assert load_durations(str(tmp_path / "prev")) == {"c-a-float32-cpu": 3.0, "c-b-float32-cpu": 7.0}
    with pytest.raises(PartitionError, match="--durations-from: .*missing"):
        load_durations(str(tmp_path / "missing"))


# ------------------------------------------------------------------------------------------------
# Real processes: three shards, merged, equal the unsharded run


ARGS = ("--candidate", "exact", "--candidate", "clamp", "--profile", "smoke", "--samples", "4096",
        "--cases", "normal-2sigma,abs-bounds-trap", "--dtypes", "float32,bfloat16")
ROW_COLUMNS = ["verdict", "statistic", "p_value", "n", "seed"]


def _env(**shard_vars) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in PARTITION_VARIABLES}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env | shard_vars


def _pytest(report: Path, *args, env=None) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "pytest", "suites", *ARGS, "-p", "no:cacheprovider",
           "--report-dir", str(report), *args]
    return subprocess.Popen(cmd, cwd=ROOT, env=env or _env(), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def _finish(proc: subprocess.Popen) -> tuple[int, str]:
    out, _ = proc.communicate(timeout=600)
    return proc.returncode, out


#: The tests of the 3-shard run share one run: under `pytest tests -n 2` the harness's scheduler
#: keeps tests with one parametrization id on one worker (harness.fleet.group_ledger), so the module-scoped
#: run below is made once, not once per worker.
same_run = pytest.mark.parametrize("run", ["three-shard-run"])


@pytest.fixture(scope="module")
def sharded_run(tmp_path_factory):
    """The unsharded run, then three shards of it at once: shard 0 by flags, shard 1 by GitLab's
    1-based variables, shard 2 by flags under xdist; all three balanced by the unsharded run's
    durations."""
    base = tmp_path_factory.mktemp("partition")
    rc, out = _finish(_pytest(base / "full"))
    assert rc == 1, out[-3000:]  # clamp fails
    balance = ("--durations-from", str(base / "full"))
    # partition 2 is named with the options' former names, which stay aliases
    procs = [_pytest(base / "shard-0", "--partition-id", "0", "--num-partitions", "3", *balance),
             _pytest(base / "shard-1", *balance, env=_env(CI_NODE_INDEX="2", CI_NODE_TOTAL="3")),
             _pytest(base / "shard-2", "--shard-id", "2", "--num-shards", "3", "-n", "2", *balance)]
    results = [_finish(p) for p in procs]
    for rc, out in results:
        assert rc in (0, 1), out[-3000:]
    return base, [out for _, out in results]


def _rows(df: pd.DataFrame) -> pd.DataFrame:
    keys = ["candidate", "case", "dtype", "device", "check"]
    return df.sort_values(keys)[keys + ROW_COLUMNS].reset_index(drop=True)


@same_run
def test_three_shards_merged_equal_the_unsharded_run(run, sharded_run, capsys):
    base, outs = sharded_run
    manifests = [json.loads((base / f"shard-{k}" / "manifest.json").read_text()) for k in range(3)]
    assert [m["shard"]["id"] for m in manifests] == [0, 1, 2]
    assert "CI_NODE_INDEX/CI_NODE_TOTAL (1-based)" in manifests[1]["shard"]["source"]
    assert "harness: partition 1 of 3 (from CI_NODE_INDEX/CI_NODE_TOTAL (1-based))" in outs[1]
    assert all(m["partition"]["method"] == "durations" and m["partition"]["known"] == 12
               for m in manifests)
    # The other shards' tests are deselected, not skipped: the shards' skips are the unsharded
    # run's (checks a law makes not applicable, e.g. collisions in 16-bit), none more.
    skips = [int((read_results(str(base / d)).verdict == "skip").sum())
             for d in ("full", "shard-0", "shard-1", "shard-2")]
    assert skips[0] == sum(skips[1:]), skips
    assert "82 deselected" in outs[1] or "deselected" in outs[1]
    groups = [set(m["groups"]) for m in manifests]
    assert not (groups[0] & groups[1] or groups[0] & groups[2] or groups[1] & groups[2])
    assert set.union(*groups) == set(manifests[0]["assignment"]) and len(manifests[0]["assignment"]) == 12
    assert manifests[2]["tests"] and all(n > 0 for n in manifests[2]["tests"].values())  # xdist
    for m in manifests:
        assert m["git"]["sha"] and m["host"] and m["torch"] and m["finished_ts"] >= m["started_ts"]

    capsys.readouterr()
    out = str(base / "merged")
    assert cli(["merge", *(str(base / f"shard-{k}") for k in range(3)), "--out", out]) == 0
    assert "complete: 3 of 3 partition(s), 12 of 12 group(s) run" in capsys.readouterr().out
    full, merged = read_results(str(base / "full")), read_results(out)
    pd.testing.assert_frame_equal(_rows(full), _rows(merged))
    # ... and every other column that does not say when, where or how fast
    same = [c for c in full.columns if c not in VOLATILE]
    pd.testing.assert_frame_equal(full[same], merged[same])
    assert json.loads((base / "merged" / "manifest.json").read_text())["coverage"]["complete"]


@same_run
def test_a_missing_shard_is_named_and_exits_1(run, sharded_run, tmp_path, capsys):
    base, _ = sharded_run
    # shard 1's directory is gone; a shard that died left only case data behind
    dead = tmp_path / "died" / "case-data"
    dead.mkdir(parents=True)
    dirs = [str(base / "shard-0"), str(base / "shard-2"), str(dead.parent)]
    capsys.readouterr()
    assert cli(["merge", *dirs, "--out", str(tmp_path / "m")]) == 1
    err = capsys.readouterr().err
    assert "holds no report (a partition that did not finish?): ignored" in err
    shard1 = json.loads((base / "shard-1" / "manifest.json").read_text())["groups"]
    assert "partition 1 of 3 is missing" in err and all(g in err for g in shard1)
    assert f"INCOMPLETE: 2 of 3 partition(s), {12 - len(shard1)} of 12 group(s) run" in err
    assert "Traceback" not in err
    # the report is still written, and says what is missing
    assert "⚠ partition 1 of 3 is missing" in (tmp_path / "m" / "summary.md").read_text()
    assert cli(["merge", *dirs, "--out", str(tmp_path / "p"), "--allow-partial"]) == 0
    assert json.loads((tmp_path / "p" / "manifest.json").read_text())["coverage"]["missing_partitions"] == [1]


@same_run
def test_a_retried_shard_keeps_its_latest_attempt(run, sharded_run, tmp_path, capsys):
    base, _ = sharded_run
    # An earlier attempt of shard 0 that ended before the kept one, with a row that differs.
    old = tmp_path / "shard-0-attempt-1"
    shutil.copytree(base / "shard-0", old)
    manifest = json.loads((old / "manifest.json").read_text())
    manifest["finished_ts"] -= 3600
    (old / "manifest.json").write_text(json.dumps(manifest))
    df = read_results(str(old))
    df.loc[0, "verdict"] = "error"
    write_tables(df, str(old))  # as that attempt wrote them: both tables, their checksums
    manifest["files"] = {name: file_digest(str(old / name)) for name in ("results.parquet", "results.csv")}
    (old / "manifest.json").write_text(json.dumps(manifest))
    dirs = [str(old)] + [str(base / f"shard-{k}") for k in range(3)]
    capsys.readouterr()
    assert cli(["merge", *dirs, "--out", str(tmp_path / "m")]) == 0
    assert "1 earlier attempt(s) dropped" in capsys.readouterr().out
    pd.testing.assert_frame_equal(_rows(read_results(str(base / "full"))),
                                  _rows(read_results(str(tmp_path / "m"))))


@same_run
def test_shards_split_otherwise_or_overlapping_are_refused(run, sharded_run, tmp_path, capsys):
    base, _ = sharded_run
    # shard 1 split the grid otherwise (other durations, say): one group on another shard
    other = tmp_path / "shard-1-other-split"
    shutil.copytree(base / "shard-1", other)
    m = json.loads((other / "manifest.json").read_text())
    group = sorted(m["assignment"])[0]
    m["assignment"][group] = (m["assignment"][group] + 1) % 3
    (other / "manifest.json").write_text(json.dumps(m))
    capsys.readouterr()
    dirs = [str(base / "shard-0"), str(other), str(base / "shard-2")]
    assert cli(["merge", *dirs, "--out", str(tmp_path / "m")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "split differently: 1 group(s) are assigned to other partitions" in err[0]
    assert group in err[0]
    # shard 0's report presented as shard 2 as well: its groups run twice, shard 2's not at all
    twin = tmp_path / "shard-0-as-2"
    shutil.copytree(base / "shard-0", twin)
    m = json.loads((twin / "manifest.json").read_text())
    m["shard"]["id"] = 2
    (twin / "manifest.json").write_text(json.dumps(m))
    assert cli(["merge", str(base / "shard-0"), str(base / "shard-1"), str(twin), "--out",
                str(tmp_path / "o"), "--allow-partial"]) == 1
    assert "overlap: group" in capsys.readouterr().err
    # a shard mixed with a report that is no shard
    plain = tmp_path / "plain"
    shutil.copytree(base / "full", plain)
    assert cli(["merge", str(plain), str(base / "shard-0"), "--out", str(tmp_path / "x")]) == 2
    assert "is not a grid partition" in capsys.readouterr().err


@same_run
def test_shards_graded_at_other_harm_thresholds_are_refused(run, sharded_run, tmp_path, capsys):
    """Every shard records the thresholds its levels were graded at with its other options; a
    shard run with other thresholds (here: its manifest as such a run writes it) does not merge."""
    from harness.diagnosis import DEFAULT_THRESHOLDS

    base, _ = sharded_run
    for k in range(3):
        config = json.loads((base / f"shard-{k}" / "manifest.json").read_text())["config"]
        assert config["harm_thresholds"] == DEFAULT_THRESHOLDS.as_dict()
    other = tmp_path / "shard-1-other-thresholds"
    shutil.copytree(base / "shard-1", other)
    m = json.loads((other / "manifest.json").read_text())
    m["config"]["harm_thresholds"]["moved@0.5"] = 0.05
    (other / "manifest.json").write_text(json.dumps(m))
    capsys.readouterr()
    dirs = [str(base / "shard-0"), str(other), str(base / "shard-2")]
    assert cli(["merge", *dirs, "--out", str(tmp_path / "m")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "ran other options: harm_thresholds moved@0.5 0.03 vs 0.05" in err[0], err
    assert str(other) in err[0] and "Traceback" not in err[0]
    assert not (tmp_path / "m" / "results.parquet").exists()


def test_a_shard_with_nothing_to_run_succeeds_with_an_empty_report(tmp_path):
    # 2 groups (one case, one API group) on 3 shards: one shard is empty.
    args = ("--cases", "normal-2sigma", "--dtypes", "float32", "--candidate", "exact")
    empty = next(k for k in range(3) if k not in assign(["exact-normal-2sigma-float32-cpu",
                                                          "exact-float32-cpu"], 3)[0].values())
    cmd = [sys.executable, "-m", "pytest", "suites", *ARGS[4:8], *args, "-p", "no:cacheprovider",
           "-q", "--report-dir", str(tmp_path / "r"), "--shard-id", str(empty), "--num-shards", "3"]
    p = subprocess.run(cmd, cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    m = json.loads((tmp_path / "r" / "manifest.json").read_text())
    assert m["groups"] == [] and m["shard"]["id"] == empty
    assert len(read_results(str(tmp_path / "r"), allow_empty=True)) == 0


def test_a_ci_variable_without_its_pair_exits_4_before_running_anything(tmp_path):
    cmd = [sys.executable, "-m", "pytest", "suites", "--candidate", "exact", "-p", "no:cacheprovider",
           "--report-dir", str(tmp_path / "r")]
    p = subprocess.run(cmd, cwd=ROOT, env=_env(BUILDKITE_PARALLEL_JOB="1"), capture_output=True,
                       text=True, timeout=300)
    err = [line for line in p.stderr.splitlines() if line.strip()]
    assert p.returncode == 4 and len(err) == 1, p.stderr
    assert "BUILDKITE_PARALLEL_JOB=1 is set but the partition count is not (Buildkite)" in err[0]
    assert not (tmp_path / "r").exists()
