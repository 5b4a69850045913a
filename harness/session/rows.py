"""Result rows: the plain-builtin dict of one check on one group, as it rides on a test report to
the xdist controller and lands in the results table (`record.store`)."""

from __future__ import annotations

from collections import defaultdict

from reference.dtypes import dtype_name

#: The key under which a row rides on a test report's ``user_properties``.
ROW_KEY = "harness_row"


def row_skeleton(param, check: str) -> dict:
    case = getattr(param, "case", None)
    layout = getattr(param, "layout", None)
    row = {"group": param.id, "candidate": param.candidate.name, "candidate_spec": param.candidate.spec,
           "candidate_version": param.candidate.version,
           "case": param.case_label,
           "dtype": dtype_name(param.dtype), "device": param.device, "check": check}
    if layout is not None:
        row.update(case_id=case.id, world_size=layout.world_size, placement=layout.placement,
                   rank_seeds=layout.rank_seeds)
    if case is not None:
        row.update(mean=float(case.mean), std=float(case.std), a=float(case.a), b=float(case.b),
                   alpha=float(case.alpha), beta=float(case.beta), shape=case.shape_text,
                   shape_class=case.shape_class or "grid", path=getattr(param, "path", "eager"))
    return row


def row_key(row: dict) -> tuple:
    """What makes a row one test: (candidate spec, case, dtype, device, check)."""
    return (row.get("candidate_spec"), row["case"], row["dtype"], row["device"], row["check"])


def latest_rows(rows: list[dict]) -> list[dict]:
    """One row per (candidate, case, dtype, device, check): the last reported wins (a worker
    crash is reported for the test it was running, which may run again on a new worker)."""
    return list({row_key(r): r for r in rows}.values())


def throughput(rows: list[dict]) -> dict:
    """candidate -> (samples generated, seconds inside the candidate), over both stages: each
    group's `samples_drawn` (the most any of its rows carries: the last one's) and the time
    charged to its rows."""
    drawn: dict = {}
    seconds: dict = defaultdict(float)
    for r in rows:
        seconds[r["candidate"]] += float(r.get("candidate_s") or 0.0)
        key = (r["candidate"], r["case"], r["dtype"], r["device"])
        drawn[key] = max(drawn.get(key, 0), int(r.get("samples_drawn") or 0))
    samples: dict = defaultdict(int)
    for (cand, *_), n in drawn.items():
        samples[cand] += n
    return {c: (samples[c], seconds[c]) for c in seconds}
