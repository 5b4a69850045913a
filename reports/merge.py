"""`python -m reports merge DIR... --out DIR`: one report from a run sharded across machines.

Rows are concatenated. A (candidate, case, dtype, device, check) present in more than one input is
an error unless the rows agree on everything but the columns that describe when, where and how
fast they ran (`results.VOLATILE`): the seeds are derived from the run seed, so two shards that
both ran a case must have produced the same verdict, statistic and p-values. The case data of all
inputs is copied over and the usual files are written, so `show` and `compare` read the result
like any other run.
"""

from __future__ import annotations

import json
import os
import shutil

import pandas as pd

from .results import (CASE_DATA_DIR, SORT_KEYS, VOLATILE, ReportError, normalize, read_environment,
                      read_results, write_tables, write_views)


def _same(a, b) -> bool:
    if pd.isna(a) and pd.isna(b):
        return True
    try:
        return bool(a == b) or float(a) == float(b)
    except (TypeError, ValueError):
        return str(a) == str(b)


def merge_frames(frames: list[pd.DataFrame], names: list[str]) -> pd.DataFrame:
    tagged = [f.assign(_src=name) for f, name in zip(frames, names)]
    df = pd.concat(tagged, ignore_index=True, sort=False)
    dup = df.duplicated(SORT_KEYS, keep=False)
    if dup.any():
        compare_cols = [c for c in df.columns if c not in VOLATILE and c != "_src"]
        drop = []
        for key, grp in df[dup].groupby(SORT_KEYS, sort=False):
            first = grp.iloc[0]
            for idx, row in grp.iloc[1:].iterrows():
                diff = [c for c in compare_cols if not _same(first[c], row[c])]
                if diff:
                    raise ReportError(
                        f"duplicate row {'/'.join(map(str, key))} differs between {first['_src']} and "
                        f"{row['_src']} in {', '.join(diff[:5])}")
                drop.append(idx)
        df = df.drop(index=drop)
    return normalize(df.drop(columns="_src"))


def merge_environments(envs: list[dict], names: list[str]) -> dict:
    """Keys on which every input agrees, plus the list of inputs with their own environments."""
    common: dict = {}
    if envs:
        for k, v in envs[0].items():
            if all(k in e and e[k] == v for e in envs[1:]):
                common[k] = v
        # Devices differ between shards; name them all.
        names_map: dict = {}
        for e in envs:
            names_map.update(e.get("device_names") or {})
        if names_map:
            common["device_names"] = names_map
    common["run_id"] = "merged-" + "+".join(str(e.get("run_id", "?")) for e in envs)
    common["merged_from"] = [{"dir": os.path.abspath(n), **e} for n, e in zip(names, envs)]
    return common


def merge(dirs: list[str], out: str) -> str:
    if not dirs:
        raise ReportError("merge: no input directories")
    if any(os.path.abspath(d) == os.path.abspath(out) for d in dirs):
        raise ReportError("merge: --out must differ from every input")
    frames = [read_results(d) for d in dirs]
    envs = [read_environment(d) for d in dirs]
    df = merge_frames(frames, dirs)
    os.makedirs(os.path.join(out, CASE_DATA_DIR), exist_ok=True)
    for d in dirs:
        src = os.path.join(d, CASE_DATA_DIR)
        if os.path.isdir(src):
            for name in os.listdir(src):
                if name.endswith(".npz"):
                    shutil.copy2(os.path.join(src, name), os.path.join(out, CASE_DATA_DIR, name))
    write_tables(df, out)
    env = merge_environments(envs, dirs)
    with open(os.path.join(out, "environment.json"), "w", encoding="utf-8") as fh:
        json.dump(env, fh, indent=2, default=str)
    write_views(df, env, out)
    return os.path.abspath(out)
