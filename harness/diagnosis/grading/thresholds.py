"""The practical thresholds of harm: how far an effect figure (`harness.diagnosis.grading.effects`)
may go before a failure is harmful. `HarmThresholds` holds them (defaults below, their reasons in
docs/method/checks.md, "The levels"); `parse_thresholds` reads the text of ``--harm-thresholds``
(or the API's dict) over the defaults.

Keys, as the option writes them:

* ``moved@D`` (D on the ladder `MOVED_LADDER`, in sigma): the share of the values the monotone
  coupling moves by D sigma or more;
* ``tail@K`` (K in `TAIL_LADDER`): the share of the values beyond K sigma minus the law's;
* ``mean`` (sigma), ``std`` (relative), ``w1`` (sigma);
* ``far``: values beyond 10 sigma, more than the law gives, per large tensor (`LARGE` values);
* ``r``: a lag correlation's |r|; ``repeats``: the share of repeats (equal successive elements,
  duplicate rows, repeated windows, equal values) beyond the law's.

May import: nothing of the harness (plain numbers).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace

#: The displacements (sigma) the moved shares are measured at.
MOVED_LADDER = (0.25, 0.5, 1.0, 2.0)
#: The distances (sigma) the tail excesses are measured beyond. 64 = sqrt(4096): one value at 64
#: sigma in a 4096-wide row carries as much energy as the row's whole natural spread.
TAIL_LADDER = (4, 6, 10, 64)
#: A large tensor: the biggest embedding of a common model (151936 tokens x 4096).
LARGE = 151936 * 4096

DEFAULT_MOVED = (0.10, 0.03, 0.01, 0.01)
DEFAULT_TAIL = (1e-3, 3e-4, 1e-4, 1e-5)


class ThresholdsError(ValueError):
    """A bad threshold text or value; str() names the key and what it takes."""


def _ladder_key(prefix: str, step: float) -> str:
    return f"{prefix}@{step:g}"


@dataclass(frozen=True)
class HarmThresholds:
    """The threshold of each effect figure (module docstring)."""

    moved: tuple = DEFAULT_MOVED  # one share per rung of MOVED_LADDER
    tail: tuple = DEFAULT_TAIL  # one share per rung of TAIL_LADDER
    mean: float = 0.01  # sigma
    std: float = 0.02  # relative
    w1: float = 0.02  # sigma
    far: float = 1.0  # values per LARGE
    r: float = 0.01
    repeats: float = 1e-3

    def as_dict(self) -> dict:
        """Every threshold by its key (`keys`), in the order of the option's text."""
        out = {_ladder_key("moved", d): t for d, t in zip(MOVED_LADDER, self.moved)}
        out.update({_ladder_key("tail", k): t for k, t in zip(TAIL_LADDER, self.tail)})
        out.update(mean=self.mean, std=self.std, w1=self.w1, far=self.far, r=self.r,
                   repeats=self.repeats)
        return out

    def text(self) -> str:
        """The option's text for these thresholds: 'moved@0.25=0.1,...,repeats=0.001'."""
        return ",".join(f"{k}={v:g}" for k, v in self.as_dict().items())

    def moved_at(self, d: float) -> float:
        return self.moved[MOVED_LADDER.index(d)]

    def tail_at(self, k: int) -> float:
        return self.tail[TAIL_LADDER.index(k)]


DEFAULT_THRESHOLDS = HarmThresholds()
#: The keys the option takes.
KEYS = tuple(DEFAULT_THRESHOLDS.as_dict())


def _value(key: str, raw) -> float:
    try:
        value = float(str(raw).strip())
    except ValueError:
        raise ThresholdsError(f"{key}: expected a number, got {raw!r}") from None
    if math.isnan(value) or value < 0:
        raise ThresholdsError(f"{key}: must be a number >= 0 (inf: never harmful), got {raw!r}")
    return value


def _canonical(key: str) -> str:
    """'moved@.5' and 'moved@0.50' as 'moved@0.5'; other keys as written (lower case)."""
    key = key.strip().lower()
    prefix, at, step = key.partition("@")
    if not at:
        return key
    try:
        return _ladder_key(prefix, float(step))
    except ValueError:
        return key


def parse_thresholds(spec, base: HarmThresholds = DEFAULT_THRESHOLDS) -> HarmThresholds:
    """`base` with the thresholds `spec` names changed: None or "" (none), a `HarmThresholds`,
    a mapping key -> number, or text 'key=value,key=value'. ThresholdsError (one line) for an
    unknown key or a bad value."""
    if spec is None or isinstance(spec, HarmThresholds):
        return spec or base
    if isinstance(spec, Mapping):
        items = list(spec.items())
    else:
        items = []
        for part in str(spec).split(","):
            if not part.strip():
                continue
            key, eq, raw = part.partition("=")
            if not eq:
                raise ThresholdsError(f"{part.strip()!r}: expected key=value")
            items.append((key, raw))
    values = base.as_dict()
    for key, raw in items:
        name = _canonical(str(key))
        if name not in values:
            raise ThresholdsError(f"unknown threshold {str(key).strip()!r}; known: "
                                  f"{', '.join(KEYS)}")
        values[name] = _value(name, raw)
    return replace(base,
                   moved=tuple(values[_ladder_key("moved", d)] for d in MOVED_LADDER),
                   tail=tuple(values[_ladder_key("tail", k)] for k in TAIL_LADDER),
                   mean=values["mean"], std=values["std"], w1=values["w1"], far=values["far"],
                   r=values["r"], repeats=values["repeats"])
