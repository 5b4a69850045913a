"""Cases from a model: `--cases-from module:fn` (or ``path/file.py:fn``) calls a function that
builds and initializes a model, records every ``torch.nn.init.trunc_normal_`` call it makes
(shape, dtype, mean, std, a, b, and how many times), and turns the distinct calls into cases, so
the candidate is judged on exactly the calls the model makes, in their dtypes.

The recording replaces torch's ``_no_grad_trunc_normal_`` for the duration of the call: every call
of ``trunc_normal_`` goes through it, however the model's code imported the function (``from
torch.nn.init import trunc_normal_`` included), and the real initialization still happens (a meta
tensor stays a no-op, so a model built on the meta device is recorded without memory). Where a
torch lacks that inner function, ``torch.nn.init.trunc_normal_`` itself is replaced (calls made
through an earlier ``from ... import`` then go unseen). The function is called in every process
of a run (each xdist worker records for itself), so it must be deterministic, as model code is.
"""

from __future__ import annotations

import re
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass

import torch

from reference.dtypes import dtype_name

from .cases import Case, case_spec


class RecordingError(Exception):
    """The function could not be loaded or called; str() is one line."""


@dataclass(frozen=True)
class RecordedCall:
    shape: tuple
    dtype: str
    mean: float
    std: float
    a: float
    b: float
    count: int


@contextmanager
def _replaced(module, name: str, value):
    """`module.name` is `value` inside the block; the original is put back however it ends (a
    model that raises must not leave torch recording)."""
    original = getattr(module, name)
    setattr(module, name, value)
    try:
        yield
    finally:
        setattr(module, name, original)


def record_calls(fn) -> list[RecordedCall]:
    """Call ``fn()`` and return the distinct trunc_normal_ calls it made, in first-call order."""
    import torch.nn.init as init

    calls: Counter = Counter()

    def note(tensor, mean, std, a, b):
        calls[(tuple(int(d) for d in tensor.shape), dtype_name(tensor.dtype), float(mean),
               float(std), float(a), float(b))] += 1

    inner = getattr(init, "_no_grad_trunc_normal_", None)  # torch's own (third-party) internals
    if inner is not None:
        def recording(tensor, mean, std, a, b, generator=None):
            note(tensor, mean, std, a, b)
            return inner(tensor, mean, std, a, b, generator=generator)

        with _replaced(init, "_no_grad_trunc_normal_", recording):
            fn()
    else:  # pragma: no cover - a torch without the inner function
        outer = init.trunc_normal_

        def recording_outer(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
            note(tensor, mean, std, a, b)
            return outer(tensor, mean, std, a, b, generator=generator)

        with _replaced(init, "trunc_normal_", recording_outer):
            fn()
    return [RecordedCall(*key, count) for key, count in calls.items()]


def _label(spec: str) -> str:
    name = spec.rpartition(":")[2].split(".")[-1]
    base = spec.rpartition(":")[0].rstrip("/").rsplit("/", 1)[-1].removesuffix(".py").rsplit(".", 1)[-1]
    text = f"{base}-{name}" if name not in ("build", "main", "init", "model") else base
    return re.sub(r"[^A-Za-z0-9_.-]", "-", text) or "model"


def cases_from(spec: str) -> list[Case]:
    """The cases of the calls `spec`'s function makes (ids ``<label>-<i>``, one per distinct
    (shape, dtype, mean, std, a, b)); RecordingError (one line) when it cannot be loaded or
    raises."""
    from candidates.loader import CandidateNotFound, load_attribute

    try:
        fn, _, _ = load_attribute(spec)
    except CandidateNotFound as exc:
        raise RecordingError(f"--cases-from {spec!r}: {exc.reason}") from None
    if not callable(fn):
        raise RecordingError(f"--cases-from {spec!r}: not callable (a {type(fn).__name__})")
    try:
        with torch.random.fork_rng(devices=[]):
            calls = record_calls(fn)
    except Exception as exc:  # the user's model code: one line, no traceback
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise RecordingError(f"--cases-from {spec!r}: calling it raised {type(exc).__name__}"
                             f"{': ' + text[:200] if text else ''}") from None
    if not calls:
        raise RecordingError(f"--cases-from {spec!r}: it made no torch.nn.init.trunc_normal_ call")
    label = _label(spec)
    out = []
    for i, call in enumerate(calls):
        case_id = f"{label}-{i}"
        out.append(Case(case_id, call.mean, call.std, call.a, call.b, call.shape, ("model",),
                        f"{call.count} call(s) of trunc_normal_ in {spec}: "
                        f"{'x'.join(map(str, call.shape))} {call.dtype}",
                        spec=case_spec(call.mean, call.std, call.a, call.b, call.shape, case_id),
                        dtypes=(call.dtype,), own_shape=True))
    return out
