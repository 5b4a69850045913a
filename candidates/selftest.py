"""Self-test candidates: deliberately broken in ways the *hard* checks must catch.

They are used by the harness's own tests (tests/, pytester runs of suites/) to prove that each
non-statistical check can fail. They are not in ``REGISTRY`` (so they never show up in a listing or a
default run) but `candidates.resolve` finds them by name: ``SELFTEST_REGISTRY`` keys all start with
``selftest-``.

=============================  ===================================================================
``selftest-skip-last``         exact, but the last 3 elements (row-major) keep their old values -> written
``selftest-nan-on-bad-args``   exact, but bad arguments give a NaN-filled tensor instead of an error
                               -> arguments
``selftest-contiguous-copy``   on a non-contiguous input fills and returns a contiguous copy, the
                               input untouched -> contract (and written)
``selftest-ignores-generator`` exact with an internal generator seeded 0; takes ``generator`` and
                               ignores it -> generator (different seeds, same output)
``selftest-infinite-loop``     ``while True: pass`` in pure Python -> hang
``selftest-raises``            raises RuntimeError on every call -> error rows
``selftest-crash``             ``os._exit(3)`` on every call -> the report's crash handling
``selftest-slow``              exact, but each call sleeps 0.1 s first -> the per-case budget
                               (correct output: it must pass, with fewer samples)
``selftest-repeating-rng-X``   the good sampler X (``torch``, ``fast-exact``) on a generator that
                               repeats every draw (`RepeatingRandomness`: the RNG state restored
                               around each torch call, as a DTensor RNG tracker that restores it
                               around each random op does under FSDP2 CPU offload) -> repetition and
                               independence (calls repeat one another); hang where X redraws its
                               rejected values until they pass (torch's rejection loop)
``selftest-shifted-shards``,   on DTensors, each breaking one thing only sharding can break ->
``selftest-mirrored-shards``,  shards (repeated rows), shards (correlation), replicas, sharding;
``selftest-replica-drift``,    see candidates/dtensor_samplers.py
``selftest-layout-dependent``
=============================  ===================================================================
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable

import numpy as np
import torch
from torch.overrides import TorchFunctionMode

from candidates.builtin import exact_trunc_normal_
from candidates.fast_exact import fast_exact_trunc_normal_
from candidates.kernels import harness_version
from candidates.protocol import Candidate

__all__ = ["SELFTESTS", "RepeatingRandomness", "generators_drawn_from", "on_a_repeating_generator"]


def skip_last_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """Exact, but leaves the last 3 elements of the flattened tensor unwritten (caught by: written)."""
    if tensor.is_meta:
        return tensor
    with torch.no_grad():
        n = tensor.numel()
        k = min(3, n)
        # Three elements, addressed by their multi-index so that any layout (views included) works.
        if tensor.dim() == 0:
            idx = [()]
        else:
            idx = [tuple(int(i) for i in ix) for ix in zip(*np.unravel_index(np.arange(n - k, n), tensor.shape))]
        saved = [tensor[ix].clone() for ix in idx]
        exact_trunc_normal_(tensor, mean, std, a, b, generator=generator)
        for ix, v in zip(idx, saved):
            tensor[ix] = v
        return tensor


def nan_on_bad_args_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """Exact, but for a > b, std <= 0 or NaN arguments returns the tensor filled with NaN instead of
    raising (caught by: arguments)."""
    m, s, lo, hi = (float(v) for v in (mean, std, a, b))
    if any(math.isnan(v) for v in (m, s, lo, hi)) or s <= 0 or math.isinf(s) or lo > hi:
        with torch.no_grad():
            return tensor.fill_(math.nan)
    return exact_trunc_normal_(tensor, mean, std, a, b, generator=generator)


def contiguous_copy_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """Fills a contiguous copy of a non-contiguous input and returns the copy, leaving the input
    untouched (caught by: contract). Contiguous inputs are filled in place, correctly."""
    if tensor.is_contiguous():
        return exact_trunc_normal_(tensor, mean, std, a, b, generator=generator)
    with torch.no_grad():
        copy = tensor.contiguous()
    return exact_trunc_normal_(copy, mean, std, a, b, generator=generator)


def ignores_generator_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """Exact with a fixed internal seed 0: accepts ``generator`` and ignores it (caught by: generator)."""
    fixed = torch.Generator(device=tensor.device if tensor.device.type != "meta" else "cpu").manual_seed(0)
    return exact_trunc_normal_(tensor, mean, std, a, b, generator=fixed)


def infinite_loop_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """Never returns: a pure-Python busy loop (caught by: hang)."""
    while True:
        pass


def raises_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """Raises RuntimeError on every call (every check reports an error)."""
    raise RuntimeError("selftest-raises: this candidate always raises")


def crash_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """Kills its process with os._exit(3) on every call (the report's crash handling)."""
    os._exit(3)


def slow_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """Exact, but every call first sleeps 0.1 s (exercises the per-case budget; passes)."""
    time.sleep(0.1)
    return exact_trunc_normal_(tensor, mean, std, a, b, generator=generator)


class RepeatingRandomness(TorchFunctionMode):
    """Every torch call made inside leaves `generators` in the state it found them in: each random
    op draws the very numbers the one before it drew (a generator that repeats every draw)."""

    def __init__(self, generators):
        super().__init__()
        self.generators = tuple(generators)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        states = [g.get_state() for g in self.generators]
        try:
            return func(*args, **(kwargs or {}))
        finally:
            for g, state in zip(self.generators, states):
                g.set_state(state)


def generators_drawn_from(tensor, generator) -> list:
    """The generators a sampler filling `tensor` may draw from: the one it is given, and the
    default generator of the CPU and of the tensor's device."""
    found = [generator] if generator is not None else []
    found.append(torch.default_generator)
    device = tensor.device
    if device.type == "cuda":
        found.append(torch.cuda.default_generators[device.index if device.index is not None
                                                   else torch.cuda.current_device()])
    return found


def on_a_repeating_generator(fill: Callable) -> Callable:
    """`fill` (the protocol's function) called under `RepeatingRandomness`."""

    def repeating_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
        """The sampler on a generator that repeats every draw (its state restored around each torch
        call, as a DTensor RNG tracker restoring it around each random op does): its calls repeat
        one another, and a loop redrawing rejected values never ends."""
        with RepeatingRandomness(generators_drawn_from(tensor, generator)):
            return fill(tensor, mean, std, a, b, generator=generator)

    return repeating_


def _torch_trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    return torch.nn.init.trunc_normal_(tensor, mean, std, a, b, generator=generator)


def _make(name: str, fn: Callable, known_bad: bool = True) -> Callable[[], Candidate]:
    def factory() -> Candidate:
        return Candidate(fn, name=name, spec=name, version=harness_version(), torch_init_semantics=True,
                         known_bad=known_bad,
                         defect=(fn.__doc__ or "").strip().splitlines()[0] if known_bad else "")

    return factory


#: name -> factory of the self-test saboteurs (`candidates.catalog` adds the sharded ones).
SELFTESTS: dict[str, Callable[[], Candidate]] = {
    "selftest-skip-last": _make("selftest-skip-last", skip_last_),
    "selftest-nan-on-bad-args": _make("selftest-nan-on-bad-args", nan_on_bad_args_),
    "selftest-contiguous-copy": _make("selftest-contiguous-copy", contiguous_copy_),
    "selftest-ignores-generator": _make("selftest-ignores-generator", ignores_generator_),
    "selftest-infinite-loop": _make("selftest-infinite-loop", infinite_loop_),
    "selftest-raises": _make("selftest-raises", raises_),
    "selftest-crash": _make("selftest-crash", crash_),
    "selftest-slow": _make("selftest-slow", slow_, known_bad=False),
    "selftest-repeating-rng-torch": _make("selftest-repeating-rng-torch",
                                          on_a_repeating_generator(_torch_trunc_normal_)),
    "selftest-repeating-rng-fast-exact": _make("selftest-repeating-rng-fast-exact",
                                               on_a_repeating_generator(fast_exact_trunc_normal_)),
}

