"""The two-stage error control of the statistical checks, as numbers: the level below which a
stage-1 p-value decides a failure alone, and the false-alarm rate of one check.

A statistical check passes at stage 1 when p1 >= alpha_suspect. Below ``alpha_decide`` it fails
at stage 1: its p-value already decides the verdict within the stated rate, and a redraw could
not change it. Between the two it is suspect: a fresh stream (stage 2) decides at ``alpha_fail``.
An exact sampler fails one check with probability at most

    P(p1 < alpha_decide) + P(p1 < alpha_suspect) P(p2 < alpha_fail)
        <= alpha_decide + alpha_suspect x alpha_fail,

the stages' streams being independent. ``alpha_decide`` is a ninth of alpha_suspect x
alpha_fail, so the stage-1 decision spends a tenth of the per-check rate: at the defaults
(alpha_suspect 1e-3, alpha_fail 9e-4) p1 < 1e-7 fails at once and the rate is 1e-6.
"""

from __future__ import annotations

#: The share of a check's false-alarm rate that stage 1's own decision spends.
DECIDE_SHARE = 0.1


def alpha_decide(alpha_suspect: float, alpha_fail: float) -> float:
    """The stage-1 p-value below which a check fails without stage 2."""
    return alpha_suspect * alpha_fail * DECIDE_SHARE / (1.0 - DECIDE_SHARE)


def per_check_rate(alpha_suspect: float, alpha_fail: float) -> float:
    """The most often one statistical check fails an exact sampler (module docstring)."""
    return alpha_decide(alpha_suspect, alpha_fail) + alpha_suspect * alpha_fail


def alpha_fail_for(rate: float, alpha_suspect: float) -> float:
    """The stage-2 level at which one check's false-alarm rate is `rate`."""
    return rate * (1.0 - DECIDE_SHARE) / alpha_suspect
