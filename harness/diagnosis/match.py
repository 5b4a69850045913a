"""What the catalog says about one Summary: `Match`, a mechanism whose prediction the data match,
and `Mechanism`, the contract every mechanism implements.

A mechanism is one row of the catalog (`harness.diagnosis.mechanism_catalog.MECHANISMS`), in the
way SciPy declares one distribution per class: its `name`, the checks it `explains` (the rows a
match of it names as their cause), and `test(evidence) -> Match | None`, the mechanism's
prediction computed by the reference, set against the observation with its uncertainty. A new
mechanism is one module of `harness.diagnosis.mechanisms` holding a `Mechanism` subclass, and
one instance of it in the catalog's `MECHANISMS`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass


@dataclass(frozen=True)
class Match:
    """A mechanism whose prediction the data match: its name, the checks it explains, the one-line
    note (predicted against observed, with the uncertainty) and its parameter where it has one
    (the k of `coarse-uniform` and `few-random-bits`, the shift of `shifted` in sigma, ...).

    A match that repeats one library's own kernel says whose (`kernel`, in words: "Paddle's
    truncated_gaussian_random kernel") and which candidates run it (`kernel_of`, their registered
    names): the catalog names it only for those (`mechanism_catalog.explain`). A generic
    mechanism leaves both empty."""

    name: str
    explains: frozenset
    note: str
    parameter: float | None = None
    kernel: str = ""
    kernel_of: frozenset = frozenset()

    @property
    def library(self) -> bool:
        """Whether the match repeats a library's own kernel."""
        return bool(self.kernel_of)


class Mechanism(ABC):
    """One row of the catalog: a subclass sets `name`, `explains` and `doc`, and defines `test`.

    How the catalog (`harness.diagnosis.mechanism_catalog`) uses a row:

    * it holds one instance, built with no argument, in `MECHANISMS`; where two matches explain
      one check, `explain` names the one whose law fits the histogram, then the earlier row; a
      match of a library's kernel only for that library's candidates, and for any other after
      every generic match, as "reads like" in its note;
    * `name` is what a row's ``mechanism`` column holds (two rows may share one: two forms of
      one mechanism); `explains` the checks a match names unless it says others; `doc` what
      the mechanism is, in words;
    * `diagnose` calls `test` once per Summary, in catalog order, with one `Evidence` every row
      shares (``evidence.memo["earlier"]`` holds the matches of the rows before it). `test`
      returns this mechanism's `Match` (`match` builds it) or None; a ValueError,
      ArithmeticError, KeyError or IndexError it raises reads as no match (a law the reference
      cannot price for this row), any other exception propagates.
    """

    name: str = ""
    explains: frozenset = frozenset()
    doc: str = ""

    @abstractmethod
    def test(self, evidence) -> Match | None:
        """This mechanism's Match where the Summary behind `evidence` departs from the law as it
        predicts and agrees with its prediction, else None."""

    def match(self, note: str, parameter: float | None = None,
              explains: frozenset | None = None, kernel: str = "",
              kernel_of: frozenset = frozenset()) -> Match:
        """This mechanism's Match (explaining its own checks unless told others; `kernel`,
        `kernel_of`: the library kernel it repeats and the candidates that run it)."""
        return Match(self.name, self.explains if explains is None else frozenset(explains), note,
                     None if parameter is None else float(parameter), kernel,
                     frozenset(kernel_of))
