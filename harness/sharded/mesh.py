"""The rank's side of a sharded draw: the DeviceMesh, the DTensor parameter as FSDP2 holds it, the
candidate's calls on it, and the fold of the rank's local shard into a part of the Summary.

Runs inside a rank process (`harness.sharded.ranks`); the task it gets (`DrawTask`) and what it
sends back (`RankResult`) are plain picklable data.
"""

from __future__ import annotations

import datetime
import math
import time
from dataclasses import dataclass, field

import numpy as np
import torch

from reference import TruncatedNormal, rounded_law

from ..engine import (SLOW_CALL_FACTOR, CallTimeout, candidate_call, caught_warnings,
                      changed_facts, is_budget_stop, poison_, raised_text, tensor_facts)
from ..runner import DrawRequest
from ..summary import Summary
from .part_fold import (PairStats, PartFold, ShardingStats, box_slices, compare_pair, count_differing,
                   part_summary, record_replicas)
from .layout import Layout, boxes, comparison_pairs, is_sharded, local_box, rank_seed


def rank_device(device: str, rank: int, world_size: int) -> torch.device:
    """Rank r of a group on ``cuda:J`` uses ``cuda:((J + r) mod D)``: one GPU per rank."""
    dev = torch.device(device)
    if dev.type != "cuda":
        return dev
    count = torch.cuda.device_count()
    lead = dev.index or 0
    return torch.device("cuda", (lead + rank) % max(1, count))


def rank_call_limit(request: DrawRequest) -> float:
    """Seconds one call of a rank may take: a rank's calls have no pace to go by (each rank
    makes few), so every call gets the grace a plain draw's first call gets."""
    return SLOW_CALL_FACTOR * request.call_timeout


@dataclass(frozen=True)
class DrawTask:
    candidate: object  # a candidates.Candidate (pickled by spec)
    case: object  # harness.cases.Case
    dtype: torch.dtype
    device: str  # the group's device; rank r uses rank_device(device, r, W)
    layout: Layout
    facts: dict  # summary_facts(law)
    request: DrawRequest  # the stage's n, seed, timeouts, chunking, budget and watched mass bins
    reference_calls: int
    store_path: str
    pg_timeout_s: float
    declared_invariant: bool = False


#: The (family, field) of the histograms a part's Summary sends as its non-empty bins only.
SPARSE_HISTOGRAMS = (("binned", "hist"), ("localized", "mass_hist"))


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
        for state, name in self._histograms():
            h = getattr(state, name)
            if isinstance(h, np.ndarray):
                nz = np.flatnonzero(h)
                setattr(state, name, ("sparse", h.size, nz.astype(np.int64), h[nz]))
        return self

    def unpack(self) -> "RankResult":
        for state, name in self._histograms():
            h = getattr(state, name)
            if isinstance(h, tuple):
                _, size, nz, counts = h
                dense = np.zeros(size, dtype=np.int64)
                dense[nz] = counts
                setattr(state, name, dense)
        return self

    def _histograms(self) -> list:
        """(state, field) of each large histogram the part's Summary holds: the binned family's
        main histogram and the localized family's mass bins."""
        s = self.summary
        if s is None:
            return []
        return [(s.states[family], name) for family, name in SPARSE_HISTOGRAMS
                if family in s.states]


def _rank_law(task: DrawTask):
    """The group's rounded law, rebuilt in the rank's process (cached there by
    `reference.rounded_law`): the part folds its mass bins as the unsharded engine does."""
    c = task.case
    return rounded_law(TruncatedNormal(c.mean, c.std, c.a, c.b), task.dtype)


class RankFailure(Exception):
    """A rank's draw stopped: its candidate failed (kind raised, hang or broke its tensor), or
    a peer's did ("peer"), or the harness failed ("error"). `clean`: every rank left the
    collectives together."""

    def __init__(self, kind: str, message: str, clean: bool = True, candidate_s: float = 0.0):
        super().__init__(message)
        self.kind, self.clean, self.candidate_s = kind, clean, candidate_s


def first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else ""


def rank_draw(task: DrawTask, rank: int, beat, tell) -> RankResult:
    """Rank `rank`'s part of the draw `task`. ``beat(what)`` tells the worker the rank enters the
    candidate call `what`, ``beat(None)`` that it left it; ``tell(msg)`` sends a message as is
    (a candidate's failure, before the collectives)."""
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
        with caught_warnings() as heard:
            result = _draw_on_mesh(task, rank, device, beat, tell)
        seen = heard.lines()
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

    layout, case, dtype, request = task.layout, task.case, task.dtype, task.request
    world = layout.world_size
    cand = task.candidate
    shape = tuple(case.shape)
    offsets, local_shape = local_box(shape, layout, rank)
    numel = max(1, math.prod(shape))
    local_numel = math.prod(local_shape)
    calls_total = max(request.min_calls, math.ceil(request.n / numel))
    sharded = is_sharded(layout)
    folds = sharded or rank == 0
    accepts = cand.accepts_generator
    mean, std, a, b = case.mean, case.std, case.a, case.b
    stats = ShardingStats(layout=layout, shape=shape, boxes=boxes(shape, layout),
                          rank_seeds=[rank_seed(request.seed, layout, r) for r in range(world)],
                          declared_invariant=task.declared_invariant)
    pairs = comparison_pairs(layout, shape)
    send_to = [j for i, j in pairs if i == rank]
    recv_from = [i for i, j in pairs if j == rank]
    t_cand = 0.0
    t_start = time.perf_counter()

    limit = rank_call_limit(request)

    def call(tensor, generator, what: str):
        nonlocal t_cand
        beat(what)  # the worker learns which call a rank that goes silent is in
        before = filled_facts(tensor)
        t0 = time.perf_counter()
        try:
            with candidate_call(limit, watched=True):
                cand(tensor, mean, std, a, b, generator if accepts else None)
                if device.type == "cuda":
                    torch.cuda.synchronize(device)
        except CallTimeout:
            raise RankFailure("hang", f"{what} did not return within {limit:.3g} s") from None
        except Exception as exc:
            raise RankFailure("raised", f"{what} raised {raised_text(exc)}") from exc
        finally:
            t_cand += time.perf_counter() - t0
            beat(None)
        changed = changed_facts(before, filled_facts(tensor))
        if changed is not None:  # what the rank poisons, folds and sends next is no longer it
            raise RankFailure("broke its tensor", f"{what} changed the tensor it was given "
                                                  f"({changed}): a sampler fills it in place")

    # -- the unsharded tensor from the run's seed (the `sharding` check), first calls of stage 1
    sl = box_slices(offsets, local_shape)
    reference = None
    if task.reference_calls:
        k_ref = min(task.reference_calls, calls_total)
        torch.manual_seed(request.seed)
        generator = torch.Generator(device=device).manual_seed(request.seed)
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
    my_seed = rank_seed(request.seed, layout, rank)
    torch.manual_seed(my_seed)
    generator = torch.Generator(device=device).manual_seed(my_seed)

    chunk = max(local_numel, request.chunk_elements // world, 1)
    per_chunk = max(1, min(calls_total, chunk // max(1, local_numel)))
    fold = buffer = halo_buffer = None
    halo_from = rank - 1 if (sharded and (rank - 1, rank) in pairs) else None
    d = layout.shard_dim
    if folds:
        summary = part_summary(task.facts, shape, dtype)
        summary.notes["seed"] = request.seed
        fold = PartFold(summary, dtype, device, offsets, local_shape, d, law=_rank_law(task),
                            watch=request.watch or None)
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
        over = request.time_budget is not None and t_cand > request.time_budget
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
        if fold is not None:
            buffer[filled].copy_(out)
            if halo_buffer is not None:
                prev = received[halo_from].view(dtype).view(stats.boxes[halo_from][1])
                halo_buffer[filled].copy_(prev.select(d, prev.shape[d] - 1))
            filled += 1
        done += 1
        stop = (bool(int(status[1])) and done >= request.min_calls and done < calls_total
                and is_budget_stop(done))
        if fold is not None and (filled == per_chunk or done == calls_total or stop):
            fold.fold(buffer[:filled], halo=None if halo_buffer is None else halo_buffer[:filled])
            filled = 0
        if stop:
            stopped_by_budget = True
            break
    stats.pairs = [pair_stats[i] for i in sorted(pair_stats)]
    part = None
    if fold is not None:
        part = fold.finish()
        part.candidate_s = t_cand
        part.engine_s = time.perf_counter() - t_start - t_cand
        if stopped_by_budget:
            part.notes["stopped_by_budget"] = True
    return RankResult(rank, part, stats, t_cand, time.perf_counter() - t_start - t_cand)


def filled_facts(tensor: torch.Tensor) -> tuple:
    """`tensor_facts` of what a rank's call fills: a DTensor parameter's local shard, with the
    parameter's own autograd flag (the shard does not carry it); a plain tensor's own."""
    if not hasattr(tensor, "to_local"):
        return tensor_facts(tensor)
    with torch.no_grad():
        local = tensor.to_local()
    return tensor_facts(local, requires_grad=tensor.requires_grad)


def _as_bytes(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().reshape(-1).view(torch.uint8)
