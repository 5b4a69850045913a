"""Execution paths: the same candidate called another way, judged by the same checks.

A path is a wrapper around the candidate, never a second engine:

* ``eager``: the candidate as it is;
* ``compile``: the candidate wrapped in ``torch.compile`` (default mode). The first call of each
  shape compiles; the engine makes that call on a scratch tensor before the draw
  (`harness.engine.draw.warm_up`), so compiling is neither candidate time nor part of the draw.
  torch.compile bugs are real (torch #193938 turned ``randn`` into a uniform): the output is
  judged against the law like any other;
* ``compile-fullgraph``: the candidate compiled whole, ``torch.compile(fullgraph=True)``, as a
  model's initialization is under a compiled init function: any graph break (a host read of a
  tensor, a Python branch on one, as in torch 2.13-2.15's trunc_normal_) makes compiling raise,
  and the group's rows fail as a draw that raised (an ``api`` finding: a statement about the
  call, not the values).
  Dynamo cannot take a ``torch.Generator`` argument, so the compiled function is called without
  one and the harness's generator seeds the global RNG before each call (a fresh seed drawn from
  it, as `candidates.protocol.Candidate` does for a candidate that takes no generator); the
  values drawn there are those of the compiled graph's own random ops;
* ``deterministic``: every call under ``torch.use_deterministic_algorithms(True)``: the
  candidate must not raise, and the `generator` check holds it to the same bits from the same
  generator state.

A path group's case is labelled ``case+path`` (its own seeds); eager groups keep the case's label.
"""

from __future__ import annotations

import contextlib

import torch

from candidates.protocol import draw_seed

from ..cases import COMPILED_PATHS, PATHS


@contextlib.contextmanager
def deterministic_algorithms():
    """torch.use_deterministic_algorithms(True) for the enclosed block, restored after."""
    before = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(before, warn_only=warn_only)


class PathCandidate:
    """`candidate` called on `path` (see the module docstring); every other attribute is the
    candidate's own (name, spec, version, dtypes, skip reasons, ...)."""

    def __init__(self, candidate, path: str):
        if path not in PATHS:
            raise ValueError(f"unknown path {path!r}; known: {', '.join(PATHS)}")
        self._candidate = candidate
        self.path = path
        self.needs_warm_up = path in COMPILED_PATHS
        self._compiled = None

    def __getattr__(self, name):
        return getattr(self._candidate, name)

    def _call(self, tensor, mean, std, a, b, generator=None):
        return self._candidate(tensor, mean, std, a, b, generator)

    def _call_on_global_rng(self, tensor, mean, std, a, b):
        return self._candidate(tensor, mean, std, a, b, None)

    def __call__(self, tensor, mean, std, a, b, generator=None):
        if self.path == "compile":
            if self._compiled is None:
                # Dynamo's caches are per code object: after 8 recompiles (each group's mean,
                # std, a, b are new constants) a frame silently runs eager, and which groups get
                # there depends on what the worker ran before. A fresh start per group keeps
                # every group compiled, whatever -n and the order.
                torch.compiler.reset()
                self._compiled = torch.compile(self._call)
            return self._compiled(tensor, mean, std, a, b, generator)
        if self.path == "compile-fullgraph":
            if self._compiled is None:
                torch.compiler.reset()  # as above: every group compiled from a fresh start
                self._compiled = torch.compile(self._call_on_global_rng, fullgraph=True)
            if generator is not None:
                torch.manual_seed(draw_seed(generator))
            return self._compiled(tensor, mean, std, a, b)
        if self.path == "deterministic":
            with deterministic_algorithms():
                return self._candidate(tensor, mean, std, a, b, generator)
        return self._candidate(tensor, mean, std, a, b, generator)

    def __repr__(self) -> str:
        return f"PathCandidate({self._candidate!r}, {self.path!r})"


def candidate_on_path(candidate, path: str):
    """The candidate as called on `path` (the candidate itself for eager)."""
    return candidate if path == "eager" else PathCandidate(candidate, path)
