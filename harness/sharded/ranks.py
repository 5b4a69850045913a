"""Rank processes that cannot hang the run: one pool of W ranks per (xdist worker, world size,
device), started once and reused across groups, killed and replaced when a draw goes wrong.

* each rank runs one torch thread and dies with its worker (PR_SET_PDEATHSIG);
* the worker waits with deadlines: a rank that dies (its sentinel), sends nothing for the stall
  limit inside a candidate call (a call that cannot be interrupted) or for the harness's limit
  outside the calls (a stuck step of the harness), or does not report within
  `FAILURE_GRACE_S` of another rank's failure gets the whole pool killed (SIGKILL);
* who is to blame for a stall is read from what each rank said, not from the order the worker
  happened to read it in: a rank tells the worker when it starts a draw and when it enters and
  leaves each candidate call, stamped with its own clock (`time.monotonic`, one clock for every
  process of the machine). A rank that never said it started "did not start"; otherwise the
  rank that entered a call first and never left it is stuck in that call, and the others waited
  for it (`blame_stall`).
"""

from __future__ import annotations

import atexit
import os
import signal
import time
import traceback
from dataclasses import dataclass

import torch

from .mesh import DrawTask, RankFailure, first_line, rank_draw


#: Seconds the worker waits for the other ranks' reports once one rank reported a failure.
FAILURE_GRACE_S = 5.0


#: Seconds a new rank pool may take to start (spawn, import torch, warm up DTensor).
START_TIMEOUT_S = 300.0


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

    def beat(calling: str | None = None) -> None:
        """Tell the worker where this rank is: entering the candidate call `calling`, or (None)
        back from it."""
        if calling is None:
            conn.send(("returned", rank, time.monotonic()))
        else:
            conn.send(("calling", rank, time.monotonic(), calling))

    conn.send(("ready", rank, os.getpid()))
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg[0] == "stop":
            return
        task = msg[1]
        conn.send(("started", rank, time.monotonic()))
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

    def run(self, task: DrawTask, stall_s: float, grace_s: float = FAILURE_GRACE_S,
            harness_s: float | None = None):
        """Send the task to every rank; -> ({rank: RankResult}, {rank: (kind, message, cand_s)}).

        A rank whose candidate fails says so at once ("failing"), before it meets the others in
        the per-call all-reduce, so the cause is known even when a peer then waits forever inside
        a collective of its own (a candidate that broadcasts, say). Kills the pool when a rank
        died, stalled (`stalled`, blamed by `blame_stall`), or did not stop within `grace_s` of a
        failure (`blame_late`)."""
        from multiprocessing.connection import wait

        world = self.world_size
        harness_s = stall_s if harness_s is None else harness_s  # outside the calls: `stalled`
        for c in self.conns:
            c.send(("draw", task))
        self.draws += 1
        sent = time.monotonic()
        progress = {r: RankProgress(sent) for r in range(world)}
        results: dict = {}
        failures: dict = {}
        notices: dict = {}  # rank -> its candidate's failure, told before the collectives
        clean: dict = {}  # rank -> whether it left the collectives together with the others
        unclean = False
        first_failure = None
        sentinels = [p.sentinel for p in self.procs]

        def pending() -> list:
            return [r for r in range(world) if r not in results and r not in failures]

        def drain(r: int) -> None:
            """Take every message rank r has sent so far (a slow worker reads late, not less)."""
            while r not in results and r not in failures:
                try:
                    if not self.conns[r].poll():
                        return
                    msg = self.conns[r].recv()
                except (EOFError, OSError):
                    return  # its sentinel follows
                self._take(r, msg, progress[r], results, failures, notices, clean)

        while pending():
            now = time.monotonic()
            if first_failure is not None and now - first_failure > grace_s:
                for r in pending():
                    drain(r)
                failures.update(blame_late(progress, pending(), time.monotonic(), stall_s,
                                           harness_s, grace_s))
                unclean = True
                break
            if stalled(progress, pending(), now, stall_s, harness_s):
                for r in pending():
                    drain(r)
                now = time.monotonic()
                if stalled(progress, pending(), now, stall_s, harness_s):
                    failures.update(blame_stall(progress, pending(), now, stall_s, harness_s))
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
                    drain(r)  # its last words may still sit in the pipe
                    if r not in results and r not in failures:
                        self.procs[r].join(timeout=1)
                        failures[r] = ("crashed", f"rank {r} died ({_exit_text(self.procs[r])}) "
                                       f"during the draw", 0.0)
                        unclean = True
                else:
                    drain(self.conns.index(obj))
            if (failures or notices) and first_failure is None:
                first_failure = time.monotonic()
        for r, notice in notices.items():  # a rank's own failure explains what followed
            if failures.get(r, ("peer",))[0] in ("peer", "stall", "error"):
                failures[r] = notice
        if unclean or not all(clean.values()):
            self.kill()
        return results, failures

    @staticmethod
    def _take(r: int, msg, progress: "RankProgress", results, failures, notices, clean) -> None:
        progress.hear(msg)
        if msg[0] == "done":
            results[r] = msg[2].unpack()
        elif msg[0] == "failing":
            _, _, kind, text, cand_s = msg
            notices[r] = (kind, text, cand_s)
        elif msg[0] == "failed":
            _, _, kind, text, was_clean, cand_s = msg
            failures[r] = (kind, text, cand_s)
            clean[r] = bool(was_clean)


@dataclass
class RankProgress:
    """Where one rank's draw is, as far as its messages say: whether it said it started, the
    candidate call it is in (None: outside the calls: the harness, a collective), and when it
    last spoke, on its own clock (until it speaks: when the worker sent the task)."""

    since: float
    started: bool = False
    calling: str | None = None

    def hear(self, msg) -> None:
        """Update from one message of the rank (`_rank_main`: started, calling, returned carry
        the rank's clock; the last words done, failing, failed are taken as heard)."""
        kind = msg[0]
        stamp = msg[2] if kind in ("started", "calling", "returned") else time.monotonic()
        self.since = max(self.since, stamp)
        self.started = True
        self.calling = msg[3] if kind == "calling" else None

    def silence(self, now: float) -> float:
        return now - self.since


def _limit(p: RankProgress, stall_s: float, harness_s: float) -> float:
    """How long rank `p` may stay silent: a candidate call `stall_s` (its timeout and a margin),
    anything else (receiving the task, the harness's own steps and collectives) `harness_s`."""
    return stall_s if p.calling is not None else harness_s


def stalled(progress: dict, ranks: list, now: float, stall_s: float, harness_s: float) -> bool:
    """Whether the draw of the ranks still drawing (`ranks`) stalled: one of them has been silent
    past its limit (`_limit`: a call that cannot be interrupted past `stall_s`; a rank that has
    not started, or sits in the harness's steps, past `harness_s`, which a busy machine can make
    slow but not that slow), and none is inside a
    candidate call still within its limit (a rank waiting for a slow call waits legitimately:
    the call returns, times out by itself, or passes the limit). A rank slow in the harness's
    own steps on a busy machine is therefore not taken for a stuck one."""
    def over(r: int) -> bool:
        return progress[r].silence(now) > _limit(progress[r], stall_s, harness_s)

    if not any(over(r) for r in ranks):
        return False
    return not any(progress[r].calling is not None and not over(r) for r in ranks)


def _stuck(r: int, p: RankProgress, seconds: float) -> tuple:
    """The failure of rank r, silent for more than `seconds` where `p` says it is."""
    if not p.started:
        return ("unstarted", f"rank {r} did not start its draw within {seconds:.3g} s (killed)",
                0.0)
    where = (f"stuck in {p.calling}, a call that cannot be interrupted" if p.calling is not None
             else "stuck outside the candidate's calls (in a collective or the harness)")
    return ("stall", f"rank {r} sent nothing for {seconds:.3g} s: {where} (killed)", 0.0)


def blame_stall(progress: dict, ranks: list, now: float, stall_s: float,
                harness_s: float) -> dict:
    """{rank: (kind, message, 0.0)} for the ranks still drawing once the draw `stalled`: each
    rank that never said it started did not start ("unstarted"); failing that, the rank that
    entered a candidate call first and never left it is stuck in it ("stall"); failing that
    (every rank outside the calls), the rank silent the longest is stuck ("stall"). The others
    waited for it ("peer"). Decided by what the ranks said and when, on their clocks: not by the
    order the worker read them in."""
    culprits = [r for r in ranks if not progress[r].started]
    if not culprits:
        inside = [r for r in ranks if progress[r].calling is not None]
        among = inside or ranks
        first = min(progress[r].since for r in among)
        culprits = [r for r in among if progress[r].since == first]
    return {r: (_stuck(r, progress[r], _limit(progress[r], stall_s, harness_s)) if r in culprits
                else ("peer", f"rank {r} waited for the others (killed)", 0.0))
            for r in ranks}


def blame_late(progress: dict, ranks: list, now: float, stall_s: float, harness_s: float,
               grace_s: float) -> dict:
    """{rank: (kind, message, 0.0)} for the ranks still drawing `grace_s` after another rank's
    failure: one that never said it started did not start, one silent past its limit (`_limit`)
    is stuck where it is (either may be what the failure was: a peer's collective timing out
    while waiting for it); any other rank did not stop ("peer")."""
    out = {}
    for r in ranks:
        p = progress[r]
        limit = _limit(p, stall_s, harness_s)
        if p.silence(now) > limit:
            out[r] = _stuck(r, p, limit)
        elif not p.started:
            out[r] = _stuck(r, p, p.silence(now))
        else:
            out[r] = ("peer", f"rank {r} did not stop within {grace_s:g} s of the failure "
                      f"(killed)", 0.0)
    return out


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
