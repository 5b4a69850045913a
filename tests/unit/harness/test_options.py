"""Every option is validated at start-up: a bad value is one line naming the option.

`parse_options` is tested on the raw values pytest would hand it (strings, with the defaults
`add_options` registers); tests/e2e/test_plugin.py checks end to end that such a line ends the run
with exit status 4 and nothing else.
"""

from __future__ import annotations

import pytest

from harness.cases import GRID, SHARDED_CASES, SHARDED_DTYPES
from harness.session.options import OptionError
from harness.seeds import DEFAULT_RUN_SEED


def test_defaults(parse):
    opt = parse()
    assert opt.candidates == ("torch",) and opt.profile == "pr" and opt.samples is None
    assert opt.seed == DEFAULT_RUN_SEED and opt.cases == GRID and opt.devices is None
    assert opt.dtypes == ("float64", "float32", "float16", "bfloat16")
    assert opt.case_timeout == 4 and opt.alpha_suspect == 1e-3 and opt.alpha_fail == 9e-4
    assert opt.case_budget is None and opt.budget_seconds is None  # no clock decides an n


def test_the_run_defaults_are_written_once(parse):
    """The command line, the reproduce lines and harness.check take RunConfig's defaults."""
    import harness.api
    from harness.session.options import option_defaults
    from harness.runner import RunConfig

    opt, cfg = parse(), RunConfig()
    assert (opt.profile, opt.seed, opt.bounds, opt.case_timeout, opt.alpha_suspect,
            opt.alpha_fail) == (cfg.profile, cfg.run_seed, cfg.bounds, cfg.case_timeout,
                                cfg.alpha_suspect, cfg.alpha_fail)
    cli = option_defaults()
    assert set(harness.api.OPTIONS) == set(cli) - set(harness.api.NAMED)
    assert harness.api.OPTIONS["case_timeout"] == cli["case_timeout"] == str(cfg.case_timeout)


@pytest.mark.parametrize("given, says", [
    (dict(profile="weekly"), "--profile: unknown 'weekly'"),
    (dict(samples="-5"), "--samples: must be a positive integer, got '-5'"),
    (dict(samples="0"), "--samples: must be a positive integer"),
    (dict(samples="abc"), "--samples: expected an integer, got 'abc'"),
    (dict(samples="1.5"), "--samples: expected an integer"),
    (dict(seed="-1"), "--seed: must be an integer in [0, 2^63)"),
    (dict(seed="2**64"), "--seed: must be an integer in [0, 2^63)"),
    (dict(seed="x"), "--seed: expected an integer"),
    (dict(dtypes="float7"), "--dtypes: unknown float7"),
    (dict(dtypes=","), "--dtypes: empty list"),
    (dict(cases="no-such-case"), "--cases: unknown case 'no-such-case'"),
    (dict(cases=","), "--cases: empty list"),
    (dict(devices=","), "--devices: empty list"),
    (dict(bounds="loose"), "--bounds: unknown 'loose'"),
    (dict(case_timeout="-1"), "--case-timeout: must be a positive number of seconds"),
    (dict(case_timeout="0"), "--case-timeout: must be a positive number of seconds"),
    (dict(case_timeout="inf"), "--case-timeout: must be a positive number of seconds"),
    (dict(case_budget="-3"), "--case-budget: must be 0 (none) or a positive number"),
    (dict(case_budget="nan"), "--case-budget: must be 0 (none) or a positive number"),
    (dict(budget_seconds="0"), "--budget-seconds: must be a positive number of seconds"),
    (dict(alpha_fail="2"), "--alpha-fail: must be a probability strictly between 0 and 1"),
    (dict(alpha_fail="0"), "--alpha-fail: must be a probability"),
    (dict(alpha_suspect="1"), "--alpha-suspect: must be a probability"),
    (dict(alpha_suspect="p"), "--alpha-suspect: expected a number"),
    (dict(xfails_file="/missing"), "--xfails-file: '/missing' is not a file"),
    (dict(fail_on="worst"), "--fail-on: unknown 'worst'; known: any, fine, harmful"),
    (dict(fail_on="Harmful"), "--fail-on: unknown 'Harmful'"),
    (dict(partition_id="1"), "--partition-id 1: give --num-partitions too"),
    (dict(num_partitions="3"), "--num-partitions 3: give --partition-id too"),
    (dict(partition_id="3", num_partitions="3"), "--partition-id: partition index 3 is not in 0..2"),
    (dict(partition_id="x", num_partitions="3"), "--partition-id: expected an integer, got 'x'"),
    (dict(partition_id="0", num_partitions="0"),
     "--num-partitions: the partition count must be at least 1"),
    (dict(durations_from="/missing"), "--durations-from: no partition given"),
    (dict(durations_from="/missing", partition_id="0", num_partitions="2"),
     "--durations-from: '/missing' is not a directory"),
    (dict(world_sizes="0"), "--world-sizes: each must be an integer in [1, 1024] (1: unsharded), got 0"),
    (dict(world_sizes="2,x"), "--world-sizes: expected an integer, got 'x'"),
    (dict(world_sizes=","), "--world-sizes: empty list"),
    (dict(world_sizes="2.5"), "--world-sizes: expected an integer"),
    (dict(placements="shard2"), "--placements: unknown shard2; known: shard0, shard1, replicate"),
    (dict(placements=""), "--placements: empty list"),
    (dict(rank_seeds="random"), "--rank-seeds: unknown random; known: same, per-rank"),
])
def test_each_bad_value_is_one_line_naming_its_option(parse, given, says):
    with pytest.raises(OptionError) as info:
        parse(**given)
    assert says in str(info.value) and "\n" not in str(info.value)


def test_report_dir_must_not_be_a_file(parse, tmp_path):
    target = tmp_path / "a-file"
    target.write_text("")
    with pytest.raises(OptionError, match="--report-dir: .* is not a directory"):
        parse(report_dir=str(target))
    assert parse(report_dir="").report_dir == ""  # '' writes nothing
    assert parse(report_dir=str(tmp_path / "new")).report_dir == str(tmp_path / "new")


def test_a_relative_report_dir_is_fixed_before_any_candidate_runs(parse, tmp_path, monkeypatch):
    """A candidate that changes the working directory (os.chdir in its call) must not move what
    the run writes after it: the case data of its figures, the in-flight rows."""
    monkeypatch.chdir(tmp_path)
    opt = parse(report_dir="report")
    monkeypatch.chdir("/")
    assert opt.report_dir == str(tmp_path / "report")


def test_xfails_file_that_exists(parse, tmp_path):
    path = tmp_path / "xfails.txt"
    path.write_text("gof[*]  # cause\n")
    assert parse(xfails_file=str(path)).xfails_file == str(path)


@pytest.mark.parametrize("text, value", [("4194304", 4194304), ("4_194_304", 4194304),
                                         ("2**22", 4194304), ("4.2e6", 4200000)])
def test_samples_spellings(parse, text, value):
    assert parse(samples=text).samples == value


def test_budgets(parse):
    # the profile's budget applies to the profile's n only: an explicit n is drawn in full
    assert parse(samples="1000").case_budget is None
    assert parse(samples="1000", case_budget="2").case_budget == 2.0
    assert parse(case_budget="0").case_budget is None  # 0: no budget
    assert parse(profile="nightly").case_budget is None
    assert parse(budget_seconds="60").budget_seconds == 60.0


def test_partitions_from_flags_or_the_environment(parse):
    assert parse().partition is None and parse().durations is None
    opt = parse(partition_id="1", num_partitions="4")
    assert (opt.partition.id, opt.partition.count) == (1, 4)
    opt = parse(environ={"CI_NODE_INDEX": "4", "CI_NODE_TOTAL": "4"})
    assert (opt.partition.id, opt.partition.count) == (3, 4) and "1-based" in opt.partition.source
    with pytest.raises(OptionError, match=r"^CI_NODE_INDEX: partition index 5 is not in 1\.\.4"):
        parse(environ={"CI_NODE_INDEX": "5", "CI_NODE_TOTAL": "4"})


def test_sharding_options(parse):
    opt = parse()
    assert opt.world_sizes == (1,) and opt.placements == ("shard0", "shard1", "replicate")
    assert opt.rank_seeds == ("same",)
    # W > 1 draws the sharded selection unless --cases / --dtypes say otherwise
    assert [c.id for c in opt.sharded_cases] == list(SHARDED_CASES)
    assert opt.sharded_dtypes == SHARDED_DTYPES
    assert parse(profile="nightly").world_sizes == (1, 2, 4)
    opt = parse(world_sizes="4, 2,2", placements="shard1,shard0,shard1", rank_seeds="per-rank,same")
    assert opt.world_sizes == (2, 4) and opt.placements == ("shard1", "shard0")
    assert opt.rank_seeds == ("per-rank", "same")
    opt = parse(world_sizes="2", cases="tail-5", dtypes="float16")
    assert [c.id for c in opt.sharded_cases] == ["tail-5"] and opt.sharded_dtypes == ("float16",)
    assert opt.dtypes == ("float16",)


def test_a_list_option_given_twice_takes_both(parse):
    """Each occurrence of a list option arrives as one text of a list (argparse's append); the
    items of all of them count, in order, as one comma-separated text would."""
    opt = parse(dtypes=["float32", "float16,bfloat16"], cases=["tail-5", "half-normal"],
                devices=["cpu", "cuda:0"], shapes=["1", "7"], world_sizes=["2", "4"],
                placements=["shard0", "replicate"], rank_seeds=["same", "per-rank"],
                harm_thresholds=["mean=0.02", "moved@0.5=0.05"])
    assert opt.dtypes == ("float32", "float16", "bfloat16")
    assert [c.id for c in opt.cases] == ["tail-5", "half-normal"]
    assert opt.devices == ("cpu", "cuda:0") and opt.shapes == ("1", "7")
    assert opt.world_sizes == (2, 4) and opt.placements == ("shard0", "replicate")
    assert opt.rank_seeds == ("same", "per-rank")
    assert opt.harm_thresholds.mean == 0.02 and opt.harm_thresholds.moved[1] == 0.05
    with pytest.raises(OptionError, match="--dtypes: unknown float7"):
        parse(dtypes=["float32", "float7"])
    with pytest.raises(OptionError, match="--placements: empty list"):
        parse(placements=[""])


def test_a_dtype_candidate_or_device_named_twice_runs_once(parse):
    opt = parse(dtypes=["float32", "float16,float32"], candidate=["exact", "torch", "exact"],
                devices=["cpu", "cpu"])
    assert opt.dtypes == ("float32", "float16") and opt.candidates == ("exact", "torch")
    assert opt.devices == ("cpu",)


def test_typed_cases_and_dtypes_are_taken_as_given(parse):
    """`harness.check` hands its typed values on: a `Case` object (the grid's or one of the
    caller's own) is the run's case as it is, a torch dtype is named by its name."""
    import torch

    from harness.cases import Case, case_by_id

    own = Case("own-window", 0.0, 1.0, -0.5, 1.5, (64, 32))
    opt = parse(cases=[case_by_id("normal-2sigma"), own, "abs-bounds-trap"],
                dtypes=[torch.bfloat16, "float32"])
    assert opt.cases[0] is case_by_id("normal-2sigma") and opt.cases[1] is own
    assert [c.id for c in opt.cases] == ["normal-2sigma", "own-window", "abs-bounds-trap"]
    assert opt.dtypes == ("bfloat16", "float32")
    with pytest.raises(OptionError, match="--dtypes: unknown int32"):
        parse(dtypes=[torch.int32])


def test_fail_on_takes_a_level_and_defaults_to_any(parse):
    assert parse().fail_on == "any"
    assert [parse(fail_on=v).fail_on for v in ("harmful", "fine", "any")] == [
        "harmful", "fine", "any"]
