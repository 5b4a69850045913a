"""Shared fixtures of the harness's self-tests.

* `repo_root`: the repository (what a subprocess puts on PYTHONPATH);
* `suite`: a scratch pytest project holding the suites, run in a subprocess (pytester), with the
  repository importable and no CI shard variables; ``suite(*args, report=DIR)`` returns
  (RunResult, the results.csv as a DataFrame or None); ``suite.path`` is the project;
* `pytest_configure`: a run of the self-tests writes no report of its own;
* `small_disk`: a real 64 KiB filesystem (a tmpfs mounted for the test, unmounted after; skipped
  where this process may not mount), for the faults of a full disk.

The tree mirrors the code: ``unit/<package>/`` (fast, no pytest subprocess), ``e2e/`` (real
pytest, real xdist, real ranks), ``calibration/`` (the exact samplers over many seeds and the
known-bad ones at the pr n; marked ``calibration``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from harness.fleet.partition import PARTITION_VARIABLES

ROOT = Path(__file__).resolve().parents[1]


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    """A run of the self-tests draws nothing itself (its conformance runs are subprocesses with
    report directories of their own), so it writes no report: it neither takes nor overwrites
    ./harness-report, where the main job's report may be, nor waits on a run that holds it."""
    tests = Path(__file__).resolve().parent
    paths = [Path(config.invocation_params.dir, arg.split("::")[0]).resolve()
             for arg in config.args]
    if paths and all(path.is_relative_to(tests) for path in paths):
        config.option.report_dir = ""


@pytest.fixture
def one_thread():
    """torch at one intra-op thread for the test: 2 cores shared by 2 xdist workers only contend
    (the plugin does the same on its workers; this covers runs without -n)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return ROOT


@pytest.fixture
def suite(pytester, monkeypatch):
    """A scratch project holding the suites, with the repo importable; returns a runner."""
    monkeypatch.setenv("PYTHONPATH", str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for name in PARTITION_VARIABLES:  # a CI's shard variables would split these runs' grids
        monkeypatch.delenv(name, raising=False)
    pytester.makeconftest('pytest_plugins = ["harness.plugin"]\n')
    shutil.copytree(ROOT / "suites", pytester.path / "suites")
    pytester.makeini("[pytest]\nmarkers =\n    harness_check(name): check\n    slow: slow\n")

    def run(*args, report="report"):
        result = pytester.runpytest_subprocess("suites", "-p", "no:cacheprovider",
                                               "--report-dir", report, *args, timeout=600)
        csv = pytester.path / report / "results.csv"
        df = pd.read_csv(csv) if csv.exists() else None
        return result, df

    run.path = pytester.path
    return run


@pytest.fixture
def small_disk(tmp_path) -> Path:
    """A 64 KiB tmpfs mounted at a fresh directory: writes past it fail with ENOSPC, as on a
    full disk (no mock: the kernel refuses them)."""
    mount = tmp_path / "small-disk"
    mount.mkdir()
    try:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)],
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        pytest.skip(f"cannot mount a tmpfs here: {exc}")
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip() or done.returncode}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True, timeout=30)
