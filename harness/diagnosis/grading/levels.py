"""How much a failure matters: `level_of` puts a failing row on one of `harness.result.LEVELS`
from the effect figures of its group (`harness.diagnosis.grading.effects`) and the thresholds in
force (`harness.diagnosis.grading.thresholds.HarmThresholds`); `grade` gives the level and, for
an undetermined row, the n that would decide it; `basis_text` says which figures decided it, in
the words of the row's ``level_basis``.

* ``api``: the failure is no statement about the values: the API checks (contract, generator,
  threads, arguments) and the hard checks of the draw that are not about values (written, hang,
  inplace, the sharded layout's replicas and sharding); and, for any check, a draw that did not
  complete (no Summary, hence no figures) and an ``error`` row.
* ``harmful``: some figure's lower confidence bound lies above its threshold (a signed figure's
  interval lies wholly beyond +-threshold), a value is off the support or not finite, or far
  values reach `thresholds.far` per large tensor. With probability >= 1 - delta per figure the
  candidate's true figure is then above the threshold, at this n and every other.
* ``fine`` (fine-structure): the check failed, and every *deciding* figure's upper bound lies at
  or below its threshold, and every *harm-only* figure's point estimate too. The deciding
  figures are the moved shares, the tail excesses, the mean and the counts (and, on the rows of
  `DEPENDENCE_CHECKS`, their dependence figures): their intervals narrow as n grows wherever the
  support is, so each can rule harm out. The harm-only figures (std, W1, far values) have no
  useful upper bound on a wide support (the trap's is 200 sigma: the range enters their bounds),
  so they can make a row harmful and, by their point estimate, keep it from fine, but never rule
  harm out.
* ``undetermined``: neither; `grade` estimates the n that would decide it, each bound's
  distance from its point scaling as 1 / sqrt(n) (`decide_n`).

Every check about the values (``about="values"``) and about single values
(``about="single-values"``: collisions, lattices, low_bits) is graded by its group's figures;
the dependence checks by their own dependence figures too.

May import: `harness.checks` (what a check is about) and this package.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...checks import CHECKS
from .effects import MOVED_NAMES, TAIL_NAMES
from .thresholds import DEFAULT_THRESHOLDS, LARGE, MOVED_LADDER, TAIL_LADDER, HarmThresholds

#: Verdicts that carry a level.
FAILING = ("fail", "xfail", "error")

#: The dependence figures each dependence check is graded by, beside its group's figures.
DEPENDENCE_CHECKS = {
    "independence": ("dep_r", "equal_successive", "duplicate_rows"),
    "repetition": ("repeated_windows",),
    "collisions": ("equal_values",),
}


@dataclass(frozen=True)
class Rule:
    """How one figure decides: `kind` "share" (harmful when lo > t, rules harm out when
    hi <= t), "signed" (harmful when the interval lies beyond +-t, rules out when it lies
    within), "count" (harmful when above 0, rules out at 0), "harm" (harmful when the lower
    bound `lower` passes t, with `at_least` >= instead of >; keeps the row from fine while the
    point's size exceeds t)."""

    name: str
    threshold: float
    kind: str
    lower: str = ""
    at_least: bool = False


def rules(check: str, t: HarmThresholds = DEFAULT_THRESHOLDS) -> tuple:
    """The rules a failing row of `check` is graded by."""
    out = [Rule(name, t.moved_at(d), "share") for d, name in zip(MOVED_LADDER, MOVED_NAMES)]
    out += [Rule(name, t.tail_at(k), "signed") for k, name in zip(TAIL_LADDER, TAIL_NAMES)]
    out += [Rule("mean_off", t.mean, "signed"), Rule("nonfinite", 0.0, "count"),
            Rule("off_support", 0.0, "count"),
            Rule("std_off", t.std, "harm", lower="std_off_lo"),
            Rule("w1_sigma", t.w1, "harm", lower="w1_lo"),
            Rule("far", t.far, "harm", lower="far_lo", at_least=True)]
    for name in DEPENDENCE_CHECKS.get(check, ()):
        out.append(Rule(name, t.r if name == "dep_r" else t.repeats, "share"))
    return tuple(out)


def _get(figures: dict, name: str) -> float:
    try:
        return float(figures.get(name, math.nan))
    except (TypeError, ValueError):
        return math.nan


def judge(rule: Rule, f: dict) -> str:
    """'harmful', 'fine' (rules harm out) or 'open' for one figure; 'n/a' where it is absent."""
    t = rule.threshold
    point = _get(f, rule.name)
    if math.isnan(point):
        return "n/a"
    if rule.kind == "count":
        return "harmful" if point > 0 else "fine"
    if rule.kind == "harm":
        lo = _get(f, rule.lower)
        if not math.isnan(lo) and (lo >= t if rule.at_least else lo > t):
            return "harmful"
        return "open" if abs(point) > t else "fine"
    lo, hi = _get(f, f"{rule.name}_lo"), _get(f, f"{rule.name}_hi")
    if rule.kind == "share":
        return "harmful" if lo > t else "fine" if hi <= t else "open"
    if lo > t or hi < -t:
        return "harmful"
    return "fine" if -t <= lo and hi <= t else "open"


#: Figures bounded by Clopper-Pearson on a count: where the count is small (its bound's
#: distance from the point under `FEW_COUNTS` / n) that distance scales as 1 / n, not 1 / sqrt(n).
COUNT_FIGURES = (*TAIL_NAMES, "far", "equal_successive", "duplicate_rows", "repeated_windows",
                 "equal_values")
#: ~ 2 ln(2 / delta) at delta = 1e-6: a count below it is in the 1 / n regime of its bound.
FEW_COUNTS = 30.0


def n_to_decide(rule: Rule, f: dict, n: float) -> float:
    """The n at which an open figure's bound would cross its threshold, the shares staying as
    they are and the bound's distance from the point scaling as 1 / sqrt(n) (as 1 / n for a
    small count, `COUNT_FIGURES`); inf where the point sits on the threshold."""
    t, point = rule.threshold, _get(f, rule.name)
    if rule.kind == "harm":
        lo = _get(f, rule.lower)
        gap, margin = abs(point) - lo, abs(point) - t
    else:
        lo, hi = _get(f, f"{rule.name}_lo"), _get(f, f"{rule.name}_hi")
        size = abs(point) if rule.kind == "signed" else point
        if size > t:  # heading for harmful: the near bound must pass t
            gap = (point - lo) if point >= 0 else (hi - point)
            margin = size - t
        else:  # heading for fine: the far bound must come within t
            gap = max(hi - point, point - lo) if rule.kind == "signed" else hi - point
            margin = t - size
    if not (margin > 0) or not math.isfinite(gap):
        return math.inf
    ratio = max(gap / margin, 1.0)
    per_value = LARGE if rule.name == "far" else 1.0  # far counts per LARGE values
    if rule.name in COUNT_FIGURES and gap * n / per_value < FEW_COUNTS:
        return n * ratio
    return n * ratio**2


@dataclass(frozen=True)
class Grade:
    level: str
    decide_n: float = math.nan  # undetermined rows: the n that would decide them
    deciding: tuple = ()  # the figures that made the row harmful, or that are open


def grade(check: str, verdict: str, severity: dict, n: float = math.nan,
          thresholds: HarmThresholds = DEFAULT_THRESHOLDS) -> Grade:
    """The level of one row (module docstring) and what decided it. `severity`: the group's
    figures (severity's and effects'), empty where the row has no Summary; `n` the deciding
    stage's values (for `decide_n`)."""
    if verdict not in FAILING:
        return Grade("")
    if verdict == "error" or check not in CHECKS:
        return Grade("api")
    if CHECKS[check].about == "api" or not severity:
        return Grade("api")
    judged = [(rule, judge(rule, severity)) for rule in rules(check, thresholds)]
    harmful = tuple(r.name for r, v in judged if v == "harmful")
    if harmful:
        return Grade("harmful", deciding=harmful)
    open_ = [r for r, v in judged if v == "open"]
    moved_known = any(v != "n/a" for r, v in judged if r.name in MOVED_NAMES)
    if not open_ and moved_known:
        return Grade("fine")
    needs = [n_to_decide(r, severity, n) for r in open_]
    to_harm = [x for r, x in zip(open_, needs) if _heading_for_harm(r, severity)]
    decide = min(to_harm) if to_harm else (max(needs) if needs else math.inf)
    return Grade("undetermined", decide_n=float(decide), deciding=tuple(r.name for r in open_))


def _heading_for_harm(rule: Rule, f: dict) -> bool:
    point = _get(f, rule.name)
    return (abs(point) if rule.kind in ("signed", "harm") else point) > rule.threshold


#: Each figure by the key of ``--harm-thresholds`` its threshold is set with.
THRESHOLD_KEYS = {**{name: f"moved@{d:g}" for d, name in zip(MOVED_LADDER, MOVED_NAMES)},
                  **{name: f"tail@{k:g}" for k, name in zip(TAIL_LADDER, TAIL_NAMES)},
                  "mean_off": "mean", "std_off": "std", "w1_sigma": "w1", "far": "far",
                  "dep_r": "r", **{name: f"repeats ({name})" for name in
                                   ("equal_successive", "duplicate_rows", "repeated_windows",
                                    "equal_values")}}
#: Figures a basis names, at most; the rest are counted.
BASIS_FIGURES = 3


def short_number(x: float, digits: int = 2) -> str:
    """`digits` significant digits, the exponent without its '+' or leading zeros: 0.05, 2.1e-4,
    1.4e6."""
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    mantissa, e, exponent = f"{x:.{digits}g}".partition("e")
    return mantissa + (f"e{int(exponent)}" if e else "")


def apart(value: float, threshold: float) -> str:
    """`value` in as few significant digits (two at least) as tell it from `threshold`'s text:
    0.0102 against 0.01 reads 0.0102, not 0.01."""
    shown = short_number(threshold)
    for digits in range(2, 7):
        text = short_number(value, digits)
        if text != shown:
            break
    return text


def _bound_text(rule: Rule, f: dict, verdict: str) -> str:
    """Which side of one figure decided (harmful) or keeps it open, against its threshold:
    'lo 0.05 > 0.03', 'hi 2.1e-4 > 1e-5', '3 > 0', 'point 0.03 > 0.02'."""
    t = rule.threshold
    if rule.kind == "count":
        return f"{short_number(_get(f, rule.name))} > 0"
    if rule.kind == "harm":
        if verdict == "harmful":
            lo = _get(f, rule.lower)
            return f"lo {apart(lo, t)} {'≥' if rule.at_least else '>'} {short_number(t)}"
        return f"point {apart(abs(_get(f, rule.name)), t)} > {short_number(t)}"
    lo, hi = _get(f, f"{rule.name}_lo"), _get(f, f"{rule.name}_hi")
    if rule.kind == "share":
        side, value = ("lo", lo) if verdict == "harmful" else ("hi", hi)
        return f"{side} {apart(value, t)} > {short_number(t)}"
    # signed: the bound beyond +t (lower bound above it: harmful; upper: open), or beyond -t
    side, value = ("lo", lo) if verdict == "harmful" else ("hi", hi)
    if value > t:
        return f"{side} {apart(value, t)} > {short_number(t)}"
    side, value = ("hi", hi) if verdict == "harmful" else ("lo", lo)
    return f"{side} {apart(value, -t)} < {short_number(-t)}"


def _times_threshold(rule: Rule, f: dict) -> float:
    """How many times its threshold a harmful figure's deciding bound is (inf for a count or a
    threshold of 0): the figures furthest past theirs are named first."""
    if rule.kind == "count" or rule.threshold <= 0:
        return math.inf
    lo = _get(f, rule.lower if rule.kind == "harm" else f"{rule.name}_lo")
    beyond = lo if rule.kind != "signed" or lo > rule.threshold else -_get(f, f"{rule.name}_hi")
    return beyond / rule.threshold


def _decides_first(rule: Rule, f: dict, n: float) -> tuple:
    """Sort key of the open figures, the one that gives `grade`'s decide_n first: a figure
    heading for harmful decides the row when it gets there, the soonest first; where none is,
    the row is fine when the last one closes."""
    needs = n_to_decide(rule, f, n)
    needs = math.inf if math.isnan(needs) else needs
    heading = _heading_for_harm(rule, f)
    return (not heading, needs if heading else -needs)


def _listed(items: list) -> str:
    more = len(items) - BASIS_FIGURES
    return ", ".join(items[:BASIS_FIGURES]) + (f" (+{more} more)" if more > 0 else "")


def basis_text(check: str, graded: Grade, severity: dict,
               thresholds: HarmThresholds = DEFAULT_THRESHOLDS, n: float = math.nan) -> str:
    """The figures that decided `graded`, in words, each by its ``--harm-thresholds`` key:
    harmful 'moved@0.5 lo 0.05 > 0.03' (the figures furthest past their thresholds first),
    undetermined 'open: tail@64 (hi 2.1e-4 > 1e-5); decided at n ≈ 1.4e6' (the figure that
    gives that n first); "" for fine, api and rows with no level. `n`: the deciding stage's
    values, as `grade` took them."""
    if graded.level not in ("harmful", "undetermined"):
        return ""
    by_name = {rule.name: rule for rule in rules(check, thresholds)}
    deciding = [by_name[name] for name in graded.deciding if name in by_name]
    if graded.level == "harmful":
        deciding.sort(key=lambda r: _times_threshold(r, severity), reverse=True)
        return _listed([f"{THRESHOLD_KEYS.get(r.name, r.name)} {_bound_text(r, severity, 'harmful')}"
                        for r in deciding])
    if not deciding:
        return "open: no moved share measured, nothing rules harm out"
    deciding.sort(key=lambda r: _decides_first(r, severity, n))
    text = "open: " + _listed([f"{THRESHOLD_KEYS.get(r.name, r.name)} "
                               f"({_bound_text(r, severity, 'open')})" for r in deciding])
    if math.isfinite(graded.decide_n):
        return text + f"; decided at n ≈ {short_number(graded.decide_n)}"
    if not math.isnan(graded.decide_n):
        return text + "; no n decides it (a figure sits on its threshold)"
    return text


def level_of(check: str, verdict: str, severity: dict,
             thresholds: HarmThresholds = DEFAULT_THRESHOLDS) -> str:
    """The level of one row: "" for pass and skip rows, else one of `harness.result.LEVELS`
    (`grade`)."""
    return grade(check, verdict, severity, thresholds=thresholds).level
