"""The one list of checks, in the order a group runs them; everything else is derived from it.

The pytest tests of ``suites/`` (one per check), the Python API's check list, the runner's
dispatch, which groups run which checks (sharded ones included), which statistic families the
engine folds for a group (`Registry.families`), stale-xfails detection, reproduce lines and the
MDE table all read `CHECKS`. Adding a check is one declaration next to its math (a statistic
family's module, `harness.families`, for a check that needs data of its own from the draw) and
one entry below.

The order matters only for time: a group's draw is made by its first check and shared by the rest,
and the cheap checks of a draw come before the statistics. The checks that call the candidate on
tensors of their own (contract, generator, threads) come after every check of the draw: a group
judges its draws in one stretch, stage 2 included, before the candidate is called again (a
row's `samples_drawn`, which counts the group's draws so far, is then the group's total there).
"""

from __future__ import annotations

import math

from ..declaration import Check
from ..engine import fold_order
from ..engine import summarize_samples as fold_samples
from ..families import (atoms, binned, extremes, independence, localized, moments, position,
                        repetition, resolution, tails)
from ..group import group_kind
from . import contract, hard, sharded


class Registry:
    """An ordered, name-unique collection of `Check` declarations."""

    def __init__(self, checks) -> None:
        self._checks = tuple(checks)
        self._by_name = {c.name: c for c in self._checks}
        if len(self._by_name) != len(self._checks):
            seen: set = set()
            twice = sorted({c.name for c in self._checks if c.name in seen or seen.add(c.name)})
            raise ValueError(f"checks declared twice: {', '.join(twice)}")

    def __iter__(self):
        return iter(self._checks)

    def __len__(self) -> int:
        return len(self._checks)

    def __contains__(self, name) -> bool:
        return name in self._by_name

    def __getitem__(self, name: str) -> Check:
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"unknown check {name!r}; known: {', '.join(self.names())}") from None

    def names(self) -> tuple:
        """Every check's name, in the order a group runs them."""
        return tuple(self._by_name)

    def index(self, name: str) -> int:
        return self.names().index(name)

    def for_kind(self, kind: str) -> tuple:
        """The checks a group of this kind runs (`harness.group.GROUP_KINDS`), in order."""
        return tuple(c for c in self._checks if c.applies_to(kind))

    def for_group(self, *, shaped: bool, path: str, sharded: bool) -> tuple:
        """The checks of one case group."""
        return self.for_kind(group_kind(shaped=shaped, path=path, sharded=sharded))

    def families(self, kind: str = "grid") -> tuple:
        """The statistic families (`harness.engine.Family`) the engine folds for a group of this
        kind: those the checks it runs read, with what they need, in fold order."""
        return fold_order(f for c in self.for_kind(kind) for f in c.families)

    def of_kind(self, kind: str) -> tuple:
        """The checks whose verdict rests on `kind` (hard, statistical, api)."""
        return tuple(c for c in self._checks if c.kind == kind)

    def outcomes(self, kind: str = "grid") -> dict:
        """name -> ``outcome(summary, law, *, alpha)`` of the statistical checks a group of this
        kind runs, in order (the pure functions, for code that judges a Summary itself)."""
        return {c.name: c.outcome for c in self.for_kind(kind) if c.kind == "statistical"}

    def mdes(self, law, n: int, shape: tuple, alpha: float = 1e-3) -> dict:
        """Minimum detectable effect of every check that states one, at n samples of a tensor of
        `shape` (no sampling): name -> (mde, unit); a check with components (moments) gives one
        entry per component, ``"moments.mean"``, ..."""
        out = {}
        for c in self._checks:
            if c.mde is None:
                continue
            value = c.mde(law, n, tuple(shape), alpha)
            if isinstance(value, dict):
                for component, v in value.items():
                    out[f"{c.name}.{component}"] = (_number(v), c.unit[component])
            else:
                out[c.name] = (_number(value), c.unit)
        return out


def _number(value) -> float:
    return float(value) if value is not None else math.nan


CHECKS = Registry((
    hard.FINITE, hard.WRITTEN, hard.BOUNDS, hard.HANG, hard.INPLACE,
    binned.GOF, binned.KS, atoms.ATOMS, tails.TAILS, moments.MOMENTS, extremes.EXTREMES,
    independence.INDEPENDENCE, localized.SPIKES, localized.SCAN, position.POSITION,
    repetition.REPETITION, resolution.COLLISIONS, resolution.LATTICES, resolution.LOW_BITS,
    contract.CONTRACT, contract.GENERATOR, contract.THREADS,
    *sharded.DECLARED,
    contract.ARGUMENTS,
))


def summarize_samples(samples, law, shape: tuple | None = None, watch: tuple | None = None,
                      kind: str = "grid"):
    """Fold samples shaped (calls, *shape) — or flat, with `shape` given — into a Summary through
    the families of the checks a group of `kind` runs (`harness.engine.summarize_samples`): the
    very fold of a run, for samples already in memory (self-tests, offline audits)."""
    return fold_samples(samples, law, CHECKS.families(kind), shape=shape, watch=watch)
