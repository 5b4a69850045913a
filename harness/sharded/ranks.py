"""Rank processes that cannot hang the run: one pool of W ranks per (xdist worker, world size,
device), started once and reused across groups, killed and replaced when a draw goes wrong.

* each rank runs one torch thread and dies with its worker (PR_SET_PDEATHSIG);
* the worker waits with deadlines: a rank that dies (its sentinel), sends nothing for the stall
  limit (a call that cannot be interrupted, a stuck collective), or does not report within
  `FAILURE_GRACE_S` of another rank's failure gets the whole pool killed (SIGKILL).
"""

from __future__ import annotations

import atexit
import os
import signal
import time
import traceback

import torch

from .mesh import DrawTask, RankFailure, first_line, rank_draw


#: Seconds the worker waits for the other ranks' reports once one rank reported a failure.
FAILURE_GRACE_S = 5.0


#: Seconds a new rank pool may take to start (spawn, import torch, warm up DTensor).
START_TIMEOUT_S = 300.0


#: How often a rank tells the worker it is alive, at most, outside the candidate's calls (it also
#: tells it each time a call returns).
BEAT_EVERY_S = 0.5


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
            conn.send(("done", rank, rank_draw(task, rank, beat, conn.send).pack()))
        except RankFailure as failure:
            conn.send(("failed", rank, failure.kind, str(failure), failure.clean, failure.candidate_s))
        except BaseException as exc:  # the harness's own failure (a collective timed out, ...)
            where = traceback.extract_tb(exc.__traceback__)[-1:] if exc.__traceback__ else []
            at = f" at {where[0].filename.rsplit(os.sep, 1)[-1]}:{where[0].lineno}" if where else ""
            conn.send(("failed", rank, "error", f"{type(exc).__name__}: {first_line(exc)}{at}",
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
