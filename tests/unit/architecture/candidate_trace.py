"""The path of a candidate through the house: which of our modules it passes through, in order.

`trace_candidate(run)` calls `run(spec)` under `sys.setprofile` and records, for every Python call
into a module of ours (`reference`, `candidates`, `harness`, `reports`), whether the call's
arguments hold the candidate: the spec string the caller gave (a fresh, non-interned string, so
identity finds it and no literal of the code), or any `candidates.Candidate`; held directly, in a
list, tuple, set or dict, or as an attribute of an object given (a Group, a runner, the session).
Each such call has a chain: the modules of the calls holding the candidate on the stack above
it, consecutive repeats merged. The candidate goes down the floors when no chain comes back to a
module it had left; a *return* is a call into a module already earlier in its chain (a callback,
a double dispatch, an object handed back up), counted once per (from, to) pair, so that a loop
over checks or chunks counts once.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

PACKAGES = ("reference", "candidates", "harness", "reports")


@dataclass
class Trace:
    """Each call that held the candidate, as the chain of modules that handed it down to there."""

    calls: list = field(default_factory=list)  # (root module, ..., the called one) per call

    @property
    def path(self) -> list:
        """The called modules in the order of the calls, consecutive repeats merged."""
        out: list = []
        for chain in self.calls:
            if not out or out[-1] != chain[-1]:
                out.append(chain[-1])
        return out

    @property
    def revisits(self) -> list:
        """(from, to) steps of `path` into a module it had visited before, each pair once: in
        time rather than down a chain, so a module that hands the candidate to two others in
        turn counts (the figure an orchestrating caller raises; informative, not held)."""
        path, out = self.path, []
        for i in range(1, len(path)):
            if path[i] in path[:i - 1] and (path[i - 1], path[i]) not in out:
                out.append((path[i - 1], path[i]))
        return out

    @property
    def modules(self) -> list:
        """The modules the candidate passed through, in the order it first reached them."""
        return list(dict.fromkeys(m for chain in self.calls for m in chain))

    @property
    def returns(self) -> dict:
        """(from, to) -> an example chain, for each step back into a module the chain had left."""
        out: dict = {}
        for chain in self.calls:
            if chain[-1] in chain[:-1]:
                out.setdefault((chain[-2], chain[-1]), chain)
        return out

    def text(self) -> str:
        lines = [f"{len(self.modules)} modules, {len(self.returns)} returns "
                 f"({len(self.revisits)} revisits in time)",
                 "  modules: " + ", ".join(self.modules)]
        lines += [f"  return {a} -> {b}: " + " > ".join(chain)
                  for (a, b), chain in self.returns.items()]
        return "\n".join(lines)


def _holds(value, marks, depth: int = 2) -> bool:
    if marks(value):
        return True
    if depth == 0 or isinstance(value, (str, bytes, int, float, type(None))):
        return False
    if isinstance(value, dict):
        items = list(value.values())[:64]
    elif isinstance(value, (list, tuple, set, frozenset)):
        items = list(value)[:64]
    else:
        try:
            attrs = vars(value)
        except TypeError:
            attrs = {n: getattr(value, n, None) for n in getattr(type(value), "__slots__", ())}
        items = [v for k, v in list(attrs.items())[:64] if not k.startswith("__")]
    return any(_holds(v, marks, depth - 1) for v in items)


def trace_candidate(run, spec: str) -> Trace:
    """Call `run(spec)` (with a fresh copy of `spec`) and trace the candidate's path through our
    modules."""
    from candidates import Candidate

    given = "".join(list(spec))  # a new str object: identity tells it from the code's literals

    def marks(value) -> bool:
        return value is given or isinstance(value, Candidate)

    trace = Trace()
    holding: dict = {}  # id(frame) -> module, for the frames of ours whose arguments hold it

    def profile(frame, event, arg):
        if event == "return":
            holding.pop(id(frame), None)
            return
        if event != "call":
            return
        module = frame.f_globals.get("__name__", "")
        if module.split(".")[0] not in PACKAGES:
            return
        code = frame.f_code
        n_args = (code.co_argcount + code.co_kwonlyargcount + bool(code.co_flags & 0x04)
                  + bool(code.co_flags & 0x08))
        local = frame.f_locals
        if not any(_holds(local.get(n), marks) for n in code.co_varnames[:n_args]):
            return
        holding[id(frame)] = module
        chain, f = [module], frame.f_back
        while f is not None:
            m = holding.get(id(f))
            if m is not None and m != chain[-1]:
                chain.append(m)
            f = f.f_back
        trace.calls.append(tuple(reversed(chain)))

    sys.setprofile(profile)
    try:
        run(given)
    finally:
        sys.setprofile(None)
    return trace
