"""The figure data of failing groups on disk: one small .npz per (candidate, case, dtype, device)
under `<report_dir>/case-data/`, written by the worker that sees the group fail
(`save_case_data`), read back by the report's figures (`load_case_data`, `load_case_meta`).

The data itself is plain arrays taken from the group's Summary on the harness side
(`harness.figure_data`); this module only keeps it and reads it back.
"""

from __future__ import annotations

import json
import os

import numpy as np


def save_case_data(path: str, data: dict, meta: dict | None = None) -> str:
    """Write the figure data of one (candidate, case, dtype, device) to `path` (.npz).

    `data`: `harness.figure_data.figure_data(summary, law)`: ``about`` (completes `meta`) and
    the named numpy values, kept in their order. `meta` (optional, recommended): candidate,
    case, device, stage ... stored as JSON so the renderer need not parse the file name.
    """
    info = dict(meta or {})
    for key, value in data.get("about", {}).items():
        info.setdefault(key, value)
    values = {k: v for k, v in data.items() if k != "about"}
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp.npz"  # write then rename: a crash mid-write leaves no half file behind
    np.savez_compressed(tmp, meta=np.array(json.dumps(info, default=str)), **values)
    os.replace(tmp, path)
    return path


def load_case_data(path: str, case_ids=()) -> dict:
    """A case-data file; its meta from inside the file, completed from its name (`case_ids`: the
    known case ids, which contain '-' as candidate names do)."""
    with np.load(path, allow_pickle=False) as z:
        data = {k: z[k] for k in z.files}
    meta = json.loads(str(data.pop("meta"))) if "meta" in data else {}
    for k, v in list(data.items()):
        if v.ndim == 0:
            data[k] = v.item()
    data["meta"] = _completed_meta(path, meta, case_ids)
    return data


def load_case_meta(path: str, case_ids=()) -> dict:
    """The meta `load_case_data` gives a file, without reading (or decompressing) its arrays."""
    with np.load(path, allow_pickle=False) as z:
        meta = json.loads(str(z["meta"])) if "meta" in z.files else {}
    return _completed_meta(path, meta, case_ids)


def _completed_meta(path: str, stored: dict, case_ids) -> dict:
    return meta_from_name(path, case_ids) | {k: v for k, v in stored.items() if v is not None}


def meta_from_name(path: str, case_ids=()) -> dict:
    """(candidate, case, dtype, device) from `<candidate>-<case>-<dtype>-<device>.npz`; case ids
    and candidate names both contain '-', so the case is found among `case_ids`."""
    stem = os.path.basename(path)[:-4] if path.endswith(".npz") else os.path.basename(path)
    parts = stem.rsplit("-", 2)
    if len(parts) < 3:
        return {}
    head, dtype, device = parts
    for cid in sorted(case_ids, key=len, reverse=True):
        if head.endswith("-" + cid):
            return {"candidate": head[: -len(cid) - 1], "case": cid, "dtype": dtype, "device": device}
    cand, _, case = head.partition("-")
    return {"candidate": cand, "case": case, "dtype": dtype, "device": device}
