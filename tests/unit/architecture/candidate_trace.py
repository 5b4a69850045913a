"""The path of a candidate through the house: which of our modules it passes through, in order.

`trace_candidate(run)` calls `run(spec)` under `sys.setprofile` and records, for every Python call
into a module of ours (the root packages `.importlinter` names), whether the call's arguments hold
the candidate: the spec string the caller gave (a fresh, non-interned string, so identity finds it
and no literal of the code), or any `candidates.Candidate`; held directly, in a list, tuple, set or
dict, or as an attribute of an object given (a Group, a runner, the session).

It is read two ways.

- The chain of each call: the modules of the calls holding the candidate on the stack above it,
  consecutive repeats merged. A *chain return* is a call into a module already earlier in its
  chain (a callback, a double dispatch, an object handed back up), counted once per (from, to)
  pair, so that a loop over checks or chunks counts once.
- The trip: the files the candidate is in, call after call, nested calls included. Each calling
  context (the holding calls from the root down to this one) is walked once, at its first call,
  so a loop over groups or checks walks its body once, as a reader following the code would. A
  *stay* is a maximal run of consecutive calls in one file; a *return* is a stay in a file the
  trip had already left; a *climb* is a step from a file on a lower floor to one on a higher
  floor, the floors read from `.importlinter`'s layers contracts. Code that no file holds (the
  `__init__` and `__eq__` a dataclass generates) is not a stay: it runs none of the file's code.
  Nor is a call of one of the candidate's own methods on the candidate (a function of the
  `candidates.Candidate` class, its `__call__`, `skip_reason`, `cannot_express`, ..., with the
  candidate as `self`): that is the candidate doing its work where it is, not travelling. Such
  calls stay in the chains (`calls`), which show everything that holds the candidate.

The trip is read for three figures: its returns; its *climbs*, the steps of its stays up a floor
(control coming back up after a lower floor's work counts, as a reader following the file sequence
sees it); and its *handoffs up*, the calls from a module on a lower floor into one on a higher floor
(the candidate handed back up, which the import contract cannot see).

`stays`, `returns`, `climbs`, `handoffs_up` and `floors` are pure functions over the recorded trip, so a test can
hold them to a hand-made sequence.
"""

from __future__ import annotations

import configparser
import sys
from dataclasses import dataclass, field
from pathlib import Path

IMPORTLINTER = Path(__file__).resolve().parents[3] / ".importlinter"


def _config() -> configparser.ConfigParser:
    config = configparser.ConfigParser()
    config.read(IMPORTLINTER)
    return config


def packages(config: configparser.ConfigParser | None = None) -> tuple:
    """Our root packages, as the import contract names them."""
    config = config or _config()
    return tuple(config["importlinter"]["root_packages"].split())


def stays(trip: list) -> list:
    """The trip's modules with consecutive repeats merged: one entry per stay."""
    out: list = []
    for module in trip:
        if not out or out[-1] != module:
            out.append(module)
    return out


def returns(trip: list) -> list:
    """(from, to) for each stay in a module the trip had already left, in order."""
    path = stays(trip)
    return [(path[i - 1], path[i]) for i in range(1, len(path)) if path[i] in path[:i - 1]]


def floors(config: configparser.ConfigParser | None = None) -> dict:
    """container -> {layer name: rank}, a higher rank a higher floor, for each layers contract
    (the container of a contract without containers is "", the roots)."""
    config = config or _config()
    out: dict = {}
    for section in config.sections():
        if not section.startswith("importlinter:contract:") or config[section].get("type") != "layers":
            continue
        lines = [line.strip() for line in config[section]["layers"].splitlines() if line.strip()]
        ranks = {name.strip().strip("()"): len(lines) - i
                 for i, line in enumerate(lines) for name in line.split("|")}
        for container in config[section].get("containers", "").split() or [""]:
            out.setdefault(container, {}).update(ranks)
    return out


def climbs_up(floor: dict, below: str, above: str) -> bool:
    """Whether a step from module `below` to module `above` goes up a floor: at the first level
    where their dotted names part, both sit in a layer of that container's contract and `above`'s
    layer is higher. Modules in no layer there are on no floor, and no step between them climbs."""
    a, b = below.split("."), above.split(".")
    for level in range(min(len(a), len(b))):
        if a[level] != b[level]:
            ranks = floor.get(".".join(a[:level]), {})
            low, high = ranks.get(a[level]), ranks.get(b[level])
            return low is not None and high is not None and high > low
    return False


def climbs(trip: list, floor: dict) -> list:
    """(from, to) for each step of the trip's stays up a floor, in order: a callee's work done and
    its caller's going on counts as much as a callback."""
    path = stays(trip)
    return [(path[i - 1], path[i]) for i in range(1, len(path))
            if climbs_up(floor, path[i - 1], path[i])]


def handoffs_up(trip: list, callers: list, floor: dict) -> list:
    """(caller, callee) for each call of the trip made from a module on a lower floor into one on
    a higher floor: the candidate handed back up (a callback, an object asked upward)."""
    return [(caller, module) for caller, module in zip(callers, trip)
            if caller is not None and climbs_up(floor, caller, module)]


@dataclass
class Trace:
    """Each call that held the candidate, as the chain of modules that handed it down to there,
    and the trip: the module of each calling context's first call, in order."""

    calls: list = field(default_factory=list)  # (root module, ..., the called one) per call
    trip: list = field(default_factory=list)
    trip_functions: list = field(default_factory=list)  # the function called, per step of trip
    trip_callers: list = field(default_factory=list)  # the module handing it on, per step of trip

    @property
    def path(self) -> list:
        """The called modules in the order of the calls, consecutive repeats merged."""
        return stays([chain[-1] for chain in self.calls])

    @property
    def revisits(self) -> list:
        """(from, to) steps of `path` into a module it had visited before, each pair once: in
        time rather than down a chain, so a module that hands the candidate to two others in
        turn counts (the figure an orchestrating caller raises; informative, not held)."""
        return list(dict.fromkeys(returns(self.path)))

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

    def trip_text(self, floor: dict | None = None) -> str:
        """The trip stay by stay, each return marked R and each climb marked ^."""
        floor = floors() if floor is None else floor
        path = stays(self.trip)
        lines = [f"{len(path)} stays in {len(set(path))} files, {len(climbs(self.trip, floor))} "
                 f"climbs, {len(returns(self.trip))} returns, "
                 f"{len(handoffs_up(self.trip, self.trip_callers, floor))} handoffs up"]
        functions: list = []  # the functions called in each stay
        for i, module in enumerate(self.trip):
            if i == 0 or module != self.trip[i - 1]:
                functions.append([])
            functions[-1].append(self.trip_functions[i])
        for i, module in enumerate(path):
            back = "R" if module in path[:max(i - 1, 0)] else " "
            up = "^" if i and climbs_up(floor, path[i - 1], module) else " "
            called = ", ".join(dict.fromkeys(functions[i]))
            lines.append(f"  {back}{up} {module}: {called}")
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


def own_methods(cls: type) -> frozenset:
    """The code objects of the functions `cls` (and its bases but `object`) defines: methods,
    static and class methods, and the getters and setters of its properties."""
    codes = set()
    for klass in cls.__mro__[:-1]:
        for attribute in vars(klass).values():
            functions = [getattr(attribute, name, None)
                         for name in ("__func__", "fget", "fset", "fdel", "func")] + [attribute]
            codes.update(f.__code__ for f in functions if hasattr(f, "__code__"))
    return frozenset(codes)


def trace_candidate(run, spec: str) -> Trace:
    """Call `run(spec)` (with a fresh copy of `spec`) and trace the candidate's path through our
    modules."""
    from candidates import Candidate

    given = "".join(list(spec))  # a new str object: identity tells it from the code's literals
    ours = packages()
    candidate_methods = own_methods(Candidate)

    def marks(value) -> bool:
        return value is given or isinstance(value, Candidate)

    trace = Trace()
    holding: dict = {}  # id(frame) -> (module, code), for our frames whose arguments hold it
    contexts: set = set()  # the calling contexts the trip has walked

    def profile(frame, event, arg):
        if event == "return":
            holding.pop(id(frame), None)
            return
        if event != "call":
            return
        module = frame.f_globals.get("__name__", "")
        if module.split(".")[0] not in ours:
            return
        code = frame.f_code
        n_args = (code.co_argcount + code.co_kwonlyargcount + bool(code.co_flags & 0x04)
                  + bool(code.co_flags & 0x08))
        local = frame.f_locals
        if not any(_holds(local.get(n), marks) for n in code.co_varnames[:n_args]):
            return
        holding[id(frame)] = (module, code)
        chain, context, f = [module], [code], frame.f_back
        caller = None  # the module of the nearest call above that holds the candidate
        while f is not None:
            held = holding.get(id(f))
            if held is not None:
                caller = held[0] if caller is None else caller
                context.append(held[1])
                if held[0] != chain[-1]:
                    chain.append(held[0])
            f = f.f_back
        trace.calls.append(tuple(reversed(chain)))
        working = (code in candidate_methods and code.co_argcount
                   and isinstance(local.get(code.co_varnames[0]), Candidate))
        if working:  # the candidate's own method on itself: its work, not its trip
            return
        if code.co_filename.endswith(".py") and tuple(context) not in contexts:
            contexts.add(tuple(context))
            trace.trip.append(module)
            trace.trip_functions.append(code.co_name)
            trace.trip_callers.append(caller)

    sys.setprofile(profile)
    try:
        run(given)
    finally:
        sys.setprofile(None)
    return trace
