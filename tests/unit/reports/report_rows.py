"""A crafted results row, as the harness writes one, for the self-tests of reports/ (imported by
name: pytest puts this directory on sys.path for the tests beside it)."""

from __future__ import annotations

import math


def row(case="normal-2sigma", dtype="float32", check="gof", verdict="pass", candidate="torch",
        device="cpu", **kw) -> dict:
    """One row of `check` on `case` in `dtype`; keyword arguments override or add columns."""
    r = {"candidate": candidate, "candidate_version": "2.13.0", "candidate_spec": candidate,
         "case": case, "dtype": dtype, "device": device, "check": check, "verdict": verdict,
         "message": kw.pop("message", f"{check} ok"), "n": 65536, "n_stage1": 65536, "n_stage2": 0,
         "statistic": 1.0, "p_value": 0.5, "p_value_stage1": 0.5, "p_value_stage2": math.nan,
         "seed": 123, "effect": 0.01, "effect_unit": "sigma", "mde": 0.05, "alpha_suspect": 1e-3,
         "alpha_fail": 1e-3, "candidate_s": 0.01, "harness_s": 0.02, "mean": 0.0, "std": 1.0,
         "a": -2.0, "b": 2.0, "shape": "256x256", "worker": "gw0", "profile": "smoke", "details": ""}
    if verdict in ("fail", "error", "xfail"):
        r["repro"] = (f"pytest suites --candidate {candidate} --cases {case} --dtypes {dtype} "
                      f"--devices {device} -k test_{check}")
    r.update(kw)
    return r
