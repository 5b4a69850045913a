"""Minimum detectable effects of the statistical checks, as pure functions of the law and n.

`mde_table` feeds the README's MDE table: per (profile, case, dtype) and check, the effect each
check detects with probability 0.5 at level alpha (`harness.checks.registry.Registry.mdes`;
`harness.families` states the convention). No sampling: everything comes from the rounded law.
"""

from __future__ import annotations

import math

import pandas as pd

from reference import TruncatedNormal, rounded_law
from reference.dtypes import dtype_name, torch_dtype

from .registry import CHECKS


def samples_drawn(n: int, shape: tuple, min_calls: int = 2) -> int:
    """The n the engine actually draws: whole calls of the case's tensor, at least min_calls."""
    numel = max(1, math.prod(shape)) if shape else 1
    return max(min_calls, math.ceil(n / numel)) * numel


def mde_table(profile_n: dict, cases, dtypes, alpha: float = 1e-3) -> pd.DataFrame:
    """One row per (profile, case, dtype, check): columns profile, case, dtype, n, check, mde, unit.

    profile_n: profile name -> n (an int, or an object with ``.n`` and optionally ``.min_calls``
    such as `harness.cases.Profile`). cases: `harness.cases.Case` records. dtypes: torch dtypes or
    their names. n is the number of samples the engine draws for that case (whole calls).
    """
    rows = []
    for case in cases:
        dist = TruncatedNormal(case.mean, case.std, case.a, case.b)
        for dtype in dtypes:
            law = rounded_law(dist, torch_dtype(dtype))
            for profile, spec in profile_n.items():
                n_req = int(getattr(spec, "n", spec))
                min_calls = int(getattr(spec, "min_calls", 2))
                n = samples_drawn(n_req, tuple(case.shape), min_calls)
                for check, (mde, unit) in CHECKS.mdes(law, n, tuple(case.shape), alpha).items():
                    rows.append({"profile": profile, "case": case.id, "dtype": dtype_name(dtype),
                                 "n": n, "check": check, "mde": mde, "unit": unit})
    return pd.DataFrame(rows, columns=["profile", "case", "dtype", "n", "check", "mde", "unit"])


def mde_markdown(df: pd.DataFrame, dtype: str = "bfloat16") -> str:
    """A compact README table: one row per (case, check), one column per profile, for one dtype."""
    sub = df[df["dtype"] == dtype]
    wide = sub.pivot_table(index=["case", "check"], columns="profile", values="mde", aggfunc="first",
                           sort=False)
    try:
        return wide.to_markdown(floatfmt=".3g")
    except ImportError:  # tabulate not installed
        return wide.to_string(float_format=lambda v: f"{v:.3g}")
