"""What the catalog says about one Summary: `Match`, a mechanism whose prediction the data match,
and `Mechanism`, the shape of one catalog row.

A mechanism is one row of the catalog (`harness.diagnosis.catalog.MECHANISMS`), in the way
SciPy declares one distribution per class: its `name`, the checks it `explains` (the rows a
match of it names as their cause), and `test(evidence) -> Match | None`, the mechanism's
prediction computed by the reference, set against the observation with its uncertainty.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Match:
    """A mechanism whose prediction the data match: its name, the checks it explains, the one-line
    note (predicted against observed, with the uncertainty) and its parameter where it has one
    (the k of `coarse-uniform` and `few-random-bits`, the shift of `shifted` in sigma, ...)."""

    name: str
    explains: frozenset
    note: str
    parameter: float | None = None


class Mechanism:
    """One row of the catalog. Subclasses set `name`, `explains` and `doc`, and define `test`."""

    name: str = ""
    explains: frozenset = frozenset()
    doc: str = ""

    def test(self, evidence) -> Match | None:  # pragma: no cover - every row defines it
        raise NotImplementedError

    def match(self, note: str, parameter: float | None = None,
              explains: frozenset | None = None) -> Match:
        """This mechanism's Match (explaining its own checks unless told others)."""
        return Match(self.name, self.explains if explains is None else frozenset(explains), note,
                     None if parameter is None else float(parameter))
