"""Faults a user's CI throws at the harness, injected the way they happen: candidates that
segfault (every call; the third call of every process), raise SystemExit / KeyboardInterrupt /
GeneratorExit, a report directory that cannot be written, a disk that fills up during the run, two
runs into one report directory, the lock a killed run left, a Ctrl-C, a run killed half way, and a
candidate made three times slower. Each ends with rows, a written (or partial) report, and a gate
that is not fooled; none hangs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pandas as pd
import pytest

from record.store import VOLATILE
from reports.__main__ import main as cli

FAULTS = textwrap.dedent('''\
    """Samplers that fail the way native kernels and careless code do."""
    import ctypes
    import os
    import time

    from candidates.builtin import exact_trunc_normal_

    _calls = [0]


    def segv_every(tensor, mean, std, a, b, generator=None):
        ctypes.string_at(0)  # SIGSEGV


    def segv_third(tensor, mean, std, a, b, generator=None):
        _calls[0] += 1
        if _calls[0] == 3:
            ctypes.string_at(0)
        return exact_trunc_normal_(tensor, mean, std, a, b, generator=generator)


    def system_exit(tensor, mean, std, a, b, generator=None):
        raise SystemExit(3)


    def own_interrupt(tensor, mean, std, a, b, generator=None):
        raise KeyboardInterrupt


    def generator_exit(tensor, mean, std, a, b, generator=None):
        raise GeneratorExit


    def memory_error(tensor, mean, std, a, b, generator=None):
        raise MemoryError


    def exit_zero(tensor, mean, std, a, b, generator=None):
        os._exit(0)  # the worker ends "successfully" in the middle of a test


    def writes_late(tensor, mean, std, a, b, generator=None):
        """Returns at once; a thread writes the values 0.2 s later (an async kernel not waited on)."""
        import threading

        import torch

        values = exact_trunc_normal_(tensor.detach().clone(), mean, std, a, b, generator=generator)

        def write():
            with torch.no_grad():  # the contract check hands it Parameters too
                tensor.copy_(values)

        threading.Timer(0.2, write).start()
        return tensor


    def chatty(tensor, mean, std, a, b, generator=None):
        """Says 2 KB on each call, and writes one NaN (its first test fails, with that output)."""
        import sys

        print("x" * 1000)
        print("e" * 1000, file=sys.stderr)
        exact_trunc_normal_(tensor, mean, std, a, b, generator=generator)
        tensor.view(-1)[0] = float("nan")
        return tensor


    def stuck_in_native(tensor, mean, std, a, b, generator=None):
        sum(range(10 ** 14))  # one C call: the deadline's SIGALRM handler never runs inside it
        return tensor


    _lingering = []


    def leaves_a_thread(tensor, mean, std, a, b, generator=None):
        """exact, having started a thread on its first call that outlives any run."""
        import threading

        if not _lingering:
            _lingering.append(threading.Thread(target=time.sleep, args=(3600,), name="prefetch"))
            _lingering[0].start()
        return exact_trunc_normal_(tensor, mean, std, a, b, generator=generator)


    def leaves_a_process(tensor, mean, std, a, b, generator=None):
        """exact, having started on its first call a helper process (multiprocessing, not a
        daemon) that outlives any run; its pid goes to the file HARNESS_TEST_CHILD."""
        import multiprocessing

        if not _lingering:
            child = multiprocessing.get_context("fork").Process(target=time.sleep, args=(3600,),
                                                                  name="helper")
            child.start()
            _lingering.append(child)
            with open(os.environ["HARNESS_TEST_CHILD"], "w") as fh:
                fh.write(str(child.pid))
        return exact_trunc_normal_(tensor, mean, std, a, b, generator=generator)


    def gated(tensor, mean, std, a, b, generator=None):
        """exact, once the file HARNESS_TEST_GATE exists (a run that stays busy until told)."""
        deadline = time.monotonic() + 300
        while not os.path.exists(os.environ["HARNESS_TEST_GATE"]) and time.monotonic() < deadline:
            time.sleep(0.05)
        return exact_trunc_normal_(tensor, mean, std, a, b, generator=generator)


    def slowed(tensor, mean, std, a, b, generator=None):
        """exact, plus a sleep: HARNESS_TEST_SLOWDOWN times 10 ms per call."""
        time.sleep(0.01 * float(os.environ.get("HARNESS_TEST_SLOWDOWN", "1")))
        return exact_trunc_normal_(tensor, mean, std, a, b, generator=generator)
    ''')
SMOKE = ("--profile", "smoke", "--samples", "4096")


@pytest.fixture
def faults(tmp_path):
    path = tmp_path / "faults.py"
    path.write_text(FAULTS)
    return str(path)


def _env(repo_root, **extra) -> dict:
    from harness.fleet.partition import PARTITION_VARIABLES

    env = {k: v for k, v in os.environ.items() if k not in PARTITION_VARIABLES}
    return env | {"PYTHONPATH": str(repo_root)} | extra


def _pytest(repo_root, report, *args, **popen):
    cmd = [sys.executable, "-m", "pytest", "suites", "-p", "no:cacheprovider", "-q",
           "--report-dir", str(report), *args]
    # SIGINT at its default even where the test runner's shell started us in the background
    return subprocess.Popen(cmd, cwd=repo_root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
                            **popen)


def _run(repo_root, report, *args, env=None, timeout=600):
    p = _pytest(repo_root, report, *args, env=env or _env(repo_root))
    out, _ = p.communicate(timeout=timeout)
    return p.returncode, out


def test_segfaulting_candidates_end_the_run_cleanly_with_rows_and_a_report(repo_root, tmp_path, faults):
    """-n 2, a candidate that segfaults on every call and one on the third call of every
    process, beside exact: the run ends, exact is judged in full, each crashing candidate costs
    at most MAX_CRASHES_PER_CANDIDATE (+ in-flight) workers and every one of its tests has a row."""
    from harness.plugin.crashes import MAX_CRASHES_PER_CANDIDATE

    report = tmp_path / "report"
    rc, out = _run(repo_root, report, "--candidate", f"{faults}:segv_every", "--candidate",
                   f"{faults}:segv_third", "--candidate", "exact", *SMOKE, "--cases",
                   "normal-2sigma,abs-bounds-trap,tail-5,half-normal,untruncated",
                   "--dtypes", "float32,bfloat16", "-n", "2")
    assert rc == 1, out[-3000:]
    df = pd.read_csv(report / "results.csv")
    manifest = json.loads((report / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["rows"] == len(df)
    assert sum(manifest["tests"].values()) == len(df)
    per = df.groupby("candidate").size()
    assert per.nunique() == 1, per  # every candidate has a row for every test
    exact = df[df.candidate == "exact"]
    assert set(exact.verdict) <= {"pass", "skip"} and (exact.verdict == "pass").sum() >= 140
    for name in ("segv_every", "segv_third"):
        rows = df[df.candidate == f"{faults}:{name}"]
        crashed = rows[rows.message.str.contains("died \\(SIGSEGV in ", na=False)]
        assert 1 <= len(crashed) <= MAX_CRASHES_PER_CANDIDATE + 4, crashed.message.tolist()
        assert crashed.message.str.contains(f"{name} \\(faults.py:").all()
        not_run = rows[rows.message.str.startswith("not run: candidate crashed", na=False)]
        assert len(not_run) > 0 and (not_run.verdict == "error").all()
        assert "(last: SIGSEGV in " in not_run.message.iloc[0]
        assert set(rows.verdict) <= {"error", "pass", "fail", "skip"}
    assert "Traceback" not in out


def test_an_unwritable_report_dir_exits_4_before_anything_is_drawn(repo_root, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    for where in ("/proc/harness-report", str(blocker / "report")):
        t0 = time.monotonic()
        rc, out = _run(repo_root, where, "--candidate", "exact", *SMOKE, timeout=120)
        assert rc == 4, out[-2000:]
        errors = [line for line in out.splitlines() if line.startswith("ERROR:")]
        assert len(errors) == 1 and "--report-dir" in errors[0] and where in errors[0]
        assert "Traceback" not in out and "passed" not in out
        assert time.monotonic() - t0 < 120


def test_a_full_disk_is_one_line_a_partial_report_and_exit_6(repo_root, small_disk, capsys):
    """The report directory on a 64 KiB filesystem: the row log fills it half way through. The run
    goes on, says so in one line, ends with exit 6 (REPORT_WRITE_FAILED) and no traceback, keeps
    the rows that were written, and its report is one the gate refuses."""
    from harness.session.sink import REPORT_WRITE_FAILED

    report = small_disk / "report"
    rc, out = _run(repo_root, report, "--candidate", "exact", *SMOKE, "--cases",
                   "normal-2sigma,abs-bounds-trap", "--dtypes", "float32,bfloat16", "-n", "0")
    assert rc == REPORT_WRITE_FAILED == 6, out[-3000:]
    assert "INTERNALERROR" not in out and "Traceback" not in out
    said = [line for line in out.splitlines() if "harness: the report in" in line]
    assert len(said) == 1, out[-3000:]
    line = said[0][said[0].index("harness:"):]
    assert f"{report / 'rows.jsonl'}: ENOSPC (errno 28)" in line and "is partial" in line
    logged = int(line.split("; ")[-1].split(" of ")[0])
    rows = [r for r in (report / "rows.jsonl").read_text().splitlines() if r.endswith("}")]
    assert 0 < logged == len(rows)
    assert not (report / "results.csv").exists()
    manifest = json.loads((report / "manifest.json").read_text())
    assert manifest["status"] in ("running", "partial")  # "partial" when it still fit
    capsys.readouterr()
    assert cli(["compare", str(report), str(report)]) == 1
    assert "NEW is partial" in capsys.readouterr().out
    assert not (report / "run.lock").exists()  # given back: the next run may write here


def test_a_second_run_into_a_held_report_dir_is_refused_and_the_first_keeps_its_rows(
        repo_root, tmp_path, faults, capsys):
    """Two jobs, one --report-dir: the second is refused at start (exit 4, one line naming the
    first), the readers say the first is still writing, and the first ends with all its rows."""
    report, gate = tmp_path / "report", tmp_path / "gate"
    env = _env(repo_root, HARNESS_TEST_GATE=str(gate))
    # the gated calls wait for the second run to be refused: a limit longer than that wait
    first = _pytest(repo_root, report, "--candidate", f"{faults}:gated", *SMOKE, "--cases",
                    "normal-2sigma", "--dtypes", "float32", "-n", "0", "--case-timeout", "60",
                    env=env)
    try:
        deadline = time.monotonic() + 120
        while not (report / "run.lock").exists() and first.poll() is None:
            assert time.monotonic() < deadline, "the first run never took the directory"
            time.sleep(0.1)
        rc, out = _run(repo_root, report, "--candidate", "scipy", *SMOKE, "--cases",
                       "normal-2sigma", "--dtypes", "float32", "-n", "0", env=env, timeout=120)
        assert rc == 4, out[-2000:]
        errors = [line for line in out.splitlines() if line.startswith("ERROR:")]
        assert len(errors) == 1 and "in use by another run" in errors[0]
        assert f"pid {first.pid} " in errors[0] and "gated" in errors[0]
        assert "Traceback" not in out and "passed" not in out
        capsys.readouterr()
        # 2 while the first run has written no row yet (nothing to read), 1 once it has (a
        # partial input): either way the line names the run still writing it
        assert cli(["merge", str(report), "--out", str(tmp_path / "merged")]) in (1, 2)
        assert "still writing it" in capsys.readouterr().err
    finally:
        gate.write_text("")
        out, _ = first.communicate(timeout=300)
    assert first.returncode == 0, out[-3000:]
    df = pd.read_csv(report / "results.csv")
    assert set(df.candidate) == {f"{faults}:gated"} and (df.verdict != "error").all()
    manifest = json.loads((report / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["rows"] == len(df)
    assert not (report / "run.lock").exists()


def test_the_lock_a_killed_run_left_is_taken_over_with_a_line(repo_root, tmp_path, faults):
    report, gate = tmp_path / "report", tmp_path / "gate"
    env = _env(repo_root, HARNESS_TEST_GATE=str(gate))
    killed = _pytest(repo_root, report, "--candidate", f"{faults}:gated", *SMOKE, "--cases",
                     "normal-2sigma", "--dtypes", "float32", "-n", "0", env=env)
    deadline = time.monotonic() + 120
    while not (report / "run.lock").exists() and killed.poll() is None:
        assert time.monotonic() < deadline, "the run never took the directory"
        time.sleep(0.1)
    killed.kill()  # SIGKILL: nothing of it runs any more, its lock stays
    killed.communicate(timeout=60)
    assert (report / "run.lock").exists()
    gate.write_text("")
    rc, out = _run(repo_root, report, "--candidate", "exact", *SMOKE, "--cases", "normal-2sigma",
                   "--dtypes", "float32", "-n", "0", env=env, timeout=300)
    assert rc == 0, out[-3000:]
    said = [line for line in out.splitlines() if "took over" in line]
    assert len(said) == 1 and f"pid {killed.pid} " in said[0] and "is gone" in said[0]
    assert json.loads((report / "manifest.json").read_text())["status"] == "complete"


def test_what_a_candidate_raises_is_a_fail_row(repo_root, tmp_path, faults):
    report = tmp_path / "report"
    names = {"system_exit": "SystemExit(3)", "own_interrupt": "KeyboardInterrupt()",
             "generator_exit": "GeneratorExit()"}
    args = [a for name in names for a in ("--candidate", f"{faults}:{name}")]
    rc, out = _run(repo_root, report, *args, *SMOKE, "--cases", "normal-2sigma",
                   "--dtypes", "float32", "-n", "0")
    assert rc == 1, out[-3000:]
    df = pd.read_csv(report / "results.csv")
    for name, raised in names.items():
        rows = df[df.candidate == f"{faults}:{name}"].set_index("check")
        assert rows.loc["finite", "verdict"] == "fail"
        assert f"call 1 raised {raised}" in rows.loc["finite", "message"]
        assert rows.loc["arguments", "verdict"] == "fail"  # exiting is no way to refuse arguments
        assert f"raised {raised} (ends the caller's program)" in rows.loc["arguments", "message"]
        assert (rows.verdict != "error").all()


def test_a_candidate_that_prints_on_every_call_does_not_flood_the_failure_listing(
        repo_root, tmp_path, faults):
    """4096 one-element calls print 8 MB; each captured section of a report keeps 4000
    characters at each end."""
    report = tmp_path / "report"
    rc, out = _run(repo_root, report, "--candidate", f"{faults}:chatty", *SMOKE,
                   "--case", "mean=0,std=1,a=-2,b=2,shape=1,id=tiny", "--dtypes", "float32",
                   "-n", "0", "-k", "finite or gof")
    assert rc == 1, out[-3000:]
    assert len(out) < 100_000 and "characters left out by the harness" in out
    rows = pd.read_csv(report / "results.csv").set_index("check")
    assert rows.loc["finite", "verdict"] == "fail"


def test_a_candidate_that_runs_out_of_memory_gets_fail_rows(repo_root, tmp_path, faults):
    report = tmp_path / "report"
    rc, out = _run(repo_root, report, "--candidate", f"{faults}:memory_error", *SMOKE, "--cases",
                   "normal-2sigma", "--dtypes", "float32", "-n", "0")
    assert rc == 1, out[-3000:]
    rows = pd.read_csv(report / "results.csv").set_index("check")
    assert rows.loc["finite", "verdict"] == "fail"
    assert "call 1 raised MemoryError" in rows.loc["finite", "message"]
    assert (rows.verdict != "error").all() and "Traceback" not in out


def test_a_worker_that_exits_0_mid_test_leaves_error_rows_and_a_report(repo_root, tmp_path, faults):
    """os._exit(0) inside the candidate: the xdist worker ends with a clean status in the middle of
    a test. The group gets error rows naming the crash, exact beside it is judged in full."""
    report = tmp_path / "report"
    rc, out = _run(repo_root, report, "--candidate", f"{faults}:exit_zero", "--candidate", "exact",
                   *SMOKE, "--cases", "normal-2sigma", "--dtypes", "float32", "-n", "2")
    assert rc == 1, out[-3000:]
    df = pd.read_csv(report / "results.csv")
    manifest = json.loads((report / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["rows"] == len(df)
    exiting = df[df.candidate == f"{faults}:exit_zero"]
    assert len(exiting) == len(df[df.candidate == "exact"])
    assert set(df[df.candidate == "exact"].verdict) <= {"pass", "skip"}
    assert (exiting[exiting.check.isin(["finite", "gof"])].verdict == "error").all()
    assert exiting.message.str.contains("crash|died|exit", na=False).any(), exiting.message.tolist()


def test_values_written_after_the_call_returned_are_unwritten_elements(repo_root, tmp_path, faults):
    """A candidate whose values arrive from a thread after it returned: the engine reads the poison
    it wrote before the call, so `written` fails, and the run ends with a report."""
    report = tmp_path / "report"
    rc, out = _run(repo_root, report, "--candidate", f"{faults}:writes_late", *SMOKE, "--cases",
                   "normal-2sigma", "--dtypes", "float32", "-n", "0")
    assert rc == 1, out[-3000:]
    rows = pd.read_csv(report / "results.csv").set_index("check")
    assert rows.loc["written", "verdict"] == "fail", rows.loc["written", "message"]
    assert "Traceback" not in out


def test_a_call_stuck_in_native_code_ends_its_worker_and_the_run_goes_on(
        repo_root, tmp_path, faults):
    """SIGALRM's handler runs between the interpreter's instructions, never inside one C call:
    such a call hung its worker, and the run, for pytest-timeout's hour. The native backstop
    ends the worker once the call is past every deadline it could have had; its rows name
    where it was stuck, exact beside it is judged in full, and the report is complete."""
    report = tmp_path / "report"
    t0 = time.monotonic()
    rc, out = _run(repo_root, report, "--candidate", f"{faults}:stuck_in_native", "--candidate",
                   "exact", *SMOKE, "--cases", "normal-2sigma", "--dtypes", "float32",
                   "--case-timeout", "1", "-n", "2", "-k", "not test_arguments", timeout=400)
    assert rc == 1, out[-3000:]
    assert time.monotonic() - t0 < 300
    df = pd.read_csv(report / "results.csv")
    assert (df[df.candidate == "exact"].verdict == "pass").all()
    stuck = df[df.candidate == f"{faults}:stuck_in_native"]
    assert len(stuck) and (stuck.verdict == "error").all()
    said = [m for m in stuck.message if "inside one native call" in m]
    assert said and all("in stuck_in_native (faults.py:" in m for m in said), said
    assert json.loads((report / "manifest.json").read_text())["status"] == "complete"


@pytest.mark.parametrize("workers", ["0", "2"])
def test_a_thread_the_candidate_leaves_running_does_not_keep_the_run_open(
        repo_root, tmp_path, faults, workers):
    """Interpreter shutdown joins every non-daemon thread: a sampler's thread that never ends
    kept a run without -n open forever (and a worker until xdist killed it, 10 s on). The run
    ends with its report and its own exit status, and says why it did not wait."""
    report = tmp_path / "report"
    t0 = time.monotonic()
    rc, out = _run(repo_root, report, "--candidate", f"{faults}:leaves_a_thread", *SMOKE,
                   "--cases", "normal-2sigma", "--dtypes", "float32", "-n", workers, timeout=300)
    assert rc == 0, out[-3000:]  # exact's values: every row passes
    assert time.monotonic() - t0 < 240  # the thread sleeps an hour
    assert json.loads((report / "manifest.json").read_text())["status"] == "complete"
    if workers == "0":  # a worker's line goes to its own stderr
        assert "harness: 1 thread(s) started during the run are still running ('prefetch'" in out


def test_a_child_process_the_candidate_leaves_running_does_not_keep_the_run_open(
        repo_root, tmp_path, faults):
    """multiprocessing joins every non-daemon child at exit: a sampler's helper process that
    never ends kept a run without -n open forever. The run ends with its report, says why, and
    ends the child."""
    report, pid_file = tmp_path / "report", tmp_path / "child.pid"
    t0 = time.monotonic()
    rc, out = _run(repo_root, report, "--candidate", f"{faults}:leaves_a_process", *SMOKE,
                   "--cases", "normal-2sigma", "--dtypes", "float32", "-n", "0", timeout=300,
                   env=_env(repo_root, HARNESS_TEST_CHILD=str(pid_file)))
    assert rc == 0, out[-3000:]
    assert time.monotonic() - t0 < 240  # the child sleeps an hour
    assert "harness: 1 child process(es) started during the run are still running ('helper' pid" in out
    assert json.loads((report / "manifest.json").read_text())["status"] == "complete"
    pid = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):  # ended (and reaped by the run before it exited)
        os.kill(pid, 0)


def _wait_for_rows(report, at_least: int, proc, timeout: float = 300) -> None:
    log = report / "rows.jsonl"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        if log.exists() and sum(1 for _ in open(log, encoding="utf-8")) >= at_least:
            return
        time.sleep(0.2)
    raise AssertionError(f"no {at_least} rows in {timeout} s (exit {proc.poll()})")


SLOW_RUN = ("--candidate", "selftest-slow", "--profile", "smoke", "--samples", "1048576",
            "--cases", "normal-2sigma,tail-5,half-normal", "--dtypes", "float32,bfloat16", "-n", "0")


@pytest.fixture(scope="module")
def base_report(tmp_path_factory, repo_root):
    """A whole run of the cases the interrupted runs below start (the gate's BASE)."""
    report = tmp_path_factory.mktemp("base") / "report"
    rc, out = _run(repo_root, report, "--candidate", "exact", "--profile", "smoke", "--cases",
                   "normal-2sigma,tail-5,half-normal", "--dtypes", "float32,bfloat16", "-n", "2")
    assert rc == 0, out[-2000:]
    return str(report)


def test_ctrl_c_stops_the_run_and_writes_a_partial_report(repo_root, tmp_path, base_report):
    report = tmp_path / "report"
    proc = _pytest(repo_root, report, *SLOW_RUN, env=_env(repo_root))
    _wait_for_rows(report, 3, proc)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 2, out[-3000:]  # pytest's "interrupted"
    assert "harness: interrupted: a partial report" in out
    manifest = json.loads((report / "manifest.json").read_text())
    assert manifest["status"] == "partial" and manifest["rows"] < sum(manifest["tests"].values())
    df = pd.read_csv(report / "results.csv")
    assert len(df) == manifest["rows"] >= 3
    assert cli(["compare", base_report, str(report)]) == 1  # a run that did not finish: no pass


def test_sigterm_ends_the_run_and_the_gate_refuses_its_report(repo_root, tmp_path, base_report,
                                                              capsys):
    """SIGTERM, as a CI system cancels a job: the run ends, and what it leaves is partial."""
    report = tmp_path / "report"
    proc = _pytest(repo_root, report, *SLOW_RUN, env=_env(repo_root))
    _wait_for_rows(report, 3, proc)
    proc.terminate()
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode != 0, out[-3000:]
    manifest = json.loads((report / "manifest.json").read_text())
    assert manifest["status"] in ("running", "partial")
    capsys.readouterr()
    assert cli(["compare", base_report, str(report)]) == 1
    assert "NEW is partial" in capsys.readouterr().out


def test_a_killed_run_leaves_a_partial_report_the_gate_and_merge_refuse(repo_root, tmp_path,
                                                                          base_report, capsys):
    report = tmp_path / "report"
    proc = _pytest(repo_root, report, *SLOW_RUN, env=_env(repo_root))
    _wait_for_rows(report, 3, proc)
    proc.kill()  # SIGKILL: the OOM killer, a CI timeout without grace
    proc.communicate(timeout=60)
    assert not (report / "results.csv").exists()
    assert json.loads((report / "manifest.json").read_text())["status"] == "running"
    capsys.readouterr()
    assert cli(["compare", base_report, str(report)]) == 1
    text = capsys.readouterr().out
    assert "NEW is partial" in text and "rows.jsonl" in text and "Lost coverage" in text
    assert cli(["show", str(report)]) == 0
    assert cli(["merge", str(report), "--out", str(tmp_path / "merged")]) == 1
    assert "is partial" in capsys.readouterr().err
    assert cli(["merge", str(report), "--out", str(tmp_path / "merged2"), "--allow-partial"]) == 0


def test_the_rows_do_not_depend_on_the_candidates_speed(repo_root, tmp_path, faults):
    """The same seed gives the same rows when the candidate is three times slower: the n of every
    group is fixed by the profile and the case, never by a clock."""
    args = ("--candidate", f"{faults}:slowed", "--profile", "smoke", "--cases",
            "normal-2sigma,deep-window-10-1000", "--dtypes", "float32,bfloat16",
            "-n", "2")
    frames = []
    for factor in ("1", "3"):
        report = tmp_path / f"x{factor}"
        rc, out = _run(repo_root, report, *args, env=_env(repo_root, HARNESS_TEST_SLOWDOWN=factor))
        assert rc == 0, out[-3000:]
        frames.append(pd.read_csv(report / "results.csv"))
    idle, slow = (f[[c for c in f.columns if c not in VOLATILE]]
                  .sort_values(["case", "dtype", "check"]).reset_index(drop=True) for f in frames)
    pd.testing.assert_frame_equal(idle, slow)
    assert not idle.budget_limited.any()
    drawn = idle[idle.check == "hang"]  # whole calls, at least two: n_target or a little more
    assert (drawn.n_stage1 >= drawn.n_target).all() and (drawn.n_target > 0).all()
