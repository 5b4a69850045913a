"""Grid partitions: which case groups this process runs when one run is split across machines.

A nightly run is more than one machine holds, so CI runs it as N jobs ("shards"), each given its
index K in 0..N-1. This module decides, identically on every machine, which groups shard K runs:

* The unit of assignment is the **group** (`harness.fleet.groups`: the parametrization id of a test,
  ``candidate-case-dtype-device`` today, extended by whatever the grid's key grows to). The
  partitioner only ever sees group keys, never their parts.
* `resolve_shard` reads ``--shard-id K --num-shards N`` (0-based), or, when neither flag is given,
  a CI system's variables (`ENV_SOURCES`). Half of a pair, a non-integer, or an index not below
  the count is a `PartitionError` (one line; the plugin turns it into exit status 4): a CI that
  silently runs the whole grid on every shard is the failure this prevents.
* `assign` places every group of the grid on one shard: greedy longest-processing-time over the
  groups' durations in an earlier run's results (``--durations-from DIR``: candidate_s +
  harness_s summed per group, whole milliseconds), heaviest first, each onto the least-loaded
  shard. Without durations every group weighs the same, which deals the groups out round-robin
  in the order of a stable hash of their key (BLAKE2b; never Python's salted ``hash``). Ties are
  broken by that hash, then the key, then the lower shard index, so the answer depends on the
  grid, N and the durations only: not on the machine, the process, or the order groups were
  listed in.

"Grid partitions" are not "sharded parameters" (DTensors across ranks, `harness.sharded`):
this module splits the *grid* across CI jobs and never touches a tensor. Seeds derive from the
case (`harness.seeds`), not from the shard, so a partitioned run's rows equal an unsharded run's.
"""

from __future__ import annotations

import hashlib
import math
import os
from dataclasses import dataclass, field

import pandas as pd

from reports.store import ReportError, read_results

#: Where a shard's index and count come from when the flags are not given, in the order they are
#: read: (system, index variable, count variable, first index). Kubernetes Indexed Jobs give the
#: index only; the count is ``--num-shards`` or `COUNT_VARIABLE`.
ENV_SOURCES = (
    ("Kubernetes Indexed Job", "JOB_COMPLETION_INDEX", None, 0),
    ("Buildkite", "BUILDKITE_PARALLEL_JOB", "BUILDKITE_PARALLEL_JOB_COUNT", 0),
    ("CircleCI", "CIRCLE_NODE_INDEX", "CIRCLE_NODE_TOTAL", 0),
    ("GitLab CI", "CI_NODE_INDEX", "CI_NODE_TOTAL", 1),
)
#: The shard count where the index comes from JOB_COMPLETION_INDEX (the Job's .spec.completions).
COUNT_VARIABLE = "HARNESS_NUM_SHARDS"
#: Every variable `resolve_shard` reads (tests clear them to run unsharded).
SHARD_VARIABLES = tuple(sorted({v for _, i, c, _ in ENV_SOURCES for v in (i, c) if v}
                               | {COUNT_VARIABLE}))


class PartitionError(Exception):
    """A shard that cannot be resolved; str() is one line naming the flag or variable."""


@dataclass(frozen=True)
class ShardSpec:
    """Shard `id` of `count` (0-based), and where that came from (for the header and manifest)."""

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
             first: int = 0) -> ShardSpec:
    if count < 1:
        raise PartitionError(f"{count_name}: the shard count must be at least 1, got {count}")
    if not first <= index < count + first:
        base = "1-based" if first else "0-based"
        raise PartitionError(f"{index_name}: shard index {index} is not in {first}..{count - 1 + first} "
                             f"({base}, {count_name} {count})")
    return ShardSpec(index - first, count, source)


def resolve_shard(shard_id=None, num_shards=None, environ=None) -> ShardSpec | None:
    """The shard this process is, or None for an unpartitioned run.

    `shard_id`/`num_shards`: the flags' raw values (None when not given). The flags win over the
    environment, so ``--shard-id 0 --num-shards 1`` runs the whole grid anywhere.
    """
    environ = os.environ if environ is None else environ
    if shard_id is not None or num_shards is not None:
        if num_shards is None:
            raise PartitionError(f"--shard-id {shard_id}: give --num-shards too")
        count = _integer("--num-shards", num_shards)
        if shard_id is None:
            # The count alone: the index is a Kubernetes Indexed Job's.
            index_text = environ.get("JOB_COMPLETION_INDEX")
            if index_text is None:
                raise PartitionError(f"--num-shards {count}: give --shard-id too (or run where "
                                     f"JOB_COMPLETION_INDEX is set)")
            return _checked(_integer("JOB_COMPLETION_INDEX", index_text), count,
                            "JOB_COMPLETION_INDEX, --num-shards", "JOB_COMPLETION_INDEX",
                            "--num-shards")
        return _checked(_integer("--shard-id", shard_id), count, "--shard-id/--num-shards",
                        "--shard-id", "--num-shards")

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
                                 f"({system}): give both, or --shard-id K --num-shards N")
        if count_text is None:
            how = (f"pass --num-shards N or set {COUNT_VARIABLE}" if count_name == COUNT_VARIABLE
                   else f"set {count_name} too, or pass --shard-id K --num-shards N")
            raise PartitionError(f"{index_name}={index_text} is set but the shard count is not "
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
            raise PartitionError(f"conflicting shard variables: {first_spec.source} says shard "
                                 f"{first_spec.id} of {first_spec.count}, {other.source} says "
                                 f"{other.id} of {other.count}; pass --shard-id K --num-shards N")
    return first_spec


# ------------------------------------------------------------------------------------------------
# Assignment


def stable_hash(key: str) -> int:
    """A 64-bit hash of a group key, the same in every process and on every machine."""
    return int.from_bytes(hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest(), "big")


@dataclass(frozen=True)
class Partition:
    """The whole grid's assignment, and this process's shard of it."""

    shard: ShardSpec
    assignment: dict = field(hash=False)  # group key -> shard index, for every group of the grid
    method: str = "hash"  # or "durations"
    weights: dict = field(default_factory=dict, hash=False)  # group -> ms used ("durations" only)
    known: int = 0  # groups whose duration the earlier run gave
    durations_from: str | None = None

    @property
    def groups(self) -> list[str]:
        """This shard's groups, sorted."""
        return sorted(g for g, k in self.assignment.items() if k == self.shard.id)

    def owns(self, group: str) -> bool:
        """Whether this shard runs `group`. A group outside the grid (a test the harness did not
        parametrize) goes by its hash alone, so it too runs on exactly one shard."""
        k = self.assignment.get(group)
        if k is None:
            k = stable_hash(group) % self.shard.count
        return k == self.shard.id

    def loads(self) -> list[int]:
        """Estimated milliseconds (durations) or group counts (hash) per shard."""
        out = [0] * self.shard.count
        for g, k in self.assignment.items():
            out[k] += self.weights.get(g, 1)
        return out

    def describe(self) -> str:
        """One line for the pytest header."""
        s = self.shard
        text = (f"shard {s.id} of {s.count} (from {s.source}): {len(self.groups)} of "
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
    """(group -> shard index, group -> weight in ms) for every group, by LPT (module docstring).

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


def plan(shard: ShardSpec, grid_groups, durations: dict | None = None,
         durations_from: str | None = None) -> Partition:
    """The partition of `grid_groups` for `shard` (durations: group -> seconds, or None)."""
    assignment, weights = assign(grid_groups, shard.count, durations)
    if durations is None:
        return Partition(shard, assignment)
    known = sum(1 for g in assignment if g in durations)
    return Partition(shard, assignment, "durations", weights, known, durations_from)


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
