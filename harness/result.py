"""What a check says: `Outcome` (one stage of one statistic) and `Result` (the verdict row).

A statistical check is a pure function ``(Summary, RoundedLaw, **options) -> Outcome``. The staging
logic (`harness.runner.CaseRunner`) turns one or two Outcomes into a `Result`; the hard checks (finite, bounds,
contract, ...) build Results directly. Results are plain data so they ride on pytest reports and land
in the results table unchanged.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

VERDICTS = ("pass", "fail", "error", "skip", "xfail")

#: How much a failure matters, worst first: `harmful` moves the values beyond a threshold of harm
#: (an effect figure's lower confidence bound above it), `undetermined` may or may not (the n
#: that would decide it is in the row's severity, ``decide_n``), `fine` stays within every
#: threshold (the upper bounds below them), `api` is the contract (arguments, generator, hangs,
#: raises). `harness.diagnosis.grading.levels` decides them.
LEVELS = ("harmful", "undetermined", "fine", "api")

#: Figures a check puts in its details that the results table carries as columns of their own:
#: the bits of randomness (`collisions`): log2 of the effective number of equally likely values,
#: its confidence interval, the law's own figure, and the sentence users read.
FIGURE_COLUMNS = ("bits", "bits_lo", "bits_hi", "law_bits", "resolution")


@dataclass
class Outcome:
    """One evaluation of one statistic on one Summary."""

    statistic: float
    p_value: float
    effect: float = math.nan  # in `effect_unit`, e.g. sigma for a location shift, obs/exp for counts
    effect_unit: str = ""
    mde: float = math.nan  # minimum detectable effect (same unit) at this n and alpha, power 0.5
    message: str = ""  # one line naming the worst bin / atom / row
    decisive: bool = False  # a zero-probability event under the law: fails without a second stage
    applicable: bool = True  # False when the law makes the statistic meaningless (e.g. one atom)
    details: dict = field(default_factory=dict)


@dataclass
class Result:
    """The verdict of one check on one (candidate, case, dtype, device)."""

    check: str
    verdict: str  # one of VERDICTS
    message: str = ""
    statistic: float = math.nan
    p_value: float = math.nan  # the deciding p-value (stage 2 where it ran)
    p_value_stage1: float = math.nan
    p_value_stage2: float = math.nan
    n: int = 0  # samples behind the deciding stage
    n_stage1: int = 0
    n_stage2: int = 0
    seed: int | None = None
    seed_stage2: int | None = None
    # Why the group drew stage 2 where this row reads it: "verdict" (a suspect stage-1 p-value
    # that did not decide), "level" (stage 1 decided every verdict, but a level needed the
    # larger n); "" where the row reads no stage 2 (`harness.error_control`).
    stage2_reason: str = ""
    effect: float = math.nan
    effect_unit: str = ""
    mde: float = math.nan
    alpha_suspect: float = math.nan
    alpha_fail: float = math.nan
    candidate_s: float = 0.0
    harness_s: float = 0.0
    details: dict = field(default_factory=dict)
    # What the failure means (set by the diagnosis floor), on fail, xfail and error rows only:
    # `level` is one of LEVELS; `mechanism` names the catalog's mechanism that explains the row
    # ("unexplained" where none matches), `mechanism_note` gives its prediction against the
    # observation; `severity` holds the group's severity figures and their noise floors, its
    # effect figures with their bounds, and ``decide_n`` (an undetermined row's deciding n), by
    # name (columns ``severity_<name>`` of the results table). `level_basis` says which figures
    # decided the level against which thresholds: "moved@0.5 lo 0.05 > 0.03" (harmful), "open:
    # tail@64 (hi 2.1e-4 > 1e-5); decided at n ≈ 1.4e6" (undetermined), "" (fine, api).
    level: str = ""
    level_basis: str = ""
    mechanism: str = ""
    mechanism_note: str = ""
    severity: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {VERDICTS}, got {self.verdict!r}")
        if self.level and self.level not in LEVELS:
            raise ValueError(f"level must be one of {LEVELS}, got {self.level!r}")

    def as_row(self) -> dict:
        """Plain builtins only (floats, ints, str): safe to send across xdist and into pandas."""
        row = {name: _builtin(value) for name, value in asdict(self).items()}
        row["details"] = repr(self.details) if self.details else ""
        del row["severity"]
        for name, value in self.severity.items():
            row[f"severity_{name}"] = float(value)
        for name in FIGURE_COLUMNS:
            if name in self.details:
                value = self.details[name]
                row[name] = value if isinstance(value, str) else float(value)
        return row


def _builtin(value):
    """A numpy scalar as the Python number it holds (execnet, which carries rows between xdist
    processes, refuses numpy types); anything else as it is."""
    item = getattr(value, "item", None)
    return item() if callable(item) and type(value).__module__ == "numpy" else value
