"""manifest.json: what one process of a run was asked to run, what it ran, and where.

Every run that writes a report writes a manifest beside the results, twice: at start-up, before
anything is drawn (``status`` "running": it proves the directory is writable, and it is what a
run killed half way leaves beside its row log), and at the end. It is what lets `reports merge`
tell a complete partitioned run from one with a shard missing (`reports.merge`), and `reports
compare` a complete NEW from one that was cut short (`reports.report`):

* ``status``: "running" (written at start-up; still there: the run never finished), "complete"
  (every test collected has its row) or "partial" (cut short: ``-x``, Ctrl-C, a worker lost);
  ``reason``: why a partial run is partial, where the run knows (a write that failed: the file
  and the errno); ``rows``: how many rows the results hold; ``files``: the sha256 of
  results.parquet and results.csv, so a truncated or altered artifact is found;

* ``shard``: ``{"id", "count", "source"}`` for a grid partition (harness.fleet.partition), or null for
  an unpartitioned run;
* ``partition``: how the grid was split (``method`` "hash" or "durations", the durations' source)
  and ``assignment``: every group key of the grid with the shard that owns it. Every shard of one
  run records the same assignment, so any shard's manifest names the groups a missing shard
  should have run;
* ``groups``: the group keys this process ran (they have rows), ``tests``: the number of tests it
  collected per group (a group with fewer rows than tests was cut short: ``-x``, Ctrl-C);
* ``config``: the options every shard of one run must share (seed, profile, n, bounds, alphas,
  the harm thresholds the levels are graded at, candidates and their versions);
* the machine: the harness's git SHA (``HARNESS_GIT_SHA`` overrides, for images without .git),
  host, torch, its CUDA, the NVIDIA driver, the GPU names; start and end times (ISO 8601 UTC and
  seconds since the epoch), the pytest exit status and the command.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import time

from .store import ReportError, write_atomically

MANIFEST_FILE = "manifest.json"
FORMAT = 1
STATUSES = ("running", "complete", "partial")
#: Where the harness's sources are: its git SHA is the harness's, not the caller's project's.
HARNESS_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(cmd: list[str], cwd: str | None = None, timeout: float = 10.0) -> str | None:
    try:
        p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError):
        return None
    return p.stdout.strip() if p.returncode == 0 else None


def git_revision(root: str = HARNESS_ROOT) -> dict:
    """{"sha", "dirty"} of the harness's checkout (None where git or .git is absent)."""
    sha = os.environ.get("HARNESS_GIT_SHA") or _run(["git", "rev-parse", "HEAD"], cwd=root)
    if os.environ.get("HARNESS_GIT_SHA"):
        return {"sha": sha, "dirty": None}
    status = _run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root) if sha else None
    return {"sha": sha, "dirty": bool(status) if status is not None else None}


def nvidia_driver() -> str | None:
    """The NVIDIA driver version (nvidia-smi), None without one."""
    out = _run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])
    return out.splitlines()[0].strip() if out else None


def machine_facts() -> dict:
    """Host, torch, CUDA, driver, GPUs and git; a fact that cannot be had is None, never an
    exception (the manifest is what makes a shard count, so it must be written)."""
    import torch

    def fact(fn):
        try:
            return fn()
        except Exception as exc:  # a broken driver or device must not cost the manifest
            return f"unknown ({type(exc).__name__})"

    cuda = bool(fact(torch.cuda.is_available) is True)
    return {"host": platform.node(), "platform": platform.platform(),
            "torch": torch.__version__, "cuda": torch.version.cuda,
            "driver": fact(nvidia_driver) if cuda else None,
            "gpus": fact(lambda: [torch.cuda.get_device_name(i)
                                  for i in range(torch.cuda.device_count())]) if cuda else [],
            "git": fact(git_revision)}


def iso(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


def build_manifest(*, shard: dict | None, partition: dict, assignment: dict, groups, tests: dict,
                   config: dict, started: float, finished: float | None, exitstatus: int | None,
                   command: str = "", machine: dict | None = None, status: str = "complete",
                   rows: int | None = None, files: dict | None = None,
                   reason: str | None = None) -> dict:
    """The manifest of one process's run (see the module docstring for the fields)."""
    if status not in STATUSES:
        raise ValueError(f"status must be one of {STATUSES}, got {status!r}")
    finished_iso = iso(finished) if finished is not None else None
    return {"format": FORMAT, "status": status, "reason": reason, "rows": rows,
            "files": files or {},
            "shard": shard, "partition": partition,
            "assignment": dict(sorted(assignment.items())), "groups": sorted(groups),
            "tests": dict(sorted(tests.items())), "config": config,
            **(machine if machine is not None else machine_facts()),
            "started": iso(started), "finished": finished_iso, "started_ts": started,
            "finished_ts": finished, "exitstatus": None if exitstatus is None else int(exitstatus),
            "command": command}


def write_manifest(report_dir: str, manifest: dict) -> str:
    """Write manifest.json whole or not at all (a reader never sees half a manifest); DiskFault
    when it cannot be written."""
    path = os.path.join(report_dir, MANIFEST_FILE)

    def dump(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(manifest, fh, indent=1, default=str)

    write_atomically(path, dump)
    return path


def read_manifest(report_dir: str) -> dict | None:
    """The manifest of a report directory, None when it has none (written before manifests);
    ReportError with one line when it is there but unreadable or not a manifest."""
    path = os.path.join(report_dir, MANIFEST_FILE)
    if not os.path.exists(path):
        return None
    try:
        with open(path, encoding="utf-8") as fh:
            manifest = json.load(fh)
    except (OSError, ValueError) as exc:
        raise ReportError(f"{report_dir!r}: {MANIFEST_FILE} unreadable ({type(exc).__name__})") from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("assignment"), dict):
        raise ReportError(f"{report_dir!r}: {MANIFEST_FILE} is not a harness manifest")
    shard = manifest.get("shard")
    if shard is not None and not (isinstance(shard, dict) and isinstance(shard.get("id"), int)
                                  and isinstance(shard.get("count"), int)):
        raise ReportError(f"{report_dir!r}: {MANIFEST_FILE}: malformed shard {shard!r}")
    return manifest
