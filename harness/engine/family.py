"""What a statistic family is to the fold: its record (`Family`), and the protocols its state
(`FamilyState`) and its accumulator (`Accumulator`) keep.

A family module (`harness.families`) declares a state class, an accumulator class and a
`Family` naming them to the fold; `tests/unit/architecture/test_families.py` holds every family
to these protocols.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from ..summary import Summary


@runtime_checkable
class FamilyState(Protocol):
    """What a family leaves in the Summary, filed under its name (``summary.<family>``): plain
    data (numpy arrays and Python scalars) that pickles across workers, and `merge`."""

    @classmethod
    def merge(cls, parts: list, whole: Summary) -> "FamilyState | None":
        """The state of a sharded parameter's whole tensor from its parts' states (`whole`: the
        merged Summary so far, with the states merged before this one); None where the family
        has no merged state."""
        ...


@runtime_checkable
class Accumulator(Protocol):
    """What folds a family's state chunk by chunk, on the chunk's device."""

    def fold(self, chunk) -> None:
        """Add one chunk (`harness.engine.Chunk`) to the running totals."""
        ...

    def finish(self, whole: Summary) -> FamilyState:
        """The family's state, once, after the last chunk (`whole`: the Summary with the states
        of the families this one needs)."""
        ...


class Start(Protocol):
    """A family's `init`: the accumulator for this law, shape and fold (`harness.engine.Fold`),
    or None where the family has nothing to fold for this law, dtype or part."""

    def __call__(self, law, shape: tuple, fold) -> Accumulator | None: ...


@dataclass(frozen=True)
class Family:
    """A statistic family as the fold sees it: `name` (its state's key in the Summary), `init`
    (`Start`) and `needs`, the families it reads (their chunk values or their finished state):
    they are folded and finished before it."""

    name: str
    init: Start
    needs: tuple = ()
