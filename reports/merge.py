"""`python -m reports merge DIR... --out DIR`: one report from a run split across machines.

Rows are concatenated. A (candidate, case, dtype, device, check) present in more than one input is
an error unless the rows agree on everything but the columns that describe when, where and how
fast they ran (`store.VOLATILE`): the seeds are derived from the run seed and the case, so two
inputs that both ran a case must have produced the same verdict, statistic and p-values. The case
data of all inputs is copied over, their shrunk boundaries (``boundaries.json``) joined, and the
usual files are written, so `show`, `compare` and `map` read the result like any other run.

**Grid partitions.** When the inputs are partitions of a partitioned run (their manifests name
one under ``shard``, `record.manifest`), the merge is strict (`check_coverage`):

* the partitions must have been split the same way (the same partition count, the same
  assignment of the same grid, the same run options, the harm thresholds included): otherwise
  they are not one run (ReportError: exit 2);
* a partition that was retried keeps its latest attempt, by end time; the earlier ones are dropped;
* no group may have been run by a partition other than the one it was assigned to (overlap: exit 1);
* every group of the grid must have been run to the end by its partition; missing partitions and
  missing groups are named, and the run is incomplete (exit 1) unless ``--allow-partial``. An input
  directory with neither results nor a manifest (what a partition that died may leave) is ignored
  with a warning: its partition shows as missing.

The merged report is written in every case but a ReportError, with the coverage in its manifest
and, when something is missing, at the top of summary.md and index.html. Reports written without
a partition (by hand with ``--cases``, or before manifests existed) merge as before, unchecked
but for the harm thresholds their environment.json records (`check_thresholds`: levels graded at
other thresholds do not mix in one report); mixing them with partitions is an error.
"""

from __future__ import annotations

import json
import os
import shutil
from collections import Counter
from dataclasses import dataclass, field

import pandas as pd

from record.leases import ReportDirHeld, lock_report_dir, unlock_report_dir
from record.manifest import FORMAT, read_manifest, write_manifest
from record.store import (CASE_DATA_DIR, ROW_LOG, SORT_KEYS, VOLATILE, ReportError, normalize,
                          read_environment, write_tables)

from .map import BOUNDARIES, read_boundaries
from .render import write_views
from .report import read_report

#: Group names listed per line on stderr (manifest.json lists them all).
MAX_NAMES = 8


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
        # Devices differ between partitions; name them all.
        names_map: dict = {}
        for e in envs:
            names_map.update(e.get("device_names") or {})
        if names_map:
            common["device_names"] = names_map
        # The case order of the views: every input's, in the order they first appear.
        cases = list(dict.fromkeys(c for e in envs for c in e.get("cases") or ()))
        if cases:
            common["cases"] = cases
    common["run_id"] = "merged-" + "+".join(str(e.get("run_id", "?")) for e in envs)
    common["merged_from"] = [{"dir": os.path.abspath(n), **e} for n, e in zip(names, envs)]
    return common


def merge_boundaries(dirs: list[str], out: str) -> None:
    """Write `out`'s boundaries.json: every input's shrunk boundaries, in input order, each once
    (each partition shrank the failing explored cases it ran; inputs that overlap can hold the same
    one). Where no input has the file, `out` has none either, so an earlier merge into the same
    directory leaves no boundaries behind."""
    path = os.path.join(out, BOUNDARIES)
    sources = [d for d in dirs if os.path.exists(os.path.join(d, BOUNDARIES))]
    if not sources:
        if os.path.exists(path):
            os.remove(path)
        return
    joined, seen = [], set()
    for d in sources:
        for item in read_boundaries(d):
            key = json.dumps(item, sort_keys=True, default=str)
            if key not in seen:
                seen.add(key)
                joined.append(item)
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(joined, fh, indent=1, default=str)


# ------------------------------------------------------------------------------------------------
# Coverage of a partitioned run


@dataclass
class PartitionReport:
    """One input directory: its manifest and its rows."""

    dir: str
    manifest: dict | None
    frame: pd.DataFrame

    @property
    def id(self) -> int:
        return self.manifest["shard"]["id"]

    @property
    def attempt_key(self) -> tuple:
        m = self.manifest
        return (float(m.get("finished_ts") or 0.0), float(m.get("started_ts") or 0.0), self.dir)

    def rows_per_group(self) -> Counter:
        if "group" not in self.frame.columns:
            return Counter()
        return Counter(g for g in self.frame["group"] if isinstance(g, str))


@dataclass
class Coverage:
    """What a partitioned run's partitions covered (empty lists: complete)."""

    count: int
    present: list = field(default_factory=list)  # partition ids kept
    missing_partitions: list = field(default_factory=list)
    missing_groups: dict = field(default_factory=dict)  # group -> why
    overlaps: dict = field(default_factory=dict)  # group -> partition ids that ran it
    superseded: list = field(default_factory=list)  # dirs of earlier attempts, dropped
    warnings: list = field(default_factory=list)
    groups: int = 0  # in the grid

    @property
    def complete(self) -> bool:
        return not self.missing_partitions and not self.missing_groups

    def as_dict(self) -> dict:
        return {"partitions": self.count, "present": self.present,
                "missing_partitions": self.missing_partitions, "groups": self.groups,
                "missing_groups": dict(sorted(self.missing_groups.items())),
                "overlaps": dict(sorted(self.overlaps.items())), "superseded": self.superseded,
                "warnings": self.warnings, "complete": self.complete}

    def problem_lines(self) -> list[str]:
        """What is wrong, one line each (empty: nothing): for stderr and the report's top."""
        lines = []
        by_missing_partition: dict = {}
        other: dict = {}
        for group, why in sorted(self.missing_groups.items()):
            if why.startswith("partition ") and why.endswith(" missing"):
                by_missing_partition.setdefault(why, []).append(group)
            else:
                other[group] = why
        for k in self.missing_partitions:
            groups = by_missing_partition.get(f"partition {k} missing", [])
            lines.append(f"partition {k} of {self.count} is missing: its {len(groups)} group(s) were "
                         f"not run: {_names(groups)}")
        for why, groups in _by_reason(other).items():
            lines.append(f"{len(groups)} group(s) {why}: {_names(groups)}")
        for group, partitions in sorted(self.overlaps.items()):
            lines.append(f"overlap: group {group} was run by partitions {', '.join(map(str, partitions))}")
        return lines

    def status_line(self) -> str:
        text = (f"{len(self.present)} of {self.count} partition(s), "
                f"{self.groups - len(self.missing_groups)} of {self.groups} group(s) run")
        if self.superseded:
            text += f"; {len(self.superseded)} earlier attempt(s) dropped"
        if self.overlaps:
            return f"OVERLAPPING partitions: {len(self.overlaps)} group(s) run twice; {text}"
        return ("complete: " if self.complete else "INCOMPLETE: ") + text


def _names(groups: list) -> str:
    shown = ", ".join(groups[:MAX_NAMES])
    return shown + (f", … {len(groups) - MAX_NAMES} more (manifest.json lists them)"
                    if len(groups) > MAX_NAMES else "")


def _by_reason(reasons: dict) -> dict:
    out: dict = {}
    for group, why in sorted(reasons.items()):
        out.setdefault(why, []).append(group)
    return out


def _differs(a: dict, b: dict) -> str:
    """How two assignments differ, in a few words ('' when equal)."""
    if a == b:
        return ""
    only_a, only_b = sorted(set(a) - set(b)), sorted(set(b) - set(a))
    if only_a or only_b:
        return (f"their grids differ ({len(only_a)} group(s) only in the first, e.g. "
                f"{only_a[:1] or '-'}; {len(only_b)} only in the second, e.g. {only_b[:1] or '-'}: "
                f"other --cases/--dtypes/--devices/--candidate, or a different number of GPUs)")
    moved = sorted(g for g in a if a[g] != b[g])
    return (f"{len(moved)} group(s) are assigned to other partitions, e.g. {moved[0]} to {a[moved[0]]} "
            f"vs {b[moved[0]]} (one used --durations-from and the other not, or other durations)")


def option_difference(key: str, a, b) -> str:
    """One option two runs set otherwise, in a few words: 'alpha_fail 1e-06 vs 1e-05'; for an
    option that is a table (the harm thresholds), only its entries that differ:
    'harm_thresholds moved@0.5 0.03 vs 0.05'."""
    if isinstance(a, dict) and isinstance(b, dict):
        keys = [k for k in dict.fromkeys([*a, *b]) if a.get(k) != b.get(k)]
        return f"{key} " + ", ".join(f"{k} {a.get(k)!r} vs {b.get(k)!r}" for k in keys)
    return f"{key} {a!r} vs {b!r}"


def check_thresholds(envs: list[dict], names: list[str]) -> None:
    """ReportError when two inputs graded their levels at other harm thresholds (their
    environment.json's ``harm_thresholds``; an input that records none, written before the
    thresholds existed, is not compared)."""
    recorded = [(name, env["harm_thresholds"]) for name, env in zip(names, envs)
                if isinstance(env.get("harm_thresholds"), dict)]
    if not recorded:
        return
    first, reference = recorded[0]
    for name, thresholds in recorded[1:]:
        if thresholds != reference:
            raise ReportError(f"merge: {first!r} and {name!r} graded their levels at other harm "
                              f"thresholds: {option_difference('harm_thresholds', reference, thresholds)}"
                              f" (rerun one with the other's --harm-thresholds)")


def check_coverage(partitions: list[PartitionReport]) -> tuple[list[PartitionReport], Coverage]:
    """(the attempts kept, their coverage) for the partitions of one partitioned run; ReportError when
    they are not partitions of one run. See the module docstring."""
    counts = {s.manifest["shard"]["count"] for s in partitions}
    if len(counts) > 1:
        raise ReportError(f"merge: the partitions name different partition counts ({sorted(counts)}): "
                          f"not one partitioned run")
    count = counts.pop()
    by_id: dict = {}
    for s in partitions:
        if not 0 <= s.id < count:
            raise ReportError(f"merge: {s.dir!r}: partition id {s.id} is not in 0..{count - 1}")
        by_id.setdefault(s.id, []).append(s)
    kept, superseded = [], []
    for k in sorted(by_id):
        attempts = sorted(by_id[k], key=lambda s: s.attempt_key)
        kept.append(attempts[-1])
        superseded += [s.dir for s in attempts[:-1]]
    ref = kept[0]
    assignment = ref.manifest["assignment"]
    for s in kept[1:]:
        why = _differs(assignment, s.manifest["assignment"])
        if why:
            raise ReportError(f"merge: partition {ref.id} ({ref.dir}) and partition {s.id} ({s.dir}) were "
                              f"split differently: {why}")
        a, b = ref.manifest.get("config") or {}, s.manifest.get("config") or {}
        diff = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
        if diff:
            key = diff[0]
            raise ReportError(f"merge: partition {ref.id} ({ref.dir}) and partition {s.id} ({s.dir}) ran "
                              f"other options: {option_difference(key, a.get(key), b.get(key))}"
                              + (f" (and {', '.join(diff[1:])})" if len(diff) > 1 else ""))
    cov = Coverage(count=count, present=[s.id for s in kept], superseded=superseded,
                   groups=len(assignment))
    cov.missing_partitions = [k for k in range(count) if k not in by_id]
    shas = {(s.manifest.get("git") or {}).get("sha") for s in kept} - {None}
    if len(shas) > 1:
        cov.warnings.append(f"the partitions ran different harness commits: {', '.join(sorted(shas))}")
    ran_by: dict = {}
    rows_of = {s.id: s.rows_per_group() for s in kept}
    for s in kept:
        for group in set(rows_of[s.id]) | set(s.manifest.get("groups") or []):
            ran_by.setdefault(group, []).append(s.id)
    for group, ids in ran_by.items():
        owner = assignment.get(group)
        if len(ids) > 1 or (owner is not None and ids[0] != owner):
            cov.overlaps[group] = sorted(set(ids) | ({owner} if owner is not None else set()))
    present = {s.id: s for s in kept}
    for group, k in assignment.items():
        if k not in present:
            cov.missing_groups[group] = f"partition {k} missing"
            continue
        rows = rows_of[k].get(group, 0)
        tests = int((present[k].manifest.get("tests") or {}).get(group, 0))
        if rows == 0:
            cov.missing_groups[group] = f"not run by partition {k} (its -k/-m, or it stopped early)"
        elif rows < tests:
            cov.missing_groups[group] = f"cut short in partition {k} (fewer rows than tests collected)"
    return kept, cov


# ------------------------------------------------------------------------------------------------


@dataclass
class Merged:
    path: str
    coverage: Coverage | None  # None: the inputs were not grid partitions (unchecked merge)
    partial: list = field(default_factory=list)  # inputs whose run did not finish, one line each


def merge(dirs: list[str], out: str, allow_partial: bool = False) -> Merged:
    """Merge `dirs` into `out`; see the module docstring. `allow_partial` is recorded in the
    merged manifest (the exit status is the command line's business)."""
    if not dirs:
        raise ReportError("merge: no input directories")
    if any(os.path.abspath(d) == os.path.abspath(out) for d in dirs):
        raise ReportError("merge: --out must differ from every input")
    inputs, empty, partial = [], [], []
    for d in dirs:
        manifest = read_manifest(d)
        if manifest is None and os.path.isdir(d) and not any(
                os.path.exists(os.path.join(d, f)) for f in ("results.parquet", "results.csv", ROW_LOG)):
            empty.append(d)  # e.g. the artifact of a partition that died: case data, no report
            continue
        report = read_report(d, allow_empty=True)  # a partition may have had nothing to run
        inputs.append(PartitionReport(d, report.manifest, report.frame))
        if report.partial:
            partial.append(f"{d!r} is partial: {report.partial}")
    partitioned = [s for s in inputs if s.manifest is not None and s.manifest.get("shard")]
    if empty and not partitioned:
        read_report(empty[0])  # not partitions: an input without results is an error, as it was
    coverage = None
    if partitioned:
        plain = [s.dir for s in inputs if s not in partitioned]
        if plain:
            raise ReportError(f"merge: {plain[0]!r} is not a grid partition (its manifest names no "
                              f"partition) but {partitioned[0].dir!r} is: merge the partitions of one run")
        inputs, coverage = check_coverage(inputs)
        coverage.warnings += [f"{d!r} holds no report (a partition that did not finish?): ignored"
                              for d in empty]
    names = [s.dir for s in inputs]
    if coverage is None:  # partitions compare their thresholds with their other options
        check_thresholds([read_environment(d) for d in names], names)
    df = merge_frames([s.frame for s in inputs], names)
    os.makedirs(os.path.join(out, CASE_DATA_DIR), exist_ok=True)
    try:  # one writer per directory: a run or another merge into `out` is refused
        lock_report_dir(out, "reports merge")  # a dead writer's lock is taken over silently
    except ReportDirHeld as exc:
        raise ReportError(f"merge: --out {exc}".replace("--report-dir: ", "")) from None
    try:
        return _write_merged(inputs, names, df, out, coverage, partial, allow_partial)
    finally:
        unlock_report_dir(out)


def _write_merged(inputs, names, df, out, coverage, partial, allow_partial) -> Merged:
    """The merged report's files, written into `out` while this process holds it."""
    for d in names:
        src = os.path.join(d, CASE_DATA_DIR)
        if os.path.isdir(src):
            for name in os.listdir(src):
                if name.endswith(".npz"):
                    shutil.copy2(os.path.join(src, name), os.path.join(out, CASE_DATA_DIR, name))
    merge_boundaries(names, out)  # before the views, which list and draw them
    write_tables(df, out)
    env = merge_environments([read_environment(d) for d in names], names)
    if coverage is not None:
        env["coverage"] = coverage.as_dict()
        if not coverage.complete or coverage.overlaps:
            env["coverage_problems"] = [coverage.status_line()] + coverage.problem_lines()
    with open(os.path.join(out, "environment.json"), "w", encoding="utf-8") as fh:
        json.dump(env, fh, indent=2, default=str)
    if coverage is None and partial:  # unpartitioned inputs: nothing else says what is missing
        env["coverage_problems"] = partial
    manifest = merged_manifest(inputs, coverage, allow_partial, partial)
    manifest["rows"] = len(df)
    write_manifest(out, manifest)
    write_views(df, env, out)
    return Merged(os.path.abspath(out), coverage, partial)


def merged_manifest(inputs: list[PartitionReport], coverage: Coverage | None, allow_partial: bool,
                    partial=()) -> dict:
    """The merged report's manifest: unpartitioned (``shard`` null) with the grid, the groups run, the
    coverage, and each input's partition, machine and times."""
    manifests = [s.manifest or {} for s in inputs]
    assignment: dict = {}
    for m in manifests:
        assignment.update(m.get("assignment") or {})
    groups = set()
    for s in inputs:
        groups |= set(s.rows_per_group())
    tests: Counter = Counter()
    for m in manifests:
        tests.update(m.get("tests") or {})
    keep = ("shard", "host", "platform", "torch", "cuda", "driver", "gpus", "git", "started",
            "finished", "exitstatus", "command")
    whole = (coverage.complete and not coverage.overlaps) if coverage is not None else not partial
    return {"format": FORMAT, "status": "complete" if whole else "partial",
            "shard": None, "assignment": {g: 0 for g in sorted(assignment)},
            "groups": sorted(groups), "tests": dict(sorted(tests.items())),
            "config": manifests[0].get("config") if manifests else None,
            "coverage": coverage.as_dict() if coverage is not None else None,
            "allow_partial": allow_partial,
            "inputs": [{"dir": os.path.abspath(s.dir), **{k: (s.manifest or {}).get(k) for k in keep}}
                       for s in inputs]}
