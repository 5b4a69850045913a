"""A draw: call a candidate again and again, poisoned tensor first, and fold its output.

`run_engine` is the one loop every stage of every case goes through: it poisons the case's tensor,
calls the candidate under the per-call deadline (`harness.engine.deadline.Pace`), copies each
output into a chunk buffer and folds full chunks (`harness.engine.fold`). A candidate that
raises, hangs or breaks the tensor ends the draw as a `CandidateFailure` carrying the partial
Summary.
"""

from __future__ import annotations

import math
import time

import torch

from ..summary import Summary
from .bits import INT_VIEW, dtype_bits, make_target, poison_value
from .deadline import (CallTimeout, Pace, candidate_call, held_handlers, raised_text,
                       release_native_backstop)
from .fold import Fold, new_summary
from .settings import changes, kept_settings


class CandidateFailure(Exception):
    """The candidate did not produce a chunk: it raised, hung, or broke the tensor."""

    def __init__(self, kind: str, message: str, summary: Summary | None = None):
        super().__init__(message)
        # "raised" | "hang" | "crashed" (the process died) | "split" (another worker holds the
        # case: a scheduling defect, see record.leases) | "broke its tensor" (resized it, swapped
        # its storage, changed its dtype or its requires_grad: `changed_tensor`)
        self.kind = kind
        self.summary = summary


#: What a call must leave as it found it, in `tensor_facts`' order.
TENSOR_FACTS = ("storage", "shape", "strides", "dtype", "requires_grad")


def tensor_facts(t: torch.Tensor, requires_grad: bool | None = None) -> tuple:
    """The storage, shape, strides, dtype and autograd flag of the tensor a candidate fills: a
    sampler writes its values in place and leaves these as they were. `requires_grad`: the flag
    where `t` does not carry it (the local shard of a DTensor parameter, whose flag is the
    parameter's)."""
    flag = t.requires_grad if requires_grad is None else requires_grad
    return (t.data_ptr(), tuple(t.shape), t.stride(), t.dtype, flag)


def changed_tensor(before: tuple, t: torch.Tensor) -> str | None:
    """What a call changed of `t` (`tensor_facts` before it), None where nothing."""
    return changed_facts(before, tensor_facts(t))


def changed_facts(before: tuple, after: tuple) -> str | None:
    """What differs between two readings of a tensor's `TENSOR_FACTS` (its storage named, not
    its address), None where nothing: "shape (256, 256) -> (3,), storage"."""
    return changes(TENSOR_FACTS, before, after, bare=frozenset({"storage"}))


def is_budget_stop(calls: int) -> bool:
    """Call counts at which a budget may stop a draw: 2^k and 3 * 2^k. Few enough that the n of
    a budget-limited draw is a round number of calls, dense enough (ratio <= 1.5 between
    neighbours) that stopping at the next one costs little."""
    calls = int(calls)
    if calls < 1:
        return False
    odd = calls >> ((calls & -calls).bit_length() - 1)
    return odd in (1, 3)


#: Elements folded at a time on CPU: the fold's working set (the chunk, its integer keys, z, z^2,
#: a scratch tensor and the pending mass counters: ~6 x 4 MB at 2^20 float32 elements) then stays
#: in the last-level cache, and the fold is ~20% faster than at 2^22 (benchmarks/engine.py).
CPU_CHUNK_ELEMENTS = 1 << 20
#: Elements folded at a time on an accelerator, which pays per kernel launch rather than per
#: cache miss: four times fewer launches than the CPU's chunks would take.
DEVICE_CHUNK_ELEMENTS = 1 << 22


def chunk_elements_for(device) -> int:
    """The default chunk size (elements) of a draw on `device`."""
    return CPU_CHUNK_ELEMENTS if torch.device(device).type == "cpu" else DEVICE_CHUNK_ELEMENTS


PREPARE_TIMEOUT_S = 120.0


def prepare_candidate(candidate, call_timeout: float | None, fold: "Fold") -> None:
    """A candidate's one-time start-up (``candidate.prepare()``: importing a library,
    starting a library's child process) before the timed calls, so it is neither candidate time
    nor spent out of a per-case budget. Idempotent on the candidate's side; bounded by a deadline
    of its own (imports are slow on a busy machine)."""
    prepare = getattr(candidate, "prepare", None)
    if prepare is None:
        return
    seconds = max(call_timeout or 0.0, PREPARE_TIMEOUT_S)
    try:
        with candidate_call(seconds, watched=True):
            prepare()
    except CallTimeout:
        raise CandidateFailure("hang", f"preparing the candidate did not finish within {seconds:g} s",
                               fold.finish()) from None
    except Exception as exc:
        raise CandidateFailure("raised", f"preparing the candidate raised {raised_text(exc)}",
                               fold.finish()) from exc


def warm_up(candidate, case, dtype, device, call_timeout: float | None, fold: "Fold",
            pace: Pace) -> None:
    """Untimed calls on a scratch tensor of the case, with generators of their own (the draw's
    stream is untouched), for a candidate that asks for it (``candidate.warm_up``: a compiled
    path, whose first call compiles): compiling is neither candidate time nor part of the draw.
    Two calls, each with a new generator: Dynamo compiles again for the second generator object
    it meets (8.7 s here, measured; past the call timeout on a loaded machine) and then takes
    any generator, as the draw's. The second call, compiled, is the draw's first timed call
    (`pace`): the draw's first call is held to its pace."""
    if not getattr(candidate, "needs_warm_up", False):
        return
    scratch, _, _ = make_target(case, dtype, device)
    seconds = max(call_timeout or 0.0, PREPARE_TIMEOUT_S)
    try:
        for seed in (0x5EED, 0x5EED + 1):
            generator = torch.Generator(device=device).manual_seed(seed)
            t0 = time.perf_counter()
            with candidate_call(seconds, watched=True):
                candidate(scratch, case.mean, case.std, case.a, case.b, generator)
                _synchronize(device)
        pace.record(time.perf_counter() - t0)
    except CallTimeout:
        raise CandidateFailure("hang", f"warming the candidate up (compiling) did not finish within "
                               f"{seconds:g} s", fold.finish()) from None
    except Exception as exc:
        raise CandidateFailure("raised", f"warming the candidate up (compiling) raised "
                               f"{raised_text(exc)}", fold.finish()) from exc


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def run_engine(candidate, case, dtype: torch.dtype, device, law, n: int, seed: int, *,
               families, call_timeout: float | None = 60.0, chunk_elements: int | None = None,
               min_calls: int = 2, time_budget: float | None = None,
               watch: tuple | None = None, progress=None) -> Summary:
    """Draw at least n samples of `case` from `candidate` and fold them into a Summary through
    the statistic families `families` (`harness.checks.CHECKS.families`).

    With `time_budget` (seconds of the candidate's own time), stop once the candidate has used
    the budget, at the first call count on the grid 1, 2, 3, 4, 6, 8, 12, ... (`is_budget_stop`)
    at or after `min_calls`: the Summary's n says how many samples were drawn, and
    ``notes["stopped_by_budget"]`` that the budget stopped it. Chunks are cut the same way for
    any n, so ``run_engine(..., n=summary.n)`` without a budget folds the very same chunks and
    gives the same Summary bit for bit (what a `reproduce:` line with ``--samples`` relies on).
    `chunk_elements`: elements folded at a time (None: `chunk_elements_for(device)`); the
    Summary does not depend on it beyond float rounding of its sums.
    `watch` (mass-bin indices) asks for the exact values in those bins to be tallied.
    `progress(drawn, target)`, when given, is called after each fold (a progress bar).
    Raises CandidateFailure (kind "raised" or "hang") when a call raises or does not return
    within its deadline (`call_timeout`, stretched by the candidate's own `Pace`); the exception
    carries the partial Summary.
    """
    device = torch.device(device)
    shape = tuple(case.shape)
    numel = max(1, math.prod(shape))
    chunk_elements = chunk_elements or chunk_elements_for(device)
    calls_total = max(min_calls, math.ceil(n / numel))
    per_chunk = max(1, min(calls_total, chunk_elements // numel))
    summary = new_summary(law, shape, dtype)
    summary.notes["seed"] = seed
    fold = Fold(summary, dtype, device, law, families=families, watch=watch)
    generator = torch.Generator(device=device).manual_seed(seed)
    target, base, others = make_target(case, dtype, device)
    # A call that fills a chunk on its own is folded from the tensor it filled: copying it into a
    # buffer first would be one more pass over the largest tensors, and twice their memory.
    direct = per_chunk == 1 and target.is_contiguous()
    buffer = None if direct else torch.empty((per_chunk, *shape), dtype=dtype, device=device)
    prepare_candidate(candidate, call_timeout, fold)
    pace = Pace(call_timeout)
    warm_up(candidate, case, dtype, device, call_timeout, fold, pace)
    filled = 0
    done = 0
    t_candidate = 0.0
    # the poison and its view, looked up once: a tiny tensor's call costs ~100 us in all
    int_view = INT_VIEW[dtype_bits(dtype)]
    base_ints = base.view(int_view)
    outside = tuple(part.view(int_view) for part in others)
    poison = poison_value(dtype)
    facts = tensor_facts(target)
    t_start = time.perf_counter()
    with held_handlers(), kept_settings():  # handlers installed once for the draw's calls
        while done < calls_total:
            base_ints.fill_(poison)
            limit = pace.limit()
            t0 = time.perf_counter()
            try:
                with candidate_call(limit, pace.watched()):
                    # the candidate's own time: the deadline's arming is the harness's
                    t0 = time.perf_counter()
                    returned = candidate(target, case.mean, case.std, case.a, case.b, generator)
                    _synchronize(device)
                    seconds = time.perf_counter() - t0
            except CallTimeout:
                summary.candidate_s = t_candidate + (time.perf_counter() - t0)
                raise CandidateFailure(
                    "hang", f"call {done + 1} did not return within {limit:.3g} s", fold.finish()
                ) from None
            except Exception as exc:  # the candidate's own error (SystemExit too), a fail row
                summary.candidate_s = t_candidate + (time.perf_counter() - t0)
                raise CandidateFailure("raised", f"call {done + 1} raised {raised_text(exc)}",
                                       fold.finish()) from exc
            t_candidate += seconds
            pace.record(seconds)
            changed = changed_tensor(facts, target)
            if changed is not None:  # what the harness reads and poisons next is no longer it
                summary.candidate_s = t_candidate
                raise CandidateFailure("broke its tensor", f"call {done + 1} changed the tensor it "
                                       f"was given ({changed}): a sampler fills it in place",
                                       fold.finish())
            if returned is not target:
                summary.n_returned_other += 1
            for part in outside:
                summary.n_written_outside += int(torch.count_nonzero(part != poison))
            if not direct:
                buffer[filled].copy_(target)  # a view a call: a block of them at once costs more
            filled += 1
            done += 1
            over_budget = (time_budget is not None and done >= min_calls and done < calls_total
                           and t_candidate > time_budget and is_budget_stop(done))
            if filled == per_chunk or done == calls_total or over_budget:
                release_native_backstop()  # the fold's time is the harness's, not a call's
                fold.fold(target.unsqueeze(0) if direct else buffer[:filled])
                filled = 0
                if progress is not None:
                    progress(done * numel, calls_total * numel)
                if over_budget:
                    summary.notes["stopped_by_budget"] = True
                    break
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    summary = fold.finish()
    summary.candidate_s = t_candidate
    summary.engine_s = time.perf_counter() - t_start - t_candidate
    return summary
