"""The plugin end to end: real pytest (pytester, in a subprocess), real xdist, real candidates.

Each test runs the suites in a scratch directory against built-in candidates, including the
self-test saboteurs, and reads the results.csv the run leaves behind.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pandas as pd
import pytest

from harness.engine import is_budget_stop

ROOT = Path(__file__).resolve().parents[2]

SMOKE = ("--profile", "smoke", "--samples", "4096")


def test_unknown_candidate_is_a_one_line_usage_error(suite):
    result, df = suite("--candidate", "no_such_module:fn")
    assert result.ret == 4
    err = result.stderr.str()
    assert "no_such_module" in err
    assert "Traceback" not in err and "Traceback" not in result.stdout.str()
    assert df is None


def test_unknown_case_and_dtype_are_usage_errors(suite):
    result, _ = suite("--candidate", "exact", "--cases", "no-such-case")
    assert result.ret == 4 and "no-such-case" in result.stderr.str()
    result, _ = suite("--candidate", "exact", "--dtypes", "float7")
    assert result.ret == 4 and "float7" in result.stderr.str()


def test_exact_passes_and_csv_has_the_columns(suite):
    result, df = suite("--candidate", "exact", *SMOKE, "--cases", "normal-2sigma,tail-5",
                       "--dtypes", "float32,bfloat16")
    assert result.ret == 0, result.stdout.str()[-3000:]
    for col in ("candidate", "case", "dtype", "device", "check", "n", "statistic", "p_value",
                "verdict", "message", "seed", "candidate_s", "harness_s"):
        assert col in df.columns
    assert set(df.verdict) <= {"pass", "skip"}
    hard = {"finite", "written", "bounds", "hang", "contract", "generator", "arguments"}
    assert hard <= set(df.check)
    assert (df[df.check.isin(hard)].verdict == "pass").all()  # never all skipped
    skips = df[df.verdict == "skip"]  # only statistics the law makes meaningless
    assert skips.message.str.startswith("not applicable").all(), skips[["case", "check", "message"]]
    # throughput next to torch's normal_ on the same tensor, on every row of a case
    cases = df[df.case != "api"]
    for col in ("samples_per_s", "normal_samples_per_s", "speed_vs_normal", "n_target",
                "budget_limited", "group"):
        assert col in df.columns
    assert (cases.samples_per_s > 0).all() and (cases.normal_samples_per_s > 0).all()
    assert (cases.n_target == 4096).all() and not cases.budget_limited.any()
    out = result.stdout.str()
    assert "harness: candidates exact" in out and "report written to" in out


def test_verdicts_do_not_depend_on_xdist(suite):
    # cuda:0 cases are skipped without a GPU, yet scheduled: the device-aware scheduler routes
    # them next to the CPU cases in a real xdist run
    args = ("--candidate", "exact", "--candidate", "clamp", *SMOKE, "--cases",
            "normal-2sigma,abs-bounds-trap", "--dtypes", "bfloat16,float32",
            "--devices", "cpu,cuda:0")
    _, serial = suite(*args, "-n", "0", report="serial")
    result, parallel = suite(*args, "-n", "2", "-v", report="parallel")
    assert "scheduling tests via DeviceGroupScheduling" in result.stdout.str()
    keys = ["candidate", "case", "dtype", "device", "check"]
    cols = keys + ["verdict", "statistic", "p_value", "n", "seed"]
    a = serial[cols].sort_values(keys).reset_index(drop=True)
    b = parallel[cols].sort_values(keys).reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b)
    assert set(parallel.worker) - {"main"}, "the -n 2 run did not use xdist workers"
    # Every check of one (candidate, case, dtype, device) ran on one worker (one shared draw).
    # (Skipped cases have no worker: their rows come from the controller.)
    ran = parallel[parallel.verdict != "skip"]
    assert (ran.groupby(["candidate", "case", "dtype", "device"]).worker.nunique() == 1).all()


def test_hang_becomes_a_fail_row_and_the_run_goes_on(suite):
    result, df = suite("--candidate", "selftest-infinite-loop", *SMOKE, "--cases",
                       "normal-2sigma", "--dtypes", "float32", "--case-timeout", "1")
    assert result.ret == 1
    hang = df[df.check == "hang"].iloc[0]
    # the first call's deadline: 3x the case timeout (harness.engine.deadline.Pace)
    assert hang.verdict == "fail" and "call 1 did not return within 3 s" in hang.message
    assert "normal-2sigma" in hang.message
    assert (df.verdict != "pass").all()
    # the API checks of a case whose draw hangs fail at once, naming the hang: no probe waits
    # out another deadline
    for check in ("contract", "generator", "threads"):
        row = df[df.check == check].iloc[0]
        assert row.verdict == "fail" and "does not return on normal-2sigma" in row.message, row.message
        assert f"{check} needs calls that return" in row.message
        assert row.candidate_s + row.harness_s < 1


def test_rejection_loop_hangs_on_the_deep_tail_only(suite):
    result, df = suite("--candidate", "rejection-loop", *SMOKE, "--cases",
                       "normal-2sigma,deep-window-10-1000", "--dtypes", "float32",
                       "--case-timeout", "2", "-k", "hang or bounds")
    assert result.ret == 1
    hang = df[df.check == "hang"].set_index("case").verdict
    assert hang["deep-window-10-1000"] == "fail"
    assert hang["normal-2sigma"] == "pass"


@pytest.mark.parametrize("saboteur, check", [
    ("selftest-skip-last", "written"),
    ("selftest-nan-on-bad-args", "arguments"),
    ("selftest-contiguous-copy", "contract"),
    ("selftest-ignores-generator", "generator"),
])
def test_each_saboteur_fails_its_check(suite, saboteur, check):
    result, df = suite("--candidate", saboteur, *SMOKE, "--cases", "normal-2sigma",
                       "--dtypes", "float32", "-k", f"test_{check}")
    assert result.ret == 1, result.stdout.str()[-2000:]
    row = df[df.check == check].iloc[0]
    assert row.verdict == "fail", row.message
    assert "reproduce: pytest suites --candidate " + saboteur in result.stdout.str()


def test_candidate_that_raises_gets_fail_rows_not_a_traceback(suite):
    result, df = suite("--candidate", "selftest-raises", *SMOKE, "--cases", "normal-2sigma",
                       "--dtypes", "float32")
    assert result.ret == 1
    # It returns at once (no hang); everything else fails, `arguments` too: raising on a valid
    # call as well, it refuses nothing in particular.
    assert set(df[df.verdict != "fail"].check) <= {"hang"}
    assert "a valid call (mean 0, std 1 on [-2, 2]) raised RuntimeError" in \
        df[df.check == "arguments"].message.iloc[0]
    assert df[df.check == "finite"].message.iloc[0].startswith("candidate raised")
    assert "Traceback" not in result.stdout.str()


def test_xfails_file_marks_known_failures_and_warns_on_stale_lines(suite, pytester):
    xf = pytester.path / "xfails.txt"
    xf.write_text("written[selftest-skip-last-*]  # leaves the last elements unwritten\n"
                  "bounds[nothing-matches-this]  # stale\n")
    result, df = suite("--candidate", "selftest-skip-last", *SMOKE, "--cases", "normal-2sigma",
                       "--dtypes", "float32", "-k", "test_written", "--xfails-file", str(xf))
    assert result.ret == 0, result.stdout.str()[-2000:]
    assert df[df.check == "written"].verdict.iloc[0] == "xfail"
    assert "matches no test" in result.stdout.str()


def test_xfails_file_auto_says_what_it_chose_for_the_installed_torch(suite, pytester):
    """A measured torch: the header names the file. A torch no file was measured on (the
    installed one made to say 2.12.0 before the plugin loads): the run goes on without known
    failures, and the line says so at the end too (where -q shows it)."""
    import torch

    from harness.session.xfails import choose_xfails

    args = ("--candidate", "exact", *SMOKE, "--cases", "normal-2sigma", "--dtypes", "float32",
            "-k", "test_finite", "--xfails-file", "auto")
    result, _ = suite(*args)
    assert result.ret == 0, result.stdout.str()[-2000:]
    chosen, line = choose_xfails(torch.__version__)
    assert f"harness: {line}" in result.stdout.str()
    pytester.makeconftest('import torch\ntorch.__version__ = "2.12.0"\n'
                          'pytest_plugins = ["harness.plugin"]\n')
    result, df = suite(*args, "-q")
    assert result.ret == 0, result.stdout.str()[-2000:]
    assert "no xfails file was measured on the installed torch 2.12.0" in result.stdout.str()
    assert "every failure counts as new" in result.stdout.str()
    assert (df.verdict == "pass").all()


def test_options_select_dtypes_cases_devices(suite):
    """A list option given twice runs what both name (pytest's own parser, end to end)."""
    result, df = suite("--candidate", "exact", *SMOKE, "--cases", "half-normal",
                       "--dtypes", "float16", "--dtypes", "bfloat16", "--devices", "cpu,cuda:0",
                       "-k", "finite")
    assert result.ret == 0
    assert set(df.dtype) == {"float16", "bfloat16"} and set(df.case) == {"half-normal"}
    cuda = df[df.device == "cuda:0"]
    import torch

    if not torch.cuda.is_available():
        assert (cuda.verdict == "skip").all() and len(cuda) == 2  # one per dtype


def test_strict_bounds_see_rounded_bounds_outside_the_interval(suite):
    # In bfloat16, RN(0.30001) = RN(0.3) = 0.30078125 > 0.30001: allowed by "rounded", not "strict".
    args = ("--candidate", "exact", *SMOKE, "--cases", "sub-ulp-window", "--dtypes",
            "bfloat16", "-k", "test_bounds")
    result, df = suite(*args)
    assert result.ret == 0
    result, df = suite(*args, "--bounds", "strict")
    assert result.ret == 1 and df.verdict.iloc[0] == "fail"


def test_a_budget_limited_case_is_marked_and_its_repro_line_gives_the_same_rows(suite):
    """selftest-slow sleeps 0.1 s per call: a 0.3 s budget stops stage 1 after a few calls. The
    reproduce line pins that n with --samples (no budget then), and the rows come back bit for bit."""
    args = ("--candidate", "selftest-slow", "--cases", "normal-2sigma", "--dtypes", "float32",
            "--shapes", "none", "-k", "finite or gof or moments")
    result, df = suite(*args, "--case-budget", "0.3", report="budget")
    assert result.ret == 0, result.stdout.str()[-2000:]
    row = df[df.check == "gof"].iloc[0]
    assert bool(row.budget_limited) and row.n_target == 1 << 22
    calls, rest = divmod(int(row.n_stage1), 256 * 256)
    # 0.1 s of sleep per call: the budget is spent after 2 or 3 calls (machine load decides),
    # and the draw stops there or at the next call count of the 2^k, 3*2^k grid
    assert rest == 0 and is_budget_stop(calls) and 2 <= calls <= 4, calls
    assert (df.n_stage1 == row.n_stage1).all()
    # what the reproduce line carries
    rerun, df2 = suite(*args, "--samples", str(row.n_stage1), report="rerun")
    assert rerun.ret == 0
    keys = ["check"]
    cols = keys + ["verdict", "statistic", "p_value", "n", "seed", "n_stage1"]
    pd.testing.assert_frame_equal(df[cols].sort_values(keys).reset_index(drop=True),
                                  df2[cols].sort_values(keys).reset_index(drop=True))
    assert not df2.budget_limited.any()


def test_a_failing_budget_limited_case_says_how_to_reproduce_it(suite):
    result, df = suite("--candidate", "clamp", "--cases", "normal-2sigma", "--dtypes", "bfloat16",
                       "--shapes", "none", "--case-budget", "1e-9", "-k", "atoms")
    assert result.ret == 1
    row = df.iloc[0]
    assert bool(row.budget_limited) and row.n_stage1 == 2 * 256 * 256  # stopped at min_calls
    assert f"--samples {row.n_stage1} " in row.repro
    # stage 2, where a verdict or a level needs it, draws 4x the n the budget stopped stage 1 at
    reason = row.stage2_reason if isinstance(row.stage2_reason, str) else ""  # "" reads as NaN
    assert row.n_stage2 == (4 * row.n_stage1 if reason else 0)


def test_a_row_graded_at_other_thresholds_reproduces_at_them(suite):
    """With std and W1 never harmful the clamp's ±2σ row is undetermined at smoke n, where the
    defaults read it harmful (its std's lower bound 0.057 > 0.02, tests/unit/diagnosis/
    test_level_basis.py): the reproduce line carries the thresholds, and its rerun gives the same
    level and basis. The draws are deterministic (the default run seed)."""
    result, df = suite("--candidate", "clamp", "--profile", "smoke", "--cases", "normal-2sigma",
                       "--dtypes", "float32", "--shapes", "none", "-k", "test_gof",
                       "--harm-thresholds", "std=inf,w1=inf", report="thresholds")
    assert result.ret == 1, result.stdout.str()[-2000:]
    row = df[df.check == "gof"].iloc[0]
    assert row.verdict == "fail" and row.level == "undetermined", row.level_basis
    assert row.level_basis.startswith("open: ") and "decided at n ≈" in row.level_basis
    argv = shlex.split(row.repro)
    assert argv[:2] == ["pytest", "suites"]
    assert argv[argv.index("--harm-thresholds") + 1] == "std=inf,w1=inf"
    rerun, df2 = suite(*argv[2:], report="rerun")
    assert rerun.ret == 1, rerun.stdout.str()[-2000:]
    again = df2[df2.check == "gof"].iloc[0]
    assert (again.level, again.level_basis, again.repro) == (row.level, row.level_basis, row.repro)


def test_budget_seconds_scales_n_down_and_records_it(suite):
    result, df = suite("--candidate", "exact", "--samples", str(1 << 26), "--budget-seconds", "3",
                       "--cases", "normal-2sigma", "--dtypes", "float32", "-k", "test_finite")
    assert result.ret == 0
    n = int(df[df.check == "finite"].n.iloc[0])
    assert 0 < n < 1 << 26


def test_a_worker_crash_leaves_a_complete_report_with_error_rows(suite, pytester):
    sampler = pytester.path / "crashy.py"
    sampler.write_text(
        "import os\n"
        "from candidates import resolve\n"
        "_exact = resolve('exact')\n"
        "def trunc_normal_(tensor, mean, std, a, b, generator=None):\n"
        "    if mean == 100.0:  # the large-mean case kills its process\n"
        "        os._exit(3)\n"
        "    return _exact(tensor, mean, std, a, b, generator)\n")
    result, df = suite("--candidate", f"{sampler}:trunc_normal_", *SMOKE, "--cases",
                       "normal-2sigma,large-mean", "--dtypes", "float32", "-n", "2")
    assert result.ret == 1
    assert df is not None, "no report was written"
    crashed, fine = df[df.case == "large-mean"], df[df.case == "normal-2sigma"]
    # one row per check of a case (inplace is the shape axis's: neither case has it)
    assert len(crashed) == len(fine) and set(crashed.check) == set(fine.check)
    assert set(fine.verdict) == {"pass"}
    assert (crashed[crashed.check.isin(["finite", "hang", "gof"])].verdict == "error").all()
    assert "crashed" in " ".join(crashed.message.astype(str))
    # one crash: the group's other checks are error rows, not handed to the next worker to kill
    again = crashed.message.str.contains("in this group \\(exit 3\\); the group is not drawn again")
    assert again.sum() == len(crashed) - 1, crashed.message.tolist()


def test_a_group_split_by_a_foreign_scheduler_is_an_error_naming_the_cause(suite, pytester):
    """Another plugin's scheduler takes over and scatters the checks of each case: the run says
    so on every row of the split groups, and never calls it a candidate crash."""
    pytester.makeconftest(
        'import pytest\n'
        'pytest_plugins = ["harness.plugin"]\n'
        '@pytest.hookimpl(tryfirst=True)\n'
        'def pytest_xdist_make_scheduler(config, log):\n'
        '    from xdist.scheduler import LoadScheduling\n'
        '    return LoadScheduling(config, log)\n')
    result, df = suite("--candidate", "exact", *SMOKE, "--cases", "normal-2sigma,tail-5",
                       "--dtypes", "float32", "-n", "2")
    assert result.ret == 1
    cases = df[df.case != "api"]
    split = cases[cases.message.str.contains("split across", na=False)]
    assert len(split) and (split.verdict == "error").all()
    assert "LoadScheduling" in " ".join(split.message)
    assert not df.message.str.contains("crash", na=False).any()
    assert set(cases[cases.group.isin(split.group)].verdict) == {"error"}


@pytest.mark.parametrize("option, value, says", [
    ("--samples", "-5", "--samples: must be a positive integer"),
    ("--samples", "0", "--samples: must be a positive integer"),
    ("--alpha-fail", "2", "--alpha-fail: must be a probability"),
    ("--case-timeout", "-1", "--case-timeout: must be a positive number"),
    ("--xfails-file", "/missing", "--xfails-file: '/missing' is not a file"),
    ("--fail-on", "worst", "--fail-on: unknown 'worst'; known: any, fine, harmful"),
    ("--devices", "gpu7", "--devices: 'gpu7' is not a torch device"),
    ("--dist", "worksteal", "--dist worksteal: the harness keeps each case's checks on one worker"),
])
def test_a_bad_option_exits_4_with_one_line(suite, option, value, says):
    extra = ("-n", "2") if option == "--dist" else ()
    result, df = suite("--candidate", "exact", option, value, *extra)
    assert result.ret == 4, result.stdout.str()[-1500:]
    err = [line for line in result.stderr.lines if line.strip()]
    assert len(err) == 1 and says in err[0], err
    assert "Traceback" not in result.stdout.str() and df is None


def test_a_sampler_without_a_generator_parameter_gets_fresh_streams_per_call(suite, pytester):
    """Seeded through the global RNG with a seed drawn from the harness's generator per call: an
    exact sampler without a `generator` parameter passes, independence across calls included
    (reseeding alike before every call made successive calls identical)."""
    sampler = pytester.path / "no_generator.py"
    sampler.write_text(
        "from candidates.builtin import exact_trunc_normal_\n"
        "def trunc_normal_(tensor, mean, std, a, b):\n"
        "    return exact_trunc_normal_(tensor, mean, std, a, b)\n")
    result, df = suite("--candidate", f"{sampler}:trunc_normal_", *SMOKE, "--cases",
                       "normal-2sigma", "--dtypes", "float32")
    assert result.ret == 0, result.stdout.str()[-2000:]
    assert set(df.verdict) == {"pass"}
    assert "torch.manual_seed" in df[df.check == "generator"].message.iloc[0]
