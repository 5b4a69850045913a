"""The reusable workflow's own scripts, run as a caller's job would run them: the harness checked
out beside a caller's repository whose sampler is the candidate (actionlint checks the YAML; this
checks that the steps do what they say)."""

from __future__ import annotations

import os
import subprocess
import textwrap

import pandas as pd
import yaml

from harness.fleet.partition import PARTITION_VARIABLES


def _steps(repo_root) -> dict:
    with open(repo_root / ".github" / "workflows" / "conformance.yml", encoding="utf-8") as fh:
        doc = yaml.safe_load(fh)
    return {s["name"]: s for s in doc["jobs"]["conformance"]["steps"] if "name" in s}


def _run(step: dict, workspace, env: dict) -> subprocess.CompletedProcess:
    cwd = workspace / step.get("working-directory", ".")
    return subprocess.run(["bash", "-e", "-c", step["run"]], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)


def test_the_conformance_step_runs_a_callers_sampler_and_publishes_the_report(repo_root, tmp_path):
    caller = tmp_path / "caller" / "mypkg"
    caller.mkdir(parents=True)
    (caller / "__init__.py").write_text("")
    (caller / "init.py").write_text(textwrap.dedent('''\
        """A caller's initializer: the harness's gold sampler under another name."""
        from candidates.builtin import exact_trunc_normal_ as trunc_normal_
        '''))
    (tmp_path / "caller" / "known.txt").write_text("# no known failures\n")
    os.symlink(repo_root, tmp_path / "harness")
    env = {k: v for k, v in os.environ.items() if k not in PARTITION_VARIABLES}
    env.update(GITHUB_WORKSPACE=str(tmp_path), GITHUB_OUTPUT=str(tmp_path / "output"),
               GITHUB_STEP_SUMMARY=str(tmp_path / "summary"), CANDIDATE="mypkg.init:trunc_normal_",
               PROFILE="smoke", XFAILS="known.txt",
               EXTRA_ARGS="--cases normal-2sigma --dtypes float32 --samples 4096",
               PYTHONPATH=str(repo_root))
    steps = _steps(repo_root)
    done = _run(steps["Conformance"], tmp_path, env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert (tmp_path / "output").read_text().strip() == "exit=0"
    df = pd.read_csv(tmp_path / "report" / "results.csv")
    assert set(df.candidate) == {"mypkg.init:trunc_normal_"} and (df.verdict == "pass").sum() > 10
    summary = _run(steps["Job summary"], tmp_path, env)
    assert summary.returncode == 0
    assert "Truncated-normal conformance" in (tmp_path / "summary").read_text()
