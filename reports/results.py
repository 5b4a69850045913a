"""The results table: one row per (candidate, case, dtype, device, check), written once per run.

Rows arrive as plain dicts (assembled on the xdist controller from the test reports); this module
turns them into a pandas DataFrame with a fixed leading column order and writes it, with the
environment, into the report directory.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
import uuid

import pandas as pd

#: The leading columns, in order; any further keys of the rows follow.
COLUMNS = ("run_id", "started", "candidate", "candidate_version", "case", "dtype", "device",
           "check", "verdict", "n", "statistic", "p_value", "message", "seed", "candidate_s",
           "harness_s", "n_stage1", "n_stage2", "p_value_stage1", "p_value_stage2", "seed_stage2",
           "alpha_suspect", "alpha_fail", "effect", "effect_unit", "mde", "mean", "std", "a", "b",
           "shape", "torch_version", "device_name", "profile", "worker", "repro", "xfail_cause",
           "candidate_spec", "details")

SORT_KEYS = ["candidate", "case", "dtype", "device", "check"]


def results_frame(rows: list[dict], run_info: dict | None = None) -> pd.DataFrame:
    df = pd.DataFrame(rows)
    for key, value in (run_info or {}).items():
        df[key] = value
    for col in COLUMNS:
        if col not in df.columns:
            df[col] = None
    extra = [c for c in df.columns if c not in COLUMNS]
    df = df[list(COLUMNS) + extra]
    return df.sort_values(SORT_KEYS, kind="stable").reset_index(drop=True)


def device_name(device: str) -> str:
    import torch

    if device.startswith("cuda") and torch.cuda.is_available():
        return torch.cuda.get_device_name(torch.device(device))
    return platform.processor() or platform.machine()


def environment(config=None, session=None) -> dict:
    import numpy
    import scipy
    import torch

    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    env = {"python": sys.version.split()[0], "torch": torch.__version__, "numpy": numpy.__version__,
           "scipy": scipy.__version__, "pandas": pd.__version__, "platform": platform.platform(),
           "cpu": cpu, "cpu_count": os.cpu_count(),
           "cuda_devices": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
           if torch.cuda.is_available() else [],
           "command": " ".join(sys.argv)}
    if session is not None:
        cfg = session.run_config
        env.update(profile=cfg.profile, samples=cfg.samples, run_seed=cfg.run_seed,
                   bounds=cfg.bounds, case_timeout=cfg.case_timeout,
                   alpha_suspect=cfg.alpha_suspect, alpha_fail=cfg.alpha_fail,
                   candidates=[{"name": c.name, "spec": c.spec, "version": c.version}
                               for c in session.candidates],
                   devices=session.devices)
    return env


def write_run(rows: list[dict], report_dir: str, config=None, session=None) -> str:
    """Write results.parquet, results.csv and environment.json; return the directory."""
    import torch

    os.makedirs(report_dir, exist_ok=True)
    started = getattr(session, "started", time.time())
    run_info = {"run_id": uuid.uuid4().hex[:12],
                "started": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(started)),
                "torch_version": torch.__version__}
    df = results_frame(rows, run_info)
    df["device_name"] = [device_name(str(d)) for d in df["device"]]
    df.to_csv(os.path.join(report_dir, "results.csv"), index=False)
    df.astype({c: "string" for c in ("message", "details", "repro", "xfail_cause", "shape",
                                     "effect_unit", "candidate_version")}).to_parquet(
        os.path.join(report_dir, "results.parquet"), index=False)
    env = environment(config, session) | {"run_id": run_info["run_id"], "started": run_info["started"]}
    with open(os.path.join(report_dir, "environment.json"), "w", encoding="utf-8") as fh:
        json.dump(env, fh, indent=2, default=str)
    return os.path.abspath(report_dir)
