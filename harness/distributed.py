"""Sharded parameters: W real ranks, a DeviceMesh, a DTensor parameter, and the merged Summary.

This layer sits between the candidates and the engine. For a sharded case group (a `Layout`: W
ranks, a placement, a rank seeding) it has W rank processes (gloo on CPU, NCCL on CUDA with one GPU
per rank) build a 1-D DeviceMesh and the parameter the way FSDP2 holds one (an ``nn.Parameter``
wrapping a DTensor), seed every rank (``torch.manual_seed(s)`` plus a generator seeded with s for
candidates that take one; per-rank seeds as a variant), call the candidate on the parameter with
the torch.nn.init protocol, and fold each rank's local shard into a part of the engine's Summary
(`harness.shardfold.PartFolder`). The worker merges the parts (`Summary.merge`), so every existing
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
  overruns `--case-timeout` (SIGALRM in the rank) stops every rank at the same call, cleanly;
* the worker waits with deadlines: a rank that dies (its sentinel), sends nothing for
  `--case-timeout` + `STALL_MARGIN_S` (a call that cannot be interrupted, a stuck collective), or
  does not report within `FAILURE_GRACE_S` of another rank's failure gets the whole pool killed
  (SIGKILL) and replaced at the next draw. The draw becomes a `CandidateFailure` ("raised" and
  "hang": fail rows; "crashed": error rows), the run goes on and the report is written.
"""

from __future__ import annotations

import atexit
import datetime
import hashlib
import math
import os
import signal
import tempfile
import time
import traceback
import uuid
import warnings
from dataclasses import dataclass, field

import numpy as np
import torch

from .engine import CandidateFailure, _Timeout, call_deadline, is_budget_stop, poison_
from .layout import (Layout, boxes, comparison_pairs, is_sharded, layout_applicable, local_box,
                     rank_seed)
from .run import CASE_CHECKS, CaseRunner, RunConfig, RunnerCache, dtype_name, inflight_marker
from .shardfold import (PairStats, PartFolder, ShardingStats, box_slices, compare_pair,
                        count_differing, part_summary, record_replicas, summary_facts)
from .summary import Summary

#: Seconds beyond --case-timeout a rank may stay silent before the worker calls it hung.
STALL_MARGIN_S = 30.0
#: Seconds the worker waits for the other ranks' reports once one rank reported a failure.
FAILURE_GRACE_S = 5.0
#: Seconds a new rank pool may take to start (spawn, import torch, warm up DTensor).
START_TIMEOUT_S = 300.0
#: Calls of stage 1 compared with the unsharded tensor from the same seed (the `sharding` check).
REFERENCE_CALLS = 4
#: How often a rank tells the worker it is alive, at most, outside the candidate's calls (it also
#: tells it each time a call returns).
BEAT_EVERY_S = 0.5


def case_label(case_id: str, layout: Layout) -> str:
    """The case column of a sharded group's rows (`harness.layout`'s naming)."""
    return f"{case_id}@{layout.label}"


# ------------------------------------------------------------------------------------------------
# Can this machine run a layout?


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


def rank_device(device: str, rank: int, world_size: int) -> torch.device:
    """Rank r of a group on ``cuda:J`` uses ``cuda:((J + r) mod D)``: one GPU per rank."""
    dev = torch.device(device)
    if dev.type != "cuda":
        return dev
    count = torch.cuda.device_count()
    lead = dev.index or 0
    return torch.device("cuda", (lead + rank) % max(1, count))


# ------------------------------------------------------------------------------------------------
# One draw: the task the worker sends, what each rank sends back


@dataclass(frozen=True)
class DrawTask:
    candidate: object  # a candidates.Candidate (pickled by spec)
    case: object  # harness.cases.Case
    dtype: torch.dtype
    device: str  # the group's device; rank r uses rank_device(device, r, W)
    layout: Layout
    facts: dict  # summary_facts(law)
    n: int
    seed: int
    call_timeout: float
    chunk_elements: int
    min_calls: int
    time_budget: float | None
    reference_calls: int
    store_path: str
    pg_timeout_s: float
    declared_invariant: bool = False
    watch: tuple = ()  # stage 2: mass bins whose exact values are tallied (spikes; harness.run)


@dataclass
class RankResult:
    rank: int
    summary: Summary | None  # None where the rank folds nothing (replicas of rank 0)
    stats: ShardingStats
    candidate_s: float
    engine_s: float
    warnings: list = field(default_factory=list)

    def pack(self) -> "RankResult":
        """Histograms travel as (bins, counts) of their non-empty bins: a 32-bit part's 2^20
        bins are 8 MB (its mass bins ~4.6 MB), mostly zeros at small n."""
        s = self.summary
        if s is not None:
            for name in ("hist", "mass_hist"):
                h = getattr(s, name)
                if isinstance(h, np.ndarray):
                    nz = np.flatnonzero(h)
                    setattr(s, name, ("sparse", h.size, nz.astype(np.int64), h[nz]))
        return self

    def unpack(self) -> "RankResult":
        s = self.summary
        if s is not None:
            for name in ("hist", "mass_hist"):
                h = getattr(s, name)
                if isinstance(h, tuple):
                    _, size, nz, counts = h
                    dense = np.zeros(size, dtype=np.int64)
                    dense[nz] = counts
                    setattr(s, name, dense)
        return self


def _rank_law(task: DrawTask):
    """The group's rounded law, rebuilt in the rank's process (cached there by
    `reference.rounded_law`): the part folds its mass bins as the unsharded engine does."""
    from reference import TruncatedNormal, rounded_law

    c = task.case
    return rounded_law(TruncatedNormal(c.mean, c.std, c.a, c.b), task.dtype)


class RankFailure(Exception):
    """A rank's draw stopped: its candidate failed (kind raised/hang), or a peer's did ("peer"),
    or the harness failed ("error"). `clean`: every rank left the collectives together."""

    def __init__(self, kind: str, message: str, clean: bool = True, candidate_s: float = 0.0):
        super().__init__(message)
        self.kind, self.clean, self.candidate_s = kind, clean, candidate_s


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else ""


def _rank_draw(task: DrawTask, rank: int, beat, tell) -> RankResult:
    import torch.distributed as dist

    layout = task.layout
    world = layout.world_size
    device = rank_device(task.device, rank, world)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    backend = "gloo" if device.type == "cpu" else "nccl"
    store = dist.FileStore(task.store_path, world)
    dist.init_process_group(backend, store=store, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=task.pg_timeout_s))
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = _draw_on_mesh(task, rank, device, beat, tell)
        seen = []
        for w in caught:
            text = f"{w.category.__name__}: {w.message}"
            if text not in seen:
                seen.append(text)
        result.warnings = seen
        result.stats.notes += [f"rank {rank}: {t}" for t in seen]
        return result
    finally:
        try:
            dist.destroy_process_group()
        except Exception:
            pass


def _draw_on_mesh(task: DrawTask, rank: int, device: torch.device, beat, tell) -> RankResult:
    import torch.distributed as dist
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.tensor import DTensor, Replicate, Shard

    layout, case, dtype = task.layout, task.case, task.dtype
    world = layout.world_size
    cand = task.candidate
    shape = tuple(case.shape)
    offsets, local_shape = local_box(shape, layout, rank)
    numel = max(1, math.prod(shape))
    local_numel = math.prod(local_shape)
    calls_total = max(task.min_calls, math.ceil(task.n / numel))
    sharded = is_sharded(layout)
    folds = sharded or rank == 0
    accepts = cand.accepts_generator
    mean, std, a, b = case.mean, case.std, case.a, case.b
    stats = ShardingStats(layout=layout, shape=shape, boxes=boxes(shape, layout),
                          rank_seeds=[rank_seed(task.seed, layout, r) for r in range(world)],
                          declared_invariant=task.declared_invariant)
    pairs = comparison_pairs(layout, shape)
    send_to = [j for i, j in pairs if i == rank]
    recv_from = [i for i, j in pairs if j == rank]
    t_cand = 0.0
    t_start = time.perf_counter()

    def call(tensor, generator, what: str):
        nonlocal t_cand
        t0 = time.perf_counter()
        try:
            with call_deadline(task.call_timeout):
                cand(tensor, mean, std, a, b, generator if accepts else None)
                if device.type == "cuda":
                    torch.cuda.synchronize(device)
        except _Timeout:
            raise RankFailure("hang", f"{what} did not return within {task.call_timeout:g} s") from None
        except Exception as exc:
            raise RankFailure("raised", f"{what} raised {type(exc).__name__}: {_first_line(exc)}") from exc
        finally:
            t_cand += time.perf_counter() - t0
            beat(force=True)  # the worker learns which rank came back last

    # -- the unsharded tensor from the run's seed (the `sharding` check), first calls of stage 1
    sl = box_slices(offsets, local_shape)
    reference = None
    if task.reference_calls:
        k_ref = min(task.reference_calls, calls_total)
        torch.manual_seed(task.seed)
        generator = torch.Generator(device=device).manual_seed(task.seed)
        whole = torch.empty(shape, dtype=dtype, device=device)
        reference = torch.empty((k_ref, *local_shape), dtype=dtype, device=device)
        try:
            for k in range(k_ref):
                poison_(whole)
                call(whole, generator, f"unsharded reference call {k + 1}")
                reference[k].copy_(whole[sl])
        except RankFailure as failure:
            stats.reference_error = str(failure)
            reference = None
        del whole

    # -- the parameter, as FSDP2 holds it
    try:  # DTensor's RNG tracker (CUDA meshes) lives per process: each draw starts without one,
        from torch.distributed.tensor import _random as dtensor_random  # as a fresh script does

        dtensor_random._rng_tracker = None
    except (ImportError, AttributeError):
        pass
    mesh = DeviceMesh(device.type, list(range(world)))
    placement = Replicate() if layout.shard_dim is None else Shard(layout.shard_dim)
    local = torch.empty(local_shape, dtype=dtype, device=device)
    strides = tuple(int(math.prod(shape[d + 1:])) for d in range(len(shape)))
    param = torch.nn.Parameter(DTensor.from_local(local, mesh, [placement], run_check=False,
                                                  shape=torch.Size(shape), stride=strides),
                               requires_grad=dtype.is_floating_point)
    my_seed = rank_seed(task.seed, layout, rank)
    torch.manual_seed(my_seed)
    generator = torch.Generator(device=device).manual_seed(my_seed)

    chunk = max(local_numel, task.chunk_elements // world, 1)
    per_chunk = max(1, min(calls_total, chunk // max(1, local_numel)))
    folder = buffer = halo_buffer = None
    halo_from = rank - 1 if (sharded and (rank - 1, rank) in pairs) else None
    d = layout.shard_dim
    if folds:
        summary = part_summary(task.facts, shape, dtype)
        summary.notes["seed"] = task.seed
        folder = PartFolder(summary, dtype, device, offsets, local_shape, d, law=_rank_law(task),
                            watch=task.watch or None)
        buffer = torch.empty((per_chunk, *local_shape), dtype=dtype, device=device)
        if halo_from is not None:
            prev_shape = list(stats.boxes[halo_from][1])
            del prev_shape[d]
            halo_buffer = torch.empty((per_chunk, *prev_shape), dtype=dtype, device=device)
    # Collectives move bytes: exact for every dtype, and gloo has no int16/bfloat16 everywhere.
    item = torch.empty((), dtype=dtype).element_size()
    received = {i: torch.empty(math.prod(stats.boxes[i][1]) * item, dtype=torch.uint8, device=device)
                for i in recv_from}
    pair_stats = {i: PairStats(i, rank) for i in recv_from}
    status = torch.zeros(2, dtype=torch.int64, device=device)
    center, scale = float(task.facts["mean"]), float(task.facts["std"])
    if not (scale > 0 and math.isfinite(scale)):
        scale = float(task.facts["dist_std"])
    filled = done = 0
    stopped_by_budget = False
    while done < calls_total:
        with torch.no_grad():
            poison_(param.to_local())
        failure = None
        try:
            call(param, generator, f"call {done + 1}")
        except RankFailure as exc:
            failure = exc
        if failure is not None:  # tell the worker first: a peer may be stuck in a collective
            tell(("failing", rank, failure.kind, str(failure), t_cand))
        over = task.time_budget is not None and t_cand > task.time_budget
        status[0], status[1] = int(failure is not None), int(over)
        dist.all_reduce(status, op=dist.ReduceOp.MAX)
        if failure is not None:
            failure.candidate_s = t_cand
            raise failure
        if int(status[0]):
            raise RankFailure("peer", "stopped: another rank's call failed", candidate_s=t_cand)
        with torch.no_grad():
            out = param.to_local().detach()
        if layout.placement == "replicate" and world > 1:
            first = _as_bytes(out).clone()
            dist.broadcast(first, src=0)
            if rank > 0:
                diff = count_differing(out.unsqueeze(0),
                                       first.view(dtype).view(out.shape).unsqueeze(0))
                record_replicas(stats, rank, done, diff, local_numel)
        if pairs:
            ops = [dist.P2POp(dist.isend, _as_bytes(out), j) for j in send_to]
            ops += [dist.P2POp(dist.irecv, received[i], i) for i in recv_from]
            if ops:
                for req in dist.batch_isend_irecv(ops):
                    req.wait()
            for i in recv_from:
                theirs = received[i].view(dtype).view(stats.boxes[i][1]).unsqueeze(0)
                pair_stats[i].add(compare_pair(i, rank, theirs, out.unsqueeze(0), center, scale))
        if reference is not None and done < reference.shape[0]:
            diff = int(count_differing(out.unsqueeze(0), reference[done].unsqueeze(0))[0])
            stats.reference_per_call.append(diff)
            stats.reference_differing += diff
            stats.reference_elements += local_numel
            stats.reference_calls = len(stats.reference_per_call)
        if folder is not None:
            buffer[filled].copy_(out)
            if halo_buffer is not None:
                prev = received[halo_from].view(dtype).view(stats.boxes[halo_from][1])
                halo_buffer[filled].copy_(prev.select(d, prev.shape[d] - 1))
            filled += 1
        done += 1
        stop = (bool(int(status[1])) and done >= task.min_calls and done < calls_total
                and is_budget_stop(done))
        if folder is not None and (filled == per_chunk or done == calls_total or stop):
            folder.fold(buffer[:filled], halo=None if halo_buffer is None else halo_buffer[:filled])
            filled = 0
        if stop:
            stopped_by_budget = True
            break
    stats.pairs = [pair_stats[i] for i in sorted(pair_stats)]
    part = None
    if folder is not None:
        part = folder.finish()
        part.candidate_s = t_cand
        part.engine_s = time.perf_counter() - t_start - t_cand
        if stopped_by_budget:
            part.notes["stopped_by_budget"] = True
    return RankResult(rank, part, stats, t_cand, time.perf_counter() - t_start - t_cand)


def _as_bytes(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().reshape(-1).view(torch.uint8)


# ------------------------------------------------------------------------------------------------
# The rank process


def _die_with_parent() -> None:
    """SIGKILL this rank when its worker dies (Linux), so no rank outlives the run."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def _rank_main(rank: int, world_size: int, device: str, conn, parent_pid: int) -> None:
    _die_with_parent()
    if os.getppid() != parent_pid:  # the worker died before prctl took effect
        os._exit(1)
    torch.set_num_threads(1)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass
    import importlib

    importlib.import_module("torch.distributed.tensor")  # warm up: the first import costs seconds

    last = [0.0]

    def beat(force: bool = False) -> None:
        now = time.monotonic()
        if force or now - last[0] >= BEAT_EVERY_S:
            last[0] = now
            conn.send(("beat", rank))

    conn.send(("ready", rank, os.getpid()))
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg[0] == "stop":
            return
        task = msg[1]
        try:
            conn.send(("done", rank, _rank_draw(task, rank, beat, conn.send).pack()))
        except RankFailure as failure:
            conn.send(("failed", rank, failure.kind, str(failure), failure.clean, failure.candidate_s))
        except BaseException as exc:  # the harness's own failure (a collective timed out, ...)
            where = traceback.extract_tb(exc.__traceback__)[-1:] if exc.__traceback__ else []
            at = f" at {where[0].filename.rsplit(os.sep, 1)[-1]}:{where[0].lineno}" if where else ""
            conn.send(("failed", rank, "error", f"{type(exc).__name__}: {_first_line(exc)}{at}",
                       False, 0.0))


class PoolError(Exception):
    """The rank pool could not start or broke; str() is one line."""


def _exit_text(process) -> str:
    code = process.exitcode
    if code is None:
        return "did not exit"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


class RankPool:
    """W rank processes of one (world size, device), reused across draws until one fails badly."""

    def __init__(self, world_size: int, device: str, start_timeout: float = START_TIMEOUT_S):
        import multiprocessing as mp

        self.world_size, self.device = world_size, device
        ctx = mp.get_context("spawn")
        self.procs, self.conns = [], []
        for rank in range(world_size):
            parent, child = ctx.Pipe(duplex=True)
            proc = ctx.Process(target=_rank_main, args=(rank, world_size, device, child, os.getpid()),
                               name=f"harness-rank{rank}-of-{world_size}", daemon=True)
            proc.start()
            child.close()
            self.procs.append(proc)
            self.conns.append(parent)
        deadline = time.monotonic() + start_timeout
        ready = set()
        from multiprocessing.connection import wait

        while len(ready) < world_size:
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                raise PoolError(f"{world_size} ranks did not start within {start_timeout:g} s")
            for obj in wait(self.conns + [p.sentinel for p in self.procs], timeout=min(left, 1.0)):
                if obj in self.conns:
                    r = self.conns.index(obj)
                    try:
                        msg = obj.recv()
                    except (EOFError, OSError):
                        continue
                    if msg[0] == "ready":
                        ready.add(r)
                else:
                    r = [p.sentinel for p in self.procs].index(obj)
                    self.kill()
                    raise PoolError(f"rank {r} died while starting ({_exit_text(self.procs[r])})")
        self.broken = False
        self.draws = 0

    @property
    def alive(self) -> bool:
        return not self.broken and all(p.is_alive() for p in self.procs)

    def kill(self) -> None:
        self.broken = True
        for p in self.procs:
            if p.is_alive():
                p.kill()
        for p in self.procs:
            p.join(timeout=10)
        for c in self.conns:
            try:
                c.close()
            except OSError:
                pass

    def close(self) -> None:
        if self.broken:
            return
        for c in self.conns:
            try:
                c.send(("stop",))
            except (OSError, BrokenPipeError):
                pass
        for p in self.procs:
            p.join(timeout=5)
        self.kill()

    def run(self, task: DrawTask, stall_s: float, grace_s: float = FAILURE_GRACE_S):
        """Send the task to every rank; -> ({rank: RankResult}, {rank: (kind, message, cand_s)}).

        A rank whose candidate fails says so at once ("failing"), before it meets the others in
        the per-call all-reduce, so the cause is known even when a peer then waits forever inside
        a collective of its own (a candidate that broadcasts, say). Kills the pool when a rank
        died, stalled, or did not stop within `grace_s` of a failure."""
        from multiprocessing.connection import wait

        world = self.world_size
        for c in self.conns:
            c.send(("draw", task))
        self.draws += 1
        results: dict = {}
        failures: dict = {}
        notices: dict = {}  # rank -> its candidate's failure, told before the collectives
        clean: dict = {}  # rank -> whether it left the collectives together with the others
        unclean = False
        last = {r: time.monotonic() for r in range(world)}
        first_failure = None
        sentinels = [p.sentinel for p in self.procs]

        def pending() -> list:
            return [r for r in range(world) if r not in results and r not in failures]

        while pending():
            now = time.monotonic()
            if first_failure is not None and now - first_failure > grace_s:
                for r in pending():
                    failures[r] = ("peer", f"rank {r} did not stop within {grace_s:g} s of the "
                                   f"failure (killed)", 0.0)
                unclean = True
                break
            if any(now - last[r] > stall_s for r in pending()):
                # The rank silent the longest is stuck; the others went silent after it, waiting
                # for it in a collective (every rank tells the worker when a call returns).
                oldest = min(last[r] for r in pending())
                for r in pending():
                    if last[r] == oldest:
                        failures[r] = ("stall", f"rank {r} sent nothing for {stall_s:g} s: stuck "
                                       f"in a call that cannot be interrupted or in a collective "
                                       f"(killed)", 0.0)
                    else:
                        failures[r] = ("peer", f"rank {r} waited for the others (killed)", 0.0)
                unclean = True
                first_failure = first_failure or now
                continue
            waiting = pending()
            ready = wait([self.conns[r] for r in waiting] + [sentinels[r] for r in waiting],
                         timeout=0.5)
            for obj in ready:
                if obj in sentinels:
                    r = sentinels.index(obj)
                    if r in results or r in failures:
                        continue
                    while self.conns[r].poll():  # its last words may still sit in the pipe
                        try:
                            self._take(r, self.conns[r].recv(), results, failures, notices,
                                       last, clean)
                        except (EOFError, OSError):
                            break
                    if r not in results and r not in failures:
                        self.procs[r].join(timeout=1)
                        failures[r] = ("crashed", f"rank {r} died ({_exit_text(self.procs[r])}) "
                                       f"during the draw", 0.0)
                        unclean = True
                else:
                    r = self.conns.index(obj)
                    try:
                        msg = obj.recv()
                    except (EOFError, OSError):
                        continue  # its sentinel follows
                    self._take(r, msg, results, failures, notices, last, clean)
            if (failures or notices) and first_failure is None:
                first_failure = time.monotonic()
        for r, notice in notices.items():  # a rank's own failure explains what followed
            if failures.get(r, ("peer",))[0] in ("peer", "stall", "error"):
                failures[r] = notice
        if unclean or not all(clean.values()):
            self.kill()
        return results, failures

    @staticmethod
    def _take(r: int, msg, results, failures, notices, last, clean) -> None:
        last[r] = time.monotonic()
        if msg[0] == "done":
            results[r] = msg[2].unpack()
        elif msg[0] == "failing":
            _, _, kind, text, cand_s = msg
            notices[r] = (kind, text, cand_s)
        elif msg[0] == "failed":
            _, _, kind, text, was_clean, cand_s = msg
            failures[r] = (kind, text, cand_s)
            clean[r] = bool(was_clean)


_POOLS: dict = {}


def get_pool(world_size: int, device: str) -> RankPool:
    """This process's pool for (world size, device): started on first use, replaced when broken."""
    key = (world_size, str(device))
    pool = _POOLS.get(key)
    if pool is not None and not pool.alive:
        pool.kill()
        pool = None
    if pool is None:
        pool = _POOLS[key] = RankPool(world_size, str(device))
    return pool


def close_pools() -> None:
    """Stop every rank this process started (end of the worker's session, and atexit)."""
    while _POOLS:
        _, pool = _POOLS.popitem()
        try:
            pool.close()
        except Exception:
            pool.kill()


atexit.register(close_pools)


# ------------------------------------------------------------------------------------------------
# The worker's side of a draw


def _store_path(store_dir: str | None, task_key: str) -> str:
    if not store_dir:
        store_dir = os.path.join(tempfile.gettempdir(), f"harness-stores-{os.getpid()}")
    os.makedirs(store_dir, exist_ok=True)
    name = hashlib.blake2b(task_key.encode(), digest_size=8).hexdigest()
    return os.path.join(store_dir, f"{name}-{uuid.uuid4().hex[:8]}")


#: Which rank's failure names the draw's: a death, then the candidate's own failures, then a
#: rank that went silent, then the harness's errors, then ranks stopped by the others.
_PRIORITY = {"crashed": 0, "hang": 1, "raised": 2, "stall": 3, "error": 4, "peer": 5}


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
    elif kind == "peer":
        kind = "crashed"
    return CandidateFailure(kind, message)


def draw_sharded(candidate, case, dtype, device: str, layout: Layout, law, *, n: int, seed: int,
                 call_timeout: float, chunk_elements: int, min_calls: int,
                 time_budget: float | None, reference_calls: int, store_dir: str | None,
                 stall_margin_s: float = STALL_MARGIN_S, watch: tuple = ()) -> Summary:
    """One stage's draw of a sharded group: the merged Summary with `.sharding` set.
    Raises CandidateFailure when a rank's candidate raised or hung, or a rank died."""
    world = layout.world_size
    try:
        pool = get_pool(world, device)
    except PoolError as exc:
        raise CandidateFailure("crashed", f"sharded draw could not start its ranks: {exc}") from None
    key = f"{candidate.spec}|{case.id}|{dtype_name(dtype)}|{device}|{layout.label}|{seed}"
    path = _store_path(store_dir, key)
    task = DrawTask(candidate=candidate, case=case, dtype=dtype, device=str(device), layout=layout,
                    facts=summary_facts(law), n=n, seed=seed, call_timeout=call_timeout,
                    chunk_elements=chunk_elements, min_calls=min_calls, time_budget=time_budget,
                    reference_calls=reference_calls, store_path=path,
                    pg_timeout_s=call_timeout + stall_margin_s,
                    declared_invariant=bool(getattr(candidate, "sharding_invariant", False)),
                    watch=tuple(watch or ()))
    try:
        results, failures = pool.run(task, stall_s=call_timeout + stall_margin_s)
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
    Summary and statistical ones plus `replicas`, `shards`, `sharding`."""

    def __init__(self, candidate, case, dtype, device, config: RunConfig, layout: Layout,
                 store_dir: str | None = None, stall_margin_s: float = STALL_MARGIN_S):
        super().__init__(candidate, case, dtype, device, config)
        self.layout = layout
        self.store_dir = store_dir
        self.stall_margin_s = stall_margin_s

    def statistical_checks(self) -> dict:
        from .checks.sharded import SHARDED_CHECKS

        return {**super().statistical_checks(), **SHARDED_CHECKS}

    def check_names(self) -> tuple:
        return tuple(c for c in CASE_CHECKS if c not in ("contract", "generator")) + \
            tuple(self.statistical_checks())

    def _inflight_marker(self, stage):
        return inflight_marker(self.config, self.candidate, case_label(self.case.id, self.layout),
                               self.dtype, self.device, stage)

    def _draw(self, stage: int):
        try:
            s = draw_sharded(self.candidate, self.case, self.dtype, self.device, self.layout,
                             self.law, n=self.n_requested(stage), seed=self.seed(stage),
                             call_timeout=self.config.case_timeout,
                             chunk_elements=self.config.chunk_elements,
                             min_calls=_min_calls(self.config),
                             time_budget=self.config.case_budget_s if stage == 1 else None,
                             reference_calls=REFERENCE_CALLS if stage == 1 else 0,
                             store_dir=self.store_dir, stall_margin_s=self.stall_margin_s,
                             watch=self.watch_list() if stage == 2 else ())
        except CandidateFailure as failure:
            return failure, (getattr(failure, "candidate_s", 0.0), 0.0)
        for note in s.sharding.notes:
            text = note.split(": ", 1)[-1]
            if text not in self.warnings:
                self.warnings.append(text)
        return s, (s.candidate_s, s.engine_s)


def _min_calls(config: RunConfig) -> int:
    from .cases import PROFILES

    return PROFILES[config.profile].min_calls


class ShardedRunnerCache(RunnerCache):
    """The worker's ShardedCaseRunners of the last few sharded groups."""

    def __init__(self, store_dir: str | None = None, size: int = 4):
        super().__init__(size)
        self.store_dir = store_dir

    def get(self, candidate, case, dtype, device, config: RunConfig, layout: Layout = None):
        key = (candidate.spec, case.id, dtype_name(dtype), str(device), config, layout)
        runner = self._runners.pop(key, None)
        if runner is None:
            runner = ShardedCaseRunner(candidate, case, dtype, device, config, layout,
                                       store_dir=self.store_dir)
        self._runners[key] = runner
        while len(self._runners) > self.size:
            self._runners.popitem(last=False)
        return runner
