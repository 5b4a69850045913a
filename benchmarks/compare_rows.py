"""Do two reports give the same rows? The row-for-row check of a refactoring.

A change that should not change behaviour (a module split, a renamed class, a new fold layout) is
run before and after on the same grid and seed; this script compares the two reports' rows by key
(candidate, case, dtype, device, check) on everything a verdict rests on: the verdict, the
statistic, the p-values of both stages, the samples drawn, the effect, the MDE and the message.
Columns that vary with the machine's speed (times, rates, the worker, the run id, the budget
limit that a timeout sets), a time measured into a row's details (`TIMING_DETAILS`) and columns
that only the newer report has are left out and listed.

    python benchmarks/compare_rows.py BEFORE_DIR AFTER_DIR [--show 20]

Exit 0 when every key is in both and every compared field is equal (floats to the last bit,
NaN equal to NaN), 1 otherwise, with the first differences printed.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

import pandas as pd

KEY = ("candidate", "case", "dtype", "device", "check")
COMPARED = ("verdict", "statistic", "p_value", "p_value_stage1", "p_value_stage2", "n",
            "n_stage1", "n_stage2", "samples_drawn", "effect", "mde", "seed", "seed_stage2",
            "message", "details")
#: Columns that depend on the clock, the scheduler or the run, not on the samples.
TIMING = ("run_id", "started", "candidate_s", "harness_s", "samples_per_s",
          "normal_samples_per_s", "speed_vs_normal", "worker", "budget_limited")
#: Entries of a row's details that are times measured in the run (the `threads` check's
#: one-thread call), left out of the details compared.
TIMING_DETAILS = ("one_thread_s",)


def read_rows(directory: str) -> pd.DataFrame:
    path = Path(directory) / "results.csv"
    if not path.is_file():
        raise SystemExit(f"compare_rows: no results.csv in {directory}")
    rows = pd.read_csv(path, low_memory=False, keep_default_na=False, dtype=str)
    if "details" in rows.columns:
        rows["details"] = rows["details"].map(without_timing)
    return rows


def without_timing(details: str) -> str:
    """A row's details as written, less the TIMING_DETAILS entries (text that is no dict is
    kept as it is)."""
    if not any(name in details for name in TIMING_DETAILS):
        return details
    try:
        parsed = ast.literal_eval(details)
    except (ValueError, SyntaxError):
        return details
    if not isinstance(parsed, dict):
        return details
    return repr({k: v for k, v in parsed.items() if k not in TIMING_DETAILS})


def same(a: pd.Series, b: pd.Series) -> pd.Series:
    """Equal as text (the CSV's round-trip repr of a float is exact), else equal as numbers."""
    equal = a == b
    numeric_a = pd.to_numeric(a, errors="coerce")
    numeric_b = pd.to_numeric(b, errors="coerce")
    both_nan = numeric_a.isna() & numeric_b.isna() & (a.str.lower().isin(["nan", ""]))
    return equal | (numeric_a == numeric_b) | (both_nan & (b.str.lower().isin(["nan", ""])))


def compare(before: pd.DataFrame, after: pd.DataFrame, show: int) -> int:
    key = list(KEY)
    for name, df in (("before", before), ("after", after)):
        duplicated = df.duplicated(key).sum()
        if duplicated:
            print(f"{name}: {duplicated} duplicated keys")
            return 1
    merged = before.merge(after, on=key, how="outer", suffixes=("_before", "_after"),
                          indicator=True)
    only = merged[merged["_merge"] != "both"]
    fields = [c for c in COMPARED if c in before.columns and c in after.columns]
    both = merged[merged["_merge"] == "both"]
    differing = {}
    for field in fields:
        mask = ~same(both[f"{field}_before"], both[f"{field}_after"])
        if mask.any():
            differing[field] = both[mask]
    print(f"rows: before {len(before)}, after {len(after)}, in both {len(both)}, "
          f"in one only {len(only)}")
    print("compared: " + ", ".join(fields))
    print("left out (timing): " + ", ".join(c for c in TIMING if c in before.columns))
    new = sorted(set(after.columns) - set(before.columns))
    print("left out (only in after): " + (", ".join(new) if new else "none"))
    for field, rows in differing.items():
        print(f"\n{field}: {len(rows)} rows differ")
        for _, row in rows.head(show).iterrows():
            print("  " + "/".join(row[k] for k in key) + f": {row[f'{field}_before']!r} -> "
                  f"{row[f'{field}_after']!r}")
    if len(only):
        print(only[key + ["_merge"]].head(show).to_string())
    verdicts = both["verdict_before"].value_counts().to_dict()
    print(f"\nverdicts (before): {verdicts}")
    ok = not differing and not len(only)
    print("SAME ROWS" if ok else "ROWS DIFFER")
    return 0 if ok else 1


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("before")
    p.add_argument("after")
    p.add_argument("--show", type=int, default=20, help="differences printed per field")
    args = p.parse_args(argv)
    return compare(read_rows(args.before), read_rows(args.after), args.show)


if __name__ == "__main__":
    sys.exit(main())
