"""Writing a whole report: the tables (`record.store`), environment.json, and the views people read
(summary.md, index.html and its figures), from plain rows and the run's plain facts."""

from __future__ import annotations

import json
import os
import time
import traceback
import uuid
import warnings

from record.store import DiskFault, device_name, environment, results_frame, write_tables, writing

from .figure_jobs import render_figures
from .html import write_index
from .map import MAP_NAME, has_explored, read_boundaries, render_map
from .model import MODEL_REPORT, model_markdown
from .overview import summary_markdown


def write_views(df, env: dict, report_dir: str, figures: bool = True,
                workers: int | None = None) -> None:
    """summary.md, index.html and (for the case data present) the figures, over `workers`
    processes (`reports.figure_jobs.figure_processes`: None, the CPUs here); for a run that explored
    the parameter space, the failure map (map.png) and the shrunk boundaries."""
    figs = render_figures(df, report_dir, workers) if figures else {}
    boundaries = read_boundaries(report_dir)
    map_image = None
    if figures and has_explored(df):
        try:
            render_map(df, os.path.join(report_dir, MAP_NAME), env, boundaries)
            map_image = MAP_NAME
        except Exception as exc:  # a broken map must not cost the report
            warnings.warn(f"reports: no failure map: {type(exc).__name__}: {exc}", stacklevel=2)
    summary = os.path.join(report_dir, "summary.md")
    with writing(summary), open(summary, "w", encoding="utf-8") as fh:
        fh.write(summary_markdown(df, env, boundaries))
    model = model_markdown(df, env)
    if model is not None:
        path = os.path.join(report_dir, MODEL_REPORT)
        with writing(path), open(path, "w", encoding="utf-8") as fh:
            fh.write(model)
    write_index(df, env, report_dir, figs, map_image, boundaries)


def write_run(rows: list[dict], report_dir: str, run: dict | None = None) -> str:
    """Write results.parquet, results.csv, environment.json, summary.md, index.html and the
    figures; return the directory (absolute). DiskFault (one line: the file and the errno) when a
    write fails; what was written before stays. `run`: the run's facts (plain values: profile,
    seed, candidates, devices, the case order, ``started`` as a time.time() stamp, ...)."""
    import torch

    run = dict(run or {})
    os.makedirs(report_dir, exist_ok=True)
    started = run.pop("started", None) or time.time()
    run_info = {"run_id": uuid.uuid4().hex[:12],
                "started": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(started)),
                "torch_version": torch.__version__}
    df = results_frame(rows, run_info)
    names = {d: device_name(str(d)) for d in df["device"].dropna().unique()}
    df["device_name"] = [names.get(d) for d in df["device"]]
    write_tables(df, report_dir)
    env = environment(run) | {"run_id": run_info["run_id"], "started": run_info["started"],
                              "finished": time.strftime("%Y-%m-%dT%H:%M:%S")}
    env_path = os.path.join(report_dir, "environment.json")
    with writing(env_path), open(env_path, "w", encoding="utf-8") as fh:
        json.dump(env, fh, indent=2, default=str)
    try:
        with writing(report_dir):
            # The run's workers are idle by now: its figures are rendered over as many processes.
            write_views(df, env, report_dir, workers=run.get("xdist_workers"))
    except DiskFault:  # the disk, not the view: the run reports it as a fault
        raise
    except Exception:  # the table is the record; a broken view must not cost the run its report
        with open(os.path.join(report_dir, "views-error.txt"), "w", encoding="utf-8") as fh:
            fh.write(traceback.format_exc())
        warnings.warn(f"reports: summary/html could not be written, see {report_dir}/views-error.txt",
                      stacklevel=2)
    return os.path.abspath(report_dir)
