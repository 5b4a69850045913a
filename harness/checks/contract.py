"""Checks of the candidate's API: `contract`, `generator`, `threads` and `arguments` call the
candidate on tensors of their own (they test the API, not the law) under a deadline, so a candidate
that hangs on bad arguments fails instead of stalling the run. No statistics: a violation fails at
once.
"""

from __future__ import annotations

import math
import os
import time
import warnings

import torch

from ..engine import (INT_VIEW, SLOW_CALL_FACTOR, CallTimeout, CandidateRaised, Pace,
                      candidate_call, changed_tensor, dtype_bits, kept_settings, poison_,
                      poison_value, raised_text, tensor_facts)
from ..result import Result
from ..declaration import CANDIDATE, calling


class _Probe:
    """Call a candidate under a deadline (`timeout`, stretched by the candidate's own pace:
    `harness.engine.Pace`; `grace=1`: the fixed limit alone), turning every outcome into data;
    `seconds` adds up the time spent inside the candidate (charged to the Result's candidate_s,
    not to the harness)."""

    def __init__(self, candidate, timeout: float, grace: float = SLOW_CALL_FACTOR):
        self.candidate = candidate
        self.pace = Pace(timeout, grace)
        self.seconds = 0.0
        self.changed_settings: str | None = None  # the first of torch's settings a call changed

    def __call__(self, tensor, mean, std, a, b, generator=None, limit: float | None = None):
        """-> ("ok", returned) | ("raised", exc) | ("fatal", exc) | ("hang", None). "fatal": the
        candidate raised SystemExit, GeneratorExit or a KeyboardInterrupt of its own, which would
        end the user's program: never a proper way to refuse an argument. `limit`: this call's
        deadline, where not the pace's."""
        self.last_limit = limit or self.pace.limit()
        kept = None
        t0 = time.perf_counter()
        try:
            deadline = candidate_call(self.last_limit, self.pace.watched())
            with kept_settings() as kept:  # set back, and said in `contract`, if changed
                with deadline, warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    returned = self.candidate(tensor, mean, std, a, b, generator)
            self.pace.record(time.perf_counter() - t0)
            return "ok", returned
        except CallTimeout:
            return "hang", None
        except CandidateRaised as exc:
            return "fatal", exc
        except Exception as exc:
            return "raised", exc
        finally:
            self.seconds += time.perf_counter() - t0
            if kept is not None and kept.changed is not None:
                self.changed_settings = self.changed_settings or kept.changed

    def charge(self, result: Result) -> Result:
        result.candidate_s = self.seconds
        return result


def _verdict(check: str, problems: list, passed: str, notes: list = (), **extra) -> Result:
    """Fail listing every problem found, or pass with the notes on what was not applicable."""
    if problems:
        return Result(check, "fail", "; ".join(problems), statistic=len(problems), p_value=0.0,
                      **extra)
    note = f" ({'; '.join(notes)})" if notes else ""
    return Result(check, "pass", passed + note, statistic=0, p_value=1.0, **extra)


def _unwritten(tensor: torch.Tensor) -> int:
    bits = dtype_bits(tensor.dtype)
    return int((tensor.view(INT_VIEW[bits]) == poison_value(tensor.dtype)).sum())


def _gen(device, seed):
    return torch.Generator(device=device).manual_seed(seed)


def check_contract(candidate, case, dtype, device, seed: int, timeout: float) -> Result:
    """In place, same tensor back, metadata unchanged, views written and nothing else, edge
    shapes, torch's process-wide settings left as they were (`harness.engine.settings`)."""
    probe = _Probe(candidate, timeout)
    m, s, a, b = case.mean, case.std, case.a, case.b
    problems: list[str] = []
    notes: list[str] = []
    not_run: list[str] = []

    def call(t, label):
        if not_run or any(p.endswith("did not return") for p in problems):
            # One hang is a fail already; each further probe would only wait out the deadline.
            not_run.append(label)
            return None
        status, out = probe(t, m, s, a, b, _gen(device, seed))
        if status != "ok":
            what = "did not return" if status == "hang" else f"raised {raised_text(out)}"
            problems.append(f"{label}: {what}"[:200])
            return None
        return out

    # Plain tensor: same object back, metadata unchanged, fully written.
    t = poison_(torch.empty((8, 6), dtype=dtype, device=device))
    facts = tensor_facts(t)
    out = call(t, "plain 8x6")
    if out is not None or not problems:
        if out is not t:
            problems.append("plain 8x6: did not return the tensor it was given")
        changed = changed_tensor(facts, t)
        if changed is not None:
            problems.append(f"plain 8x6: changed the tensor ({changed})")
        if _unwritten(t):
            problems.append(f"plain 8x6: {_unwritten(t)} of 48 elements unwritten")

    # Non-contiguous views: every element of the view written, the rest of the base untouched.
    for label, make in (("transposed view", lambda base: base.t()),
                        ("stepped slice [:, ::2]", lambda base: base[:, ::2])):
        base = poison_(torch.empty((6, 10), dtype=dtype, device=device))
        view = make(base)
        mask = torch.zeros(base.shape, dtype=torch.bool, device=device)
        make(mask).fill_(True)
        out = call(view, label)
        if out is None and (not_run or problems and problems[-1].startswith(label)):
            continue
        if _unwritten(view):
            problems.append(f"{label}: {_unwritten(view)} of {view.numel()} view elements unwritten")
        outside = base[~mask]
        if outside.numel() and _unwritten(outside) != outside.numel():
            problems.append(f"{label}: wrote {outside.numel() - _unwritten(outside)} elements "
                            "outside the view")
        if out is not None and out is not view:
            problems.append(f"{label}: did not return the view it was given")

    # Edge shapes.
    empty = torch.empty((0, 3), dtype=dtype, device=device)
    out = call(empty, "empty 0x3 tensor")
    scalar = poison_(torch.empty((), dtype=dtype, device=device))
    out = call(scalar, "0-d tensor")
    if out is not None and _unwritten(scalar):
        problems.append("0-d tensor: not written")

    # nn.Parameter with requires_grad: works and records no autograd history.
    param = torch.nn.Parameter(torch.empty((4, 5), dtype=dtype, device=device), requires_grad=True)
    out = call(param, "nn.Parameter(requires_grad=True)")
    if out is not None:
        if getattr(out, "grad_fn", None) is not None or param.grad_fn is not None:
            problems.append("nn.Parameter: the fill recorded autograd history")
        if not param.requires_grad:
            problems.append("nn.Parameter: requires_grad was switched off")

    # Meta tensors: torch.nn.init semantics make them a no-op.
    if getattr(candidate, "torch_init_semantics", False):
        meta_t = torch.empty((4, 5), dtype=dtype, device="meta")
        call(meta_t, "meta tensor")
    else:
        notes.append("meta tensors not tried (candidate does not claim torch.nn.init semantics)")
    if not_run:
        problems.append(f"not run after the hang: {', '.join(not_run)}")
    if probe.changed_settings is not None:
        problems.append(f"changed torch's settings and left them so ({probe.changed_settings})")

    return probe.charge(_verdict("contract", problems, "in place, same tensor, views exact, "
                                 "edge shapes ok", notes))


def _rng_state(device) -> torch.Tensor:
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.get_rng_state(device)
    return torch.get_rng_state()


def check_generator(candidate, case, dtype, device, seed: int, timeout: float,
                    collision_prob: float) -> Result:
    """Same seed -> bit-identical output; other seed -> other output; global RNG left alone."""
    probe = _Probe(candidate, timeout)
    shape = (16, 64)
    numel = math.prod(shape)
    bits = INT_VIEW[dtype_bits(dtype)]

    def draw(s):
        t = poison_(torch.empty(shape, dtype=dtype, device=device))
        status, out = probe(t, case.mean, case.std, case.a, case.b, _gen(device, s))
        return status, out, t

    problems, notes = [], []
    st1, o1, t1 = draw(seed)
    st2, o2, t2 = draw(seed)
    st3, o3, t3 = draw(seed + 1)
    for st, o in ((st1, o1), (st2, o2), (st3, o3)):
        if st != "ok":
            what = "did not return" if st == "hang" else f"raised {raised_text(o)}"
            return probe.charge(Result("generator", "fail", f"call {what}"[:300], p_value=0.0))
    if not torch.equal(t1.view(bits), t2.view(bits)):
        diff = int((t1.view(bits) != t2.view(bits)).sum())
        problems.append(f"same seed gave different output ({diff} of {numel} elements differ)")
    # With one atom (or a tiny support) two seeds may legitimately agree everywhere.
    log_p_equal = numel * math.log(collision_prob) if collision_prob > 0 else -math.inf
    if log_p_equal < math.log(1e-12):
        if torch.equal(t1.view(bits), t3.view(bits)):
            problems.append("seeds s and s+1 gave bit-identical output")
    else:
        notes.append("different-seed check not applicable: the law has almost one atom")

    if candidate.accepts_generator:
        before = _rng_state(device).clone()
        st, o, _ = draw(seed)
        if not torch.equal(before, _rng_state(device)):
            problems.append("an explicit generator was passed, but the global RNG state changed")
    else:
        notes.append("no generator parameter: seeded through torch.manual_seed")

    return probe.charge(_verdict("generator", problems,
                                 "reproducible, seed-sensitive, global RNG untouched", notes))


#: The tensor the thread-count check fills: big enough that torch's CPU kernels split it across
#: threads (their grain is 32768 elements: two chunks or more).
THREADS_SHAPE = (256, 256)


def check_threads(candidate, case, dtype, device, seed: int, timeout: float) -> Result:
    """The same generator state with one torch thread and with all of them: whether the bits
    match is recorded; it fails only a candidate that declares ``thread_invariant``."""
    if torch.device(device).type != "cpu":
        return Result("threads", "skip", "the torch thread count applies to CPU kernels")
    probe = _Probe(candidate, timeout)
    bits = INT_VIEW[dtype_bits(dtype)]
    before = torch.get_num_threads()
    counts = (1, max(2, os.cpu_count() or 1))
    outs = []
    try:
        for threads in counts:
            torch.set_num_threads(threads)
            t = poison_(torch.empty(THREADS_SHAPE, dtype=dtype, device=device))
            # With all threads, the fixed limit: past it the call is not judged (below), so
            # waiting out a longer pace would only cost time.
            status, out = probe(t, case.mean, case.std, case.a, case.b, _gen(device, seed),
                                limit=timeout if outs else None)
            if status == "hang" and outs:
                return probe.charge(Result(
                    "threads", "skip", f"not judged: with {threads} threads the call did not "
                    f"return within {probe.last_limit:.3g} s, where with {counts[0]} it returned. "
                    f"With more threads than this worker's share of the cores each of torch's "
                    f"parallel ops can wait for a busy core, so that time is the machine's load; "
                    f"whether calls return is the hang check's",
                    details={"one_thread_s": probe.pace.slowest}))
            if status != "ok":
                what = "did not return" if status == "hang" else f"raised {raised_text(out)}"
                return probe.charge(Result("threads", "fail", f"with {threads} thread(s): call {what}"
                                           [:300], p_value=0.0))
            outs.append(t.view(bits))
    finally:
        torch.set_num_threads(before)
    diff = int((outs[0] != outs[1]).sum())
    declared = bool(getattr(candidate, "thread_invariant", False))
    details = {"threads": list(counts), "bits_match": diff == 0}
    if diff == 0:
        return probe.charge(Result("threads", "pass", f"the same bits with {counts[0]} and "
                                   f"{counts[1]} threads", statistic=0, p_value=1.0, details=details))
    text = (f"{diff} of {outs[0].numel()} elements differ between {counts[0]} and {counts[1]} "
            f"threads from the same generator state")
    if declared:
        return probe.charge(Result("threads", "fail", text + " (the candidate declares "
                                   "thread_invariant)", statistic=diff, p_value=0.0, details=details))
    return probe.charge(Result("threads", "pass", text + " (recorded: the candidate does not "
                               "declare thread_invariant)", statistic=diff, details=details))


BAD_ARGUMENTS = (
    ("a > b", dict(a=1.0, b=-1.0)),
    ("std = 0", dict(std=0.0)),
    ("std < 0", dict(std=-1.0)),
    ("std = NaN", dict(std=math.nan)),
    ("std = inf", dict(std=math.inf)),
    ("mean = NaN", dict(mean=math.nan)),
    ("a = NaN", dict(a=math.nan)),
    ("b = NaN", dict(b=math.nan)),
)


#: The valid call `check_arguments` makes first: its refusals mean something only where this fills.
VALID_ARGUMENTS = dict(mean=0.0, std=1.0, a=-2.0, b=2.0)


def check_arguments(candidate, dtype, device, seed: int, timeout: float) -> Result:
    """Invalid arguments must raise; returning anything or hanging fails. a == b is recorded.

    A valid call (`VALID_ARGUMENTS`) comes first: a candidate that raises or hangs on it too
    fails, since raising on everything refuses nothing in particular. Arguments the candidate
    declares it cannot be asked for (``cannot_express``: a fixed-±2σ library sampler has no
    bounds to pass) are not probed; the verdict says which, and is a skip when none could be
    probed."""
    prepare = getattr(candidate, "prepare", None)
    if prepare is not None:
        # The one-time start-up (a library's import and first compile) is not a probe's time:
        # a first probe that waits for it would count as hung.
        prepare()
    probe = _Probe(candidate, timeout, grace=1.0)  # refusing an argument takes no time
    problems = []
    cannot = getattr(candidate, "cannot_express", lambda *args: None)
    refused = _refuses_valid_call(probe, cannot, dtype, device, seed, timeout)
    if refused is not None:
        return probe.charge(Result("arguments", "fail", refused, statistic=1, p_value=0.0))
    not_expressible, reasons = [], []
    for label, override in BAD_ARGUMENTS:
        args = VALID_ARGUMENTS | override
        reason = cannot(args["mean"], args["std"], args["a"], args["b"])
        if reason is not None:
            not_expressible.append(label)
            reasons.append(reason)
            continue
        t = poison_(torch.empty((4, 8), dtype=dtype, device=device))
        status, out = probe(t, args["mean"], args["std"], args["a"], args["b"], _gen(device, seed))
        if status == "hang":
            problems.append(f"{label}: hung (no return within {timeout:g} s)")
        elif status == "fatal":
            problems.append(f"{label}: raised {raised_text(out)} (ends the caller's program)")
        elif status == "ok":
            x = t.to(torch.float64)
            what = ("NaN" if bool(torch.isnan(x).all()) and not _unwritten(t)
                    else "nothing" if _unwritten(t) == t.numel() else "values")
            problems.append(f"{label}: returned without raising (wrote {what})")
    if cannot(0.0, 1.0, 0.5, 0.5) is not None:
        not_expressible.append("a == b")
        if len(not_expressible) == len(BAD_ARGUMENTS) + 1:
            return Result("arguments", "skip", "the candidate cannot be asked for any invalid "
                          f"argument ({reasons[0]})", details={"a_equals_b": "not expressible"})
        return probe.charge(_verdict("arguments", problems,
                                     "every expressible invalid argument raised",
                                     [f"not expressible: {', '.join(not_expressible)}"],
                                     details={"a_equals_b": "not expressible"}))
    t = poison_(torch.empty((4, 8), dtype=dtype, device=device))
    status, out = probe(t, 0.0, 1.0, 0.5, 0.5, _gen(device, seed))
    a_eq_b = {"ok": "fills", "raised": "raises", "hang": "hangs", "fatal": "exits"}[status]
    if status == "ok":
        expected = torch.tensor(0.5, dtype=dtype)
        if not bool((t.cpu() == expected).all()):
            problems.append("a == b: returned, but did not fill with a")
    elif status == "hang":
        problems.append(f"a == b: hung (no return within {timeout:g} s)")
    elif status == "fatal":
        problems.append(f"a == b: raised {raised_text(out)} (ends the caller's program)")
    return probe.charge(_verdict("arguments", problems,
                                 f"every invalid argument raised; a == b {a_eq_b}",
                                 [f"not expressible: {', '.join(not_expressible)}"]
                                 if not_expressible else [],
                                 details={"a_equals_b": a_eq_b}))


def _refuses_valid_call(probe: _Probe, cannot, dtype, device, seed: int, timeout: float,
                        ) -> str | None:
    """Why the valid call (`VALID_ARGUMENTS`) did not fill a tensor, None where it did or where the
    candidate cannot be asked for it."""
    args = VALID_ARGUMENTS
    if cannot(args["mean"], args["std"], args["a"], args["b"]) is not None:
        return None
    t = poison_(torch.empty((4, 8), dtype=dtype, device=device))
    status, out = probe(t, args["mean"], args["std"], args["a"], args["b"], _gen(device, seed))
    if status == "ok":
        return None
    what = (f"did not return within {timeout:g} s" if status == "hang"
            else f"raised {raised_text(out)}"
            + (" (ends the caller's program)" if status == "fatal" else ""))
    return (f"a refusal means nothing where valid arguments fail too: a valid call (mean 0, "
            f"std 1 on [-2, 2]) {what}")[:300]


#: The API checks: tensors of their own, on the grid's unsharded groups (one call may take up to
#: --case-timeout, capped: they make many small calls), and `arguments` once per candidate.
CONTRACT = calling("contract", lambda candidate, c, seed, timeout: check_contract(
    candidate, c.case, c.dtype, c.device, seed, timeout), timeout_cap=30.0,
    doc="In place, same tensor back, views written exactly, edge shapes, nn.Parameter, meta.")
GENERATOR = calling("generator", lambda candidate, c, seed, timeout: check_generator(
    candidate, c.case, c.dtype, c.device, seed, timeout, float(c.law.collision_prob)),
    timeout_cap=30.0,
    doc="Same seed, same bits; other seed, other bits; an explicit generator leaves the global "
        "RNG alone.")
THREADS = calling("threads", lambda candidate, c, seed, timeout: check_threads(
    candidate, c.case, c.dtype, c.device, seed, timeout), timeout_cap=30.0,
    doc="The same generator state with 1 and with all torch threads (recorded; held if "
        "declared).")
ARGUMENTS = calling("arguments", lambda candidate, c, seed, timeout: check_arguments(
    candidate, c.dtype, c.device, seed, timeout), scope=CANDIDATE, timeout_cap=10.0,
    doc="Invalid arguments raise where a valid call fills; a == b raises or fills with a "
        "(recorded).")
