"""Grid partitions: which case groups this process runs when one run is split across machines.

A nightly run is more than one machine holds, so CI runs it as N jobs (partitions of the grid),
each given its index K in 0..N-1. This module decides, identically on every machine, which groups
partition K runs:

* The unit of assignment is the **group** (`harness.fleet.group_ledger`: the parametrization id of a test,
  ``candidate-case-dtype-device`` today, extended by whatever the grid's key grows to). The
  partitioner only ever sees group keys, never their parts.
* `resolve_partition` reads ``--partition-id K --num-partitions N`` (0-based; ``--shard-id`` and
  ``--num-shards`` are their former names), or, when neither flag is given, a CI system's
  variables (`ENV_SOURCES`). Half of a pair, a non-integer, or an index not below the count is a
  `PartitionError` (one line; the plugin turns it into exit status 4): a CI that silently runs
  the whole grid on every partition is the failure this prevents.
* `assign` places every group of the grid on one partition: greedy longest-processing-time over the
  groups' durations in an earlier run's results (``--durations-from DIR``: candidate_s +
  harness_s summed per group, whole milliseconds), heaviest first, each onto the least-loaded
  partition. Without durations every group weighs the same, which deals the groups out round-robin
  in the order of a stable hash of their key (BLAKE2b; never Python's salted ``hash``). Ties are
  broken by that hash, then the key, then the lower partition index, so the answer depends on the
  grid, N and the durations only: not on the machine, the process, or the order groups were
  listed in.

"Grid partitions" are not "sharded parameters" (DTensors across ranks, `harness.sharded`):
this module splits the *grid* across CI jobs and never touches a tensor. Seeds derive from the
case (`harness.seeds`), not from the partition, so a partitioned run's rows equal a whole run's.
"""

from __future__ import annotations

import hashlib
import math
import os
from dataclasses import dataclass, field

import pandas as pd

from record.store import ReportError, read_results

#: Where a partition's index and count come from when the flags are not given, in the order they are
#: read: (system, index variable, count variable, first index). Kubernetes Indexed Jobs give the
#: index only; the count is ``--num-partitions`` or `COUNT_VARIABLE`.
ENV_SOURCES = (
    ("Kubernetes Indexed Job", "JOB_COMPLETION_INDEX", None, 0),
    ("Buildkite", "BUILDKITE_PARALLEL_JOB", "BUILDKITE_PARALLEL_JOB_COUNT", 0),
    ("CircleCI", "CIRCLE_NODE_INDEX", "CIRCLE_NODE_TOTAL", 0),
    ("GitLab CI", "CI_NODE_INDEX", "CI_NODE_TOTAL", 1),
)
#: The partition count where the index comes from JOB_COMPLETION_INDEX (the Job's
#: .spec.completions), and the variable's former name, still read when it is not set.
COUNT_VARIABLE = "HARNESS_NUM_PARTITIONS"
COUNT_VARIABLE_ALIAS = "HARNESS_NUM_SHARDS"
#: Every variable `resolve_partition` reads (tests clear them to run the whole grid).
PARTITION_VARIABLES = tuple(sorted({v for _, i, c, _ in ENV_SOURCES for v in (i, c) if v}
                                   | {COUNT_VARIABLE, COUNT_VARIABLE_ALIAS}))


class PartitionError(Exception):
    """A partition that cannot be resolved; str() is one line naming the flag or variable."""


@dataclass(frozen=True)
class PartitionSpec:
    """Partition `id` of `count` (0-based), and where that came from (the header, the manifest)."""

    id: int
    count: int
    source: str

    def as_dict(self) -> dict:
        return {"id": self.id, "count": self.count, "source": self.source}


def _integer(name: str, text) -> int:
    value = str(text).strip()
    try:
        return int(value)
    except ValueError:
        raise PartitionError(f"{name}: expected an integer, got {value!r}") from None


def _checked(index: int, count: int, source: str, index_name: str, count_name: str,
             first: int = 0) -> PartitionSpec:
    if count < 1:
        raise PartitionError(f"{count_name}: the partition count must be at least 1, got {count}")
    if not first <= index < count + first:
        base = "1-based" if first else "0-based"
        raise PartitionError(f"{index_name}: partition index {index} is not in "
                             f"{first}..{count - 1 + first} ({base}, {count_name} {count})")
    return PartitionSpec(index - first, count, source)


def resolve_partition(partition_id=None, num_partitions=None, environ=None) -> PartitionSpec | None:
    """The partition this process is, or None for an unpartitioned run.

    `partition_id`/`num_partitions`: the flags' raw values (None when not given). The flags win
    over the environment, so ``--partition-id 0 --num-partitions 1`` runs the whole grid anywhere.
    """
    environ = os.environ if environ is None else environ
    if COUNT_VARIABLE not in environ and COUNT_VARIABLE_ALIAS in environ:
        environ = {**environ, COUNT_VARIABLE: environ[COUNT_VARIABLE_ALIAS]}
    if partition_id is not None or num_partitions is not None:
        if num_partitions is None:
            raise PartitionError(f"--partition-id {partition_id}: give --num-partitions too")
        count = _integer("--num-partitions", num_partitions)
        if partition_id is None:
            # The count alone: the index is a Kubernetes Indexed Job's.
            index_text = environ.get("JOB_COMPLETION_INDEX")
            if index_text is None:
                raise PartitionError(f"--num-partitions {count}: give --partition-id too (or run "
                                     f"where JOB_COMPLETION_INDEX is set)")
            return _checked(_integer("JOB_COMPLETION_INDEX", index_text), count,
                            "JOB_COMPLETION_INDEX, --num-partitions", "JOB_COMPLETION_INDEX",
                            "--num-partitions")
        return _checked(_integer("--partition-id", partition_id), count,
                        "--partition-id/--num-partitions", "--partition-id", "--num-partitions")

    found = []
    for system, index_name, count_name, first in ENV_SOURCES:
        index_text = environ.get(index_name)
        count_name = count_name or COUNT_VARIABLE
        count_text = environ.get(count_name)
        if index_text is None and count_text is None:
            continue
        if index_text is None:
            count = _integer(count_name, count_text)
            if count == 1 and count_name != COUNT_VARIABLE:
                continue  # GitLab sets CI_NODE_TOTAL=1 on every job without `parallel:`
            raise PartitionError(f"{count_name}={count_text} is set but {index_name} is not "
                                 f"({system}): give both, or --partition-id K --num-partitions N")
        if count_text is None:
            how = (f"pass --num-partitions N or set {COUNT_VARIABLE}" if count_name == COUNT_VARIABLE
                   else f"set {count_name} too, or pass --partition-id K --num-partitions N")
            raise PartitionError(f"{index_name}={index_text} is set but the partition count is not "
                                 f"({system}): {how}")
        index, count = _integer(index_name, index_text), _integer(count_name, count_text)
        spec = _checked(index, count, f"{index_name}/{count_name}" + (" (1-based)" if first else ""),
                        index_name, count_name, first)
        if spec.count > 1:  # CircleCI says "node 0 of 1" on every job without parallelism
            found.append(spec)
    if not found:
        return None
    first_spec = found[0]
    for other in found[1:]:
        if (other.id, other.count) != (first_spec.id, first_spec.count):
            raise PartitionError(f"conflicting partition variables: {first_spec.source} says "
                                 f"partition {first_spec.id} of {first_spec.count}, {other.source} "
                                 f"says {other.id} of {other.count}; pass --partition-id K "
                                 f"--num-partitions N")
    return first_spec


# ------------------------------------------------------------------------------------------------
# Assignment


def stable_hash(key: str) -> int:
    """A 64-bit hash of a group key, the same in every process and on every machine."""
    return int.from_bytes(hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest(), "big")


@dataclass(frozen=True)
class Partition:
    """The whole grid's assignment, and this process's partition of it."""

    spec: PartitionSpec
    assignment: dict = field(hash=False)  # group key -> partition index, every group of the grid
    method: str = "hash"  # or "durations"
    weights: dict = field(default_factory=dict, hash=False)  # group -> ms used ("durations" only)
    known: int = 0  # groups whose duration the earlier run gave
    durations_from: str | None = None

    @property
    def groups(self) -> list[str]:
        """This partition's groups, sorted."""
        return sorted(g for g, k in self.assignment.items() if k == self.spec.id)

    def owns(self, group: str) -> bool:
        """Whether this partition runs `group`. A group outside the grid (a test the harness did not
        parametrize) goes by its hash alone, so it too runs on exactly one partition."""
        k = self.assignment.get(group)
        if k is None:
            k = stable_hash(group) % self.spec.count
        return k == self.spec.id

    def loads(self) -> list[int]:
        """Estimated milliseconds (durations) or group counts (hash) per partition."""
        out = [0] * self.spec.count
        for g, k in self.assignment.items():
            out[k] += self.weights.get(g, 1)
        return out

    def describe(self) -> str:
        """One line for the pytest header."""
        s = self.spec
        text = (f"partition {s.id} of {s.count} (from {s.source}): {len(self.groups)} of "
                f"{len(self.assignment)} groups")
        if self.method == "durations":
            loads = self.loads()
            text += (f", ~{loads[s.id] / 1000:.0f} s of {sum(loads) / 1000:.0f} s by the durations "
                     f"in {self.durations_from} ({self.known} of {len(self.assignment)} groups "
                     f"known, the others at the median)")
        else:
            text += ", assigned by a stable hash of the group key"
        return text


def assign(groups, count: int, durations: dict | None = None) -> tuple[dict, dict]:
    """(group -> partition index, group -> weight in ms) for every group, by LPT (module docstring).

    `durations`: group key -> seconds from an earlier run; groups it lacks weigh the median of
    those it has (1 ms if it has none of them). Without durations every group weighs 1.
    """
    groups = sorted(set(groups))
    if count < 1:
        raise ValueError("count must be at least 1")
    if durations is not None:
        known = {g: max(1, int(round(float(durations[g]) * 1000))) for g in groups if g in durations}
        fill = sorted(known.values())[len(known) // 2] if known else 1
        weights = {g: known.get(g, fill) for g in groups}
    else:
        weights = {g: 1 for g in groups}
    order = sorted(groups, key=lambda g: (-weights[g], stable_hash(g), g))
    loads = [0] * count
    assignment = {}
    for g in order:
        k = min(range(count), key=lambda i: (loads[i], i))
        assignment[g] = k
        loads[k] += weights[g]
    return assignment, weights


def plan(spec: PartitionSpec, grid_groups, durations: dict | None = None,
         durations_from: str | None = None) -> Partition:
    """The partition of `grid_groups` for `spec` (durations: group -> seconds, or None)."""
    assignment, weights = assign(grid_groups, spec.count, durations)
    if durations is None:
        return Partition(spec, assignment)
    known = sum(1 for g in assignment if g in durations)
    return Partition(spec, assignment, "durations", weights, known, durations_from)


def load_durations(report_dir: str) -> dict:
    """Seconds per group (candidate_s + harness_s summed over its rows) from a report directory;
    PartitionError with one line when it cannot be read or holds no group durations."""
    try:
        df = read_results(report_dir)
    except ReportError as exc:
        raise PartitionError(f"--durations-from: {exc}") from None
    if "group" not in df.columns or df["group"].isna().all():
        raise PartitionError(f"--durations-from: {report_dir!r}: the results have no group column "
                             f"(written by an older harness)")
    seconds = (pd.to_numeric(df["candidate_s"], errors="coerce").fillna(0.0)
               + pd.to_numeric(df["harness_s"], errors="coerce").fillna(0.0))
    totals = seconds.groupby(df["group"]).sum()
    out = {str(g): float(s) for g, s in totals.items() if isinstance(g, str) and math.isfinite(s)}
    if not out:
        raise PartitionError(f"--durations-from: {report_dir!r}: no group durations in the results")
    return out
