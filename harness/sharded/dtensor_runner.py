"""Sharded parameters: W real ranks, a DeviceMesh, a DTensor parameter, and the merged Summary.

This layer sits between the candidates and the engine. For a sharded case group (a `Layout`: W
ranks, a placement, a rank seeding) it has W rank processes (gloo on CPU, NCCL on CUDA with one GPU
per rank) build a 1-D DeviceMesh and the parameter the way FSDP2 holds one (an ``nn.Parameter``
wrapping a DTensor), seed every rank (``torch.manual_seed(s)`` plus a generator seeded with s for
candidates that take one; per-rank seeds as a variant), call the candidate on the parameter with
the torch.nn.init protocol, and fold each rank's local shard into a part of the engine's Summary
(`harness.sharded.part_fold.PartFold`). The worker merges the parts (`Summary.merge`), so every existing
check runs unchanged on the whole parameter, and attaches what only sharding can break
(`ShardingStats`) for the checks `replicas`, `shards` and `sharding`. Nothing is gathered: each
rank holds its shard of one call, its chunk of calls (a W-th of the engine's chunk) and, for the
cross-shard comparisons, the other shards of one call.

Processes cannot hang the run:

* one rank pool per (xdist worker, world size, device), started once (seconds) and reused across
  groups; each rank runs one torch thread and dies with its worker (PR_SET_PDEATHSIG);
* one FileStore per draw, under the report directory (``.stores/``), so groups never share a
  rendezvous; process-group timeouts (`pg_timeout`);
* every call ends with a tiny all-reduce of (failed, over budget), so a candidate that raises or
  overruns the call timeout (SIGALRM in the rank) stops every rank at the same call, cleanly; the
  call timeout is a plain run's first call's (`harness.sharded.mesh.rank_call_limit`:
  SLOW_CALL_FACTOR times `--case-timeout` or the parameter's ``normal_`` yardstick,
  `harness.runner.case_runner.RunConfig.call_timeout`);
* the worker waits with deadlines: a rank that dies (its sentinel), sends nothing for the
  call timeout + `STALL_MARGIN_S` inside a candidate call (a call that cannot be interrupted) or
  for `HARNESS_STALL_S` (at least) outside the calls (a stuck step or collective), or
  does not report within `FAILURE_GRACE_S` of another rank's failure gets the whole pool killed
  (SIGKILL) and replaced at the next draw. The draw becomes a `CandidateFailure` ("raised" and
  "hang": fail rows; "crashed": error rows, also for a rank that never started its draw), the
  run goes on and the report is written. A stall is blamed on the rank that stopped, from what
  the ranks said (`harness.sharded.ranks.blame_stall`), whatever order they were read in.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import tempfile
import uuid

import torch

from record.ids import format_case_label
from reference.dtypes import dtype_name

from ..engine import CandidateFailure
from ..runner import CaseRunner, DrawRequest, RunConfig, RunnerCache
from ..summary import Summary
from .part_fold import ShardingStats, summary_facts
from .layout import Layout, layout_applicable
from .mesh import DrawTask, rank_call_limit
from .ranks import PoolError, get_pool


#: Seconds beyond the call timeout a rank may stay silent before the worker calls it hung.
STALL_MARGIN_S = 30.0


#: Seconds a rank may stay silent outside the candidate's calls (receiving the task, building the
#: mesh, folding, the harness's collectives) before the worker calls it stuck, at least: a busy
#: machine (two cores under a CI's load) makes these steps take tens of seconds where they take
#: a fraction of one on a quiet one, and such a rank is slow, not stuck. Twice the stall limit
#: where that is longer.
HARNESS_STALL_S = 120.0


#: Calls of stage 1 compared with the unsharded tensor from the same seed (the `sharding` check).
REFERENCE_CALLS = 4


def case_label(case, layout: Layout) -> str:
    """The case column of a sharded group's rows: ``case@layout`` (`record.ids`)."""
    return format_case_label(dataclasses.replace(case.label, layout=layout.label))


def sharded_skip_reason(layout: Layout, device: str, shape: tuple) -> str | None:
    """Why this (layout, device, case shape) cannot run here (None: it can); a skip, not an error."""
    why = layout_applicable(shape, layout)
    if why:
        return why
    try:
        import torch.distributed as dist
    except ImportError:  # pragma: no cover - every supported torch has it
        return "torch.distributed is not part of this torch build"
    if not dist.is_available():
        return "torch.distributed is not available in this torch build"
    dev = torch.device(device)
    if dev.type == "cpu":
        if not dist.is_gloo_available():
            return "sharded runs on CPU need the gloo backend, which this torch lacks"
        return None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            return f"device {device}: cuda is not available on this machine"
        if not dist.is_nccl_available():
            return "sharded runs on CUDA need the NCCL backend, which this torch lacks"
        count = torch.cuda.device_count()
        if count < layout.world_size:
            return (f"world size {layout.world_size} on CUDA needs {layout.world_size} GPUs (one "
                    f"per rank); {count} visible")
        return None
    return f"sharded runs support cpu (gloo) and cuda (NCCL) meshes, not {dev.type}"


def _store_path(store_dir: str | None, task_key: str) -> str:
    if not store_dir:
        store_dir = os.path.join(tempfile.gettempdir(), f"harness-stores-{os.getpid()}")
    os.makedirs(store_dir, exist_ok=True)
    name = hashlib.blake2b(task_key.encode(), digest_size=8).hexdigest()
    return os.path.join(store_dir, f"{name}-{uuid.uuid4().hex[:8]}")


#: Which rank's failure names the draw's: a death, then the candidate's own failures, then a
#: rank that went silent, then one that never started its draw (its peers' collectives time out
#: waiting for it: the harness's errors come after), then ranks stopped by the others.
_PRIORITY = {"crashed": 0, "hang": 1, "raised": 2, "broke its tensor": 3, "stall": 4,
             "unstarted": 5, "error": 6, "peer": 7}


def _failure(failures: dict, world: int) -> CandidateFailure:
    """One CandidateFailure naming the ranks and the first cause."""
    kind = min((f[0] for f in failures.values()), key=lambda k: _PRIORITY.get(k, 9))
    causes = {}
    for r in sorted(failures):
        fkind, text, _ = failures[r]
        if fkind == kind:
            causes.setdefault(text, []).append(r)
    text, ranks = next(iter(causes.items()))
    who = f"rank {ranks[0]}" if len(ranks) == 1 else f"ranks {', '.join(map(str, ranks))}"
    message = f"{who} of {world}: {text}"
    if kind == "error":
        kind, message = "crashed", f"sharded draw failed in the harness: {message}"
    elif kind == "stall":
        kind = "hang"
    elif kind == "unstarted":  # no call was made: no verdict on the candidate
        kind, message = "crashed", f"sharded draw could not start: {message}"
    elif kind == "peer":
        kind = "crashed"
    return CandidateFailure(kind, message)


def draw_sharded(candidate, case, dtype, device: str, layout: Layout, law, request: DrawRequest, *,
                 reference_calls: int, store_dir: str | None,
                 stall_margin_s: float = STALL_MARGIN_S,
                 harness_stall_s: float = HARNESS_STALL_S) -> Summary:
    """One stage's draw of a sharded group, asked for by `request` as a plain group's is: the
    merged Summary with `.sharding` set.
    Raises CandidateFailure when a rank's candidate raised or hung, or a rank died."""
    world = layout.world_size
    try:
        pool = get_pool(world, device)
    except PoolError as exc:
        raise CandidateFailure("crashed", f"sharded draw could not start its ranks: {exc}") from None
    key = f"{candidate.spec}|{case.id}|{dtype_name(dtype)}|{device}|{layout.label}|{request.seed}"
    # A rank's silence is held to the stall limit inside a candidate call, to the harness's limit
    # outside (`harness.sharded.ranks.stalled`); the harness's collectives wait a stall limit
    # longer than that, so a rank stuck anywhere is named by the worker's deadline, not by a
    # peer's collective timing out first.
    stall_s = rank_call_limit(request) + stall_margin_s
    harness_s = max(2.0 * stall_s, harness_stall_s)
    path = _store_path(store_dir, key)
    task = DrawTask(candidate=candidate, case=case, dtype=dtype, device=str(device), layout=layout,
                    facts=summary_facts(law), request=request, reference_calls=reference_calls,
                    store_path=path, pg_timeout_s=harness_s + stall_s,
                    declared_invariant=bool(getattr(candidate, "sharding_invariant", False)))
    try:
        results, failures = pool.run(task, stall_s=stall_s, harness_s=harness_s)
    finally:
        try:
            os.remove(path)
        except OSError:
            pass
    if failures:
        failure = _failure(failures, world)
        cand_s = max([f[2] for f in failures.values()] + [r.candidate_s for r in results.values()])
        failure.candidate_s = cand_s
        raise failure
    ranked = [results[r] for r in range(world)]
    parts = [r.summary for r in ranked if r.summary is not None]
    merged = Summary.merge(parts)
    merged.sharding = ShardingStats.merge([r.stats for r in ranked])
    merged.candidate_s = max(r.candidate_s for r in ranked)
    merged.engine_s = max(r.engine_s for r in ranked)
    merged.notes["candidate_s_all_ranks"] = sum(r.candidate_s for r in ranked)
    merged.notes["rank_seeds"] = merged.sharding.rank_seeds
    return merged


class ShardedCaseRunner(CaseRunner):
    """`CaseRunner` for one sharded group: the draws come from `draw_sharded`, the checks are the
    Summary and statistical ones plus `replicas`, `shards`, `sharding` (the checks of scope
    ``sharded``, `harness.checks.CHECKS`)."""

    sharded = True

    def __init__(self, candidate, case, dtype, device, config: RunConfig, layout: Layout,
                 store_dir: str | None = None, stall_margin_s: float = STALL_MARGIN_S,
                 harness_stall_s: float = HARNESS_STALL_S):
        super().__init__(candidate, case, dtype, device, config)
        self.layout = layout
        self.store_dir = store_dir
        self.stall_margin_s = stall_margin_s
        self.harness_stall_s = harness_stall_s

    def lease_case_name(self) -> str:
        """The group's case label, ``case@layout``: each layout of a case holds its own leases."""
        return case_label(self.case, self.layout)

    def draw(self, request: DrawRequest) -> Summary:
        """The stage's draw on the group's ranks (`draw_sharded`); the sharding notes become
        warnings of the group's rows."""
        first = request.stage == 1
        s = draw_sharded(self.candidate, self.case, self.dtype, self.device, self.layout,
                         self.law, request, reference_calls=REFERENCE_CALLS if first else 0,
                         store_dir=self.store_dir, stall_margin_s=self.stall_margin_s,
                         harness_stall_s=self.harness_stall_s)
        for note in s.sharding.notes:
            text = note.split(": ", 1)[-1]
            if text not in self.warnings:
                self.warnings.append(text)
        return s


class ShardedRunnerCache(RunnerCache):
    """The worker's ShardedCaseRunners of the last few sharded groups."""

    def __init__(self, store_dir: str | None = None, size: int = 4):
        super().__init__(size)
        self.store_dir = store_dir

    def build(self, candidate, case, dtype, device, config: RunConfig, layout: Layout):
        return ShardedCaseRunner(candidate, case, dtype, device, config, layout,
                                 store_dir=self.store_dir)
